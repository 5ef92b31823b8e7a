//go:build integration

package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
)

// TestUnmergeWithoutReextracting merges "Cert Manager" (INC-112) into
// cert-manager by normalisation, then undoes the merge with `kgstream
// entities unmerge`: INC-112 moves to its own entity, the bridge question
// loses Discovery, and not one LLM call is made again.
func TestUnmergeWithoutReextracting(t *testing.T) {
	seed := "../../../shared/corpora/seed-postmortems"
	replay, err := llmtest.SeedReplay(filepath.Join(seed, "recorded-llm-extraction.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(replay.Close)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"token":"admin","tenant":"acme","principal":"ops","admin":true}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	aliases := filepath.Join(dir, "aliases.yaml")
	if err := os.WriteFile(aliases, []byte("# reviewed by the SRE team\naliases: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := app.Start(context.Background(), app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0", TokensFile: tokens,
		AliasesFile: aliases, Quiet: 50 * time.Millisecond, MaxDelay: time.Second,
		LLM: llm.Config{BaseURL: replay.URL(), Model: "replay", APIKey: "k", Timeout: 10 * time.Second},
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	ctx := t.Context()
	srv := []string{"--server", a.URL(), "--token", "admin"}
	if err := run(ctx, append([]string{"catalog", "import", filepath.Join(seed, "catalog-info.yaml")}, srv...)); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, append([]string{"ingest", filepath.Join(seed, "docs"), "--doc-type", "incident"}, srv...)); err != nil {
		t.Fatal(err)
	}
	c := app.NewClient(a.URL(), "admin")
	teams := func() []string {
		var p struct {
			Terminals []struct{ Name string } `json:"terminals"`
		}
		if err := c.Do(ctx, "GET", "/v1/paths?start=component:cert-manager&rels=~involved,affected,owned_by", "", nil, &p); err != nil {
			return nil
		}
		var out []string
		for _, tm := range p.Terminals {
			out = append(out, tm.Name)
		}
		sort.Strings(out)
		return out
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := c.WaitFor(ctx, 60*time.Second, func() (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	waitFor("the merged graph", func() bool { return strings.Join(teams(), ",") == "Discovery,Identity,Messaging,Payments" })
	waitFor("every document extracted and applied", func() bool {
		var st struct {
			Applied int               `json:"applied"`
			Pending map[string]uint64 `json:"pending"`
		}
		err := c.Do(ctx, "GET", "/v1/status", "", nil, &st)
		return err == nil && st.Applied == 11 && st.Pending["extractor"] == 0 && st.Pending["resolver"] == 0
	})
	extractions := func() int {
		n := 0
		for _, call := range replay.Calls() {
			if strings.Contains(string(call.Request.ResponseFormat), "graph_extraction") {
				n++
			}
		}
		return n
	}
	calls := extractions()

	err = run(ctx, append([]string{"entities", "unmerge", "component:cert-manager", "--mention", "Cert Manager",
		"--as", "cert manager (legacy)", "--aliases", aliases}, srv...))
	if err != nil {
		t.Fatal(err)
	}
	waitFor("the split", func() bool { return strings.Join(teams(), ",") == "Identity,Messaging,Payments" })
	var e struct {
		Name      string `json:"name"`
		Citations []struct {
			DocID string `json:"doc_id"`
		} `json:"citations"`
	}
	if err := c.Do(ctx, "GET", "/v1/entities/component/cert%20manager%20(legacy)", "", nil, &e); err != nil {
		t.Fatalf("the split entity: %v", err)
	}
	if e.Name != "Cert Manager" || len(e.Citations) == 0 || e.Citations[0].DocID != "INC-112" {
		t.Fatalf("split entity = %+v", e)
	}
	// The split spelling itself now names the split entity, as it does for mentions.
	var bySpelling struct {
		ID string `json:"id"`
	}
	if err := c.Do(ctx, "GET", "/v1/entities/component/Cert%20Manager", "", nil, &bySpelling); err != nil || bySpelling.ID != "component:certmanagerlegacy" {
		t.Fatalf("component:Cert Manager resolves to %q (%v), want the split entity", bySpelling.ID, err)
	}
	if n := extractions(); n != calls {
		t.Fatalf("the unmerge made %d extraction calls; it must re-resolve stored extractions", n-calls)
	}
	var st struct {
		OrphanEdges int `json:"orphan_edges"`
		Entities    int `json:"entities"`
	}
	if err := c.Do(ctx, "GET", "/v1/status?audit=1", "", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.OrphanEdges != 0 || st.Entities != 37 {
		t.Fatalf("after the split: %+v (want 37 entities: 36 plus the split-off component)", st)
	}
	data, _ := os.ReadFile(aliases)
	if !strings.Contains(string(data), "# reviewed by the SRE team") || !strings.Contains(string(data), "Cert Manager") {
		t.Fatalf("the alias file lost its comments or the rule:\n%s", data)
	}
	// Re-resolving is for admins only; a bad reference is a usage error.
	var raw json.RawMessage
	if err := app.NewClient(a.URL(), "").Do(ctx, "POST", "/v1/entities/reresolve", "application/json", []byte(`{"entity":"component:x"}`), &raw); err == nil {
		t.Fatal("an unauthenticated re-resolution was accepted")
	}
}
