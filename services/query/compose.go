package query

import (
	"context"
	"errors"
	"time"

	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/serve"
	"github.com/kgstream/kgstream/pkg/service"
	"github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/services/query/webui"
)

// ServiceConfig configures the query service as a process runs it.
type ServiceConfig struct {
	// Config is the query routes'; its zero fields take DefaultConfig's.
	// Its Aliases, when nil, is the watcher of AliasesFile, which the
	// service then owns and runs; its Vectors, Embedder, LLM and Events,
	// when nil, are the process's.
	Config
	// AliasesFile is the reviewed alias table (YAML), reloaded when it
	// changes; empty: no aliases.
	AliasesFile string
	// Stages are the consumers whose pending counts status reports
	// (default status.Stages).
	Stages []string
}

// composed is what NewService adds to a Service: status, the web UI and
// the alias table it owns.
type composed struct {
	status      *status.Collector
	ownsAliases bool
	routes      *serve.Routes
}

// A query process is ready once the service's warm-up is over.
var _ service.Warmer = (*Service)(nil)

// NewService builds the query service of a process: the query routes,
// status (GET /v1/status, dead letters) and the web UI, on the process's
// stores, authenticator, bus, vector index and LLM.
func NewService(cfg ServiceConfig, d service.Deps) (*Service, error) {
	if d.Stores == nil || d.Auth == nil {
		return nil, errors.New("query: the service needs the stores and an authenticator")
	}
	log := d.Logger()
	c := &composed{}
	if cfg.Aliases == nil {
		a, err := resolve.NewAliasWatcher(cfg.AliasesFile, log)
		if err != nil {
			return nil, err
		}
		cfg.Aliases, c.ownsAliases = a, true
	}
	if cfg.Vectors == nil && cfg.Embedder == nil {
		cfg.Vectors, cfg.Embedder = d.Vectors, d.Embedder
	}
	if cfg.LLM == nil && d.LLM != nil {
		cfg.LLM = d.LLM
	}
	if cfg.Events == nil {
		cfg.Events = d.Bus
	}
	stages := cfg.Stages
	if stages == nil {
		stages = status.Stages
	}
	s, err := New(cfg.Config, d.Stores, d.Auth, log.With("component", "query"), d.Registry)
	if err != nil {
		return nil, err
	}
	if c.status, err = status.NewCollector(d.Stores, d.Bus, stages, log, d.Registry); err != nil {
		return nil, err
	}
	if d.Vectors != nil {
		c.status.WithVectors(d.Vectors)
	}
	if d.Recorder != nil {
		c.status.WithRecorder(d.Recorder)
	}
	s.FollowDocsFor(c.status)
	c.routes = serve.NewRoutes()
	c.routes.Handle("GET /v1/status", c.status.Handler(d.Auth))
	c.routes.Handle("/v1/status/", c.status.DeadLetterHandler(d.Auth))
	if err := webui.Mount(c.routes); err != nil {
		return nil, err
	}
	c.routes.Handle("/", s.Handler())
	s.composed = c
	return s, nil
}

// FollowDocsFor has f told when the service's caches go live or not and
// of the document of every graph change they follow (DocFollower). Call it
// before Run.
func (s *Service) FollowDocsFor(f DocFollower) { s.cache.docs = f }

// Status is the status collector of GET /v1/status.
func (s *Service) Status() *status.Collector { return s.composed.status }

// Actors are the event follower that keeps the caches and, when the
// service owns it, the alias table's watcher.
func (s *Service) Actors() []service.Actor {
	out := []service.Actor{{Name: "query", Run: s.Run}}
	if s.composed.ownsAliases {
		out = append(out, service.Actor{Name: "query aliases", Run: func(ctx context.Context) error { return s.cfg.Aliases.Run(ctx, 5*time.Second) }})
	}
	return out
}

// Routes is the query API, status and the web UI.
func (s *Service) Routes() *serve.Routes { return s.composed.routes }
