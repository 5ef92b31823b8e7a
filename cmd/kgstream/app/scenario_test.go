package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
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

// Tokens used by every scenario: alice ingests (a writer token: the catalog
// is written by writers) and reads INC-101 through payments, bob through sre
// (which the revocation drops), eve is another tenant; ops is the admin
// who watches the pipeline figures.
var scenarioTokens = `[
 {"token":"ops-token","tenant":"acme","principal":"ops","admin":true},
 {"token":"alice-token","tenant":"acme","principal":"alice","groups":["sre","payments"],"writer":true},
 {"token":"bob-token","tenant":"acme","principal":"bob","groups":["sre"]},
 {"token":"eve-token","tenant":"other","principal":"eve","groups":["sre","payments"]}
]`

func writeTokens(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens.json")
	require.NoError(t, os.WriteFile(p, []byte(scenarioTokens), 0o600))
	return p
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

type scenario struct {
	write string // gateway base URL
	read  string // query base URL
	// metrics returns the text of /metrics of the process that audits.
	metrics func() string
}

type basicAnswerResp struct {
	Answer    string `json:"answer"`
	Citations []struct {
		DocID    string `json:"doc_id"`
		Version  int64  `json:"version"`
		TextUnit string `json:"text_unit"`
	} `json:"citations"`
}

// basicAnswer asks a basic-mode question.
func basicAnswer(t *testing.T, c *app.Client, q string) basicAnswerResp {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"mode": "basic", "question": q})
	var resp basicAnswerResp
	require.NoError(t, c.Do(t.Context(), http.MethodPost, "/v1/query", "application/json", body, &resp))
	return resp
}

func (r basicAnswerResp) cites(doc string) bool {
	for _, c := range r.Citations {
		if c.DocID == doc {
			return true
		}
	}
	return false
}

const certQuestion = "Why did the TLS certificate on the public ingress expire?"

func (s scenario) client(base, token string) *app.Client { return app.NewClient(base, token) }

type entity struct {
	ID, Type, Name string
}

type pathsResp struct {
	Start     entity `json:"start"`
	Terminals []struct {
		entity
		ID    string `json:"id"`
		Type  string `json:"type"`
		Name  string `json:"name"`
		Paths int    `json:"paths"`
	} `json:"terminals"`
	Rows []struct {
		Nodes []entity `json:"nodes"`
		Edges []struct {
			Source, Relation, Target string
			Citations                []map[string]any `json:"citations"`
		} `json:"edges"`
	} `json:"rows"`
}

type aggResp struct {
	Groups []struct {
		Target  entity `json:"target"`
		Count   int    `json:"count"`
		Members []struct {
			ID, Type, Name string
			Citations      []map[string]any `json:"citations"`
		} `json:"members"`
	} `json:"groups"`
}

func get(t *testing.T, c *app.Client, p string, out any) error {
	t.Helper()
	return c.Do(t.Context(), http.MethodGet, p, "", nil, out)
}

const certPaths = "/v1/paths?start=component:cert-manager&rels=~involved,affected,owned_by"

func terminals(t *testing.T, c *app.Client) []string {
	t.Helper()
	var p pathsResp
	require.NoError(t, get(t, c, certPaths, &p))
	var names []string
	for _, tm := range p.Terminals {
		names = append(names, tm.Name)
	}
	sort.Strings(names)
	return names
}

// failures returns the aggregate of incidents by failure as "name=count[members]".
func failures(t *testing.T, c *app.Client) map[string]string {
	t.Helper()
	var a aggResp
	require.NoError(t, get(t, c, "/v1/aggregate?type=incident&rel=failure", &a))
	out := map[string]string{}
	for _, g := range a.Groups {
		var ms []string
		for _, m := range g.Members {
			require.NotEmpty(t, m.Citations, "member %s of %s has no citation", m.Name, g.Target.Name)
			ms = append(ms, m.Name)
		}
		sort.Strings(ms)
		out[g.Target.Name] = fmt.Sprintf("%d%v", g.Count, ms)
	}
	return out
}

type statusResp struct {
	Documents   int               `json:"documents"`
	Applied     int               `json:"applied"`
	Entities    int               `json:"entities"`
	Edges       int               `json:"edges"`
	OrphanEdges int               `json:"orphan_edges"`
	DeadLetters uint64            `json:"dead_letters"`
	Pending     map[string]uint64 `json:"pending"`
}

func status(t *testing.T, c *app.Client, audit bool) statusResp {
	t.Helper()
	var s statusResp
	p := "/v1/status"
	if audit {
		p += "?audit=1"
	}
	require.NoError(t, get(t, c, p, &s))
	return s
}

