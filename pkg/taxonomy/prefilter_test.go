package taxonomy

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// findEveryCue is Find without the prefilters: every cue of every mode
// whose keywords occur runs on every sentence, and every negation and
// effect expression on every hit.
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
					hits = append(hits, t.plainHit(m, c, sent, s, loc, asserted))
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
			for _, set := range LiteralSets(m.Cues[ci].Pattern) {
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
	require.Equal(t, [][]string{{"cert"}}, LiteralSets(`\bcert(ificate)?s?\b`))
	sets := LiteralSets(`\b(expired|expiring|lapsed)\b`)
	require.Len(t, sets, 1)
	require.ElementsMatch(t, []string{"expired", "expiring", "lapsed"}, sets[0])
	// Parts matching a few strings exactly combine (the parser turns
	// was|were into w(as|ere)).
	sets = LiteralSets(`\b(was|were) (not|never)\b`)
	require.Len(t, sets, 1)
	require.ElementsMatch(t, []string{"was not", "was never", "were not", "were never"}, sets[0])
	// An optional part adds the strings without it; a string holding
	// another of the set adds nothing.
	require.Equal(t, [][]string{{"no", "never"}}, LiteralSets(`\b(no|not|none|never)\b`))
	require.Nil(t, LiteralSets(`\b(\w+\s+)?x?\b`))
	// Every part of a concatenation is required; optional parts are not.
	require.Equal(t, [][]string{{"puppet", "ansible"}, {"change", "patch"}},
		LiteralSets(`\b(puppet|ansible)\s+(the\s+|a\s+)?(change|patch)\b`))
	require.Equal(t, [][]string{{"time out"}, {"db"}}, LiteralSets(`time out\s*(\w+\s+)*db`))
	a := newAutomaton([]string{"he", "she", "his", "hers"})
	found := make([]bool, 4)
	a.scan("uSHers", found, nil, nil, nil)
	require.Equal(t, []bool{true, true, false, true}, found)
	occ := a.scan("USHERS", make([]bool, 4), nil, []uint32{1, 2, 0, 4}, nil)
	require.Equal(t, []occurrence{{1, 4, 2}, {2, 4, 1}, {2, 6, 4}}, occ)
}

// TestPrefilterAgreesOnManySentences compares Find with the prefilters
// against every cue and expression run on many sentences: random ones
// made of the cues' literals, their keywords, the words of the negation
// and effect expressions and common words (in random case), and the
// sentences of the corpora beside the checkout when they are there.
func TestPrefilterAgreesOnManySentences(t *testing.T) {
	tx, err := Default()
	require.NoError(t, err)
	words := strings.Fields("the a an of to in on was were is by due caused because after during our their " +
		"change changes changed config configuration update deploy deployment release rollout network switch " +
		"router traffic load request spike failed failure outage disk drive power timeout expired certificate")
	words = append(words, exprWords...)
	for _, m := range tx.Modes {
		words = append(words, m.Keywords...)
		for ci := range m.Cues {
			for _, set := range LiteralSets(m.Cues[ci].Pattern) {
				words = append(words, set...)
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 11))
	sents := randomSentences(rng, words, 4000, 15)
	sents = append(sents, corpusParts(t)...)
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

// plainHit is hit without the sentence prefilter and memory: every
// expression runs on its part of the sentence.
func (t *Taxonomy) plainHit(m Mode, c Cue, sent string, s Span, loc []int, asserted bool) Hit {
	h := Hit{Mode: m.Name, Family: family(m), Tier: m.Tier, Weight: c.Weight,
		Start: s.Start + loc[0], End: s.Start + loc[1], Sentence: s, Cue: c.Pattern,
		Negated: t.plainNegated(sent, loc[0], loc[1], c.NegationInside), Asserted: asserted,
		Explicit: c.Explicit, Effect: t.plainEffect(sent, loc[0], loc[1])}
	if h.Effect {
		h.Weight *= EffectWeight
	}
	return h
}

// plainEffect reports whether sent presents the cue at start:end as an effect
// (an effect.before phrase earlier in its clause, an effect.after phrase
// right after it, an effect.reason clause before its own) or as a remedy (an effect.remedy phrase in its clause,
// or opening the sentence: "To mitigate, engineers updated the records"
// tells the remedy in every clause), unless the cue itself matches
// effect.remedy_keeps: rolling back a deploy names the deploy as the cause.
func (t *Taxonomy) plainEffect(sent string, start, end int) bool {
	// A latent defect that something triggered ("requests that triggered
	// a bug which caused ...") is the cause the sentence names, not an
	// effect: effect.exposed matches the clause up to the cue's end.
	before := clauseBefore(sent, start)
	exposed := t.effectExposed != nil && t.effectExposed.MatchString(sent[start-len(before):end])
	if !exposed && t.effectBefore != nil && t.effectBefore.MatchString(before) {
		return true
	}
	if t.effectAfter != nil && t.effectAfter.MatchString(sent[end:]) {
		return true
	}
	// "Because the store lacked the data, the balancers were
	// misconfigured": a clause after the reason the sentence gives.
	if t.effectReason != nil && t.effectReason.MatchString(sent[:start]) {
		return true
	}
	if t.remedy == nil || t.remedyKeeps != nil && t.remedyKeeps.MatchString(sent[start:end]) {
		return false
	}
	// A sentence that opens with the remedy ("To mitigate, engineers
	// updated the DNS records") tells the remedy in all its clauses.
	if t.remedy.MatchString(sent[start-len(before):end] + clauseAfter(sent, end)) {
		return true
	}
	lead := leadingLabel.ReplaceAllString(sent, "")
	m := t.remedy.FindStringIndex(lead)
	return m != nil && strings.IndexFunc(lead[:m[0]], unicode.IsLetter) < 0
}

func (t *Taxonomy) plainNegated(sent string, start, end int, inside bool) bool {
	clause := clauseBefore(sent, start)
	// A sentence stating a general rule ("when a user modifies ...") tells
	// nothing that happened, wherever the cue stands in it.
	if t.negSentence != nil && t.negSentence.MatchString(sent) {
		return true
	}
	// A conditional ("when there is such a change") scopes over the whole
	// clause after it, however many words on.
	if t.negClause != nil && t.negClause.MatchString(clause) {
		return true
	}
	if t.negBefore != nil {
		prefix := lastWords(clause, prefixWords)
		if t.negBefore.MatchString(prefix) {
			return true
		}
		if inside && t.negBefore.MatchString(sent[start:end]) {
			return true
		}
	}
	if t.negAfter != nil && t.negAfter.MatchString(sent[end:]) {
		return true
	}
	return false
}

// CorpusTexts returns the text of every file of the postmortem corpora
// beside the checkout (../shared, as CI has it), failing when there is
// none. Exported for the package's external tests.
func CorpusTexts(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, dir := range []string{"dfds-postmortems", "cloud-incidents", "wikitech-incidents"} {
		md, _ := filepath.Glob(filepath.Join("../../../shared/corpora", dir, "*.md"))
		txt, _ := filepath.Glob(filepath.Join("../../../shared/corpora", dir, "*.txt"))
		for _, f := range append(md, txt...) {
			data, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, string(data))
		}
	}
	if len(out) == 0 {
		tb.Fatal("no corpus file under ../../../shared/corpora")
	}
	return out
}

// corpusParts returns the ". "-separated parts of every corpus file.
func corpusParts(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, text := range CorpusTexts(t) {
		out = append(out, strings.SplitAfter(text, ". ")...)
	}
	return out
}
