package taxonomy

import (
	"math/rand/v2"
	"os"
	"path/filepath"
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
			for _, set := range cueLiteralSets(m.Cues[ci].Pattern) {
				for _, l := range set {
					all.WriteString(l + " ")
				}
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
	require.Equal(t, [][]string{{"cert"}}, cueLiteralSets(`\bcert(ificate)?s?\b`))
	sets := cueLiteralSets(`\b(expired|expiring|lapsed)\b`)
	require.Len(t, sets, 1)
	require.ElementsMatch(t, []string{"expir", "lapsed"}, sets[0])
	require.Nil(t, cueLiteralSets(`\b(\w+\s+)?x?\b`))
	// Every part of a concatenation is required; optional parts are not.
	require.Equal(t, [][]string{{"puppet", "ansible"}, {"change", "patch"}},
		cueLiteralSets(`\b(puppet|ansible)\s+(the\s+|a\s+)?(change|patch)\b`))
	require.Equal(t, [][]string{{"time out"}, {"db"}}, cueLiteralSets(`time out\s*(\w+\s+)*db`))
	a := newAutomaton([]string{"he", "she", "his", "hers"})
	found := make([]bool, 4)
	a.scan("ushers", found)
	require.Equal(t, []bool{true, true, false, true}, found)
}

// TestPrefilterAgreesOnManySentences compares Find with the prefilter
// against every cue run on many sentences: random ones made of the cues'
// literals, their keywords and common words (in random case), and the
// sentences of the corpora beside the checkout when they are there.
func TestPrefilterAgreesOnManySentences(t *testing.T) {
	tx, err := Default()
	require.NoError(t, err)
	words := strings.Fields("the a an of to in on was were is by due caused because after during our their " +
		"change changes changed config configuration update deploy deployment release rollout network switch " +
		"router traffic load request spike failed failure outage disk drive power timeout expired certificate")
	for _, m := range tx.Modes {
		words = append(words, m.Keywords...)
		for ci := range m.Cues {
			for _, set := range cueLiteralSets(m.Cues[ci].Pattern) {
				words = append(words, set...)
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 11))
	var sents []string
	for range 4000 {
		n := 2 + rng.IntN(14)
		ws := make([]string, n)
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
		sents = append(sents, strings.Join(ws, " ")+".")
	}
	for _, dir := range []string{"dfds-postmortems", "cloud-incidents", "wikitech-incidents"} {
		files, _ := filepath.Glob(filepath.Join("../../../shared/corpora", dir, "*.md"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			sents = append(sents, strings.SplitAfter(string(data), ". ")...)
		}
	}
	hits := 0
	for _, sent := range sents {
		if sent == "" {
			continue
		}
		sp := []Span{{0, len(sent)}}
		want := tx.findEveryCue(sent, sp)
		require.Equal(t, want, tx.Find(sent, sp), sent)
		hits += len(want)
	}
	t.Logf("%d sentences, %d hits", len(sents), hits)
	require.Greater(t, hits, 100, "the sentences must exercise the cues")
}
