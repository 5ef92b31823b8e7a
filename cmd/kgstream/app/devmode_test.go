package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

func TestDevModeServesOnlyLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "example.com:0"} {
		_, err := app.Start(context.Background(), app.Config{DataDir: t.TempDir(), HTTPAddr: addr, Log: quietLog()})
		require.Error(t, err, addr)
		require.Contains(t, err.Error(), "--tokens", addr)
	}

	var logs lockedBuffer
	a, err := app.Start(context.WithoutCancel(t.Context()), app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0",
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	t.Cleanup(a.Close)
	require.Contains(t, logs.String(), "development mode", "the start-up says who an anonymous caller is")

	// The one user may change and delete a restricted document they created.
	do := func(method, path, body string) int {
		req, err := http.NewRequest(method, a.URL()+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode
	}
	require.Equal(t, 202, do("POST", "/v1/documents", `{"id":"secret","text":"for the payments team","acl":{"groups":["payments"]}}`))
	require.Equal(t, 202, do("POST", "/v1/documents", `{"id":"secret","text":"edited","acl":{"groups":["payments"]}}`))
	require.Equal(t, 202, do("PUT", "/v1/documents/secret/acl", `{"public":true}`))
	require.Equal(t, 202, do("DELETE", "/v1/documents/secret", ``))
}

// lockedBuffer is a log sink the test may read while the server's
// goroutines still write to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestDotAndSlashIDsThroughTheAllInOne sends ids with '/' and dot segments
// through the whole server (its muxes included): a path with dot segments
// is a JSON 400, never a redirect a client follows to another document.
func TestDotAndSlashIDsThroughTheAllInOne(t *testing.T) {
	a, err := app.Start(context.WithoutCancel(t.Context()), app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Log: quietLog()})
	require.NoError(t, err)
	t.Cleanup(a.Close)
	do := func(method, path, body string) (int, map[string]any) {
		req, err := http.NewRequest(method, a.URL()+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out), "%s %s answers JSON", method, path)
		return resp.StatusCode, out
	}
	for _, id := range []string{"b", "a/../b", "/", "team-a/2024/incident.md", "team-b/2024/incident.md"} {
		body, err := json.Marshal(map[string]any{"id": id, "text": "text of " + id})
		require.NoError(t, err)
		status, out := do("POST", "/v1/documents", string(body))
		require.Equal(t, 202, status, "%s: %v", id, out)
	}
	status, out := do("DELETE", "/v1/documents/a/../b", ``)
	require.Equal(t, 400, status, out)
	status, out = do("DELETE", "/v1/documents//acl", ``)
	require.Equal(t, 400, status, out)
	for _, c := range []struct{ path, id string }{{"/v1/documents/a%2F..%2Fb", "a/../b"}, {"/v1/documents/%2F", "/"},
		{"/v1/documents/team-a%2F2024%2Fincident.md", "team-a/2024/incident.md"}} {
		status, out = do("DELETE", c.path, ``)
		require.Equal(t, 202, status, "%s: %v", c.path, out)
		require.Equal(t, c.id, out["id"])
	}
	srcs, err := a.Stores.Sources(t.Context(), "default", []string{"b", "team-b/2024/incident.md"})
	require.NoError(t, err)
	require.False(t, srcs["b"].Deleted, "b was deleted through a path naming another document")
	require.False(t, srcs["team-b/2024/incident.md"].Deleted)
}