// eventually polls cond (no sleeps in assertions: a bounded poll).
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func idle(s statusResp) bool {
	return s.Pending["extractor"] == 0 && s.Pending["resolver"] == 0
}

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

type global struct {
	answer string
	themes []string
	counts map[string]int
	cited  map[string]bool
}

// globalAnswer asks a global question and parses the ranked themes.
func globalAnswer(t *testing.T, c *app.Client, q string) global {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"mode": "global", "question": q})
	var resp struct {
		Answer    string `json:"answer"`
		Entities  []entity
		Citations []struct {
			DocID string `json:"doc_id"`
		} `json:"citations"`
		Context []struct {
			Citations []struct {
				DocID string `json:"doc_id"`
			} `json:"citations"`
		} `json:"context"`
	}
	require.NoError(t, c.Do(t.Context(), http.MethodPost, "/v1/query", "application/json", body, &resp))
	g := global{answer: resp.Answer, counts: map[string]int{}, cited: map[string]bool{}}
	for _, line := range strings.Split(resp.Answer, "\n")[1:] {
		// "1. expired certificate (failure_mode): 3 documents [INC-101, ...]"
		_, rest, _ := strings.Cut(line, ". ")
		name, rest, _ := strings.Cut(rest, " (")
		_, rest, _ = strings.Cut(rest, "): ")
		var n int
		fmt.Sscanf(rest, "%d", &n)
		g.themes = append(g.themes, name)
		g.counts[name] = n
	}
	for _, ci := range resp.Citations {
		g.cited[ci.DocID] = true
	}
	for _, it := range resp.Context {
		for _, ci := range it.Citations {
			g.cited[ci.DocID] = true
		}
	}
	return g
}

// reportIDs lists the reports admitted for c, with the documents each cites.
func reportIDs(t *testing.T, c *app.Client) map[string][]string {
	t.Helper()
	var cs struct {
		Communities []struct {
			ReportID string `json:"report_id"`
		} `json:"communities"`
	}
	if get(t, c, "/v1/communities", &cs) != nil {
		return nil
	}
	out := map[string][]string{}
	for _, cm := range cs.Communities {
		if cm.ReportID == "" {
			continue
		}
		var rep struct {
			Sources []struct {
				DocID string `json:"doc_id"`
			} `json:"sources"`
		}
		if get(t, c, "/v1/reports/"+url.PathEscape(cm.ReportID), &rep) != nil {
			continue
		}
		for _, src := range rep.Sources {
			out[cm.ReportID] = append(out[cm.ReportID], src.DocID)
		}
	}
	return out
}

// settledReportWith waits until clustering has settled and returns a
// report built on doc.
func settledReportWith(t *testing.T, c *app.Client, doc string) string {
	t.Helper()
	prev := fmt.Sprint(reportIDs(t, c))
	var found string
	eventually(t, 60*time.Second, "settled community reports", func() bool {
		time.Sleep(300 * time.Millisecond) // longer than the test's quiet period
		st := status(t, opsClient(c), false)
		cur := reportIDs(t, c)
		same := fmt.Sprint(cur) == prev
		prev = fmt.Sprint(cur)
		if !same || !idle(st) || st.Pending["clusterer"] != 0 || st.Pending["reporter"] != 0 {
			return false
		}
		for id, docs := range cur {
			for _, d := range docs {
				if d == doc {
					found = id
					return true
				}
			}
		}
		return false
	})
	return found
}

// startApp runs the all-in-one in-process.
func startApp(t *testing.T, cfg app.Config) *app.App {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.HTTPAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	if cfg.Log == nil {
		cfg.Log = quietLog()
	}
	cfg.Quiet, cfg.MaxDelay = 50*time.Millisecond, 2*time.Second
	if cfg.Backoff == nil {
		cfg.Backoff = []time.Duration{20 * time.Millisecond}
	}
	a, err := app.Start(context.WithoutCancel(t.Context()), cfg)
	require.NoError(t, err)
	t.Cleanup(a.Close)
	return a
}

func metricsOf(t *testing.T, base string) func() string {
	return func() string {
		resp, err := http.Get(base + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return b.String()
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
}

func TestSeedScenarioRedis(t *testing.T) {
	replay := newReplay(t)
	prefix := fmt.Sprintf("kgtest-%d", time.Now().UnixNano())
	a := startApp(t, app.Config{TokensFile: writeTokens(t), LLM: llmConfig(replay),
		RedisURL: redisURL(), RedisPrefix: prefix})
	t.Cleanup(func() { cleanRedis(t, prefix) })
	runSeedScenario(t, scenario{write: a.URL(), read: a.URL(), metrics: metricsOf(t, a.OpsURL())}, replay)
}
