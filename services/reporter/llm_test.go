package reporter_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/services/reporter"
)

func TestLLMWriterChecksFindings(t *testing.T) {
	var answer string
	srv := llmtest.New(func(req llmtest.Request) (string, bool) {
		require.Contains(t, req.Prompt(), "R1 | incident:a -failure-> failure_mode:diskfull")
		return answer, true
	})
	t.Cleanup(srv.Close)
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", APIKey: "k", Timeout: 5 * time.Second, MaxRetries: 1})
	require.NoError(t, err)

	_, st, bus, _ := setup(t)
	reg := prometheus.NewRegistry()
	w, err := reporter.New(reporter.Config{LLM: reporter.NewLLMWriter(client)}, bus, st, nil, reg)
	require.NoError(t, err)
	apply(t, st, "a", 1, "diskfull")
	apply(t, st, "b", 1, "diskfull")
	cs := []store.Community{{ID: "c0-x", Level: 0, Members: []string{"failure_mode:diskfull", "incident:a", "incident:b"}, MemberHash: "x"}}
	require.NoError(t, st.ReplaceCommunities(t.Context(), "acme", 1, cs))

	b, _ := json.Marshal(map[string]any{
		"title": "Disk full", "summary": "Two incidents ran out of disk.", "rating": 7.5, "rating_explanation": "recurring",
		"findings": []map[string]any{
			{"summary": "a filled its disk", "explanation": "INC a", "entities": []string{"E2"}, "relationships": []string{"R1"}},
			{"summary": "invented", "explanation": "cites an id that is not in the context", "entities": []string{}, "relationships": []string{"R99"}},
			{"summary": "uncited", "explanation": "cites nothing", "entities": []string{}, "relationships": []string{}},
		},
	})
	answer = string(b)
	require.NoError(t, w.Handle(t.Context(), message(t, &events.CommunitiesChanged{Run: 1,
		Changed: []events.CommunityChange{{ID: "c0-x", MemberHash: "x"}}})))
	r, err := st.Report(t.Context(), "acme", reporter.ReportID("c0-x"))
	require.NoError(t, err)
	require.Equal(t, "Disk full", r.Title)
	require.Equal(t, "llm:m", r.Writer)
	require.Len(t, r.Findings, 1, "the invented and the uncited findings are rejected")
	require.Equal(t, []string{"incident:a|failure|failure_mode:diskfull"}, r.Findings[0].Edges)
	require.Equal(t, []provenance.SourceRef{{DocID: "a", Version: 1, TextUnit: "a-u"}}, r.Findings[0].Citations)
	require.Equal(t, []provenance.SourceRef{{DocID: "a", Version: 1}, {DocID: "b", Version: 1}}, r.Sources)

	// A report with no valid finding falls back to the extractive writer
	// (a new community: an unchanged one would only be restamped).
	answer = strings.Replace(answer, `"R1"`, `"R42"`, 1)
	cs[0].ID, cs[0].MemberHash = "c0-y", "y"
	require.NoError(t, st.ReplaceCommunities(t.Context(), "acme", 2, cs))
	require.NoError(t, w.Handle(t.Context(), message(t, &events.CommunitiesChanged{Run: 2,
		Changed: []events.CommunityChange{{ID: "c0-y", MemberHash: "y"}}})))
	r, err = st.Report(t.Context(), "acme", reporter.ReportID("c0-y"))
	require.NoError(t, err)
	require.Equal(t, "extractive", r.Writer)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "kgstream_report_llm_fallbacks_total" {
			found = true
			require.EqualValues(t, 1, mf.Metric[0].Counter.GetValue())
		}
	}
	require.True(t, found)
}

// TestLLMReportsAreWrittenConcurrently: with an LLM writer the reports of
// one event are written ReportConcurrency at a time (the LLM's calls
// overlap, never more than that), and what is stored is what one report
// at a time stores.
func TestLLMReportsAreWrittenConcurrently(t *testing.T) {
	var (
		mu             sync.Mutex
		inFlight, most int
	)
	answer := oneFindingReport(t)
	srv := llmtest.New(func(llmtest.Request) (string, bool) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(150 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return answer, true
	})
	t.Cleanup(srv.Close)
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", APIKey: "k", Timeout: 5 * time.Second, MaxRetries: 1})
	require.NoError(t, err)

	stored := map[int][]store.Report{}
	for _, n := range []int{1, 4} {
		_, st, bus, _ := setup(t)
		communities, changes := incidentCommunities(t, st, 12)
		w, err := reporter.New(reporter.Config{LLM: reporter.NewLLMWriter(client), ReportConcurrency: n}, bus, st, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		mu.Lock()
		most = 0
		mu.Unlock()
		require.NoError(t, w.Handle(t.Context(), message(t, &events.CommunitiesChanged{Run: 1, Changed: changes})))
		mu.Lock()
		if n == 1 {
			require.Equal(t, 1, most, "LLM calls in flight at most, one report at a time")
		} else {
			require.GreaterOrEqual(t, most, 2, "LLM calls in flight at most, with ReportConcurrency %d", n)
			require.LessOrEqual(t, most, n, "LLM calls in flight at most, with ReportConcurrency %d", n)
		}
		mu.Unlock()
		reps, err := st.Reports(t.Context(), "acme")
		require.NoError(t, err)
		require.Len(t, reps, len(communities))
		for i := range reps {
			require.Equal(t, "llm:m", reps[i].Writer, reps[i].ID)
			reps[i].UpdatedAt = time.Time{}
		}
		stored[n] = reps
	}
	require.Equal(t, stored[1], stored[4])
}

// oneFindingReport is an LLM's community report with one finding citing
// the first entity and relationship of its context.
func oneFindingReport(tb testing.TB) string {
	tb.Helper()
	b, err := json.Marshal(map[string]any{
		"title": "An incident", "summary": "One incident and its failure.", "rating": 5, "rating_explanation": "one",
		"findings": []map[string]any{{"summary": "it failed", "explanation": "see the incident", "entities": []string{"E1"}, "relationships": []string{"R1"}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// incidentCommunities applies n documents, each an incident and its own
// failure mode, stores one community of the two per document (run 1) and
// returns them with the changes announcing them.
func incidentCommunities(tb testing.TB, st *embedded.Store, n int) ([]store.Community, []events.CommunityChange) {
	tb.Helper()
	var cs []store.Community
	var changes []events.CommunityChange
	for k := range n {
		doc := fmt.Sprintf("d%03d", k)
		apply(tb, st, doc, 1, "f"+doc)
		id := "c0-" + doc
		cs = append(cs, store.Community{ID: id, Members: []string{"failure_mode:f" + doc, "incident:" + doc}, MemberHash: id})
		changes = append(changes, events.CommunityChange{ID: id, MemberHash: id})
	}
	if err := st.ReplaceCommunities(tb.Context(), "acme", 1, cs); err != nil {
		tb.Fatal(err)
	}
	return cs, changes
}
