//go:build integration

package extractor_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/llm/llmtest"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/llmx"
)

func TestLLMExtractsSeedPostmortems(t *testing.T) {
	bus := startBus(t)
	r := replay(t)
	reg := prometheus.NewRegistry()
	startWorker(t, bus, llmExtractor(t, r.URL(), reg), reg, nil)

	for _, id := range seedIDs {
		publishDoc(t, bus, seedDoc(t, "acme", id, 1))
	}
	got := waitExtracted(t, bus, "acme", len(seedIDs))
	want := recorded(t)
	for _, ex := range got {
		require.Equal(t, want[ex.DocID], triples(ex.Relationships), ex.DocID)
		require.Equal(t, "llm", ex.Extractor)
		require.Equal(t, "incident", ex.DocType)
		require.Equal(t, "Postmortem "+ex.DocID, ex.Title)
		require.Equal(t, time.Date(2025, 1, 9, 12, 0, 0, 0, time.UTC), ex.ReceivedAt)
		require.Len(t, ex.TextUnits, 1)
		u := ex.TextUnits[0]
		require.Equal(t, chunk.TextUnitID(ex.DocID, 1, 0), u.ID)
		for _, rel := range ex.Relationships {
			require.Equal(t, u.ID, rel.TextUnit)
		}
		for _, e := range ex.Entities {
			require.Equal(t, u.ID, e.TextUnit)
		}
	}

	// One extraction call and one gleaning call per document.
	calls := r.Calls()
	require.Len(t, calls, 2*len(seedIDs))
	for i := 0; i < len(calls); i += 2 {
		require.Contains(t, calls[i].Prompt, "Document id: ")
		require.False(t, calls[i].Request.FollowUp())
		require.Equal(t, llmx.GleaningPrompt, calls[i+1].Prompt)
		require.True(t, calls[i+1].Request.FollowUp())
		require.Equal(t, 200, calls[i+1].Status)
	}
	require.Equal(t, float64(len(seedIDs)), metricValue(t, reg, "kgstream_extract_units_total", map[string]string{"extractor": "llm"}))
	// llmtest reports 100 prompt tokens per call.
	require.Equal(t, float64(100*len(calls)), metricValue(t, reg, "kgstream_llm_tokens_total",
		map[string]string{"model": "replay-model", "direction": "prompt"}))
	require.Zero(t, metricValue(t, reg, "kgstream_extract_dropped_relationships_total", nil))

	// The INC-121 edit: the revised postmortem blames a bad upgrade.
	r.Override("INC-121", []llmtest.Relationship{
		{Source: "INC-121", SourceType: "incident", Relation: "affected", Target: "notification-service", TargetType: "service"},
		{Source: "INC-121", SourceType: "incident", Relation: "involved", Target: "certmanager", TargetType: "component"},
		{Source: "INC-121", SourceType: "incident", Relation: "failure", Target: "bad upgrade", TargetType: "failure_mode"},
	})
	rev := seedDoc(t, "acme", "INC-121", 2)
	rev.Text = strings.Replace(rev.Text, "after an upgrade, certmanager stopped", "a bad upgrade of certmanager stopped", 1)
	publishDoc(t, bus, rev)
	got = waitExtracted(t, bus, "acme", len(seedIDs)+1)
	last := got[len(got)-1]
	require.Equal(t, int64(2), last.Version)
	require.Contains(t, triples(last.Relationships), "incident:INC-121 -failure-> failure_mode:bad upgrade")
	require.NotContains(t, triples(last.Relationships), "incident:INC-121 -failure-> failure_mode:expired certificate")
	require.NotEqual(t, got[6].TextUnits[0].ID, last.TextUnits[0].ID, "a new version has new text unit ids")
}

// metricValue sums the series of a metric whose labels include labels (0
// when there are none: a vector without series is not gathered).
