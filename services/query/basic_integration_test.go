//go:build integration

package query_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/services/query"
)

func TestBasicMode(t *testing.T) {
	base := newFixture(t)
	emb := embed.NewHashing(256)
	ix := indexSeed(t, base, emb)
	f := base.withConfig(query.Config{Vectors: ix, Embedder: emb, BasicTopK: 5})

	r := basicQuery(t, f, tokAlice, "Why did the TLS certificate on the public ingress expire?")
	require.NotEmpty(t, r.Context)
	require.LessOrEqual(t, len(r.Context), 5)
	require.Equal(t, "INC-101", r.Context[0].Citations[0].DocID, "the passage that says it comes first: %s", r.Answer)
	for i, it := range r.Context {
		require.Equal(t, query.KindTextUnit, it.Kind)
		require.Len(t, it.Citations, 1)
		c := it.Citations[0]
		require.NotEmpty(t, c.TextUnit, "a passage cites its text unit")
		require.Equal(t, c.DocID+"#"+c.TextUnit, it.ID)
		if i == 0 {
			require.Contains(t, r.Answer, fmt.Sprintf("[%s v%d #%s]", c.DocID, c.Version, c.TextUnit), "the best passage is quoted")
		}
		if i > 0 {
			require.LessOrEqual(t, it.Score, r.Context[i-1].Score, "closest first")
		}
	}
	require.Contains(t, r.Timings, "search_ms")
	require.Contains(t, r.Answer, "expired", "the answer quotes the sentence that answers")
	require.Zero(t, readmissionDrops(t, f))

	// Another tenant's passages never come back, whatever the question.
	g := basicQuery(t, f, tokCarol, "Why did the TLS certificate on the public ingress expire?")
	require.Equal(t, map[string]bool{"G-1": true}, citedDocs(g))

	// A revocation recorded by the registry ONLY (the index still has the
	// old ACL): the very next answer leaves INC-101 out; the hits the index
	// returned and the registry refused are counted for operators only.
	_, err := f.st.SetACL(t.Context(), tenantAcme, "INC-101", provenance.ACL{Groups: []string{"sre"}})
	require.NoError(t, err)
	r = basicQuery(t, f, tokAlice, "Why did the TLS certificate on the public ingress expire?")
	require.False(t, citedDocs(r)["INC-101"], "revoked document cited: %s", r.Answer)
	require.NotContains(t, r.Answer, "INC-101 v1")
	require.Positive(t, readmissionDrops(t, f))
	raw := map[string]any{}
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokAlice, map[string]any{"mode": "basic", "question": "TLS certificate expired"}, &raw))
	require.Equal(t, map[string]any{"used": raw["basic"].(map[string]any)["used"]}, raw["basic"], "a response counts admitted material only")
	require.NotEmpty(t, r.Context, "the other passages still answer")
	// bob (sre) still reads it.
	require.True(t, citedDocs(basicQuery(t, f, tokBob, "Why did the TLS certificate on the public ingress expire?"))["INC-101"])

	// A deletion too, and a failing registry fails closed.
	_, err = f.st.MarkDeleted(t.Context(), tenantAcme, "INC-101")
	require.NoError(t, err)
	require.False(t, citedDocs(basicQuery(t, f, tokBob, "TLS certificate on the public ingress expired"))["INC-101"])
	f.st.fail.Store(true)
	status, code := f.errorCode(http.MethodPost, "/v1/query", tokBob, map[string]any{"mode": "basic", "question": "certificate"})
	f.st.fail.Store(false)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "admission_unavailable", code)

	// Local answers gain the closest passages too.
	var l queryResp
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokBob, map[string]any{"mode": "local",
		"question": "What happened to cert-manager and the DNS credentials?"}, &l))
	scored := 0
	for _, it := range l.Context {
		if it.Kind == query.KindTextUnit && it.Score > 0 {
			scored++
			require.NotEqual(t, "INC-101", it.Citations[0].DocID)
		}
	}
	require.Positive(t, scored, "local context has vector-search passages")

	// Without a vector index basic mode is not available.
	status, code = base.errorCode(http.MethodPost, "/v1/query", tokAlice, map[string]any{"mode": "basic", "question": "x"})
	require.Equal(t, http.StatusNotImplemented, status)
	require.Equal(t, "not_implemented", code)
}

