// Package metrics registers the extractor's Prometheus collectors. The
// worker and the extractors may register on one registry, so registration
// reuses a collector already there.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Dropped is the counter of extracted relationships dropped because an
// endpoint is not among the extracted entities, by extractor.
func Dropped(reg prometheus.Registerer) *prometheus.CounterVec {
	return Counter(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kgstream_extract_dropped_relationships_total",
		Help: "Extracted relationships dropped because an endpoint is not among the extracted entities, by extractor.",
	}, []string{"extractor"}))
}

// Counter registers c on reg (nil: none) and returns it, or the counter
// of the same description already registered.
func Counter(reg prometheus.Registerer, c *prometheus.CounterVec) *prometheus.CounterVec {
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

// Histogram registers h on reg (nil: none) and returns it, or the
// histogram of the same description already registered.
func Histogram(reg prometheus.Registerer, h *prometheus.HistogramVec) *prometheus.HistogramVec {
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
		panic(err) // a programming error, as with MustRegister
	}
	return h
}
