package clusterer

import (
	"errors"

	"github.com/kgstream/kgstream/pkg/serve"
	"github.com/kgstream/kgstream/pkg/service"
)

// Service is the clusterer as a process runs it: one stage.
type Service struct{ w *Worker }

// NewService builds the clusterer on the process's stores and bus. Without
// a Partitioner it clusters with hierarchical Leiden at cfg.MaxClusterSize.
func NewService(cfg Config, d service.Deps) (*Service, error) {
	if d.Stores == nil {
		return nil, errors.New("clusterer: the service needs the stores")
	}
	if cfg.Partitioner == nil {
		cfg.Partitioner = Leiden(LeidenConfig{MaxClusterSize: cfg.MaxClusterSize})
	}
	w, err := New(cfg, d.Bus, d.Stores, d.Logger().With("stage", "clusterer"), d.Registry)
	if err != nil {
		return nil, err
	}
	return &Service{w: w}, nil
}

// Worker is the clustering stage.
func (s *Service) Worker() *Worker { return s.w }

// Actors is the clustering stage.
func (s *Service) Actors() []service.Actor {
	return []service.Actor{{Name: "clusterer", Run: s.w.Run}}
}

// Routes is nil: the clusterer has no API.
func (s *Service) Routes() *serve.Routes { return nil }
