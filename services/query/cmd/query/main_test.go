package main

import (
	"net/http"
	"testing"

	"github.com/kgstream/kgstream/pkg/daemon/daemontest"
	"github.com/kgstream/kgstream/pkg/openapi"
)

// TestMainRunsTheService: the binary, started as its main starts it,
// becomes ready and serves the routes its package's NewService lists
// (queries, status, the web UI) and the OpenAPI document, nothing else.
func TestMainRunsTheService(t *testing.T) {
	r := daemontest.Start(t, run)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/v1/entities", http.StatusUnauthorized},
		{http.MethodGet, "/v1/status", http.StatusUnauthorized},
		{http.MethodGet, "/ui", http.StatusMovedPermanently},
		{http.MethodGet, openapi.Path, http.StatusOK},
		{http.MethodPost, "/v1/documents", http.StatusNotFound}, // the gateway's
	} {
		got, err := r.Status(c.method, c.path)
		if err != nil || got != c.want {
			t.Errorf("%s %s = %d %v, want %d", c.method, c.path, got, err, c.want)
		}
	}
}
