// Package resolver resolves extracted mentions into canonical typed entities
// and applies each document version to the graph store atomically: the
// version's contributions replace the previous version's in one transaction.
package resolver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
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
	// Aliases, when set, maps reviewed mentions to canonical entities.
	Aliases *resolve.AliasWatcher
	// DegreeJumpFactor flags an entity whose degree grows by this factor in
	// one apply (usually a false merge); 0 means the default 10, negative
	// disables the check.
	DegreeJumpFactor float64
	// DegreeJumpMinEdges: only entities gaining at least this many edges in
	// one apply are checked (default 5), which keeps the check off the hot
	// path of ordinary documents.
	DegreeJumpMinEdges int
	// ExactNames turns normalisation off: names key by their lower-cased
	// spelling, so "cert-manager" and "Cert Manager" stay two entities. It
	// exists to measure what resolution buys, not for production.
	ExactNames bool
	// CatalogTTL bounds how long the catalog title index of a tenant is
	// cached (default 30s); applying a catalog refreshes it at once.
	CatalogTTL time.Duration
}

func (c *Config) setDefaults() {
	if c.Stage == "" {
		c.Stage = "resolver"
	}
	if c.CatalogTTL == 0 {
		c.CatalogTTL = 30 * time.Second
	}
	if c.DegreeJumpFactor == 0 {
		c.DegreeJumpFactor = 10
	}
	if c.DegreeJumpMinEdges == 0 {
		c.DegreeJumpMinEdges = 5
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
	jumps    prometheus.Counter

	catMu   sync.Mutex
	catalog map[string]*catalogIndex // by tenant
}

// catalogIndex links mentions to catalog entities: by title key (catalog
// titles win over mentions) and, for untyped mentions, by key to the types
// that key exists under.
type catalogIndex struct {
	built   time.Time
	byTitle map[string]string   // type + "\x00" + title key -> entity id
	types   map[string][]string // key -> types
}

// CatalogTypes are the entity types a catalog import produces.
var CatalogTypes = []string{"service", "component", "system", "resource", "api", "domain", "team", "group", "user"}

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
	w := &Worker{cfg: cfg, bus: bus, graph: graph, log: log, catalog: map[string]*catalogIndex{},
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_resolver_applies_total",
			Help: "Graph applies by kind (change, delete) and outcome (applied, duplicate, stale).",
		}, []string{"kind", "outcome"}),
		jumps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgstream_resolver_degree_jumps_total",
			Help: "Entities whose degree grew by the configured factor in one apply (likely false merges).",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_resolver_rejected_mentions_total",
			Help: "Mentions the resolver refused, by reason.",
		}, []string{"reason"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{w.outcomes, w.rejected, w.jumps} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering resolver metrics: %w", err)
			}
		}
	}
	return w, nil
}

// DegreeJumps is the degree-jump counter (for tests and dashboards).
func (w *Worker) DegreeJumps() prometheus.Counter { return w.jumps }

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
		if ev.Resolution > 0 {
			// A re-resolution must see the alias table that asked for it.
			if err := w.cfg.Aliases.Refresh(); err != nil {
				w.log.Error("alias table not reloaded for a re-resolution", "error", err)
			}
		}
		c, err := w.Resolve(ctx, &ev)
		if err != nil {
			return err
		}
		// Keep the extraction so the document can be resolved again (after an
		// unmerge) without re-extracting it.
		c.Resolution, c.Raw = ev.Resolution, m.Data
		before, err := w.degrees(ctx, ev.Tenant, w.hubCandidates(c))
		if err != nil {
			return err
		}
		prev, err := w.previousEntities(ctx, ev.Tenant, ev.DocID)
		if err != nil {
			return err
		}
		res, err := w.graph.Apply(ctx, ev.Tenant, ev.DocID, ev.Version, c)
		if err != nil {
			return classify(fmt.Errorf("applying %s@%d: %w", ev.DocID, ev.Version, err))
		}
		if res.Outcome == store.Applied && len(before) > 0 {
			if err := w.checkJumps(ctx, ev.Tenant, ev.DocID, ev.Version, before); err != nil {
				return err
			}
		}
		if ev.DocType == "catalog" && res.Outcome == store.Applied {
			w.forgetCatalog(ev.Tenant)
		}
		for _, e := range c.Entities {
			prev = append(prev, e.ID)
		}
		return w.after(ctx, "change", ev.Tenant, ev.DocID, ev.Version, ev.Resolution, false, ev.ReceivedAt, res, prev)
	case events.KindDocDeleted:
		var ev events.DocDeleted
		if err := events.Decode(m.Data, &ev); err != nil {
			return err
		}
		if ev.Tenant != m.Tenant {
			return stream.Permanent(fmt.Errorf("event tenant %q does not match subject tenant %q", ev.Tenant, m.Tenant))
		}
		prev, err := w.previousEntities(ctx, ev.Tenant, ev.DocID)
		if err != nil {
			return err
		}
		res, err := w.graph.Delete(ctx, ev.Tenant, ev.DocID, ev.Version)
		if err != nil {
			return classify(fmt.Errorf("deleting %s@%d: %w", ev.DocID, ev.Version, err))
		}
		return w.after(ctx, "delete", ev.Tenant, ev.DocID, ev.Version, 0, true, ev.ReceivedAt, res, prev)
	default:
		return stream.Permanent(fmt.Errorf("resolver does not handle %s events", m.Kind))
	}
}

