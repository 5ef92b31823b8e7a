package taxonomy

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAnchoredAlternationMatchesAsWritten: an expression compiles to one
// that finds what the expression as written finds, whether or not ^ is
// moved out of its alternation, and the default taxonomy's anchored
// expressions get it moved.
func TestAnchoredAlternationMatchesAsWritten(t *testing.T) {
	for _, tc := range []struct {
		expr     string
		anchored bool
	}{
		{`^a|^b`, true},
		{`(^a|^b)`, true},
		{`^\s*was not|^[^.;]{0,10}\bruled out\b`, true},
		{`(?:^a|^b)c|^d`, true},
		{`^(a|b)`, false}, // one branch, already anchored
		{`^a`, false},
		{`a|^b`, false},
		{`^a|b`, false},
		{`(^|,)\s*because`, false},
		{`^a|(?:x|^y)`, false},
		{`\b^a|^b`, false},
		{`^(?-i)A|^b`, true},
	} {
		require.Equal(t, tc.anchored, anchoredAlternation("(?i)"+tc.expr), tc.expr)
		re, err := compile("test", tc.expr)
		require.NoError(t, err)
		plain := regexp.MustCompile("(?i)" + tc.expr)
		for _, text := range []string{"", "a", "b", "za", "zb", " a", "ab", "A", "B", "Za", "d", "zd", "acd", "bc", "yb",
			"y", "xy", "zx", "  was not", "the cause was ruled out", "it, because", "because", "x, because",
			"\u017fa", "a\u212a", "a\nb", "\nb"} {
			require.Equal(t, plain.FindAllStringIndex(text, -1), re.FindAllStringIndex(text, -1), "%s on %q", tc.expr, text)
		}
	}
	tx, err := Default()
	require.NoError(t, err)
	for name, re := range map[string]*regexp.Regexp{"negation.after": tx.negAfter, "negation.sentence": tx.negSentence,
		"effect.after": tx.effectAfter} {
		require.Regexp(t, `^\(\?i\)\^\(\?:`, re.String(), name)
	}
}
