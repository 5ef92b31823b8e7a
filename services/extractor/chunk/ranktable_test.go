package chunk

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// testRanks are cl100k_base's ranks as a map, the reference for
// rankTable.
func testRanks(tb testing.TB) map[string]int {
	tb.Helper()
	ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(cl100kFile)
	if err != nil {
		tb.Fatal(err)
	}
	return ranks
}

// checkRank fails unless the table and the map agree on s.
func checkRank(t *testing.T, tab *rankTable, ranks map[string]int, s string) {
	t.Helper()
	got, gotOK := tab.rank(s)
	want, wantOK := ranks[s]
	if got != want || gotOK != wantOK {
		t.Fatalf("rank(%q) = %d, %v; the map has %d, %v", s, got, gotOK, want, wantOK)
	}
}

// TestRankTableEqualsMap: every token has its rank in the table, and
// every substring of the edge cases (mostly no token) is looked up as in
// the map, keys of every length around the short keys' bound among them.
func TestRankTableEqualsMap(t *testing.T) {
	ranks := testRanks(t)
	tab := newRankTable(ranks)
	for k := range ranks {
		checkRank(t, tab, ranks, k)
	}
	extra := []string{"", "\x00", "a\x00", "\x00a", "abcdefgh", "abcdefghi", " the", " thex", "\x00\x00\x00\x00\x00\x00\x00\x00",
		" administrators", " administratorsx", "unbelievablyextraordinarilylongwordthatneedsmerging"}
	for _, s := range append(extra, tokenEdgeCases...) {
		for i := 0; i <= len(s); i++ {
			for j := i; j <= len(s); j++ {
				checkRank(t, tab, ranks, s[i:j])
			}
		}
	}
	empty := newRankTable(map[string]int{})
	if _, ok := empty.rank("a"); ok {
		t.Fatal("an empty table has a token")
	}
}

// FuzzRankTable compares rankTable with the ranks map on any string and
// on the string with a byte cut off or added at either end (near a token
// when the string is one).
func FuzzRankTable(f *testing.F) {
	for _, s := range tokenEdgeCases {
		f.Add(s)
	}
	f.Add(" kubernetes")
	f.Add("ingress")
	ranks := testRanks(f)
	tab := newRankTable(ranks)
	f.Fuzz(func(t *testing.T, s string) {
		for _, v := range []string{s, s + "s", "s" + s, s + "\x00"} {
			checkRank(t, tab, ranks, v)
			if len(v) > 0 {
				checkRank(t, tab, ranks, v[1:])
				checkRank(t, tab, ranks, v[:len(v)-1])
			}
		}
	})
}

// TestSkipLettersEqualsSkip: skipLetters stops where skip with isLetter
// does, from every offset of the edge cases, text outside ASCII and
// invalid UTF-8 among them.
func TestSkipLettersEqualsSkip(t *testing.T) {
	cases := append([]string{"aZ@[`{", "Straße\xffx", "abc\xe2\x80", "İıſK", "x\u0301y", "AZaz09_"}, tokenEdgeCases...)
	for _, s := range cases {
		for i := 0; i <= len(s); i++ {
			if got, want := skipLetters(s, i), skip(s, i, isLetter, -1); got != want {
				t.Fatalf("skipLetters(%q, %d) = %d, skip %d", s, i, got, want)
			}
		}
	}
	for c := 0; c < utf8.RuneSelf; c++ {
		s := string(rune(c)) + "a"
		if got, want := skipLetters(s, 0), skip(s, 0, isLetter, -1); got != want {
			t.Fatalf("skipLetters(%q, 0) = %d, skip %d", s, got, want)
		}
	}
}

// FuzzSkipLetters compares skipLetters with skip and isLetter.
func FuzzSkipLetters(f *testing.F) {
	for _, s := range tokenEdgeCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i := 0; i <= len(s); i++ {
			if got, want := skipLetters(s, i), skip(s, i, isLetter, -1); got != want {
				t.Fatalf("skipLetters(%q, %d) = %d, skip %d", s, i, got, want)
			}
		}
	})
}

// mergePieces are pieces that are no token: words, identifiers, numbers
// and runs of symbols, many more than the cache has slots, some longer
// than it keeps (one of 256 bytes, whose ends a byte cannot hold).
func mergePieces(t *testing.T, tk *Tokenizer) []string {
	t.Helper()
	var out []string
	for i := range 3 * mergeSlots {
		for _, p := range []string{fmt.Sprintf(" kgstreamx%dzq", i), fmt.Sprintf("qq%xvv", i*7919), fmt.Sprintf(" Überlänge%d", i)} {
			if _, ok := tk.ranks.rank(p); !ok {
				out = append(out, p)
			}
		}
	}
	out = append(out, " "+strings.Repeat("zq", maxMerged), strings.Repeat("x", maxMerged+1), strings.Repeat("x", maxMerged),
		strings.Repeat("x", 255), strings.Repeat("x", 256), strings.Repeat("qz", 128), strings.Repeat("x", 257))
	return out
}

// TestMergedEndsAreMergeEnds: a piece split from the cache splits as
// mergeEnds splits it, the first time and right after, at any offset,
// and again with other pieces stored into its slot in between.
func TestMergedEndsAreMergeEnds(t *testing.T) {
	tk, err := testTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	pieces := mergePieces(t, tk)
	for round := range 2 {
		for i, p := range pieces {
			want := tk.mergeEnds(p, i%5, []int{-1})
			for again := range 2 { // stored, then found
				if got := tk.mergedEnds(p, i%5, []int{-1}); !slices.Equal(got, want) {
					t.Fatalf("round %d, %q at %d (%d): %v, mergeEnds %v", round, p, i%5, again, got, want)
				}
			}
		}
	}
}

// TestMergedEndsConcurrently: tokenizers share one cache; goroutines
// splitting the same pieces at once split them as mergeEnds does (run
// with -race).
func TestMergedEndsConcurrently(t *testing.T) {
	tk, err := testTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	pieces := mergePieces(t, tk)[:2000]
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Go(func() {
			for k := range pieces {
				p := pieces[(k*(g+1))%len(pieces)]
				if got, want := tk.mergedEnds(p, g, nil), tk.mergeEnds(p, g, nil); !slices.Equal(got, want) {
					errs <- fmt.Sprintf("%q: %v, mergeEnds %v", p, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}
