package taxonomy

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// clauseBreakRE is the expression nextClauseBreak matches as.
var clauseBreakRE = regexp.MustCompile(`(?i)[,;:()]|\s(but|however|although|though|whereas|while|and then)\s`)

// TestClauseBreaksAsTheExpression: clauseBefore and clauseAfter cut where
// the expression's last and first matches do, on texts of clause words in
// any case (the long s for an s), partial words, every white-space and
// non-white-space byte around them, and bytes outside ASCII.
func TestClauseBreaksAsTheExpression(t *testing.T) {
	refBefore := func(sent string, start int) string {
		clause := sent[:start]
		if locs := clauseBreakRE.FindAllStringIndex(clause, -1); len(locs) > 0 {
			clause = clause[locs[len(locs)-1][1]:]
		}
		return clause
	}
	refAfter := func(sent string, end int) string {
		rest := sent[end:]
		if loc := clauseBreakRE.FindStringIndex(rest); loc != nil {
			rest = rest[:loc[0]]
		}
		return rest
	}
	pieces := []string{"but", "BUT", "However", "although", "though", "whereas", "WHEREA\u017f", "wherea\u017f", "while", "and then",
		"AND THEN", "and  then", "butt", "but", "whil", "then", "x", "the cert expired", " ", " ", "\t", "\n", "\f", "\r", "\v",
		",", ";", ":", "(", ")", ".", "\u00a0", "\u212a", "\u017f", "e\u0301", "\xff", "and", "al", "thoughs"}
	rng := rand.New(rand.NewPCG(5, 6))
	texts := []string{"", " but ", "a, b; c: d (e) f", "x but y however z", "x\tbut\ny", " but but but ", " whereaſ ",
		"it failed, but the cert expired while we slept and then the disk filled"}
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(14) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		texts = append(texts, b.String())
	}
	for _, text := range texts {
		for k := 0; k <= len(text); k++ {
			require.Equal(t, refBefore(text, k), clauseBefore(text, k), "%q before %d", text, k)
			require.Equal(t, refAfter(text, k), clauseAfter(text, k), "%q after %d", text, k)
		}
	}
}
