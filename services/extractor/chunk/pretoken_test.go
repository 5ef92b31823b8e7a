package chunk

import (
	"slices"
	"sync"
	"testing"
	"unicode/utf8"
)

// testTokenizer is loaded once per test binary.
var testTokenizer = sync.OnceValues(NewTokenizer)

// tiktokenEnds is the reference for tokenEnds: tiktoken-go's ordinary
// encoding, each token's end the sum of the decoded tokens' lengths.
func tiktokenEnds(t *Tokenizer, text string) []int {
	var ends []int
	off := 0
	for _, id := range t.enc.EncodeOrdinary(text) {
		off += len(t.enc.Decode([]int{id}))
		ends = append(ends, off)
	}
	return ends
}

// checkTokenEnds fails unless tokenEnds splits text as tiktoken-go does.
func checkTokenEnds(t *testing.T, tk *Tokenizer, text string) {
	t.Helper()
	got, want := tk.tokenEnds(text, nil), tiktokenEnds(tk, text)
	if !slices.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%q: token %d of %d ends at %v, tiktoken %d tokens, at %v", text, i, len(got), got[i:min(len(got), i+3)],
			len(want), want[i:min(len(want), i+3)])
	}
}

// tokenEdgeCases exercise every alternative of cl100kPattern and the
// places where they compete.
var tokenEdgeCases = []string{
	"", "a", " ", "\n", "\r\n", "  ", "   x", " \n ", "\n\n\n", "a  \n  b", "x \t\n\t y", "end   ", "end \n",
	"It's they're we've I'm you'll he'd IT'S THEY'RE I'M 'S 'sword 'llama 'd' 'x don't", "'", "''", "'\n",
	"123 4567 12345678 1,234.56 v1.2.3 x86_64 3rd 2nd", "²³ ½ ٣٤٥ 四五", "(word [x] {y} <a> --flag -x ... !!! ?!",
	" (word  (word\t(word \"quoted\" `code` a->b a=>b x==y", "!!!\n\n ??\r\n", "\u00a0word \u3000字 \u2003x",
	"naïve café Ünïcödé 日本語のテキスト Привет мир", "e\u0301 a\u0300b", "emoji 😀😀 👍🏽 x", "\ttab\tword",
	"https://example.com/a/b?c=d&e=f#g", "foo_bar foo-bar foo.bar foo/bar", "a\rb\r\rc", "x\u0085y \u2028z",
	"ab\n \n cd", "  \n\n  ", "A1B2 1A 1a 11a a11 aaa111", "$100 €5 £3 ¥9", "\x00\x01 \x7f", "ä ö ü ß ÄÖÜ",
	"the quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!", "12:34:56 2021-03-04T10:00:01Z",
	"                                   many spaces", "unbelievablyextraordinarilylongwordthatneedsmerging",
}

func TestTokenEndsEqualTiktoken(t *testing.T) {
	tk, err := testTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tokenEdgeCases {
		checkTokenEnds(t, tk, s)
	}
}

// FuzzTokenEnds compares tokenEnds with tiktoken-go on valid UTF-8 (the
// chunker sends other text to tiktoken-go).
func FuzzTokenEnds(f *testing.F) {
	for _, s := range tokenEdgeCases {
		f.Add(s)
	}
	tk, err := testTokenizer()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		checkTokenEnds(t, tk, s)
	})
}
