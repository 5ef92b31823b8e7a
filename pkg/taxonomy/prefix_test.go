package taxonomy

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPrefixLiteralsStartEveryMatch: the literals a cue's matches start
// with, none where a match may start otherwise, or at ^.
func TestPrefixLiteralsStartEveryMatch(t *testing.T) {
	for expr, want := range map[string][]string{
		`\bcert(ificate)?s?\b[^.;]{0,160}?\bexpired\b`: {"cert"},
		`\b(due to|caused by)\s+x`:                     {"due to", "caused by"},
		`\bdns\s+x`:                                    {"dns"},
		`(system\s+)?oom`:                              nil,
		`^foo\b`:                                       nil,
		`\bfoo|^bar`:                                   nil,
		`\b\b`:                                         nil,
		`\w+\s+failed`:                                 nil,
		`\b(a|b?)c`:                                    nil,
	} {
		require.Equal(t, want, prefixLiterals(expr), expr)
	}
}

// TestSearchFromTheFirstPrefixFindsEveryHit: Find, which searches a cue
// from a byte before the first literal its matches start with, finds what
// every cue run on the whole sentence finds, where that literal stands at
// the start, after a word byte ("recertificate"), after punctuation, in
// capitals, more than once, or not at all.
func TestSearchFromTheFirstPrefixFindsEveryHit(t *testing.T) {
	tx, err := Default()
	require.NoError(t, err)
	pieces := []string{"cert", "Cert", "CERTIFICATE", "re", "x", "expired", "had", "has", "due to", "Due To", "a", "bad",
		"deploy", "deployment", "of", "the", "dns", "DNS", "server", "outage", "upgrade", "caused", "connection", "pool",
		"exhausted", "disk", "full", "network", "failure", "ran", "out", "of", "memory", "power", "loss"}
	seps := []string{" ", "", ",", "-", "(", "_", "  ", ". "}
	rng := rand.New(rand.NewPCG(13, 14))
	for range 4000 {
		var b strings.Builder
		for range 1 + rng.IntN(10) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
			b.WriteString(seps[rng.IntN(len(seps))])
		}
		text := b.String()
		sp := []Span{{0, len(text)}}
		require.Equal(t, tx.findEveryCue(text, sp), tx.Find(text, sp), text)
	}
}
