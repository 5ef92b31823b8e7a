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

// Mux returns a mux with /metrics, /healthz and /readyz, and api (may be
// nil) for every other path.
func Mux(api http.Handler, gatherer prometheus.Gatherer, ready *Readiness) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
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
		mux.Handle("/", api)
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
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
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
