package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

// lockedBuffer is a bytes.Buffer safe for the server's logger and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMCPCommandStdio runs `kgstream mcp` on stdio pipes against a running
// all-in-one and calls a tool as an MCP client; logs (JSON, as asked) go to
// stderr and stdout carries only the protocol.
func TestMCPCommandStdio(t *testing.T) {
	a, err := app.Start(context.Background(), app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0",
		Quiet: 50 * time.Millisecond, MaxDelay: time.Second,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := app.IngestDemo(ctx, a.URL(), ""); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- runIO(ctx, []string{"mcp", "--server", a.URL(), "--log-format", "json"}, inR, outW, &stderr)
		_ = outW.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "entities", Arguments: map[string]any{"q": "token"}})
	if err != nil || res.IsError {
		t.Fatalf("entities: %v %+v", err, res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "service:tokenissuer") {
		t.Fatalf("entities answer: %s", text)
	}
	_ = cs.Close()
	_ = inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("mcp exited: %v", err)
	}
	if log := stderr.String(); !strings.Contains(log, `"msg":"mcp server started"`) || !strings.Contains(log, `"transport":"stdio"`) {
		t.Fatalf("stderr: %s", log)
	}
}

// TestMCPCommandHTTP runs `kgstream mcp --http` and calls a tool over
// streamable HTTP with the caller's token in the request.
func TestMCPCommandHTTP(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"tokens.json": `[{"token":"w-1","tenant":"acme","principal":"ingest","writer":true},
 {"token":"r-1","tenant":"acme","principal":"alice"}]`})
	a, err := app.Start(context.Background(), app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", TokensFile: filepath.Join(dir, "tokens.json"),
		Quiet: 50 * time.Millisecond, MaxDelay: time.Second,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := app.IngestDemo(ctx, a.URL(), "w-1"); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	var stderr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- runIO(ctx, []string{"mcp", "--http", addr, "--server", a.URL(), "--token", "w-1"}, strings.NewReader(""), io.Discard, &stderr)
	}()
	call := func(token string) (*mcp.CallToolResult, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		var cs *mcp.ClientSession
		err := app.NewClient(a.URL(), "").WaitFor(ctx, 10*time.Second, func() (bool, error) {
			var err error
			cs, err = c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", DisableStandaloneSSE: true, MaxRetries: -1,
				HTTPClient: &http.Client{Transport: headerTransport{"Authorization", "Bearer " + token}}}, nil)
			return err == nil, err
		})
		if err != nil {
			return nil, err
		}
		defer cs.Close()
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "aggregate", Arguments: map[string]any{"type": "service", "rel": "owned_by"}})
	}
	res, err := call("r-1")
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "Trust Team") {
		t.Fatalf("aggregate over HTTP: %v %+v", err, res)
	}
	// The process's --token is not lent to a caller without one.
	res, err = call("")
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "401") {
		t.Fatalf("no token over HTTP: %v %+v", err, res)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("mcp --http after a stop: %v", err)
	}
	if !strings.Contains(stderr.String(), "transport=streamable-http") {
		t.Fatalf("stderr: %s", stderr.String())
	}
}

// headerTransport sets one header on every request.
type headerTransport struct{ key, value string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.value != "Bearer " {
		r.Header.Set(h.key, h.value)
	}
	return http.DefaultTransport.RoundTrip(r)
}
