package extractor

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
)

// Extractor finds entities and relationships in the text units of one
// document version. Every returned entity and relationship names the text
// unit that supports it. An error marked with stream.Permanent is
// dead-lettered at once; any other error is retried with backoff.
type Extractor interface {
	Extract(ctx context.Context, doc *events.DocChanged, units []events.TextUnit) ([]events.RawEntity, []events.RawRelationship, error)
	// Name identifies the extractor in events and metrics.
	Name() string
}

// entityID is the canonical id an entity resolves to.
func entityID(e events.RawEntity) string {
	if e.Key != "" {
		return resolve.ID(e.Type, e.Key)
	}
	return resolve.ID(e.Type, e.Name)
}

// connected splits rels into those whose endpoints are among ents and the
// number dropped: a relationship to an entity nobody declared would become
// an orphan edge downstream.
func connected(ents []events.RawEntity, rels []events.RawRelationship) ([]events.RawRelationship, int) {
	ids := make(map[string]bool, len(ents))
	for _, e := range ents {
		ids[entityID(e)] = true
	}
	kept := make([]events.RawRelationship, 0, len(rels))
	for _, r := range rels {
		if ids[resolve.ID(r.SourceType, r.Source)] && ids[resolve.ID(r.TargetType, r.Target)] {
			kept = append(kept, r)
		}
	}
	return kept, len(rels) - len(kept)
}

// Metric constructors shared by the worker and the extractors. Both may
// register on one registry, so registration reuses an existing collector.

func droppedCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	return registerCounter(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kgstream_extract_dropped_relationships_total",
		Help: "Extracted relationships dropped because an endpoint is not among the extracted entities, by extractor.",
	}, []string{"extractor"}))
}

func registerCounter(reg prometheus.Registerer, c *prometheus.CounterVec) *prometheus.CounterVec {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing
			}
		}
		panic(err) // a programming error, as with MustRegister
	}
	return c
}

func registerHistogram(reg prometheus.Registerer, h *prometheus.HistogramVec) *prometheus.HistogramVec {
	if reg == nil {
		return h
	}
	if err := reg.Register(h); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.HistogramVec); ok {
				return existing
			}
		}
		panic(err)
	}
	return h
}
