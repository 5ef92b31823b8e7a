package query

import (
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// splitSentencesByRunes is splitSentences as it was written over a rune
// slice of the paragraph: the oracle of the byte version.
func splitSentencesByRunes(p string) []string {
	abbrev := func(before []rune) bool {
		s := strings.ToLower(string(before))
		for _, a := range []string{"e.g", "i.e", " vs", "etc", " approx", " no"} {
			if strings.HasSuffix(s, a) {
				return true
			}
		}
		n := len(before)
		return n >= 2 && before[n-2] == ' ' && unicode.IsUpper(before[n-1])
	}
	var out []string
	for _, part := range strings.Split(p, " • ") {
		rs := []rune(strings.Join(strings.Fields(part), " "))
		start := 0
		for i := 0; i+2 < len(rs); i++ {
			if (rs[i] == '.' || rs[i] == '!' || rs[i] == '?') && rs[i+1] == ' ' &&
				(unicode.IsUpper(rs[i+2]) || unicode.IsDigit(rs[i+2])) && !abbrev(rs[start:i]) {
				out = append(out, strings.TrimSpace(string(rs[start:i+1])))
				start = i + 2
			}
		}
		if s := strings.TrimSpace(string(rs[start:])); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// TestSplitSentencesAsByRunes: the byte version cuts made-up paragraphs
// that test its edges as the rune version did (the corpora's paragraphs:
// TestSplitSentencesOfTheCorporaAsByRunes).
func TestSplitSentencesAsByRunes(t *testing.T) {
	for _, p := range splitEdgeCases {
		require.Equal(t, splitSentencesByRunes(p), splitSentences(p), "paragraph %q", p)
	}
}

// splitEdgeCases are paragraphs at the edges of splitSentences: spaces to
// collapse, abbreviations, single capitals, non-ASCII letters, bullets.
var splitEdgeCases = []string{
	"", " ", "a", "One. Two", "  spaced   out.  Next one.\tTabbed. ", "e.g. Not cut. J. Smith said so. Über. Écoute! 9 lives? yes",
	"The value was approx. 5 and then etc. Done. See vs. Them. No. 5 was next.", "Ends with a dot.", "x. É", "• bullet • Another. One",
	"Ünïcödé sentence. Ωmega starts here. ñ lower. 3 digits.", "Ticket no. 5 was filed. Then NO. 6 too.",
}

// TestWordSet: the joined form holds the distinct words in order, finds
// each of them and nothing else (prefixes, extensions, the empty word).
func TestWordSet(t *testing.T) {
	require.Empty(t, slices.Collect(newWordSet(nil).all()))
	require.False(t, newWordSet(nil).has(""))
	ws := []string{"kafka", "broker", "kafka", "a", "brokers", "disk", "b", "ünï"}
	s := newWordSet(slices.Clone(ws))
	require.Equal(t, []string{"a", "b", "broker", "brokers", "disk", "kafka", "ünï"}, slices.Collect(s.all()))
	for _, w := range ws {
		require.True(t, s.has(w), w)
	}
	for _, w := range []string{"", "brok", "brokerss", "kafk", "kafkas", "c", "z", "ün"} {
		require.False(t, s.has(w), w)
	}
}
