// Package webui serves the web UI: the bundle web/ builds (`make ui`),
// embedded so that the binary needs nothing else at run time. The UI talks
// to the same JSON API with the caller's bearer token; this handler serves
// only static files, which hold no data.
package webui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

//go:embed dist
var dist embed.FS

// Prefix is where the UI is mounted.
const Prefix = "/ui/"

// file is one embedded file, ready to serve in both encodings.
type file struct {
	ctype          string
	plain, gz      []byte
	etag, etagGzip string
}

// Handler serves the embedded UI under Prefix. Unknown paths under it get
// index.html, so that the UI's own routes can be bookmarked.
type Handler struct {
	files map[string]*file
}

// New compresses every embedded file once and returns the handler.
func New() (*Handler, error) {
	h := &Handler{files: map[string]*file{}}
	err := fs.WalkDir(dist, "dist", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := dist.ReadFile(p)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if _, err := zw.Write(data); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		tag := hex.EncodeToString(sum[:8])
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		h.files[strings.TrimPrefix(p, "dist/")] = &file{ctype: ct, plain: data, gz: buf.Bytes(),
			etag: `"` + tag + `"`, etagGzip: `"` + tag + `-gz"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the embedded web UI: %w", err)
	}
	if h.files["index.html"] == nil {
		return nil, fmt.Errorf("reading the embedded web UI: dist/index.html is missing (run make ui)")
	}
	return h, nil
}

// ServeHTTP serves GET and HEAD under Prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMethodNotAllowed)
		_, _ = w.Write([]byte(`{"error":{"code":"method_not_allowed","message":"the web UI is read with GET"}}` + "\n"))
		return
	}
	name := strings.TrimPrefix(r.URL.Path, Prefix)
	f := h.files[name]
	if f == nil {
		name, f = "index.html", h.files["index.html"]
	}
	hd := w.Header()
	hd.Set("Content-Type", f.ctype)
	hd.Set("Vary", "Accept-Encoding")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	// Everything comes from this origin: no script, style or font from
	// anywhere else, and the API is called on the same origin.
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
	if name == "index.html" {
		hd.Set("Cache-Control", "no-cache")
	} else {
		hd.Set("Cache-Control", "public, max-age=300")
	}
	body, tag := f.plain, f.etag
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body, tag = f.gz, f.etagGzip
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("ETag", tag)
	if matchETag(r.Header.Get("If-None-Match"), tag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// acceptsGzip reads Accept-Encoding: gzip (or *) with a q above 0.
func acceptsGzip(h string) bool {
	for _, part := range strings.Split(h, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "*" {
			continue
		}
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		return q > 0
	}
	return false
}

// matchETag reads If-None-Match (a list of tags, or *).
func matchETag(h, tag string) bool {
	for _, t := range strings.Split(h, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == tag || t == "*" {
			return true
		}
	}
	return false
}

// Mount serves the UI on mux under Prefix, and redirects /ui to it.
func Mount(mux interface{ Handle(string, http.Handler) }) error {
	h, err := New()
	if err != nil {
		return err
	}
	mux.Handle(Prefix, h)
	mux.Handle("GET /ui", http.RedirectHandler(Prefix, http.StatusMovedPermanently))
	return nil
}
