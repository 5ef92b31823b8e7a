// Package serve runs kgstream's HTTP servers: the API routes plus the
// operational endpoints every service has (/metrics, /healthz, /readyz), and
// an orderly shutdown (unready, stop accepting, finish in-flight requests).
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kgstream/kgstream/pkg/httpapi"
)

// Readiness is a flag the process flips when it is connected and caught up.
type Readiness struct{ ready atomic.Bool }

// Set marks the process ready or not.
func (r *Readiness) Set(v bool) { r.ready.Store(v) }

// Ready reports the flag.
func (r *Readiness) Ready() bool { return r.ready.Load() }

// Mux returns a mux with /metrics (unless gatherer is nil), /healthz and
// /readyz, and api (may be nil) for every other path.
func Mux(api http.Handler, gatherer prometheus.Gatherer, ready *Readiness) *http.ServeMux {
	mux := http.NewServeMux()
	if gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil && !ready.Ready() {
			httpapi.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	if api != nil {
		mux.Handle("/", jsonErrors(api))
	} else {
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			httpapi.WriteError(w, nil, httpapi.Errorf(http.StatusNotFound, "not_found", "no route %s %s", r.Method, r.URL.Path))
		})
	}
	return mux
}

// Listen binds addr so the caller knows the bound address before serving.
func Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return l, nil
}

// Serve serves h on l until ctx is cancelled, then shuts down gracefully.
func Serve(ctx context.Context, l net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{Handler: CleanPaths(h), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "error", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// CleanPaths refuses, with a JSON 400, a request whose path has empty,
// "." or ".." segments. A ServeMux would answer it with a redirect to the
// cleaned path, which clients follow: DELETE /v1/documents/a/../b would
// delete b. Such segments inside an id travel escaped (%2F, %2E).
func CleanPaths(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.EscapedPath()
		if r.Method != http.MethodConnect && p != "/" && p != "" {
			clean := path.Clean(p)
			if strings.HasSuffix(p, "/") {
				clean += "/"
			}
			if clean != p {
				httpapi.WriteError(w, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_path",
					"the path %q has an empty or dot segment; escape '/' in an id as %%2F and '.' as %%2E", p))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// jsonErrors turns the plain-text 404 and 405 answers of a ServeMux (no
// route, wrong method) into the JSON error body every other answer has.
func jsonErrors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&plainErrorWriter{ResponseWriter: w, r: r}, r)
	})
}

type plainErrorWriter struct {
	http.ResponseWriter
	r       *http.Request
	swallow bool
}

func (w *plainErrorWriter) WriteHeader(code int) {
	ct := w.Header().Get("Content-Type")
	if (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) && strings.HasPrefix(ct, "text/plain") {
		w.swallow = true
		w.Header().Del("X-Content-Type-Options")
		he := httpapi.Errorf(code, "not_found", "no route %s %s", w.r.Method, w.r.URL.Path)
		if code == http.StatusMethodNotAllowed {
			he = httpapi.Errorf(code, "method_not_allowed", "%s is not allowed on %s", w.r.Method, w.r.URL.Path)
		}
		httpapi.WriteError(w.ResponseWriter, nil, he)
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *plainErrorWriter) Write(b []byte) (int, error) {
	if w.swallow {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *plainErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