// previousEntities lists the entities the document contributes before this
// change (none for a document never applied).
func (w *Worker) previousEntities(ctx context.Context, tenant, docID string) ([]string, error) {
	rec, err := w.graph.Source(ctx, tenant, docID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading source %s: %w", docID, err)
	}
	return slices.Clone(rec.Entities), nil
}

func (w *Worker) after(ctx context.Context, kind, tenant, docID string, version, resolution int64, deleted bool, received time.Time, res store.ApplyResult, contributed []string) error {
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
	id := events.MsgID(tenant, docID, version, "graph")
	if resolution > 0 {
		id = events.MsgID(tenant, docID, version, fmt.Sprintf("graph-r%d", resolution))
	}
	_, err = w.bus.Publish(ctx, events.KindGraphChanged, tenant, id,
		&events.GraphChanged{Header: events.Header{Tenant: tenant}, DocID: docID, Version: version, Deleted: deleted,
			Touched: res.Touched, Contributed: sortedUnique(contributed), Entities: st.Entities, Edges: st.Edges, ReceivedAt: received})
	if err != nil {
		return fmt.Errorf("announcing graph change: %w", err)
	}
	w.log.Info("source applied", "tenant", tenant, "doc", docID, "version", version, "outcome", res.Outcome,
		"entities_added", res.EntitiesAdded, "entities_removed", res.EntitiesRemoved,
		"edges_added", res.EdgesAdded, "edges_removed", res.EdgesRemoved)
	return nil
}

