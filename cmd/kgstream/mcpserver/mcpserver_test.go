package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

// bearer adds a caller's token to every request of an MCP HTTP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// session is an MCP client session and a helper to call its tools.
type session struct {
	t  *testing.T
	cs *mcp.ClientSession
}

// call calls a tool; it returns the result's JSON text and whether the
// tool reported an error.
func (s session) call(name string, args map[string]any) (string, bool) {
	s.t.Helper()
	res, err := s.cs.CallTool(s.t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		s.t.Fatalf("calling %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func connect(t *testing.T, tr mcp.Transport) session {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return session{t: t, cs: cs}
}

// TestMCPToolsAdmitLikeHTTP drives the MCP server as a client, over the
// in-memory transport (the stdio path: the token given to the server) and
// over streamable HTTP (each request's own token), against a running
// all-in-one with a tokens file. The on-call reader sees the restricted
// incident in every tool; the guest sees it in none; a bad token is refused.
func TestMCPToolsAdmitLikeHTTP(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[
 {"token":"writer-1","tenant":"acme","principal":"ingest","writer":true},
 {"token":"alice-1","tenant":"acme","principal":"alice","groups":["oncall"]},
 {"token":"guest-1","tenant":"acme","principal":"guest"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := app.Start(context.Background(), app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", TokensFile: tokens,
		Quiet: 50 * time.Millisecond, MaxDelay: time.Second,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	ctx := t.Context()
	if err := app.IngestDemo(ctx, a.URL(), "writer-1"); err != nil {
		t.Fatal(err)
	}
	w := app.NewClient(a.URL(), "writer-1")
	if _, err := w.PostDocument(ctx, app.Document{ID: "SEC-9", Title: "SEC-9: signing keys copied to a laptop",
		Text: "SEC-9: signing keys copied to a laptop\nThe token-issuer signing keys were copied to an unmanaged laptop during the quarterly rotation. " +
			"The Trust Team revoked every key and reissued them.",
		DocType: "incident", ACL: map[string]any{"groups": []string{"oncall"}}}); err != nil {
		t.Fatal(err)
	}
	alice := app.NewClient(a.URL(), "alice-1")
	if err := alice.WaitFor(ctx, 60*time.Second, func() (bool, error) {
		var st struct {
			Applied int               `json:"applied"`
			Pending map[string]uint64 `json:"pending"`
		}
		err := alice.Do(ctx, "GET", "/v1/status", "", nil, &st)
		return err == nil && st.Applied == 7 && st.Pending["resolver"] == 0 && st.Pending["extractor"] == 0, err
	}); err != nil {
		t.Fatal(err)
	}

	cfg := Config{BaseURL: a.URL(), Version: "test"}
	// stdio path: one caller, the token the server was started with.
	inMemory := func(token string) session {
		c := cfg
		c.Token = token
		st, ct := mcp.NewInMemoryTransports()
		ss, err := New(c).Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ss.Close() })
		return connect(t, ct)
	}
	// Streamable HTTP: the server holds no token (even if given one); each
	// request carries its caller's.
	hcfg := cfg
	hcfg.Token = "alice-1"
	hs := httptest.NewServer(Handler(hcfg))
	t.Cleanup(hs.Close)
	overHTTP := func(token string) session {
		return connect(t, &mcp.StreamableClientTransport{Endpoint: hs.URL, DisableStandaloneSSE: true, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}})
	}

	sessions := map[string]session{
		"alice stdio": inMemory("alice-1"), "alice http": overHTTP("alice-1"),
		"guest stdio": inMemory("guest-1"), "guest http": overHTTP("guest-1"),
	}
	tools, err := sessions["guest http"].cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "aggregate communities entities entity paths query report" {
		t.Fatalf("tools = %v", names)
	}

	// Wait until alice's answers cite SEC-9 (its extraction may still be
	// settling into the graph), then compare every tool for both callers.
	aliceStdio := sessions["alice stdio"]
	if err := alice.WaitFor(ctx, 60*time.Second, func() (bool, error) {
		out, isErr := aliceStdio.call("paths", map[string]any{"start": "service:token-issuer", "rels": "~mentions"})
		return !isErr && strings.Contains(out, "SEC-9"), nil
	}); err != nil {
		t.Fatalf("alice's paths never reached SEC-9: %v", err)
	}
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"paths", map[string]any{"start": "service:token-issuer", "rels": "~mentions"}},
		{"entity", map[string]any{"entity": "service:token-issuer"}},
		{"entities", map[string]any{"q": "SEC-9"}},
		{"query", map[string]any{"mode": "basic", "question": "signing keys copied to an unmanaged laptop"}},
		{"query", map[string]any{"mode": "local", "question": "what happened to token-issuer signing keys?"}},
		{"query", map[string]any{"mode": "auto", "question": "signing keys laptop rotation"}},
	}
	for name, s := range sessions {
		for _, c := range calls {
			out, isErr := s.call(c.tool, c.args)
			if isErr {
				t.Fatalf("%s %s %v: tool error %s", name, c.tool, c.args, out)
			}
			if !json.Valid([]byte(out)) {
				t.Fatalf("%s %s: not JSON: %s", name, c.tool, out)
			}
			sees := strings.Contains(out, "SEC-9") || strings.Contains(out, "laptop")
			isAlice := strings.HasPrefix(name, "alice")
			if !isAlice && sees {
				t.Fatalf("%s sees the restricted incident through %s %v:\n%s", name, c.tool, c.args, out)
			}
			if isAlice && !sees && (c.tool == "paths" || c.tool == "entity" || c.args["mode"] == "basic") {
				t.Fatalf("%s does not see SEC-9 through %s %v:\n%s", name, c.tool, c.args, out)
			}
		}
	}
	// Aggregate, communities and reports answer too.
	g := sessions["guest stdio"]
	if out, isErr := g.call("aggregate", map[string]any{"type": "service", "rel": "owned_by"}); isErr || !strings.Contains(out, "groups") {
		t.Fatalf("aggregate: %s", out)
	}
	// Paging arguments reach the API: one group, and the page that says so.
	if out, isErr := g.call("aggregate", map[string]any{"type": "service", "rel": "owned_by", "limit": 1, "members": 0}); isErr ||
		!strings.Contains(out, `"next_offset":1`) {
		t.Fatalf("aggregate page: %s", out)
	}
	if out, isErr := g.call("paths", map[string]any{"start": "service:token-issuer", "rels": "~mentions", "limit": 0}); isErr ||
		!strings.Contains(out, `"terminals":[]`) || !regexp.MustCompile(`"page":\{[^}]*"total":[1-9]`).MatchString(out) {
		t.Fatalf("paths page: %s", out)
	}
	var comms struct {
		Communities []struct {
			ReportID string `json:"report_id"`
		} `json:"communities"`
	}
	if err := alice.WaitFor(ctx, 60*time.Second, func() (bool, error) {
		out, isErr := g.call("communities", nil)
		comms.Communities = nil
		_ = json.Unmarshal([]byte(out), &comms)
		return !isErr && len(comms.Communities) > 0 && comms.Communities[0].ReportID != "", nil
	}); err != nil {
		t.Fatalf("communities: %v", err)
	}
	if err := alice.WaitFor(ctx, 60*time.Second, func() (bool, error) {
		out, isErr := g.call("report", map[string]any{"id": comms.Communities[0].ReportID})
		return !isErr && strings.Contains(out, "findings"), nil
	}); err != nil {
		t.Fatalf("report %s: %v", comms.Communities[0].ReportID, err)
	}
	// Refusals come back as tool errors carrying the API's message.
	if out, isErr := g.call("report", map[string]any{"id": "no-such-report"}); !isErr || !strings.Contains(out, "404") {
		t.Fatalf("unknown report: %v %s", isErr, out)
	}
	if out, isErr := g.call("entity", map[string]any{"entity": "no-colon"}); !isErr || !strings.Contains(out, "TYPE:NAME") {
		t.Fatalf("bad entity: %v %s", isErr, out)
	}
	if out, isErr := overHTTP("stolen").call("entities", map[string]any{}); !isErr || !strings.Contains(out, "401") {
		t.Fatalf("an unknown token over HTTP: %v %s", isErr, out)
	}
	if out, isErr := overHTTP("").call("entities", map[string]any{}); !isErr || !strings.Contains(out, "401") {
		t.Fatalf("no token over HTTP (the server's own must not be used): %v %s", isErr, out)
	}
}
