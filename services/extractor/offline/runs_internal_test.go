//go:build integration

package offline

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// corpusTexts reads every file of the public corpora beside the checkout,
// each with a tail of edge cases for word boundaries appended.
func corpusTexts(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, cp := range []string{"dfds-postmortems", "cloud-incidents", "wikitech-incidents", "seed-postmortems", "github-status-stream"} {
		err := filepath.Walk("../../../../shared/corpora/"+cp, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			out = append(out, string(b)+" x_ABC ABCD_ é ÉAB CAFé FooBar_ _FooBar Foo9Bar8 ABCDEFG a-b x.y-z _a-b a-b_ -ab- é-a a-é db1005 db1005.eqiad a_b-c"+
				" The DNS resolver Cert Manager  x A b Ab c9 Ab_ cd Ab cd_ Ab9 Cd9 Ab Cé Éb cd X1 Y2 z")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// slicesOf returns ms as slices.
func slicesOf(ms [][6]int) [][]int {
	var out [][]int
	for _, m := range ms {
		out = append(out, m[:])
	}
	return out
}

// pairSearch is the search wordPairs stands for: re's next match from
// the second word of the last one, over the whole text.
func pairSearch(re *regexp.Regexp, text string) [][]int {
	var out [][]int
	for pos := 0; pos < len(text); {
		m := re.FindStringSubmatchIndex(text[pos:])
		if m == nil {
			break
		}
		for i := range m {
			m[i] += pos
		}
		out = append(out, m)
		pos = m[4]
	}
	return out
}

// TestRunSearchesEqualWholeTextSearches: the component finder's word and
// identifier-run searches find exactly what its patterns find searched
// over the whole text, on every corpus file.
func TestRunSearchesEqualWholeTextSearches(t *testing.T) {
	f := newComponentFinder(nil, nil)
	camel := regexp.MustCompile(`\b[A-Z][a-z0-9]+(?:[A-Z]+[a-z0-9]+)+\b`)
	acronym := regexp.MustCompile(`\b[A-Z]{3,6}\b`)
	pair := regexp.MustCompile(`\b([A-Z][A-Za-z0-9]+) ([A-Za-z]+)\b`)
	texts := corpusTexts(t)
	if len(texts) < 700 {
		t.Fatalf("%d corpus files", len(texts))
	}
	found := map[string]int{}
	for i, text := range texts {
		for _, c := range []struct {
			name      string
			got, want [][]int
		}{
			{"camel", wordRuns(text, f.camelWord), camel.FindAllStringIndex(text, -1)},
			{"acronym", wordRuns(text, acronymWord), acronym.FindAllStringIndex(text, -1)},
			{"ident", findInRunsIf(f.ident, text, func(run string) bool { return strings.ContainsAny(run, "-_") }), f.ident.FindAllStringIndex(text, -1)},
			{"host", findInRuns(f.host, text), f.host.FindAllStringIndex(text, -1)},
			{"pair", slicesOf(wordPairs(text)), pairSearch(pair, text)},
		} {
			found[c.name] += len(c.got)
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("file %d, %s: %d matches, the whole-text search %d", i, c.name, len(c.got), len(c.want))
			}
		}
	}
	t.Logf("%d files: %v", len(texts), found)
}
