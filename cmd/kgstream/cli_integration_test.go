//go:build integration

package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

func TestCLIAgainstAllInOne(t *testing.T) {
	a, err := app.Start(context.Background(), app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0",
		Quiet: 50 * time.Millisecond, MaxDelay: time.Second,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	ctx := t.Context()
	srv := []string{"--server", a.URL()}
	seed := "../../../shared/corpora/seed-postmortems"
	if err := run(ctx, append([]string{"catalog", "import", filepath.Join(seed, "catalog-info.yaml")}, srv...)); err != nil {
		t.Fatalf("catalog import: %v", err)
	}
	c := app.NewClient(a.URL(), "")
	if err := c.WaitFor(ctx, 20*time.Second, func() (bool, error) {
		var r struct{ Total int }
		err := c.Do(ctx, "GET", "/v1/entities?type=service", "", nil, &r)
		return r.Total == 6, err
	}); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, append([]string{"ingest", filepath.Join(seed, "docs"), "--doc-type", "incident"}, srv...)); err != nil {
		t.Fatalf("ingest: %v", err)
	}
	// A rejected document makes ingest exit non-zero, naming it.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "EMPTY-1.txt"), []byte("   \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = run(ctx, append([]string{"ingest", dir}, srv...))
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(err.Error(), "EMPTY-1") {
		t.Fatalf("ingest of a rejected document: %v", err)
	}
	if err := c.WaitFor(ctx, 30*time.Second, func() (bool, error) {
		var st struct {
			Applied int               `json:"applied"`
			Pending map[string]uint64 `json:"pending"`
		}
		err := c.Do(ctx, "GET", "/v1/status", "", nil, &st)
		return st.Applied == 11 && st.Pending["resolver"] == 0, err
	}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"status", "--audit"},
		{"query", "paths", "service:checkout-api", "~mentions"},
		{"query", "aggregate", "service", "owned_by", "--json"},
		{"query", "local", "what", "happened", "to", "search-api?"},
		{"query", "entities", "cert"},
		{"query", "communities"},
	} {
		if err := run(ctx, append(args, srv...)); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	// Tables by default, JSON with --json (a global flag, also before the command).
	out, _, err := runOut(ctx, "query", "entities", "cert", "--server", a.URL())
	if err != nil || !regexp.MustCompile(`(?m)^ID\s+TYPE\s+NAME$`).MatchString(out) || !strings.Contains(out, "component:certmanager") {
		t.Fatalf("entities table: %v\n%s", err, out)
	}
	out, _, err = runOut(ctx, "--json", "--server", a.URL(), "query", "entities", "cert")
	var list struct {
		Entities []struct{ ID string } `json:"entities"`
		Total    int                   `json:"total"`
	}
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || list.Total == 0 {
		t.Fatalf("entities --json: %v\n%s", err, out)
	}
	out, _, err = runOut(ctx, "query", "relations", "--server", a.URL(), "--json")
	var rels struct {
		Relations []struct {
			Relation      string `json:"relation"`
			Relationships int    `json:"relationships"`
		} `json:"relations"`
	}
	if err != nil || json.Unmarshal([]byte(out), &rels) != nil {
		t.Fatalf("relations --json: %v\n%s", err, out)
	}
	inUse := map[string]int{}
	for _, r := range rels.Relations {
		inUse[r.Relation] = r.Relationships
	}
	if inUse["owned_by"] == 0 || inUse["mentions"] == 0 {
		t.Fatalf("relations in use: %v", inUse)
	}
	out, _, err = runOut(ctx, "query", "relations", "--server", a.URL())
	if err != nil || !regexp.MustCompile(`(?m)^owned_by\s+\d+$`).MatchString(out) {
		t.Fatalf("relations table: %v\n%s", err, out)
	}
	// A path query naming a relation the graph does not have fails, naming it.
	_, _, err = runOut(ctx, "query", "paths", "service:checkout-api", "~mentions,owend_by", "--server", a.URL())
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "unknown relation owend_by") || !strings.Contains(err.Error(), "owned_by") {
		t.Fatalf("unknown relation: %v", err)
	}
	out, _, err = runOut(ctx, "query", "paths", "service:checkout-api", "~mentions", "--server", a.URL())
	if err != nil || !regexp.MustCompile(`(?m)^TERMINAL\s+TYPE\s+PATHS$`).MatchString(out) || !strings.Contains(out, "INC-") {
		t.Fatalf("paths table: %v\n%s", err, out)
	}
	// Paging flags: a page of groups (each listing a window of its
	// members, its count exact) or of terminals, and where the next starts.
	out, _, err = runOut(ctx, "query", "aggregate", "service", "owned_by", "--limit", "1", "--members", "0", "--server", a.URL())
	if err != nil || !regexp.MustCompile(`(?m)^1 of \d+ groups from offset 0; next page: --offset 1$`).MatchString(out) ||
		!regexp.MustCompile(`\(0 of 1 listed\)`).MatchString(out) {
		t.Fatalf("aggregate page: %v\n%s", err, out)
	}
	out, _, err = runOut(ctx, "--json", "query", "aggregate", "service", "owned_by", "--offset", "1", "--member-offset", "1", "--server", a.URL())
	var agg struct {
		Groups []struct{ Count int }
		Page   struct{ Total, Offset int }
	}
	if err != nil || json.Unmarshal([]byte(out), &agg) != nil || agg.Page.Offset != 1 || agg.Page.Total != len(agg.Groups)+1 {
		t.Fatalf("aggregate page --json: %v\n%s", err, out)
	}
	out, _, err = runOut(ctx, "query", "paths", "service:checkout-api", "~mentions", "--limit", "1", "--server", a.URL())
	if err != nil || !regexp.MustCompile(`(?m)^1 of \d+ terminals from offset 0`).MatchString(out) {
		t.Fatalf("paths page: %v\n%s", err, out)
	}
	if _, _, err = runOut(ctx, "query", "aggregate", "service", "owned_by", "--limit", "-1", "--server", a.URL()); exitCode(err) != 2 {
		t.Fatalf("negative --limit: want a usage error, got %v", err)
	}
	out, _, err = runOut(ctx, "query", "local", "what happened to search-api?", "--server", a.URL())
	if err != nil || !regexp.MustCompile(`(?m)^  \[1\] INC-\d+@v1$`).MatchString(out) {
		t.Fatalf("answer with citations: %v\n%s", err, out)
	}
	// A full re-clustering on request: queued, then run from scratch.
	fullRuns := func() float64 {
		mfs, err := a.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "kgstream_reclusters_total" {
				for _, m := range mf.GetMetric() {
					if m.GetLabel()[0].GetValue() == "full" {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	// The first run is full; the ingest's later ones are incremental, so
	// once the first is counted only the request adds a full one.
	if err := c.WaitFor(ctx, 30*time.Second, func() (bool, error) { return fullRuns() >= 1, nil }); err != nil {
		t.Fatalf("no first re-clustering: %v", err)
	}
	before := fullRuns()
	out, _, err = runOut(ctx, "recluster", "--full", "--server", a.URL())
	if err != nil || !regexp.MustCompile(`(?m)^re-clustering of default requested \(from scratch\), request [0-9a-f]+$`).MatchString(out) {
		t.Fatalf("recluster --full: %v\n%s", err, out)
	}
	if err := c.WaitFor(ctx, 30*time.Second, func() (bool, error) { return fullRuns() > before, nil }); err != nil {
		t.Fatalf("no full re-clustering after the request: %v", err)
	}
	for _, args := range [][]string{{}, {"bogus"}, {"query"}, {"query", "paths", "x"}, {"catalog"}, {"catalog", "export"},
		{"ingest"}, {"query", "report"}, {"status", "extra"}, {"version", "--no-such-flag"}, {"version", "--log-format", "xml"},
		{"recluster", "now"}} {
		err := run(ctx, args)
		if !errors.As(err, &ee) || ee.code != 2 {
			t.Fatalf("%v: want a usage error, got %v", args, err)
		}
	}
}

func TestLeidenCommand(t *testing.T) {
	in, err := os.Open("../../../shared/fixtures/leiden/karate.edges.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	want, err := os.ReadFile("../../../shared/fixtures/leiden/karate.hier10.tsv")
	if err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if err := runIO(t.Context(), []string{"leiden"}, in, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out.String()) != strings.TrimSpace(string(want)) {
		t.Fatalf("kgstream leiden differs from the fixture:\n%s", out.String())
	}
	if !strings.Contains(errb.String(), "modularity") || !strings.Contains(errb.String(), "time") {
		t.Fatalf("stderr lacks modularity and time: %q", errb.String())
	}
	err = runIO(t.Context(), []string{"leiden"}, strings.NewReader("a\tb\tnot-a-number\n"), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("bad input: %v", err)
	}
}
