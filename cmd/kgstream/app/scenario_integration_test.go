//go:build integration

package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
)

// seedDir is the seed postmortem corpus beside the checkout.
func seedDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("../../../../shared/corpora/seed-postmortems")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(d, "EXPECTED.md"))
	require.NoError(t, err, "the seed corpus must be at ../shared beside the checkout")
	return d
}

// newReplay starts the OpenAI-compatible replay server on the recording.
func newReplay(t *testing.T) *llmtest.Replay {
	t.Helper()
	r, err := llmtest.SeedReplay(filepath.Join(seedDir(t), "recorded-llm-extraction.json"))
	require.NoError(t, err)
	t.Cleanup(r.Close)
	return r
}

// revisedINC121 is the edit of EXPECTED.md: the failure becomes "bad upgrade".
var revisedINC121 = []llmtest.Relationship{
	{Source: "INC-121", SourceType: "incident", Relation: "affected", Target: "notification-service", TargetType: "service"},
	{Source: "INC-121", SourceType: "incident", Relation: "involved", Target: "certmanager", TargetType: "component"},
	{Source: "INC-121", SourceType: "incident", Relation: "failure", Target: "bad upgrade", TargetType: "failure_mode"},
}

const certQuestion = "Why did the TLS certificate on the public ingress expire?"

