// Package openapi holds the OpenAPI 3.1 description of every HTTP route of
// kgstream (gateway, query, status, webhooks and the operational routes)
// and serves it at /openapi.json.
package openapi

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"time"
)

// Path is where every kgstream process serves the document.
const Path = "/openapi.json"

//go:embed openapi.json
var spec []byte

// Spec returns a copy of the OpenAPI document (JSON).
func Spec() []byte { return bytes.Clone(spec) }

// Handler serves the OpenAPI document (GET and HEAD) with an ETag, so a
// client that has it gets 304 Not Modified.
func Handler() http.Handler {
	sum := sha256.Sum256(spec)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("ETag", etag)
		http.ServeContent(w, r, "openapi.json", time.Time{}, bytes.NewReader(spec))
	})
}
