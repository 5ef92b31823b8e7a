package webui_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kgstream/kgstream/services/query/webui"
)

func get(t *testing.T, h http.Handler, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, r *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUIServedEmbedded serves the embedded bundle: index for the UI's own
// routes, gzip when the client accepts it (the same bytes once decoded, and
// smaller), identity when it refuses gzip with q=0, an ETag per encoding and
// 304 for a matching If-None-Match; writes are refused with a JSON error.
func TestUIServedEmbedded(t *testing.T) {
	mux := http.NewServeMux()
	if err := webui.Mount(mux); err != nil {
		t.Fatal(err)
	}
	index := get(t, mux, "/ui/", nil)
	if index.StatusCode != http.StatusOK || !strings.HasPrefix(index.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /ui/: %d %s", index.StatusCode, index.Header.Get("Content-Type"))
	}
	html := body(t, index)
	if !bytes.Contains(html, []byte(`src="/ui/app.js"`)) {
		t.Fatalf("index does not load the bundle: %s", html)
	}
	if csp := index.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("CSP = %q", csp)
	}
	if deep := body(t, get(t, mux, "/ui/entity/service:x", nil)); !bytes.Equal(deep, html) {
		t.Fatal("a UI route does not serve the index")
	}
	if r := get(t, mux, "/ui", nil); r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET /ui: %d %s", r.StatusCode, r.Header.Get("Location"))
	}

	plain := get(t, mux, "/ui/app.js", nil)
	js := body(t, plain)
	if plain.Header.Get("Content-Encoding") != "" || len(js) < 1000 || !strings.Contains(plain.Header.Get("Content-Type"), "javascript") {
		t.Fatalf("identity app.js: encoding %q, %d bytes, %s", plain.Header.Get("Content-Encoding"), len(js), plain.Header.Get("Content-Type"))
	}
	zipped := get(t, mux, "/ui/app.js", map[string]string{"Accept-Encoding": "br, gzip;q=0.8"})
	if zipped.Header.Get("Content-Encoding") != "gzip" || zipped.Header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("gzip app.js: encoding %q vary %q", zipped.Header.Get("Content-Encoding"), zipped.Header.Get("Vary"))
	}
	zb := body(t, zipped)
	zr, err := gzip.NewReader(bytes.NewReader(zb))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(unzipped, js) {
		t.Fatal("gzip body differs from the file once decoded")
	}
	if 2*len(zb) > len(js) {
		t.Fatalf("gzip is %d bytes for %d: less than 2x smaller", len(zb), len(js))
	}
	if r := get(t, mux, "/ui/app.js", map[string]string{"Accept-Encoding": "gzip;q=0"}); r.Header.Get("Content-Encoding") != "" {
		t.Fatal("gzip;q=0 is served gzip")
	}
	if plain.Header.Get("ETag") == "" || plain.Header.Get("ETag") == zipped.Header.Get("ETag") {
		t.Fatalf("ETags identity %q gzip %q", plain.Header.Get("ETag"), zipped.Header.Get("ETag"))
	}
	if r := get(t, mux, "/ui/app.js", map[string]string{"If-None-Match": plain.Header.Get("ETag")}); r.StatusCode != http.StatusNotModified || len(body(t, r)) != 0 {
		t.Fatalf("If-None-Match: %d", r.StatusCode)
	}
	if r := get(t, mux, "/ui/app.js", map[string]string{"If-None-Match": zipped.Header.Get("ETag")}); r.StatusCode != http.StatusOK {
		t.Fatalf("the gzip ETag matches the identity body: %d", r.StatusCode)
	}

	req := httptest.NewRequest(http.MethodPost, "/ui/app.js", strings.NewReader("x"))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed || !strings.Contains(rec.Body.String(), `"code":"method_not_allowed"`) {
		t.Fatalf("POST: %d %s", rec.Code, rec.Body.String())
	}
}
