package taxonomy

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// findEveryCue is Find without the prefilter: every cue of every mode
// whose keywords occur runs on every sentence.
func (t *Taxonomy) findEveryCue(text string, sentences []Span) []Hit {
	var hits []Hit
	for _, s := range sentences {
		sent := text[s.Start:s.End]
		lower := strings.ToLower(sent)
		asserted := t.assertion != nil && t.assertion.MatchString(sent)
		for _, m := range t.Modes {
			if len(m.Keywords) > 0 && !slices.ContainsFunc(m.Keywords, func(k string) bool { return strings.Contains(lower, k) }) {
				continue
			}
			for _, c := range m.Cues {
				if c.req != nil && !c.req.MatchString(sent) || c.exc != nil && c.exc.MatchString(sent) {
					continue
				}
				for _, loc := range c.re.FindAllStringIndex(sent, -1) {
					hits = append(hits, t.hit(m, c, sent, s, loc, asserted))
				}
			}
		}
	}
	slices.SortStableFunc(hits, func(a, b Hit) int { return a.Start - b.Start })
	return hits
}

// TestPrefilterFindsWhatEveryCueFinds: the literal prefilter changes no
// hit, also where case folding differs from lower-casing (the Kelvin
// sign folds to k) and for every literal the default cues require.
func TestPrefilterFindsWhatEveryCueFinds(t *testing.T) {
	tx, err := Default()
	require.NoError(t, err)
	texts := []string{
		"The TLS CERTIFICATE for the API had expired. The root cause was a misconfigured firewall rule.",
		"A bad deploy of the ingress controller caused a DNS outage; name resolution failed for 20 minutes.",
		"The database ran out of disk space. Too many connections exhausted the connection pool.",
		"A fibre cut caused packet loss between sites; BGP sessions flapped and routes were withdrawn.",
		"An upgrade of Kubernetes broke the CNI. We rolled back the recent deployment of the new version.",
		"The breaker tripped during power maintenance and the chillers failed; temperatures rose.",
		"A \u212aubernetes certificate had expired (the Kelvin sign folds to k). The di\u017fk was full.",
		"Hardware fault on a line card; a third-party provider outage; a DDoS attack; human error; a typo.",
		"No certificate had expired. We suspected DNS, but DNS was ruled out.",
	}
	var all strings.Builder
	for _, m := range tx.Modes {
		for ci := range m.Cues {
			for _, l := range cueLiterals(m.Cues[ci].Pattern) {
				all.WriteString(l + " ")
			}
		}
	}
	texts = append(texts, all.String(), strings.ToUpper(all.String()))
	for _, text := range texts {
		sentences := []Span{{0, len(text)}}
		for i, r := range text {
			if r == '.' || r == ';' {
				sentences = append(sentences, Span{0, i + 1})
			}
		}
		require.Equal(t, tx.findEveryCue(text, sentences), tx.Find(text, sentences), text)
	}
	require.Equal(t, []string{"cert"}, cueLiterals(`\bcert(ificate)?s?\b`))
	require.ElementsMatch(t, []string{"expir", "lapsed"}, cueLiterals(`\b(expired|expiring|lapsed)\b`))
	require.Nil(t, cueLiterals(`\b(\w+\s+)?x?\b`))
	a := newAutomaton([]string{"he", "she", "his", "hers"})
	found := make([]bool, 4)
	a.scan("ushers", found)
	require.Equal(t, []bool{true, true, false, true}, found)
}
