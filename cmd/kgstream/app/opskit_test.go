package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
)

// opsKitDir is deploy/observability of this checkout.
var opsKitDir = filepath.Join("..", "..", "..", "deploy", "observability")

// exporterMetrics are the series the ops kit reads from the NATS exporter
// beside each NATS server (prometheus-nats-exporter -jsz=all, its jsz
// collector), not from kgstream: consumer pending counts. kgstream has no
// metric of its own for them.
var exporterMetrics = []string{"jetstream_consumer_num_pending", "jetstream_consumer_num_ack_pending"}

// TestAlertRulesPassPromtool checks the alert rules and runs their unit
// tests with promtool. promtool (Debian package prometheus) is required:
// .ci/run installs it.
func TestAlertRulesPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is required to check the alert rules (Debian package prometheus; .ci/run installs it): %v", err)
	}
	for _, args := range [][]string{
		{"check", "rules", "kgstream-rules.yaml"},
		{"test", "rules", "kgstream-rules.test.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = opsKitDir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
		require.Contains(t, string(out), "SUCCESS", "promtool %s", strings.Join(args, " "))
	}
	// The unit tests cover every alert: a rule nobody tested fails here.
	tested := string(mustRead(t, filepath.Join(opsKitDir, "kgstream-rules.test.yaml")))
	for _, r := range opsKitRules(t) {
		require.Contains(t, tested, "alertname: "+r.Alert, "alert %s has no promtool unit test", r.Alert)
	}
}

