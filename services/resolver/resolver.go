// Package resolver resolves extracted mentions into canonical typed entities
// and applies each document version to the graph store atomically: the
// version's contributions replace the previous version's in one transaction.
package resolver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
)

// Config configures the resolver worker.
type Config struct {
	// Stage names the consumer and dead-letter subject (default "resolver").
	Stage string
	// MaxDeliver bounds deliveries before dead-lettering (default 5).
	MaxDeliver int
	// Backoff between redeliveries (default: the runner's).
	Backoff []time.Duration
}

func (c *Config) setDefaults() {
	if c.Stage == "" {
		c.Stage = "resolver"
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.MaxDeliver < 0 {
		return errors.New("resolver: MaxDeliver must be >= 0")
	}
	return nil
}

// Worker consumes extracted and deletion events and applies them.
type Worker struct {
	cfg   Config
	bus   *stream.Bus
	graph store.GraphStore
	log   *slog.Logger

	outcomes *prometheus.CounterVec
	rejected *prometheus.CounterVec
}

// New returns a resolver Worker.
func New(cfg Config, bus *stream.Bus, graph store.GraphStore, log *slog.Logger, reg prometheus.Registerer) (*Worker, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if bus == nil || graph == nil {
		return nil, errors.New("resolver: bus and graph store are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Worker{cfg: cfg, bus: bus, graph: graph, log: log,
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_resolver_applies_total",
			Help: "Graph applies by kind (change, delete) and outcome (applied, duplicate, stale).",
		}, []string{"kind", "outcome"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_resolver_rejected_mentions_total",
			Help: "Mentions the resolver refused, by reason.",
		}, []string{"reason"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{w.outcomes, w.rejected} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering resolver metrics: %w", err)
			}
		}
	}
	return w, nil
}

// Run consumes until ctx is cancelled.
func (w *Worker) Run(ctx context.Context) error {
	return w.bus.Run(ctx, stream.ConsumerConfig{
		Stage: w.cfg.Stage, Kinds: []events.Kind{events.KindExtracted, events.KindDocDeleted},
		MaxDeliver: w.cfg.MaxDeliver, Backoff: w.cfg.Backoff,
	}, w.Handle)
}

// Handle applies one event.
func (w *Worker) Handle(ctx context.Context, m *stream.Message) error {
	switch m.Kind {
	case events.KindExtracted:
		var ev events.Extracted
		if err := events.Decode(m.Data, &ev); err != nil {
			return err
		}
		if ev.Tenant != m.Tenant {
			return stream.Permanent(fmt.Errorf("event tenant %q does not match subject tenant %q", ev.Tenant, m.Tenant))
		}
		c, err := w.Resolve(&ev)
		if err != nil {
			return stream.Permanent(err)
		}
		res, err := w.graph.Apply(ctx, ev.Tenant, ev.DocID, ev.Version, c)
		if err != nil {
			return classify(fmt.Errorf("applying %s@%d: %w", ev.DocID, ev.Version, err))
		}
		return w.after(ctx, "change", ev.Tenant, ev.DocID, ev.Version, false, ev.ReceivedAt, res)
	case events.KindDocDeleted:
		var ev events.DocDeleted
		if err := events.Decode(m.Data, &ev); err != nil {
			return err
		}
		if ev.Tenant != m.Tenant {
			return stream.Permanent(fmt.Errorf("event tenant %q does not match subject tenant %q", ev.Tenant, m.Tenant))
		}
		res, err := w.graph.Delete(ctx, ev.Tenant, ev.DocID, ev.Version)
		if err != nil {
			return classify(fmt.Errorf("deleting %s@%d: %w", ev.DocID, ev.Version, err))
		}
		return w.after(ctx, "delete", ev.Tenant, ev.DocID, ev.Version, true, ev.ReceivedAt, res)
	default:
		return stream.Permanent(fmt.Errorf("resolver does not handle %s events", m.Kind))
	}
}

