package taxonomy

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// exprWords are words of the negation and effect expressions, in the
// random sentences of the tests.
var exprWords = strings.Fields("not never no because , ; : ( ) causing caused resulted in led to leading affected impacted " +
	"extended the outage further complications to mitigate resolved the issue mitigated restored it by as a workaround " +
	"rolled back reverted undo root cause contributing factor compounded by in addition reason was when if there is are " +
	"whenever ensure prevent avoid designed ruled out unrelated triggered exposed hit a bug race condition deadlock " +
	"regression but however while and then Mitigation: To mitigate, we suspected may have will plan to warnings in logs")

// randomSentences makes n sentences of 2 to maxWords words of words, in
// random case.
func randomSentences(rng *rand.Rand, words []string, n, maxWords int) []string {
	var out []string
	for range n {
		ws := make([]string, 2+rng.IntN(maxWords-1))
		for i := range ws {
			w := words[rng.IntN(len(words))]
			switch rng.IntN(6) {
			case 0:
				w = strings.ToUpper(w)
			case 1:
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			ws[i] = w
		}
		out = append(out, strings.Join(ws, " ")+".")
	}
	return out
}

// TestSentencePrefilterAgreesWithTheExpressions: where may says an
// expression cannot match a part of a sentence, the expression does not
// match it, for many parts between two word edges of many sentences.
func TestSentencePrefilterAgreesWithTheExpressions(t *testing.T) {
	tx, err := Default()
	require.NoError(t, err)
	exprs := map[int]*regexp.Regexp{exprAssertion: tx.assertion, exprNegSentence: tx.negSentence, exprNegBefore: tx.negBefore,
		exprNegAfter: tx.negAfter, exprNegClause: tx.negClause, exprEffectBefore: tx.effectBefore, exprEffectAfter: tx.effectAfter,
		exprExposed: tx.effectExposed, exprReason: tx.effectReason, exprRemedy: tx.remedy, exprRemedyKeeps: tx.remedyKeeps}
	words := slices.Concat(exprWords, strings.Fields("the disk certificate deploy config network database were"))
	for _, re := range exprs {
		for _, set := range exprLiteralSets(strings.TrimPrefix(re.String(), "(?i)")) {
			words = append(words, set...)
		}
	}
	rng := rand.New(rand.NewPCG(3, 5))
	sents := append(randomSentences(rng, words, 3000, 24),
		"A \u212aelvin sign in a ro\u017fe: because it mitigated the issue, restored it by hand.",
		"Déjà vu — the root cause, again, was the outage’s extended recovery; to mitigate it we rolled back.")
	filtered, matched := 0, 0
	found := make([]bool, tx.nPatterns)
	var sc sentence
	for _, sent := range sents {
		clear(found)
		tx.scanSentence(&sc, sent, found, make([]int32, tx.nPatterns))
		edges := []int{0, len(sent)}
		for i, r := range sent {
			if !unicode.IsLetter(r) {
				edges = append(edges, i, i+utf8.RuneLen(r))
			}
		}
		for e, re := range exprs {
			for range 40 {
				a, b := edges[rng.IntN(len(edges))], edges[rng.IntN(len(edges))]
				if a > b {
					a, b = b, a
				}
				m := re.MatchString(sent[a:b])
				if !tx.may(&sc, e, a, b) {
					require.False(t, m, "expression %d matches %q", e, sent[a:b])
					filtered++
				} else if m {
					matched++
				}
			}
		}
	}
	t.Logf("%d parts passed over, %d matched", filtered, matched)
	require.Len(t, exprs, nExprs)
	for e := range nExprs {
		require.NotEmpty(t, tx.exprSet[e], "expression %d has a literal prefilter", e)
	}
	require.Greater(t, filtered, 10000, "the prefilter must pass over parts")
	require.Greater(t, matched, 1000, "the parts must match the expressions")
	// The Kelvin sign and the long s are the runes folding into ASCII.
	// Of those, strings.ToLower makes the Kelvin sign ASCII ("k") and
	// leaves the long s.
	var folds, misses []rune
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		into, lowerMisses := asciiFolds(string(r))
		if into {
			folds = append(folds, r)
		}
		if lowerMisses {
			misses = append(misses, r)
		}
	}
	require.Equal(t, []rune{'\u017f', '\u212a'}, folds)
	require.Equal(t, []rune{'\u017f'}, misses)
	into, lowerMisses := asciiFolds("Déjà vu — it’s")
	require.False(t, into)
	require.False(t, lowerMisses)
}
