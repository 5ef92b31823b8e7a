package resolver

import (
	"context"
	"errors"
	"time"

	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/serve"
	"github.com/kgstream/kgstream/pkg/service"
)

// ServiceConfig configures the resolver service.
type ServiceConfig struct {
	// Config is the resolver stage's; its Aliases, when nil, is the
	// watcher of AliasesFile, which the service then owns and runs.
	Config
	// AliasesFile is the reviewed alias table (YAML), reloaded when it
	// changes; empty: no aliases.
	AliasesFile string
}

// Service is the resolver as a process runs it: the apply stage, the
// re-resolution after an alias change and, when it owns it, the alias
// table's watcher.
type Service struct {
	w           *Worker
	aliases     *resolve.AliasWatcher
	ownsAliases bool
}

// NewService builds the resolver on the process's graph store and bus.
func NewService(cfg ServiceConfig, d service.Deps) (*Service, error) {
	if d.Stores == nil {
		return nil, errors.New("resolver: the service needs the stores")
	}
	log := d.Logger()
	s := &Service{aliases: cfg.Aliases}
	if s.aliases == nil {
		a, err := resolve.NewAliasWatcher(cfg.AliasesFile, log)
		if err != nil {
			return nil, err
		}
		s.aliases, s.ownsAliases = a, true
		cfg.Aliases = a
	}
	w, err := New(cfg.Config, d.Bus, d.Stores, log.With("stage", "resolver"), d.Registry)
	if err != nil {
		return nil, err
	}
	s.w = w
	return s, nil
}

// Aliases is the alias table the resolver resolves through, for the query
// service of the same process to share.
func (s *Service) Aliases() *resolve.AliasWatcher { return s.aliases }

// Worker is the apply stage.
func (s *Service) Worker() *Worker { return s.w }

// Actors are the apply stage, the re-resolution after an alias change and
// the alias table's watcher (when the service owns it).
func (s *Service) Actors() []service.Actor {
	out := []service.Actor{
		{Name: "resolver", Run: s.w.Run},
		{Name: "resolver aliases", Run: func(ctx context.Context) error { return s.w.WatchAliases(ctx, time.Second) }},
	}
	if s.ownsAliases {
		out = append(out, service.Actor{Name: "aliases", Run: func(ctx context.Context) error { return s.aliases.Run(ctx, 5*time.Second) }})
	}
	return out
}

// Routes is nil: the resolver has no API.
func (s *Service) Routes() *serve.Routes { return nil }
