package taxonomy

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAlternativesMatchAsTheExpression: an expression split into the
// branches of its alternation, each run only where its literals stand,
// matches what the expression matches, on many parts of random and corpus
// sentences and on texts where case folding or UTF-8 could trip the
// literal scan: the long s and the Kelvin sign (which match s and k),
// other non-ASCII letters, invalid UTF-8.
func TestAlternativesMatchAsTheExpression(t *testing.T) {
	tx, err := Default()
	require.NoError(t, err)
	exprs := map[string]struct {
		re  *regexp.Regexp
		alt *alternatives
	}{
		"negation.after": {tx.negAfter, tx.negAfterAlts}, "effect.before": {tx.effectBefore, tx.effectBeforeAlts},
		"effect.after": {tx.effectAfter, tx.effectAfterAlts}, "effect.remedy": {tx.remedy, tx.remedyAlts},
		"undetermined": {tx.undetermined, tx.undeterminedAlts},
	}
	for _, expr := range []string{`^a|^b\w*c`, `x(y|z)|^\s*foo\b|bar`, `\bcause\s+(is|was)\s+unknown\b|\bno\s+idea\b`,
		`^(?:a|b)`, `(a|b)`, `a`, `\bk\w+|^s`, `^(?:ab|cd\s*e)`, `^(?:the|a)\s+cause`} {
		re, err := compile("test", expr)
		require.NoError(t, err)
		exprs[expr] = struct {
			re  *regexp.Regexp
			alt *alternatives
		}{re, splitAlternation(re)}
	}
	for name, e := range exprs {
		if !strings.Contains(name, "(") || strings.Contains(name, "|") {
			require.NotEmpty(t, e.alt.branches, name)
		}
	}
	for _, name := range []string{"negation.after", "effect.before", "effect.after", "effect.remedy", "undetermined"} {
		a := exprs[name].alt
		require.Greater(t, len(a.branches), 1, "%s is split", name)
		require.NotNil(t, a.auto, "%s has literals", name)
		for i := range a.branches {
			require.NotEmpty(t, a.sets[i], "%s branch %d has literals", name, i)
		}
	}

	words := strings.Fields("the cause is was remains unknown unclear not yet known no idea what caused could determine " +
		"find root underlying outage incident issue by as a workaround mitigation mitigated resolved restored it to help " +
		"mitigate recovery extended prolonged further complications affected impacted which that then triggered causing " +
		"drove pushed forced them to ruled out were never excluded good idea warnings in logs from syslog")
	words = append(words, exprWords...)
	for _, e := range exprs {
		for _, set := range exprLiteralSets(strings.TrimPrefix(e.re.String(), "(?i)")) {
			words = append(words, set...)
		}
	}
	words = append(words, "ab", "cd", "e", "cde", "cause", "cau\u017fe", "un\u212anown", "\u212anown", "wa\u017f", "i\u017f", "déjà", "naïve", "\xff", "\xe2\x80",
		"caus\xc3", "ſ", "K", "’", "—", "\u0130", "\u0131s")
	rng := rand.New(rand.NewPCG(13, 17))
	texts := randomSentences(rng, words, 3000, 20)
	for _, s := range []string{"the root cause is still unknown", "it is unclear what caused the outage",
		"we could not determine the root cause", "no cause was found", "the cause of the outage remains a mystery",
		"the exact cause has not yet been determined", "we do not know what exactly caused it"} {
		for range 30 {
			ws := strings.Fields(s)
			for i, w := range ws {
				switch rng.IntN(4) {
				case 0:
					ws[i] = strings.ToUpper(w)
				case 1:
					ws[i] = strings.ReplaceAll(w, "s", "ſ")
				case 2:
					ws[i] = strings.ReplaceAll(w, "k", "K")
				}
			}
			texts = append(texts, randomSentences(rng, words, 1, 5)[0]+" "+strings.Join(ws, " ")+" "+randomSentences(rng, words, 1, 5)[0])
		}
	}
	texts = append(texts, "", " ", "the cause is unknown", "the cau\u017fe is un\u212anown", "The CAUSE was not yet known.",
		"was not", " were never", "it is ſtill a good idea", "\xffthe cause is unknown", "no idea what cau\u017fed it")
	texts = append(texts, corpusParts(t)...)
	matched, parts := map[string]int{}, 0
	for i, text := range texts {
		// Parts between random byte offsets (not only rune starts): the
		// expressions run on parts of sentences.
		// The corpus sentences (after the random ones) are matched by
		// the taxonomy's expressions only.
		n, corpus := 3, i >= 3300
		if corpus {
			n = 1
		}
		for range n {
			a, b := rng.IntN(len(text)+1), rng.IntN(len(text)+1)
			if a > b {
				a, b = b, a
			}
			part := text[a:b]
			if rng.IntN(2) == 0 {
				part = text[a:]
			}
			parts++
			for name, e := range exprs {
				if corpus && !strings.Contains(name, ".") && name != "undetermined" {
					continue
				}
				want := e.re.MatchString(part)
				require.Equal(t, want, e.alt.MatchString(part), "%s on %q", name, part)
				if want {
					matched[name]++
				}
			}
		}
	}
	t.Logf("%d parts, matched: %v", parts, matched)
	for _, name := range []string{"negation.after", "effect.before", "effect.after", "effect.remedy", "undetermined"} {
		require.Greater(t, matched[name], 10, "the parts must match %s", name)
	}
}
