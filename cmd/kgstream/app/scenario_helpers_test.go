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
)

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
