package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/provenance"
)

// TestStatusCommandScopes: `kgstream status` prints the pipeline figures
// for an admin and says they are for admins to anyone else; `status
// --audit` refuses to pass for a token the audit is not for, and fails on
// vector ACL copies the registry no longer agrees with.
func TestStatusCommandScopes(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[
 {"token":"root-token","tenant":"acme","principal":"root","admin":true,"writer":true},
 {"token":"rita-token","tenant":"acme","principal":"rita"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := app.Start(context.Background(), app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0",
		TokensFile: tokens, Quiet: 50 * time.Millisecond, MaxDelay: time.Second,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	ctx := t.Context()
	root := app.NewClient(a.URL(), "root-token")
	for _, d := range []app.Document{
		{ID: "runbook-1", Text: "The cart-api service calls the pricing-api service.", DocType: "runbook"},
		{ID: "hush-1", Text: "The vault-api service leaked a signing key.", DocType: "incident", ACL: map[string]any{"groups": []string{"sec"}}},
	} {
		if _, err := root.PostDocument(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := root.WaitFor(ctx, 60*time.Second, func() (bool, error) {
		out, _, err := runOut(ctx, "status", "--audit", "--server", a.URL(), "--token", "root-token")
		return err == nil && strings.Contains(out, "documents 2 (applied 2)") && strings.Contains(out, "pending reporter   0"), nil
	}); err != nil {
		t.Fatal(err)
	}

	out, _, err := runOut(ctx, "status", "--server", a.URL(), "--token", "root-token")
	if err != nil || !strings.Contains(out, "pending extractor") || !strings.Contains(out, "dead letters 0") || strings.Contains(out, "admins only") ||
		!regexp.MustCompile(`(?m)^index lag p50 .* \([1-9][0-9]* samples\)$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^source kgstream@\S+ lag\.graph \([0-9.]+s ago\)$`).MatchString(out) {
		t.Fatalf("admin status: %v\n%s", err, out)
	}
	out, _, err = runOut(ctx, "status", "--server", a.URL(), "--token", "rita-token")
	if err != nil || !strings.Contains(out, "documents 1 (applied 1)") || !strings.Contains(out, "admins only") ||
		regexp.MustCompile(`(?m)^(pending|dead letters|index lag|orphan|llm) `).MatchString(out) {
		t.Fatalf("reader status: %v\n%s", err, out)
	}
	_, _, err = runOut(ctx, "status", "--audit", "--server", a.URL(), "--token", "rita-token")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "audit did not run") {
		t.Fatalf("reader status --audit: %v", err)
	}

	// The registry narrows hush-1 behind the vector index's back.
	if _, err := a.Stores.SetACL(ctx, "acme", "hush-1", provenance.ACL{Groups: []string{"legal"}}); err != nil {
		t.Fatal(err)
	}
	out, _, err = runOut(ctx, "status", "--audit", "--server", a.URL(), "--token", "root-token")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "vector ACL mismatches") || strings.Contains(err.Error(), " 0 vector ACL") ||
		!strings.Contains(out, `holds an ACL of "hush-1" other than the registry's`) {
		t.Fatalf("status --audit after a lost ACL event: %v\n%s", err, out)
	}
	var st struct {
		Documents int `json:"documents"`
	}
	if err := root.Do(ctx, http.MethodGet, "/v1/status", "", nil, &st); err != nil || st.Documents != 2 {
		t.Fatalf("status: %v %+v", err, st)
	}
}
