// Package service is the shape every kgstream service has, so that one
// process (the all-in-one) or one process per service (the service
// binaries) runs the same code: each service package's NewService builds
// the service from Deps, and a service is a set of named actors plus, for
// the services that answer HTTP, its routes.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/openapi"
	"github.com/kgstream/kgstream/pkg/serve"
	"github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/vector"
)

// Deps are what a process opens once and hands to every service it runs.
// The process owns them: it closes them after the services' actors have
// stopped.
type Deps struct {
	Bus *stream.Bus
	// Stores are nil when the process opened none; a service that needs
	// them refuses to start.
	Stores   store.Stores
	Log      *slog.Logger
	Registry prometheus.Registerer
	// Auth authenticates the API's callers (services with an API).
	Auth *auth.Authenticator
	// Vectors and Embedder, both set or both nil: the vector index.
	Vectors  vector.Index
	Embedder embed.Embedder
	// LLM is nil when no LLM is configured (the offline ways).
	LLM *llm.Client
	// Recorder records the process's status figures; a status collector
	// in the process takes the process's own from it (may be nil).
	Recorder *status.Recorder
}

// Logger is d.Log, or a logger that discards when there is none.
func (d Deps) Logger() *slog.Logger {
	if d.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Log
}

// Actor is one long-running part of a service: Run blocks until ctx ends
// (nil) or the actor fails.
type Actor struct {
	Name string
	Run  func(ctx context.Context) error
}

// Service is what a service package's NewService returns.
type Service interface {
	// Actors are the service's long-running parts.
	Actors() []Actor
	// Routes is the service's HTTP API, nil when it has none.
	Routes() *serve.Routes
}

// Warmer is a Service that prepares itself after it starts (a query
// service warming its caches): the process it runs in answers /readyz
// with 503 until Warmed is closed, so an orchestrator sends it no traffic
// before. Warmed must be closed once the preparation is over, failed or
// cancelled, or at once when there is none.
type Warmer interface {
	Warmed() <-chan struct{}
}

// API is the HTTP API of the services one process runs: every service's
// routes as the service lists them, and the OpenAPI document. A pattern
// two services register is a panic, as on an http.ServeMux.
func API(svcs ...Service) *serve.Routes {
	api := serve.NewRoutes()
	api.Handle("GET "+openapi.Path, openapi.Handler())
	for _, s := range svcs {
		if r := s.Routes(); r != nil {
			api.Mount(r)
		}
	}
	return api
}

// HasAPI reports whether any of svcs answers HTTP.
func HasAPI(svcs ...Service) bool {
	for _, s := range svcs {
		if s.Routes() != nil {
			return true
		}
	}
	return false
}

// Run runs actors as one group until the first returns: the others are
// cancelled and waited for, and the first error (named by its actor) is
// Run's; a cancelled ctx is a clean stop (nil).
func Run(ctx context.Context, actors []Actor) error {
	g, gctx := errgroup.WithContext(ctx)
	gctx, cancel := context.WithCancel(gctx)
	defer cancel()
	for _, a := range actors {
		g.Go(func() error {
			defer cancel()
			if err := a.Run(gctx); err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("%s: %w", a.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}