// TestOpsKitMetricsExist starts the all-in-one (LLM extraction against the
// local test server), ingests the demo, sends a document the model cannot
// extract (so it is dead-lettered), asks queries, then scrapes /metrics
// until every series the dashboard and the alert rules read is there, and
// checks that every label they group or match by is one those series carry.
func TestOpsKitMetricsExist(t *testing.T) {
	exprs := opsKitExprs(t)
	names := map[string]bool{}
	for _, e := range exprs {
		for _, n := range metricNames(e) {
			names[n] = true
		}
	}
	var want []string
	for n := range names {
		if slices.Contains(exporterMetrics, n) {
			continue
		}
		require.True(t, strings.HasPrefix(n, "kgstream_"), "the ops kit reads %s, neither a kgstream metric nor a listed exporter one", n)
		want = append(want, n)
	}
	slices.Sort(want)
	require.GreaterOrEqual(t, len(want), 10, "too few metrics found in the ops kit: %v", want)

	good, _ := json.Marshal(llmtest.BuildExtraction([]llmtest.Relationship{
		{Source: "ledger-api", SourceType: "service", Relation: "depends_on", Target: "ledger-db", TargetType: "datastore"},
	}))
	empty, _ := json.Marshal(llmtest.Extraction{Entities: []llmtest.Entity{}, Relationships: []llmtest.Relationship{}})
	server := llmtest.New(func(req llmtest.Request) (string, bool) {
		switch {
		case req.FollowUp():
			return string(empty), true
		case strings.Contains(req.Prompt(), "OPS-POISON"):
			return llmtest.MalformedJSONContent, true
		default:
			return string(good), true
		}
	})
	t.Cleanup(server.Close)
	t.Setenv("KG_LLM_PRICE_PROMPT", "2.5")
	t.Setenv("KG_LLM_PRICE_COMPLETION", "10")
	a := startApp(t, app.Config{
		LLM:        llmConfigFor(server.URL()),
		MaxDeliver: 2,
		AuditEvery: 100 * time.Millisecond,
	})
	ctx := t.Context()
	require.NoError(t, app.IngestDemo(ctx, a.URL(), ""))
	c := app.NewClient(a.URL(), "")
	_, err := c.PostDocument(ctx, app.Document{ID: "ops-poison", Title: "OPS-POISON", Text: "OPS-POISON: the model answers this one with broken JSON."})
	require.NoError(t, err)

	scrape := metricsOf(t, a.OpsURL())
	var series map[string]map[string]bool
	var missing []string
	const wait = 2 * time.Minute
	deadline := time.Now().Add(wait)
	for {
		// Queries make the query metrics; they are asked again each round
		// so the route histograms exist whatever the order of start-up.
		for _, q := range []string{"/v1/paths?start=service:token-issuer&rels=~mentions", "/v1/communities"} {
			resp, err := http.Get(a.URL() + q)
			require.NoError(t, err)
			resp.Body.Close()
		}
		var qr map[string]any
		_ = c.Do(ctx, http.MethodPost, "/v1/query", "application/json", []byte(`{"mode":"basic","question":"What broke the token issuer?"}`), &qr)
		series = parseExposition(scrape())
		missing = missing[:0]
		for _, n := range want {
			if series[n] == nil {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s these metrics of the ops kit are not served: %v", wait, missing)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The labels each expression groups or matches by are labels of the
	// kgstream series it reads.
	for _, e := range exprs {
		metrics := metricNames(e)
		if slices.ContainsFunc(metrics, func(m string) bool { return slices.Contains(exporterMetrics, m) }) {
			continue
		}
		for _, l := range labelNames(e) {
			found := false
			for _, m := range metrics {
				if series[m][l] {
					found = true
				}
			}
			require.True(t, found, "%q uses label %s, which none of %v carries", e, l, metrics)
		}
	}
	t.Logf("%d kgstream series of the ops kit served: %v", len(want), want)
}

func llmConfigFor(url string) llm.Config {
	return llm.Config{BaseURL: url, Model: "opskit", APIKey: "test", Timeout: 10 * time.Second}
}

// opsRule is one alert rule.
type opsRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func opsKitRules(t *testing.T) []opsRule {
	t.Helper()
	var doc struct {
		Groups []struct {
			Name  string    `yaml:"name"`
			Rules []opsRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(mustRead(t, filepath.Join(opsKitDir, "kgstream-rules.yaml")))))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&doc))
	var rules []opsRule
	for _, g := range doc.Groups {
		rules = append(rules, g.Rules...)
	}
	require.NotEmpty(t, rules)
	return rules
}

// opsKitExprs returns every PromQL expression of the rules and the
// dashboard (the dashboard's $stream variable set to the default stream).
func opsKitExprs(t *testing.T) []string {
	t.Helper()
	var exprs []string
	for _, r := range opsKitRules(t) {
		exprs = append(exprs, r.Expr)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(mustRead(t, filepath.Join(opsKitDir, "kgstream-dashboard.json")), &dash))
	require.NotEmpty(t, dash.Panels)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, "panel %q has an empty query", p.Title)
			exprs = append(exprs, strings.ReplaceAll(tg.Expr, "$stream", "KG"))
		}
	}
	return exprs
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	grouping   = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
)

// metricNames are the series names an expression reads: its identifiers
// with a metric prefix (function names, keywords and labels have none).
func metricNames(expr string) []string {
	var out []string
	for _, id := range identifier.FindAllString(quoted.ReplaceAllString(expr, `""`), -1) {
		if (strings.HasPrefix(id, "kgstream_") || strings.HasPrefix(id, "jetstream_")) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// labelNames are the labels an expression groups by or matches on.
func labelNames(expr string) []string {
	var out []string
	for _, m := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	for _, m := range matcher.FindAllStringSubmatch(expr, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// parseExposition maps each series name of a text exposition to the set of
// its label names.
func parseExposition(text string) map[string]map[string]bool {
	series := map[string]map[string]bool{}
	labelName := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if series[name] == nil {
			series[name] = map[string]bool{}
		}
		if strings.HasPrefix(rest, "{") {
			labels := rest[:strings.LastIndex(rest, "}")+1]
			for _, m := range labelName.FindAllStringSubmatch(quoted.ReplaceAllString(labels, `""`), -1) {
				series[name][m[1]] = true
			}
		}
	}
	return series
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, fmt.Sprintf("reading %s", path))
	return b
}
