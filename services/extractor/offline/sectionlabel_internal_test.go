package offline

import (
	"regexp/syntax"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLabelEndsAreTheLabelsLastWords: labelEnds holds the last word, in
// lower case, of every label sectionLabel's groups match, and no other
// word, each no longer than labelBefore reads.
func TestLabelEndsAreTheLabelsLastWords(t *testing.T) {
	re, err := syntax.Parse(sectionLabel().String(), syntax.Perl)
	require.NoError(t, err)
	ends := map[string]bool{}
	groups := 0
	var walk func(re *syntax.Regexp)
	walk = func(re *syntax.Regexp) {
		if re.Op == syntax.OpCapture {
			groups++
			for _, s := range spellings(t, re.Sub[0]) {
				require.True(t, isASCII(s), s)
				ends[lastWord(s)] = true
				require.LessOrEqual(t, len(s), maxLabelChars, s)
			}
			return
		}
		for _, sub := range re.Sub {
			walk(sub)
		}
	}
	walk(re)
	require.Equal(t, 2, groups)
	require.Equal(t, ends, labelEnds)
	for w := range labelEnds {
		require.LessOrEqual(t, len(w), len("prevention"), w)
	}
}

// spellings lists the strings re matches, up to case; re must match a
// few strings only (literals, small classes, ?, alternation, groups).
func spellings(t *testing.T, re *syntax.Regexp) []string {
	t.Helper()
	switch re.Op {
	case syntax.OpEmptyMatch:
		return []string{""}
	case syntax.OpLiteral:
		return []string{string(re.Rune)}
	case syntax.OpCharClass:
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				out = append(out, string(r))
			}
		}
		require.LessOrEqual(t, len(out), 8, re.String())
		return out
	case syntax.OpCapture:
		return spellings(t, re.Sub[0])
	case syntax.OpQuest:
		return append([]string{""}, spellings(t, re.Sub[0])...)
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			out = append(out, spellings(t, sub)...)
		}
		return out
	case syntax.OpConcat:
		out := []string{""}
		for _, sub := range re.Sub {
			var next []string
			for _, a := range out {
				for _, b := range spellings(t, sub) {
					next = append(next, a+b)
				}
			}
			out = next
		}
		return out
	}
	t.Fatalf("a label matches more than a few strings: %v", re)
	return nil
}

// lastWord is the run of ASCII letters s ends with, in lower case.
func lastWord(s string) string {
	s = strings.ToLower(s)
	k := len(s)
	for k > 0 && 'a' <= s[k-1] && s[k-1] <= 'z' {
		k--
	}
	return s[k:]
}