// hubCandidates are the entities gaining enough edges in c for a degree
// jump to be possible.
func (w *Worker) hubCandidates(c store.Contributions) []string {
	if w.cfg.DegreeJumpFactor < 0 {
		return nil
	}
	n := map[string]int{}
	for _, e := range c.Edges {
		n[e.Source]++
		if e.Target != e.Source {
			n[e.Target]++
		}
	}
	var out []string
	for id, k := range n {
		if k >= w.cfg.DegreeJumpMinEdges {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (w *Worker) degrees(ctx context.Context, tenant string, ids []string) (map[string]int, error) {
	out := make(map[string]int, len(ids))
	for _, id := range ids {
		d := 0
		for _, dir := range []store.Direction{store.Out, store.In} {
			es, err := w.graph.Edges(ctx, tenant, id, dir)
			if err != nil {
				return nil, fmt.Errorf("reading degree of %s: %w", id, err)
			}
			d += len(es)
		}
		out[id] = d
	}
	return out, nil
}

// checkJumps logs and counts the candidates whose degree grew by the
// factor: the apply stands (the store is consistent either way), but a
// person should look at the merge.
func (w *Worker) checkJumps(ctx context.Context, tenant, docID string, version int64, before map[string]int) error {
	ids := make([]string, 0, len(before))
	for id := range before {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	after, err := w.degrees(ctx, tenant, ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		// A new entity arriving with many edges is a document listing
		// things; an existing one multiplying its degree is a merge.
		if before[id] > 0 && float64(after[id]) >= w.cfg.DegreeJumpFactor*float64(before[id]) {
			w.jumps.Inc()
			w.log.Warn("degree jump, possibly a false merge", "tenant", tenant, "entity", id,
				"doc", docID, "version", version, "degree_before", before[id], "degree_after", after[id])
		}
	}
	return nil
}

func (w *Worker) forgetCatalog(tenant string) {
	w.catMu.Lock()
	delete(w.catalog, tenant)
	w.catMu.Unlock()
}

// catalogFor returns the tenant's catalog index, rebuilding it from the
// graph store when it is older than CatalogTTL.
func (w *Worker) catalogFor(ctx context.Context, tenant string) (*catalogIndex, error) {
	w.catMu.Lock()
	ix := w.catalog[tenant]
	w.catMu.Unlock()
	if ix != nil && time.Since(ix.built) < w.cfg.CatalogTTL {
		return ix, nil
	}
	ix = &catalogIndex{built: time.Now(), byTitle: map[string]string{}, types: map[string][]string{}}
	for _, typ := range CatalogTypes {
		ents, err := w.graph.EntitiesByType(ctx, tenant, typ)
		if err != nil {
			return nil, fmt.Errorf("reading %s entities: %w", typ, err)
		}
		for _, e := range ents {
			_, key := resolve.SplitID(e.ID)
			ix.types[key] = appendUnique(ix.types[key], e.Type)
			for _, f := range e.Sources {
				if f.NameRank == 0 && f.Name != "" {
					tk := resolve.Key(f.Name)
					if tk != key {
						ix.byTitle[e.Type+"\x00"+tk] = e.ID
						ix.types[tk] = appendUnique(ix.types[tk], e.Type)
					}
				}
			}
		}
	}
	w.catMu.Lock()
	w.catalog[tenant] = ix
	w.catMu.Unlock()
	return ix, nil
}

// Reasons a mention is refused.
const (
	reasonUntyped   = "untyped"
	reasonAmbiguous = "ambiguous"
	reasonEmpty     = "empty_name"
)

// Resolve maps an extraction to canonical contributions: typed canonical ids
// by normalisation key, reviewed aliases applied, mentions of a catalog
// entity's title linked to it, duplicates merged. An untyped mention is
// typed only when exactly one type fits (from this extraction or the
// catalog); otherwise it is refused with a counted, logged reason instead
// of guessed, and so are the relationships that need it.
func (w *Worker) Resolve(ctx context.Context, ev *events.Extracted) (store.Contributions, error) {
	c := store.Contributions{Title: ev.Title, DocType: ev.DocType, TextUnits: ev.TextUnits, ReceivedAt: ev.ReceivedAt}
	var cat *catalogIndex
	if ev.DocType != "catalog" {
		var err error
		if cat, err = w.catalogFor(ctx, ev.Tenant); err != nil {
			return c, err
		}
	}
	aliases := w.cfg.Aliases.Current()
	// canonical applies the reviewed table (splits, aliases), then catalog
	// titles.
	canonical := func(typ, name, key string) string {
		if ck, ok := aliases.CanonicalKey(ev.Tenant, typ, name, key); ok {
			return ck
		}
		if cat != nil {
			if id, ok := cat.byTitle[typ+"\x00"+key]; ok {
				_, k := resolve.SplitID(id)
				return k
			}
		}
		return key
	}
	// Types seen in this extraction per key, for untyped mentions.
	local := map[string][]string{}
	for _, e := range ev.Entities {
		if t := resolve.Type(e.Type); t != "" {
			k := w.key(coalesce(e.Key, e.Name))
			local[k] = appendUnique(local[k], t)
		}
	}
	for _, r := range ev.Relationships {
		if t := resolve.Type(r.SourceType); t != "" {
			local[w.key(r.Source)] = appendUnique(local[w.key(r.Source)], t)
		}
		if t := resolve.Type(r.TargetType); t != "" {
			local[w.key(r.Target)] = appendUnique(local[w.key(r.Target)], t)
		}
	}
	refuse := func(reason, name string, candidates []string) {
		w.rejected.WithLabelValues(reason).Inc()
		w.log.Info("mention refused", "tenant", ev.Tenant, "doc", ev.DocID, "version", ev.Version,
			"mention", name, "reason", reason, "candidates", candidates)
	}
	ents := map[string]*store.EntityContribution{}
	add := func(id, t, name string, authority int, desc, unit string) string {
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
		if unit != "" && !slices.Contains(e.TextUnits, unit) {
			e.TextUnits = append(e.TextUnits, unit)
		}
		return id
	}
	entity := func(typ, name, key string, authority int, desc, unit string) (string, bool) {
		t := resolve.Type(typ)
		name = strings.TrimSpace(name)
		k := w.key(coalesce(key, name))
		if name == "" || k == "" {
			refuse(reasonEmpty, name, nil)
			return "", false
		}
		if t == "" {
			cands := local[k]
			if len(cands) == 0 && cat != nil {
				cands = cat.types[k]
			}
			switch len(cands) {
			case 1:
				t = cands[0]
			case 0:
				refuse(reasonUntyped, name, nil)
				return "", false
			default:
				refuse(reasonAmbiguous, name, cands)
				return "", false
			}
		}
		id := t + ":" + canonical(t, name, k)
		return add(id, t, name, authority, desc, unit), true
	}
	for _, e := range ev.Entities {
		entity(e.Type, e.Name, e.Key, e.Authority, e.Description, e.TextUnit)
	}
	edges := map[string]*store.EdgeContribution{}
	for _, r := range ev.Relationships {
		rel := resolve.Type(r.Relation)
		src, ok1 := entity(r.SourceType, r.Source, "", events.AuthorityMention, "", r.TextUnit)
		dst, ok2 := entity(r.TargetType, r.Target, "", events.AuthorityMention, "", r.TextUnit)
		if !ok1 || !ok2 || rel == "" {
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
		if r.TextUnit != "" && !slices.Contains(e.TextUnits, r.TextUnit) {
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

// key is the normalisation key of a name (or its exact lower-cased
// spelling with ExactNames).
func (w *Worker) key(name string) string {
	if w.cfg.ExactNames {
		return strings.ToLower(strings.TrimSpace(name))
	}
	return resolve.Key(name)
}

func sortedUnique(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

func coalesce(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func appendUnique(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
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