// readmissionDrops reads kgstream_query_readmission_drops_total.
func readmissionDrops(t *testing.T, f *fixture) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "kgstream_query_readmission_drops_total" {
			return mf.Metric[0].Counter.GetValue()
		}
	}
	return 0
}

func TestGlobalLLMMapReduce(t *testing.T) {
	base := newFixture(t)
	var mapPrompts []string
	srv := llmtest.New(func(req llmtest.Request) (string, bool) {
		format := string(req.ResponseFormat)
		switch {
		case strings.Contains(format, "global_map"):
			mapPrompts = append(mapPrompts, req.Prompt())
			var points []map[string]any
			for i, m := range reportIDRE.FindAllStringSubmatch(req.Prompt(), -1) {
				points = append(points, map[string]any{"description": "Expired certificates recur in " + m[1], "score": 90 - i,
					"report_ids": []string{m[1], "r-invented"}})
			}
			points = append(points, map[string]any{"description": "made up", "score": 99, "report_ids": []string{"r-unknown"}},
				map[string]any{"description": "irrelevant", "score": 0, "report_ids": []string{"r-c-0-cert"}})
			b, _ := json.Marshal(map[string]any{"points": points})
			return string(b), true
		case strings.Contains(format, "global_reduce"):
			return `{"answer":"Expired certificates are the recurring root cause.","report_ids":["r-c-0-cert","r-c-0-dns","r-nope"]}`, true
		}
		return "", false
	})
	t.Cleanup(srv.Close)
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "test", MaxRetries: -1})
	require.NoError(t, err)
	f := base.withConfig(query.Config{LLM: client})
	level := 0
	ask := func(token string) globalResp {
		t.Helper()
		var r globalResp
		require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", token, map[string]any{"mode": "global",
			"question": "What are the recurring root causes?", "level": level}, &r))
		return r
	}

	r := ask(tokAlice)
	require.Equal(t, "llm:test", r.Global.MapReduce)
	require.False(t, r.Global.LLMFallback)
	require.Contains(t, r.Answer, "Expired certificates are the recurring root cause.")
	require.Contains(t, r.Answer, "Reports: r-c-0-cert, r-c-0-dns.")
	require.NotContains(t, r.Answer, "r-nope")
	require.NotEmpty(t, r.Global.Points)
	for _, p := range r.Global.Points {
		require.NotContains(t, p.ReportIDs, "r-invented", "ids not in the map input are dropped")
		require.NotContains(t, p.ReportIDs, "r-unknown")
		require.NotEqual(t, "made up", p.Description, "a point citing no known report is dropped")
		require.Positive(t, p.Score)
	}
	cited := map[string]bool{}
	for _, c := range r.Citations {
		cited[c.DocID] = true
	}
	for _, d := range []string{"INC-101", "INC-112", "INC-121", "INC-118", catalogDoc} {
		require.True(t, cited[d], "the cited reports' sources are cited: %s", d)
	}
	require.Contains(t, r.Answer, "Exact counts: 1. expired certificate (failure_mode): 3 documents", "the exact counts follow the LLM's answer")

	// Revoke INC-118 for alice: its report is dropped BEFORE the map step,
	// so the model never sees it and the answer cannot cite it.
	_, err = f.st.SetACL(t.Context(), tenantAcme, "INC-118", provenance.ACL{Groups: []string{"sre"}})
	require.NoError(t, err)
	mapPrompts = nil
	r = ask(tokAlice)
	require.NotEmpty(t, mapPrompts)
	for _, p := range mapPrompts {
		require.NotContains(t, p, "r-c-0-dns")
		require.NotContains(t, p, "INC-118")
	}
	require.Contains(t, r.Answer, "Reports: r-c-0-cert.")
	for _, c := range r.Citations {
		require.NotEqual(t, "INC-118", c.DocID)
	}

	// An answer of another shape falls back to the offline map/reduce.
	srv.Fail(llmtest.InvalidSchema, 1)
	r = ask(tokAlice)
	require.True(t, r.Global.LLMFallback, r.Answer)
	require.Equal(t, "offline", r.Global.MapReduce)
	require.Empty(t, r.Global.Points)
	require.NotContains(t, r.Answer, "Expired certificates are the recurring root cause.")
	mfs, err := f.reg.Gather()
	require.NoError(t, err)
	fallbacks := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "kgstream_query_llm_fallbacks_total" {
			fallbacks = mf.Metric[0].Counter.GetValue()
		}
	}
	require.EqualValues(t, 1, fallbacks)
}
