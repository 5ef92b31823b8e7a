package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/kgstream/kgstream/pkg/daemon/daemontest"
	"github.com/kgstream/kgstream/pkg/openapi"
)

// TestMainRunsTheService: the binary, started as its main starts it,
// becomes ready and serves the routes its package's NewService lists (and
// the OpenAPI document), nothing else.
func TestMainRunsTheService(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"token":"w","tenant":"acme","principal":"u:w","writer":true}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := daemontest.Start(t, run, "--tokens", tokens)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodPost, "/v1/documents", http.StatusUnauthorized},
		{http.MethodPost, "/v1/catalog", http.StatusUnauthorized},
		{http.MethodGet, openapi.Path, http.StatusOK},
		{http.MethodGet, "/v1/entities", http.StatusNotFound}, // the query service's
	} {
		got, err := r.Status(c.method, c.path)
		if err != nil || got != c.want {
			t.Errorf("%s %s = %d %v, want %d", c.method, c.path, got, err, c.want)
		}
	}
}