func (w *Worker) after(ctx context.Context, kind, tenant, docID string, version int64, deleted bool, received time.Time, res store.ApplyResult) error {
	w.outcomes.WithLabelValues(kind, string(res.Outcome)).Inc()
	if res.Outcome == store.Stale {
		return fmt.Errorf("%w: %s@%d is older than applied version %d", stream.ErrStale, docID, version, res.Previous)
	}
	if res.Outcome == store.Applied {
		w.bus.ObserveLag("graph", received)
	}
	st, err := w.graph.Stats(ctx, tenant)
	if err != nil {
		return fmt.Errorf("reading graph stats: %w", err)
	}
	// Published for duplicates too: a redelivery after a failed publish must
	// still reach the clusterer; the message id de-duplicates.
	_, err = w.bus.Publish(ctx, events.KindGraphChanged, tenant, events.MsgID(tenant, docID, version, "graph"),
		&events.GraphChanged{Header: events.Header{Tenant: tenant}, DocID: docID, Version: version, Deleted: deleted,
			Touched: res.Touched, Entities: st.Entities, Edges: st.Edges, ReceivedAt: received})
	if err != nil {
		return fmt.Errorf("announcing graph change: %w", err)
	}
	w.log.Info("source applied", "tenant", tenant, "doc", docID, "version", version, "outcome", res.Outcome,
		"entities_added", res.EntitiesAdded, "entities_removed", res.EntitiesRemoved,
		"edges_added", res.EdgesAdded, "edges_removed", res.EdgesRemoved)
	return nil
}

// Resolve maps an extraction to canonical contributions: typed canonical ids
// by normalisation key, duplicates merged, relationships whose endpoints are
// untyped refused with a counted reason instead of guessed.
func (w *Worker) Resolve(ev *events.Extracted) (store.Contributions, error) {
	c := store.Contributions{Title: ev.Title, DocType: ev.DocType, TextUnits: ev.TextUnits, ReceivedAt: ev.ReceivedAt}
	ents := map[string]*store.EntityContribution{}
	entity := func(typ, name, key string, authority int, desc, unit string) (string, bool) {
		t := resolve.Type(typ)
		name = strings.TrimSpace(name)
		if key == "" {
			key = name
		}
		if t == "" || name == "" || resolve.Key(key) == "" {
			return "", false
		}
		id := resolve.ID(t, key)
		e, ok := ents[id]
		if !ok {
			e = &store.EntityContribution{ID: id, Type: t, Name: name, NameRank: rankOf(authority), Description: desc}
			ents[id] = e
		} else if r := rankOf(authority); r < e.NameRank {
			e.Name, e.NameRank = name, r
		}
		if e.Description == "" {
			e.Description = desc
		}
		if unit != "" && !contains(e.TextUnits, unit) {
			e.TextUnits = append(e.TextUnits, unit)
		}
		return id, true
	}
	for _, e := range ev.Entities {
		if _, ok := entity(e.Type, e.Name, e.Key, e.Authority, e.Description, e.TextUnit); !ok {
			w.rejected.WithLabelValues("untyped_entity").Inc()
		}
	}
	edges := map[string]*store.EdgeContribution{}
	for _, r := range ev.Relationships {
		rel := resolve.Type(r.Relation)
		src, ok1 := entity(r.SourceType, r.Source, "", events.AuthorityMention, "", r.TextUnit)
		dst, ok2 := entity(r.TargetType, r.Target, "", events.AuthorityMention, "", r.TextUnit)
		if !ok1 || !ok2 || rel == "" {
			w.rejected.WithLabelValues("untyped_relationship").Inc()
			continue
		}
		weight := r.Strength
		if weight <= 0 {
			weight = 1
		}
		id := store.EdgeID(src, rel, dst)
		e, ok := edges[id]
		if !ok {
			e = &store.EdgeContribution{Source: src, Relation: rel, Target: dst, Description: r.Description, Weight: weight}
			edges[id] = e
		} else if weight > e.Weight {
			e.Weight = weight
		}
		if e.Description == "" {
			e.Description = r.Description
		}
		if r.TextUnit != "" && !contains(e.TextUnits, r.TextUnit) {
			e.TextUnits = append(e.TextUnits, r.TextUnit)
		}
	}
	for _, e := range ents {
		sort.Strings(e.TextUnits)
		c.Entities = append(c.Entities, *e)
	}
	for _, e := range edges {
		sort.Strings(e.TextUnits)
		c.Edges = append(c.Edges, *e)
	}
	sort.Slice(c.Entities, func(i, j int) bool { return c.Entities[i].ID < c.Entities[j].ID })
	sort.Slice(c.Edges, func(i, j int) bool { return c.Edges[i].ID() < c.Edges[j].ID() })
	return c, nil
}

// classify marks store errors no redelivery can fix (malformed
// contributions) as permanent, so they are dead-lettered at once; anything
// else (store down, conflicts) is retried with backoff.
func classify(err error) error {
	if errors.Is(err, store.ErrInvalid) {
		return stream.Permanent(err)
	}
	return err
}

// rankOf converts an event's display-name authority (higher wins) into the
// store's name rank (lower wins).
func rankOf(authority int) int {
	switch authority {
	case events.AuthorityCatalogTitle:
		return 0
	case events.AuthorityCatalogName:
		return 1
	default:
		return 2
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
