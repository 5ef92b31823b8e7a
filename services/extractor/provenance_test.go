package extractor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/llmx"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// seedSentence is sentence i (0-based) of a seed postmortem: each is one
// line of two or three sentences.
func seedSentence(t *testing.T, doc *events.DocChanged, i int) string {
	t.Helper()
	ss := chunk.Sentences(doc.Text)
	require.Less(t, i, len(ss), "%s has %d sentences", doc.DocID, len(ss))
	return doc.Text[ss[i].Start:ss[i].End]
}

// cited is a relationship as a provenance table names it.
func cited(r events.RawRelationship) string {
	return r.Relation + " " + resolve.ID(r.TargetType, r.Target)
}

// checkCitations asserts that every relationship of doc names a unit of
// units, carries its hash, and spans the sentence want[cited(r)] says (a
// sentence index of doc); every entry of want must be there.
func checkCitations(t *testing.T, doc *events.DocChanged, units []events.TextUnit, rels []events.RawRelationship, want map[string]int) {
	t.Helper()
	byID := map[string]events.TextUnit{}
	for _, u := range units {
		byID[u.ID] = u
	}
	seen := map[string]bool{}
	for _, r := range rels {
		u, ok := byID[r.TextUnit]
		require.True(t, ok, "%s: %s names unit %q", doc.DocID, cited(r), r.TextUnit)
		require.Equal(t, chunk.ContentHash(u.Text), r.UnitHash, "%s: %s", doc.DocID, cited(r))
		require.GreaterOrEqual(t, r.SentenceStart, u.Start)
		require.LessOrEqual(t, r.SentenceEnd, u.End)
		require.Less(t, r.SentenceStart, r.SentenceEnd, "%s: %s has a span", doc.DocID, cited(r))
		i, ok := want[cited(r)]
		if !ok {
			continue
		}
		seen[cited(r)] = true
		require.Equal(t, seedSentence(t, doc, i), doc.Text[r.SentenceStart:r.SentenceEnd], "%s: %s", doc.DocID, cited(r))
	}
	for k := range want {
		require.True(t, seen[k], "%s: %s was extracted", doc.DocID, k)
	}
}

// extractCite is a stage that names only the text unit.
type extractCite struct{}

func (extractCite) Name() string { return "custom" }

func (extractCite) Extract(_ context.Context, a *offline.Analysis, out *offline.Output) error {
	u := a.Units[0]
	out.Relationship(events.RawRelationship{Source: a.DocEntity.Name, SourceType: a.DocEntity.Type,
		Relation: "reviewed", Target: a.DocEntity.Name, TargetType: a.DocEntity.Type, TextUnit: u.ID})
	return nil
}

func TestOfflineCitesUnitForUncitedStage(t *testing.T) {
	x, err := offline.New(offline.Config{DisablePatterns: true, DisableTaxonomy: true,
		DisableMentions: true, Stages: []offline.Stage{extractCite{}}})
	require.NoError(t, err)
	doc := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "D-1", Version: 1, Text: "xx Hello. World."}
	// A caller's unit without a hash gets one computed.
	units := []events.TextUnit{{ID: "u1", Text: "Hello. World.", Start: 3, End: 16}}
	_, rels, err := x.Extract(t.Context(), doc, units)
	require.NoError(t, err)
	require.Len(t, rels, 1)
	require.Equal(t, 3, rels[0].SentenceStart)
	require.Equal(t, 16, rels[0].SentenceEnd)
	require.Equal(t, chunk.ContentHash("Hello. World."), rels[0].UnitHash)
}

func TestLLMCitationFallbacksAndCache(t *testing.T) {
	reply := `{"entities":[
		{"name":"D-1","type":"incident","description":""},
		{"name":"orders-db","type":"datastore","description":""},
		{"name":"storage team","type":"team","description":""},
		{"name":"disk full","type":"failure_mode","description":""}],
	 "relationships":[
		{"source":"D-1","source_type":"incident","relation":"involved","target":"orders-db","target_type":"datastore","description":"","strength":5},
		{"source":"orders-db","source_type":"datastore","relation":"owned_by","target":"storage team","target_type":"team","description":"","strength":5},
		{"source":"D-1","source_type":"incident","relation":"failure","target":"disk full","target_type":"failure_mode","description":"","strength":5}]}`
	srv := llmtest.New(func(req llmtest.Request) (string, bool) {
		if req.FollowUp() {
			return `{"entities":[],"relationships":[]}`, true
		}
		return reply, true
	})
	t.Cleanup(srv.Close)
	cl, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", Timeout: 2 * time.Second})
	require.NoError(t, err)
	x, err := llmx.New(llmx.Config{Cache: llmx.NewLRUCache(10)}, cl, testLogger(t), nil)
	require.NoError(t, err)

	unit := "Alerts fired at noon. The orders-db volume filled up. Payments was paged."
	cites := func(start int) map[string]string {
		text := strings.Repeat("x", start) + unit
		doc := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "D-1", Version: 1, Text: text}
		u := events.TextUnit{ID: "u", Text: unit, Start: start, End: len(text), Hash: chunk.ContentHash(unit)}
		_, rels, err := x.Extract(t.Context(), doc, []events.TextUnit{u})
		require.NoError(t, err)
		out := map[string]string{}
		for _, r := range rels {
			require.Equal(t, u.Hash, r.UnitHash)
			out[r.Relation] = text[r.SentenceStart:r.SentenceEnd]
		}
		return out
	}
	want := map[string]string{
		"involved": "The orders-db volume filled up.", // the target named, the source not
		"owned_by": "The orders-db volume filled up.", // the source named, the target not
		// Neither named, no stem shared ("filled" is not "full"): the unit.
		"failure": unit,
	}
	require.Equal(t, want, cites(0))
	// The same text further into the document is a cache hit; its spans
	// are the new place's.
	require.Equal(t, want, cites(40))
	require.Len(t, srv.Calls(), 2, "the second extraction came from the cache")
}
