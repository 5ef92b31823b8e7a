package extractor

import (
	"errors"
	"fmt"
	"time"

	"github.com/kgstream/kgstream/pkg/serve"
	"github.com/kgstream/kgstream/pkg/service"
	"github.com/kgstream/kgstream/services/extractor/llmx"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// ServiceConfig configures the extractor service.
type ServiceConfig struct {
	// Config is the extraction stage's (chunking, redelivery).
	Config
	// Gleanings, Cache and Prices configure the LLM extractor (used when
	// the process has an LLM): "entities were missed" passes per text unit,
	// the extraction cache (nil: none) and the prices status reports.
	Gleanings int
	Cache     llmx.Cache
	Prices    llmx.PriceTable
	// Extra are the operators' gazetteers the offline extractor looks for
	// besides the bundled one; GazetteerTTL is how long it caches the
	// catalog's entities (default 30s).
	Extra        offline.StaticGazetteer
	GazetteerTTL time.Duration
}

// Service is the extractor as a process runs it: the extraction stage
// and, when the process has the (shared) stores, the catalog
// re-extraction stage.
type Service struct {
	ext Extractor
	w   *Worker
	rx  *Reextractor
}

// NewService builds the extractor: an LLM extractor when d.LLM is set,
// else the offline one, whose gazetteer reads the catalog from d.Stores.
// Without stores there are no catalog mentions and no re-extraction.
func NewService(cfg ServiceConfig, d service.Deps) (*Service, error) {
	log := d.Logger()
	var ext Extractor
	if d.LLM != nil {
		x, err := llmx.New(llmx.Config{Gleanings: cfg.Gleanings, Cache: cfg.Cache, Prices: cfg.Prices}, d.LLM, log, d.Registry)
		if err != nil {
			return nil, err
		}
		ext = x
		log.Info("extracting with an LLM", "model", d.LLM.Model())
	} else {
		oc := offline.Config{Extra: cfg.Extra}
		if d.Stores != nil {
			oc.Gazetteer = offline.NewCatalogGazetteer(d.Stores, cfg.GazetteerTTL)
		} else {
			log.Warn("offline extraction without shared stores: only document entities, no catalog mentions")
		}
		x, err := offline.New(oc)
		if err != nil {
			return nil, fmt.Errorf("creating the offline extractor: %w", err)
		}
		ext = x
	}
	if d.Bus == nil {
		return nil, errors.New("extractor: the service needs a bus")
	}
	s := &Service{ext: ext}
	var err error
	if s.w, err = New(cfg.Config, d.Bus, ext, log.With("stage", "extractor"), d.Registry); err != nil {
		return nil, err
	}
	if d.Stores == nil {
		log.Warn("without shared stores, documents are not re-extracted when the catalog changes")
		return s, nil
	}
	rc := ReextractConfig{MaxDeliver: cfg.MaxDeliver, Backoff: cfg.Backoff}
	if s.rx, err = NewReextractor(rc, d.Bus, d.Stores, ext, log.With("stage", "extractor-catalog"), d.Registry); err != nil {
		return nil, err
	}
	return s, nil
}

// Extractor is the extractor the stages use.
func (s *Service) Extractor() Extractor { return s.ext }

// Actors are the extraction stage and the re-extraction stage.
func (s *Service) Actors() []service.Actor {
	out := []service.Actor{{Name: "extractor", Run: s.w.Run}}
	if s.rx != nil {
		out = append(out, service.Actor{Name: "extractor catalog", Run: s.rx.Run})
	}
	return out
}

// Routes is nil: the extractor has no API.
func (s *Service) Routes() *serve.Routes { return nil }
