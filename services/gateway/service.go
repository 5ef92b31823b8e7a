package gateway

import (
	"errors"
	"fmt"

	"github.com/kgstream/kgstream/pkg/serve"
	"github.com/kgstream/kgstream/pkg/service"
)

// ServiceConfig configures the gateway service: the gateway's settings
// and the file of its webhook receivers.
type ServiceConfig struct {
	Config
	// WebhooksFile configures the webhook receivers (YAML or JSON); empty:
	// the receivers of Config.Webhooks, none by default.
	WebhooksFile string
}

// Service is the gateway as a process runs it: the outbox republisher and
// the document API, webhook receivers included.
type Service struct {
	*Gateway
	routes *serve.Routes
}

// NewService builds the gateway from the process's stores (its registry,
// and the graph for the catalog), bus and authenticator.
func NewService(cfg ServiceConfig, d service.Deps) (*Service, error) {
	if d.Stores == nil || d.Auth == nil {
		return nil, errors.New("gateway: the service needs the stores and an authenticator")
	}
	if cfg.Graph == nil {
		cfg.Graph = d.Stores
	}
	if cfg.WebhooksFile != "" {
		wh, err := LoadWebhooks(cfg.WebhooksFile)
		if err != nil {
			return nil, err
		}
		cfg.Webhooks = wh
	}
	g, err := New(cfg.Config, d.Stores, d.Bus, d.Auth, d.Logger().With("component", "gateway"), d.Registry)
	if err != nil {
		return nil, fmt.Errorf("creating the gateway: %w", err)
	}
	// The patterns the gateway answers; its handler routes within them.
	h := g.Handler()
	r := serve.NewRoutes()
	r.Handle("/v1/documents", h)
	r.Handle("/v1/documents/", h)
	r.Handle("/v1/catalog", h)
	r.Handle("POST /v1/entities/reresolve", h)
	r.Handle("POST /v1/communities/recluster", h)
	r.Handle("POST /webhooks/{provider}", h)
	return &Service{Gateway: g, routes: r}, nil
}

// Actors is the outbox republisher.
func (s *Service) Actors() []service.Actor {
	return []service.Actor{{Name: "gateway outbox", Run: s.Gateway.Run}}
}

// Routes is the document API and the webhook receivers.
func (s *Service) Routes() *serve.Routes { return s.routes }
