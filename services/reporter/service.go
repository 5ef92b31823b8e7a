package reporter

import (
	"errors"

	"github.com/kgstream/kgstream/pkg/serve"
	"github.com/kgstream/kgstream/pkg/service"
)

// Service is the reporter as a process runs it: one stage.
type Service struct{ w *Worker }

// NewService builds the reporter on the process's stores and bus; with
// d.LLM it writes reports with the LLM, and with d.Vectors it keeps the
// vector index current (cfg's own LLM, Vectors and Embedder win).
func NewService(cfg Config, d service.Deps) (*Service, error) {
	if d.Stores == nil {
		return nil, errors.New("reporter: the service needs the stores")
	}
	if cfg.LLM == nil && d.LLM != nil {
		cfg.LLM = NewLLMWriter(d.LLM)
	}
	if cfg.Vectors == nil && cfg.Embedder == nil {
		cfg.Vectors, cfg.Embedder = d.Vectors, d.Embedder
	}
	w, err := New(cfg, d.Bus, d.Stores, d.Logger().With("stage", "reporter"), d.Registry)
	if err != nil {
		return nil, err
	}
	return &Service{w: w}, nil
}

// Worker is the reporting stage.
func (s *Service) Worker() *Worker { return s.w }

// Actors is the reporting stage.
func (s *Service) Actors() []service.Actor {
	return []service.Actor{{Name: "reporter", Run: s.w.Run}}
}

// Routes is nil: the reporter has no API.
func (s *Service) Routes() *serve.Routes { return nil }