// runSeedScenario is EXPECTED.md end to end through the HTTP API.
func runSeedScenario(t *testing.T, s scenario, replay *llmtest.Replay) {
	ctx := t.Context()
	alice := s.client(s.write, "alice-token")
	aliceR := s.client(s.read, "alice-token")
	bobR := s.client(s.read, "bob-token")
	eveR := s.client(s.read, "eve-token")
	dir := seedDir(t)

	// Bad token: 401 on both surfaces.
	err := s.client(s.read, "nope").Do(ctx, http.MethodGet, certPaths, "", nil, nil)
	require.ErrorContains(t, err, "401")
	_, err = s.client(s.write, "nope").PostDocument(ctx, app.Document{ID: "x", Text: "y"})
	require.ErrorContains(t, err, "401")

	cat, err := os.ReadFile(filepath.Join(dir, "catalog-info.yaml"))
	require.NoError(t, err)
	_, err = alice.PostCatalog(ctx, "catalog-info", cat)
	require.NoError(t, err)

	files, err := filepath.Glob(filepath.Join(dir, "docs", "INC-*.txt"))
	require.NoError(t, err)
	require.Len(t, files, 10)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		d := app.DocumentFromFile(f, data)
		d.DocType, d.Source = "incident", "seed"
		if d.ID == "INC-101" {
			d.ACL = map[string]any{"groups": []string{"sre", "payments"}}
		}
		a, err := alice.PostDocument(ctx, d)
		require.NoError(t, err)
		require.EqualValues(t, 1, a.Version)
		require.Equal(t, "acme/"+d.ID+"/1/changed", a.EventID)
	}
	eventually(t, 90*time.Second, "all 11 sources applied", func() bool {
		st := status(t, opsClient(aliceR), false)
		return st.Applied == 11 && idle(st)
	})

	// Graph sizes of EXPECTED.md with resolution.
	st := status(t, aliceR, true)
	require.Equal(t, 36, st.Entities, "resolved node count")
	require.Equal(t, 39, st.Edges, "edge count")
	require.Zero(t, st.OrphanEdges)

	// The bridge question: precision 1, recall 1, every edge cited.
	require.Equal(t, []string{"Discovery", "Identity", "Messaging", "Payments"}, terminals(t, aliceR))
	var p pathsResp
	require.NoError(t, get(t, aliceR, certPaths, &p))
	require.NotEmpty(t, p.Rows)
	incidents := map[string]bool{}
	for _, r := range p.Rows {
		for _, e := range r.Edges {
			require.NotEmpty(t, e.Citations, "edge %s -%s-> %s has no citation", e.Source, e.Relation, e.Target)
		}
		for _, n := range r.Nodes {
			if n.Type == "incident" {
				incidents[n.Name] = true
			}
		}
	}
	require.Equal(t, map[string]bool{"INC-101": true, "INC-112": true, "INC-121": true}, incidents)

	want := map[string]string{
		"expired certificate":        "3[INC-101 INC-112 INC-121]",
		"unstaged config push":       "3[INC-104 INC-115 INC-127]",
		"connection pool exhaustion": "2[INC-107 INC-124]",
		"disk full":                  "1[INC-130]",
		"dns misconfiguration":       "1[INC-118]",
	}
	require.Equal(t, want, failures(t, aliceR))

	// Aggregate order: count descending, then name.
	var agg aggResp
	require.NoError(t, get(t, aliceR, "/v1/aggregate?type=incident&rel=failure", &agg))
	var order []string
	for _, g := range agg.Groups {
		order = append(order, g.Target.Name)
	}
	require.Equal(t, []string{"expired certificate", "unstaged config push", "connection pool exhaustion", "disk full", "dns misconfiguration"}, order)

	// Reports exist and are admitted for alice once clustering settled:
	// every stage idle and the same reports on two polls a quiet period apart.
	reportWithINC101 := settledReportWith(t, aliceR, "INC-101")

	// Basic mode: the reporter embedded the text units; the passage that
	// answers comes back cited to its text unit.
	var ba basicAnswerResp
	eventually(t, 60*time.Second, "INC-101's text units indexed", func() bool {
		ba = basicAnswer(t, aliceR, certQuestion)
		return ba.cites("INC-101")
	})
	for _, c := range ba.Citations {
		require.True(t, strings.HasPrefix(c.DocID, "INC-"), "%+v", c)
		require.NotEmpty(t, c.TextUnit, "a passage cites its text unit")
	}
	require.Contains(t, ba.Answer, "[INC-101 v1 #")
	require.True(t, basicAnswer(t, bobR, certQuestion).cites("INC-101"), "bob reads INC-101 through sre before the revocation")
	require.Empty(t, basicAnswer(t, eveR, certQuestion).Citations, "another tenant's passages never come back")

	// The global question: map-reduce over admitted reports, every document covered.
	g := globalAnswer(t, aliceR, "What are the recurring root causes of our incidents?")
	require.GreaterOrEqual(t, len(g.themes), 5, g.answer)
	require.ElementsMatch(t, []string{"expired certificate", "unstaged config push"}, g.themes[:2], g.answer)
	require.Equal(t, 3, g.counts["expired certificate"])
	require.Equal(t, 3, g.counts["unstaged config push"])
	require.Equal(t, 2, g.counts["connection pool exhaustion"])
	require.Equal(t, 1, g.counts["dns misconfiguration"], "INC-118 is covered")
	require.Equal(t, 1, g.counts["disk full"])
	for _, d := range []string{"INC-101", "INC-112", "INC-121", "INC-104", "INC-115", "INC-127", "INC-118"} {
		require.True(t, g.cited[d], "%s is not cited: %s", d, g.answer)
	}

	// Revocation: bob loses INC-101 on his very next request; alice keeps it.
	require.Equal(t, want, failures(t, bobR))
	require.NoError(t, get(t, bobR, "/v1/reports/"+url.PathEscape(reportWithINC101), nil))
	body, _ := json.Marshal(map[string]any{"groups": []string{"payments"}})
	require.NoError(t, alice.Do(ctx, http.MethodPut, "/v1/documents/INC-101/acl", "application/json", body, nil))
	require.Equal(t, []string{"Discovery", "Messaging"}, terminals(t, bobR))
	bobFail := failures(t, bobR)
	require.Equal(t, "2[INC-112 INC-121]", bobFail["expired certificate"])
	err = get(t, bobR, "/v1/reports/"+url.PathEscape(reportWithINC101), nil)
	require.ErrorContains(t, err, "404")
	err = get(t, bobR, "/v1/entities/incident/INC-101", nil)
	require.ErrorContains(t, err, "404")
	// bob's basic answers leave INC-101 out from the very next request,
	// whether or not the reporter has copied the ACL into the index yet.
	for _, q := range []string{certQuestion, "INC-101 TLS certificate ingress checkout-api auth-service 503s"} {
		bb := basicAnswer(t, bobR, q)
		require.False(t, bb.cites("INC-101"), "a revoked document reached bob's basic answer: %s", bb.Answer)
		require.NotContains(t, bb.Answer, "[INC-101 ")
	}
	require.True(t, basicAnswer(t, aliceR, certQuestion).cites("INC-101"), "alice keeps INC-101 through payments")
	bg := globalAnswer(t, bobR, "What are the recurring root causes of our incidents?")
	require.False(t, bg.cited["INC-101"], "a revoked document reached bob's global answer")
	require.NotContains(t, bg.answer, "INC-101")
	require.Equal(t, 2, bg.counts["expired certificate"], "bob's counts are exact over what he may read")
	require.Equal(t, []string{"Discovery", "Identity", "Messaging", "Payments"}, terminals(t, aliceR))
	require.NoError(t, get(t, aliceR, "/v1/reports/"+url.PathEscape(reportWithINC101), nil))
	require.NoError(t, get(t, aliceR, "/v1/entities/incident/INC-101", nil))

	// Another tenant sees nothing of acme.
	err = get(t, eveR, certPaths, nil)
	require.ErrorContains(t, err, "404")
	require.Empty(t, failures(t, eveR))
	err = get(t, eveR, "/v1/reports/"+url.PathEscape(reportWithINC101), nil)
	require.ErrorContains(t, err, "404")

	// The INC-121 edit.
	replay.Override("INC-121", revisedINC121)
	data, err := os.ReadFile(filepath.Join(dir, "docs", "INC-121.txt"))
	require.NoError(t, err)
	d := app.DocumentFromFile("INC-121.txt", data)
	d.DocType, d.Text = "incident", strings.Replace(string(data), "expired", "was left expired after a bad upgrade", 1)
	a, err := alice.PostDocument(ctx, d)
	require.NoError(t, err)
	require.EqualValues(t, 2, a.Version)
	eventually(t, 60*time.Second, "INC-121 v2 applied", func() bool {
		return failures(t, aliceR)["bad upgrade"] == "1[INC-121]"
	})
	after := failures(t, aliceR)
	require.Equal(t, "2[INC-101 INC-112]", after["expired certificate"])
	require.Equal(t, "1[INC-121]", after["bad upgrade"])
	require.NoError(t, get(t, aliceR, "/v1/entities/failure_mode/expired%20certificate", nil), "the node stays: others support it")

	// Reports are rebuilt for the edit; none built on INC-121 v1 is served.
	settledReportWith(t, aliceR, "INC-121")
	for id := range reportIDs(t, aliceR) {
		var rep struct {
			Sources []struct {
				DocID   string `json:"doc_id"`
				Version int64  `json:"version"`
			} `json:"sources"`
		}
		require.NoError(t, get(t, aliceR, "/v1/reports/"+url.PathEscape(id), &rep))
		for _, src := range rep.Sources {
			if src.DocID == "INC-121" {
				require.EqualValues(t, 2, src.Version, "report %s built on INC-121 v1 served after the edit", id)
			}
		}
	}
	var stale struct {
		StaleReports int `json:"stale_reports"`
	}
	require.NoError(t, get(t, aliceR, "/v1/status?audit=1", &stale))
	require.Zero(t, stale.StaleReports, "every report was rewritten for the current versions")

	// An older version sent after the newer one changes nothing.
	d.Version, d.Text = 1, string(data)
	_, err = alice.PostDocument(ctx, d)
	require.ErrorContains(t, err, "409")
	require.Equal(t, after, failures(t, aliceR))

	// Deleting INC-130 removes what only it supported.
	require.NoError(t, get(t, aliceR, "/v1/entities/component/Atlas", nil))
	require.NoError(t, alice.Do(ctx, http.MethodDelete, "/v1/documents/INC-130", "", nil, nil))
	// The registry already refuses it for reads...
	_, hasDisk := failures(t, aliceR)["disk full"]
	require.False(t, hasDisk, "a deleted document is unreadable at once")
	// ...and the graph loses it once the resolver applied the deletion.
	eventually(t, 60*time.Second, "INC-130 deletion applied", func() bool {
		st := status(t, opsClient(aliceR), false)
		return st.Applied == 10 && idle(st)
	})
	for _, ref := range []string{"component/Atlas", "failure_mode/disk%20full", "incident/INC-130"} {
		require.ErrorContains(t, get(t, aliceR, "/v1/entities/"+ref, nil), "404", ref)
	}
	require.NoError(t, get(t, aliceR, "/v1/entities/service/search-api", nil), "search-api has other sources")
	st = status(t, aliceR, true)
	require.Zero(t, st.OrphanEdges)
	require.Equal(t, 34, st.Entities)
	require.Equal(t, 36, st.Edges)
	if s.metrics != nil {
		require.Contains(t, s.metrics(), `kgstream_orphan_edges{tenant="acme"} 0`)
	}
}

