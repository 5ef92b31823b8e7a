package taxonomy

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseWordListRefusesWhatIsNoList: an expression with a gap, a
// boundary missing, a case-sensitive letter, a \w in the middle, a word
// that may be empty, a byte outside the word bytes (but a space or an
// apostrophe between words), a phrase starting or ending with no word or
// \s+ before a byte it could take is matched by its regular expression.
func TestParseWordListRefusesWhatIsNoList(t *testing.T) {
	for _, expr := range []string{`\btim(ed|ing)\s*out\b`, `\bmis-?configur\w*\b`, `\ba\s+ b\b`, `\ba\s+\s+b\b`,
		`\b\s+a\b`, `\ba \b`, `\b a\b`, `\bfoo\x{01}bar\b`, `\ba\sb\b`, `\ba\s+(b)?\b`, `\bfor\s+\d+\b`, `\b[a\x{e9}]\b`,
		`\bfoo[\w\x{e9}]*\b`, `\bfoo[^\x00-\x7f]\b`, `\b\w+\b`, `\bfoo\w*bar\b`,
		`(?-i)\bfoo\b`, `\b(?-i:Foo)\b`, `\bfoo\B`, `foo`, `\bfoo`, `foo\b`, `\b(a|)\b`, `\b(a|b)?\b`, `\bcaf\x{e9}\b`,
		`\b[a.]\b`, `\bx{2,}\b`, `\b(?-i:[a-z])\b`, `\bfoo\w*\w*\b`, `\bfoo\b|\bbar`, `\b\d+\b`, `^\bfoo\b`,
		`\ba\s+(\w+\s+)\s*b\b`, `\ba\s+(\w+\s+) b\b`, `\b(\w+\s+)b\b`, `\ba\s+(\w+\s+)\b`, `\ba\s+(\S+\s+)b\b`,
		`\ba\s+(\w+\s*)b\b`, `\ba\s+(\w*\s+)b\b`, `\ba'(\w+\s+)+?b\b`} {
		require.Nil(t, ParseWordList(expr), expr)
	}
	for _, expr := range []string{`\bfoo\b`, `\b(fail(ed|ing|ures?)?|errors?|erroring)\b`, `\bthrottl\w+\b`, `\b[45]\d\d\b`,
		`\bfoo\b|\bbar\w*\b`, `\b(?-i:[aA])\b`, `\b_9\b`, `\btim(ed|ing)\s+out\b`, `\b(ran out|could not|couldn't)\b`} {
		require.NotNil(t, ParseWordList(expr), expr)
	}
}

// TestWordListsMatchAsTheExpressions: on texts WordListApplies to, a
// word list finds what its expression finds, for the default taxonomy's
// cues and conditions that are word lists and for lists of several
// shapes; the texts are the lists' words and their prefixes and
// extensions, in either case, joined by word and non-word bytes, runes
// outside ASCII and invalid UTF-8. WordListApplies holds but where the
// text has a rune folding to an ASCII letter.
func TestWordListsMatchAsTheExpressions(t *testing.T) {
	exprs := []string{`\b(fail(ed|ing|ures?)?|errors?|erroring)\b`, `\b(unavailable|unreachable|down|disrupt\w*|impacted)\b`,
		`\bthrottl\w+\b`, `\b[45]\d\d\b`, `\bfoo\b|\bbar\w*\b`, `\b(a_b|x9)\w+\b|\bq\b`, `\bcr[ae]sh\w*\b`, `\b(?:foo|bar)s?\b`,
		`\b_9\b`, `\bk\w*\b`, `\bs\b`, `\btim(ed|ing)\s+out\b|\btimeouts?\b`, `\b(unable|could not|couldn't|cannot|can't)\s+to?\b`,
		`\b(expir\w*|ran out|run out|saturat\w*)\b`, `\b(because|due to|root cause|root)\b`, `\b[45]\d\d\s+errors?\b`,
		`\ba \s+b\w+\b`, `\bturned off\b|\bwent dark\b|\bempty\b`,
		// Phrases whose matches at one start end where the order of the
		// alternatives says.
		`\b(a|a b)\b`, `\b(a b|a)\b`, `\b(x\s+)?y\b|\bx\b`, `\bfoo(\s+bar)?\b`, `\bfoo(\s+bar)??\b`, `\b(a|a\s+b\w*)\b`,
		`\b(a\s+b\w*|a)\b`, `\b(ran|run)\s+(out|out of)\b`, `\bk\s+(s|s\s+k)\b`,
		// Gaps of whole words between the words of a phrase.
		`\bsurge\s+(of|in)\s+(\w+\s+){0,3}(traffic|load)\b`, `\bmore\s+(\w+\s+){0,5}than\b`, `\ba\s+(\w+\s+)?b\b`,
		`\ba\s+\w+\s+b\b`, `\ba\s+(\w+\s+){1,2}?b\w*\b`, `\bx(\w+\s+)y\b`, `\ba\s+(\w+\s+)?'b\b`, `\b(a|a\s+(\w+\s+){0,2}b)\b`}
	// The lists written here get more texts than the taxonomy's.
	written := len(exprs)
	tx, err := Default()
	require.NoError(t, err)
	for _, m := range tx.Modes {
		for _, c := range m.Cues {
			for _, e := range []string{c.Pattern, c.Requires, c.Excludes} {
				if e != "" && ParseWordList(e) != nil {
					exprs = append(exprs, e)
				}
			}
		}
	}
	require.Greater(t, len(exprs), 30)
	rng := rand.New(rand.NewPCG(11, 12))
	seps := []string{" ", "  ", ".", ",", "-", "_", "'", "\t", "(", "/", "", "\u00e9", "\u2014", "\u2019", "\xff", "\u00fc", " \u00a0"}
	for ei, expr := range exprs {
		l := ParseWordList(expr)
		require.NotNil(t, l, expr)
		re := regexp.MustCompile("(?i)" + expr)
		var tokens []string
		for _, it := range l.items {
			w := strings.ReplaceAll(it.s, string(rune(spaceRun)), []string{" ", "\t", " \n ", "", "  "}[rng.IntN(5)])
			for strings.Contains(w, string(rune(gapWord))) {
				w = strings.Replace(w, string(rune(gapWord)), []string{"x ", "the\t", "a_9  ", "", "x-y ", " ", "b ", "\u00e9 ", "k\u212a "}[rng.IntN(9)], 1)
			}
			tokens = append(tokens, w, strings.ToUpper(w), w[:len(w)/2], w+"x", w+"_", w+"9", w+"ing")
			if i := strings.IndexAny(w, " '"); i > 0 {
				tokens = append(tokens, w[:i], w[i+1:])
			}
		}
		tokens = append(tokens, "the", "x", "X", "9", "_", "K", "S", "\u00e9t\u00e9")
		if rng.IntN(4) == 0 {
			tokens = append(tokens, "\u017f", "\u212a", "erro\u017f", "\u212aey")
		}
		n := 3000
		if ei >= written {
			n = 800
		}
		for range n {
			var b strings.Builder
			for range rng.IntN(6) {
				b.WriteString(tokens[rng.IntN(len(tokens))])
				b.WriteString(seps[rng.IntN(len(seps))])
			}
			text := b.String()
			if !WordListApplies(text) {
				require.True(t, strings.ContainsAny(text, "\u017f\u212a"), text)
				continue
			}
			require.True(t, l.Finds(), expr)
			require.Equal(t, re.FindAllStringIndex(text, -1), l.FindAll(text), "%s on %q", expr, text)
			require.Equal(t, re.MatchString(text), l.Match(text), "%s on %q", expr, text)
		}
	}
}