func TestSeedScenarioEmbedded(t *testing.T) {
	replay := newReplay(t)
	t.Setenv("KG_LLM_PRICE_PROMPT", "2.5")
	t.Setenv("KG_LLM_PRICE_COMPLETION", "10")
	a := startApp(t, app.Config{TokensFile: writeTokens(t), LLM: llmConfig(replay)})
	runSeedScenario(t, scenario{write: a.URL(), read: a.URL(), metrics: metricsOf(t, a.OpsURL())}, replay)

	// Status reports the extraction spend: ten postmortems plus the INC-121
	// edit, one extraction and one gleaning call each, priced per token.
	var st struct {
		LLM *struct {
			Documents        int     `json:"documents"`
			CallsPerDocument float64 `json:"calls_per_document"`
			PromptTokens     float64 `json:"prompt_tokens"`
			Cost             float64 `json:"cost"`
			CostPerDocument  float64 `json:"cost_per_document"`
		} `json:"llm"`
	}
	require.NoError(t, get(t, app.NewClient(a.URL(), "ops-token"), "/v1/status", &st))
	require.NotNil(t, st.LLM)
	require.Equal(t, 11, st.LLM.Documents)
	require.Equal(t, 2.0, st.LLM.CallsPerDocument)
	require.Greater(t, st.LLM.PromptTokens, 0.0)
	require.InDelta(t, st.LLM.Cost/11, st.LLM.CostPerDocument, 1e-9)
	require.Greater(t, st.LLM.CostPerDocument, 0.0)
	// The same figures the distributed deployment shows, recorded by the
	// one process.
	requirePipelineFigures(t, app.NewClient(a.URL(), "ops-token"), "kgstream", "kgstream")
}

func TestSeedScenarioRedis(t *testing.T) {
	replay := newReplay(t)
	prefix := fmt.Sprintf("kgtest-%d", time.Now().UnixNano())
	a := startApp(t, app.Config{TokensFile: writeTokens(t), LLM: llmConfig(replay),
		RedisURL: redisURL(), RedisPrefix: prefix})
	t.Cleanup(func() { cleanRedis(t, prefix) })
	runSeedScenario(t, scenario{write: a.URL(), read: a.URL(), metrics: metricsOf(t, a.OpsURL())}, replay)
}
