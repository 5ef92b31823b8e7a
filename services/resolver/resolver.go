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
	// BatchSize is the most events applied in one store transaction
	// (default stream.DefaultBatchSize).
	BatchSize int
	// BatchWait is how long to wait for more events once the first of a
	// batch arrived (default stream.DefaultBatchWait).
	BatchWait time.Duration
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
	if c.BatchSize < 0 || c.BatchWait < 0 {
		return errors.New("resolver: BatchSize and BatchWait must be >= 0")
	}
	return nil
}

// Worker consumes extracted, deletion and re-resolution events and applies
// them.
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

	// applyMu serialises reading the stored state a change is numbered
	// from and applying it, between the consumers and the alias watcher,
	// so two re-resolutions in one process never take the same number.
	applyMu sync.Mutex
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

// Kinds are the event kinds the resolver consumes.
var Kinds = []events.Kind{events.KindExtracted, events.KindDocDeleted, events.KindReresolve}

// Run consumes until ctx is cancelled, up to BatchSize events per store
// transaction.
func (w *Worker) Run(ctx context.Context) error {
	return w.bus.RunBatch(ctx, stream.ConsumerConfig{
		Stage: w.cfg.Stage, Kinds: Kinds,
		MaxDeliver: w.cfg.MaxDeliver, Backoff: w.cfg.Backoff, Batch: w.cfg.BatchSize, BatchWait: w.cfg.BatchWait,
	}, w.HandleBatch)
}

// Handle applies one event (a batch of one).
func (w *Worker) Handle(ctx context.Context, m *stream.Message) error {
	return w.HandleBatch(ctx, []*stream.Message{m})[0]
}

// change is one event of a batch on its way to the store.
type change struct {
	i       int // index in the batch
	tenant  string
	docID   string
	version int64
	// resolution is the extraction's number (events.Extracted.Resolution),
	// which orders the events of one version in a batch.
	resolution int64
	// number is the graph store resolution the change is applied with,
	// assigned by Worker.number from the stored record.
	number   int64
	deleted  bool
	docType  string
	received time.Time
	ev       *events.Extracted // nil for a deletion
	raw      []byte
	// reresolve marks the stored extraction resolved again (a request or
	// the alias watcher), not an event's extraction.
	reresolve bool
	// reapply: the change is the applied version resolved again, so the
	// store taking it as a duplicate means a concurrent re-resolution took
	// its number.
	reapply bool
	c       store.Contributions
	// prev lists the entities the document contributed before, then those
	// it contributes now.
	prev []string
	// cands are the entities gaining enough edges for a degree jump
	// (hubCandidates); before holds their degrees before the apply;
	// gain, how many of this change's edges touch each.
	cands        []string
	before, gain map[string]int
}

// newer reports whether a supersedes b (the same document): a later
// version, a deletion at the same version, or the same version resolved
// again.
func (a *change) newer(b *change) bool {
	switch {
	case a.version != b.version:
		return a.version > b.version
	case a.deleted != b.deleted:
		return a.deleted
	default:
		return a.resolution > b.resolution
	}
}

func (a *change) same(b *change) bool {
	return a.version == b.version && a.deleted == b.deleted && a.resolution == b.resolution
}

// HandleBatch applies a batch of events, one store transaction per tenant
// (per run of events up to a catalog, which the events after it resolve
// against), then announces every applied document before returning, so
// nothing is acknowledged before its change and its announcement are
// durable. Of several versions of one document only the newest is
// applied; the older are stale. Each event gets its own result.
func (w *Worker) HandleBatch(ctx context.Context, ms []*stream.Message) []error {
	errs := make([]error, len(ms))
	var chs []*change
	newest := map[[2]string]*change{}
	var copies [][2]int // an event identical to another: it shares that one's result
	var requests []int
	for i, m := range ms {
		if m.Kind == events.KindReresolve {
			requests = append(requests, i)
			continue
		}
		ch, err := w.decode(m)
		if err != nil {
			errs[i] = err
			continue
		}
		ch.i = i
		k := [2]string{ch.tenant, ch.docID}
		if cur, ok := newest[k]; ok {
			switch {
			case cur.same(ch):
				copies = append(copies, [2]int{i, cur.i})
				continue
			case cur.newer(ch):
				errs[i] = w.superseded(ch, cur)
				continue
			default:
				errs[cur.i] = w.superseded(cur, ch)
				chs[slices.Index(chs, cur)] = ch
				newest[k] = ch
				continue
			}
		}
		newest[k] = ch
		chs = append(chs, ch)
	}
	if len(chs) > 0 {
		w.applyMu.Lock()
		w.applyChanges(ctx, chs, errs)
		w.applyMu.Unlock()
	}
	for _, c := range copies {
		errs[c[0]] = errs[c[1]]
	}
	for _, i := range requests {
		errs[i] = w.handleReresolve(ctx, ms[i])
	}
	return errs
}

// applyChanges prepares and applies chs in order, one run of changes up
// to each catalog at a time; errs is indexed by change.i.
func (w *Worker) applyChanges(ctx context.Context, chs []*change, errs []error) {
	for start := 0; start < len(chs); {
		end := start + 1
		for end < len(chs) && chs[end-1].docType != "catalog" {
			end++
		}
		w.applyRun(ctx, w.prepareRun(ctx, chs[start:end], errs), errs)
		start = end
	}
}

// prepareRun prepares a run of changes (prepare), reading their records
// and the degrees of their hub candidates once for the run rather than
// once per change; it returns those prepared.
func (w *Worker) prepareRun(ctx context.Context, chs []*change, errs []error) []*change {
	recs := w.sources(ctx, chs, errs)
	var run []*change
	cands := map[string][]string{} // by tenant
	for j, ch := range chs {
		if errs[ch.i] != nil {
			continue
		}
		if err := w.prepare(ctx, ch, recs[j]); err != nil {
			errs[ch.i] = err
			continue
		}
		run = append(run, ch)
		for _, id := range ch.cands {
			cands[ch.tenant] = appendUnique(cands[ch.tenant], id)
		}
	}
	// The degrees before the run, of every candidate of the run.
	degrees := map[string]map[string]int{}
	failed := map[string]error{}
	for tenant, ids := range cands {
		sort.Strings(ids)
		if degrees[tenant], failed[tenant] = w.degrees(ctx, tenant, ids); failed[tenant] != nil {
			w.log.Error("degrees not read", "tenant", tenant, "error", failed[tenant])
		}
	}
	prepared := run[:0]
	for _, ch := range run {
		ch.before = make(map[string]int, len(ch.cands))
		if len(ch.cands) > 0 && failed[ch.tenant] != nil {
			errs[ch.i] = failed[ch.tenant]
			continue
		}
		for _, id := range ch.cands {
			ch.before[id] = degrees[ch.tenant][id]
		}
		prepared = append(prepared, ch)
	}
	return prepared
}

// sources reads the stored records of chs' documents (nil for a document
// never applied), in one read per tenant when the store reads
// contribution indexes in bulk (store.SourceIndexes): a record then holds
// the version, the deletion and the entities, which is all prepare needs
// unless the change is at the applied version (a re-extraction, a
// redelivery), whose record is read whole. A failed read is the error of
// the changes it was for.
func (w *Worker) sources(ctx context.Context, chs []*change, errs []error) []*store.SourceRecord {
	recs := make([]*store.SourceRecord, len(chs))
	bulk, _ := w.graph.(store.SourceIndexes)
	byTenant := map[string][]string{}
	if bulk != nil {
		for _, ch := range chs {
			byTenant[ch.tenant] = append(byTenant[ch.tenant], ch.docID)
		}
	}
	indexes := map[string]map[string]store.SourceIndex{}
	for tenant, ids := range byTenant {
		idx, err := bulk.SourceIndexes(ctx, tenant, ids)
		if err != nil {
			w.log.Warn("records not read in bulk, reading them one by one", "tenant", tenant, "documents", len(ids), "error", err)
			continue
		}
		indexes[tenant] = idx
	}
	for j, ch := range chs {
		if idx, ok := indexes[ch.tenant]; ok {
			x, found := idx[ch.docID]
			if !found {
				continue // never applied
			}
			if x.Deleted || x.Version != ch.version {
				recs[j] = &store.SourceRecord{DocID: ch.docID, Version: x.Version, Deleted: x.Deleted, Entities: x.Entities}
				continue
			}
		}
		rec, err := w.source(ctx, ch.tenant, ch.docID)
		if err != nil {
			errs[ch.i] = err
			continue
		}
		recs[j] = rec
	}
	return recs
}

func (w *Worker) superseded(old, by *change) error {
	w.outcomes.WithLabelValues(kindOf(old.deleted), string(store.Stale)).Inc()
	return fmt.Errorf("%w: %s@%d is superseded by version %d in the same batch", stream.ErrStale, old.docID, old.version, by.version)
}

func kindOf(deleted bool) string {
	if deleted {
		return "delete"
	}
	return "change"
}

// decode reads one event of the batch, as stream.Typed does: decoded
// strictly, its tenant the subject's, or a permanent error.
func (w *Worker) decode(m *stream.Message) (*change, error) {
	switch m.Kind {
	case events.KindExtracted:
		ev, err := stream.DecodeTyped[events.Extracted](m)
		if err != nil {
			return nil, err
		}
		// Resolved in prepare, in batch order.
		return &change{tenant: ev.Tenant, docID: ev.DocID, version: ev.Version, resolution: ev.Resolution,
			docType: ev.DocType, received: ev.ReceivedAt, ev: ev, raw: m.Data}, nil
	case events.KindDocDeleted:
		ev, err := stream.DecodeTyped[events.DocDeleted](m)
		if err != nil {
			return nil, err
		}
		return &change{tenant: ev.Tenant, docID: ev.DocID, version: ev.Version, deleted: true, received: ev.ReceivedAt}, nil
	default:
		return nil, stream.Permanent(fmt.Errorf("resolver does not handle %s events", m.Kind))
	}
}

// prepare resolves a change given its document's record rec (nil: none)
// and notes what the checks after the apply compare against (its hub
// candidates, whose degrees prepareRun reads).
func (w *Worker) prepare(ctx context.Context, ch *change, rec *store.SourceRecord) error {
	if rec != nil {
		ch.prev = slices.Clone(rec.Entities)
	}
	if ch.deleted {
		return nil
	}
	w.number(ch, rec)
	ev := ch.ev
	if ch.reapply && !ch.reresolve {
		// A re-extraction must see the alias table in force.
		if err := w.cfg.Aliases.Refresh(); err != nil {
			w.log.Error("alias table not reloaded for a re-extraction", "error", err)
		}
	}
	c, err := w.Resolve(ctx, ev)
	if err != nil {
		return err
	}
	// Keep the extraction so the document can be resolved again (after an
	// unmerge) without re-extracting it.
	c.Resolution, c.Raw = ch.number, ch.raw
	ch.c = c
	ch.cands = w.hubCandidates(c)
	ch.gain = map[string]int{}
	for _, e := range c.Edges {
		ch.gain[e.Source]++
		if e.Target != e.Source {
			ch.gain[e.Target]++
		}
	}
	for _, e := range c.Entities {
		ch.prev = append(ch.prev, e.ID)
	}
	return nil
}

// number assigns the graph store resolution of a content change from the
// stored record rec (nil: none): the one place resolution numbers are
// made. A new version starts at 0. At the applied version, the stored
// extraction resolved again, or an extraction numbered above the applied
// one (a re-extraction), takes the next number; anything else keeps the
// applied number, which the store takes as a duplicate. Numbers are made
// under applyMu, and the store's own check (a higher number than the
// applied one applies) catches another process taking the same one.
func (w *Worker) number(ch *change, rec *store.SourceRecord) {
	ch.number, ch.reapply = 0, false
	if rec == nil || rec.Deleted || rec.Version != ch.version {
		return
	}
	if ch.reresolve || ch.ev.Resolution > extractionNumber(rec) {
		ch.number, ch.reapply = rec.Resolution+1, true
		return
	}
	ch.number = rec.Resolution
}

// extractionNumber is the extraction number of the applied extraction of
// rec (its events.Extracted.Resolution). Records written before the two
// numbers were kept apart carry the same number for both.
func extractionNumber(rec *store.SourceRecord) int64 {
	var ev events.Extracted
	if len(rec.Raw) == 0 || events.Decode(rec.Raw, &ev) != nil {
		return rec.Resolution
	}
	return ev.Resolution
}

// applyRun applies prepared changes, one ApplyBatch per tenant, and
// announces them.
func (w *Worker) applyRun(ctx context.Context, run []*change, errs []error) {
	if len(run) == 0 {
		return
	}
	var tenants []string
	byTenant := map[string][]*change{}
	for _, ch := range run {
		if _, ok := byTenant[ch.tenant]; !ok {
			tenants = append(tenants, ch.tenant)
		}
		byTenant[ch.tenant] = append(byTenant[ch.tenant], ch)
	}
	var out []stream.Outgoing
	var announced []*change
	var results []store.ApplyResult
	for _, tenant := range tenants {
		chs := byTenant[tenant]
		res := w.apply(ctx, tenant, chs, errs)
		var ok []*change
		var okRes []store.ApplyResult
		for j, ch := range chs {
			if errs[ch.i] != nil {
				continue
			}
			r := res[j]
			w.outcomes.WithLabelValues(kindOf(ch.deleted), string(r.Outcome)).Inc()
			if r.Outcome == store.Stale {
				errs[ch.i] = fmt.Errorf("%w: %s@%d is older than applied version %d", stream.ErrStale, ch.docID, ch.version, r.Previous)
				continue
			}
			if r.Outcome == store.Duplicate && ch.reapply {
				// Another process applied this version again since it was
				// read: number it again from the new state.
				errs[ch.i] = fmt.Errorf("%s@%d: resolution %d was applied concurrently; resolving again", ch.docID, ch.version, ch.number)
				continue
			}
			if r.Outcome == store.Applied {
				w.bus.ObserveLag("graph", ch.received)
				if ch.docType == "catalog" {
					w.forgetCatalog(tenant)
				}
			}
			ok = append(ok, ch)
			okRes = append(okRes, r)
		}
		if len(ok) == 0 {
			continue
		}
		w.checkJumps(ctx, ok, okRes, errs)
		st, err := w.graph.Stats(ctx, tenant)
		if err != nil {
			for _, ch := range ok {
				errs[ch.i] = fmt.Errorf("reading graph stats: %w", err)
			}
			continue
		}
		for j, ch := range ok {
			if errs[ch.i] != nil {
				continue
			}
			// Published for duplicates too: a redelivery after a failed
			// publish must still reach the clusterer; the message id
			// de-duplicates.
			id := events.GraphID(tenant, ch.docID, ch.version, ch.number)
			out = append(out, stream.Outgoing{Kind: events.KindGraphChanged, Tenant: tenant, MsgID: id,
				Event: &events.GraphChanged{Header: events.Header{Tenant: tenant}, DocID: ch.docID, Version: ch.version,
					Deleted: ch.deleted, Touched: okRes[j].Touched, Contributed: sortedUnique(ch.prev),
					Duplicate: okRes[j].Outcome == store.Duplicate, Entities: st.Entities, Edges: st.Edges, ReceivedAt: ch.received, DocType: ch.docType}})
			announced = append(announced, ch)
			results = append(results, okRes[j])
		}
	}
	for j, err := range w.bus.PublishAll(ctx, out) {
		ch, res := announced[j], results[j]
		if err != nil {
			errs[ch.i] = fmt.Errorf("announcing graph change: %w", err)
			continue
		}
		w.log.Info("source applied", "tenant", ch.tenant, "doc", ch.docID, "version", ch.version, "outcome", res.Outcome,
			"entities_added", res.EntitiesAdded, "entities_removed", res.EntitiesRemoved,
			"edges_added", res.EdgesAdded, "edges_removed", res.EdgesRemoved)
	}
}

// apply writes one tenant's changes in one ApplyBatch. When the store
// fails the whole batch, each change is tried alone, so one document the
// store cannot take does not hold back the others.
func (w *Worker) apply(ctx context.Context, tenant string, chs []*change, errs []error) []store.ApplyResult {
	changes := make([]store.Change, len(chs))
	for j, ch := range chs {
		changes[j] = store.Change{DocID: ch.docID, Version: ch.version, Delete: ch.deleted, Contributions: ch.c}
	}
	res, cerrs, err := w.graph.ApplyBatch(ctx, tenant, changes)
	if err != nil && len(chs) > 1 {
		w.log.Warn("batch apply failed, applying its documents one by one", "tenant", tenant, "documents", len(chs), "error", err)
		res = make([]store.ApplyResult, len(chs))
		for j := range chs {
			r, e, err := w.graph.ApplyBatch(ctx, tenant, changes[j:j+1])
			switch {
			case err != nil:
				errs[chs[j].i] = w.applyError(chs[j], err)
			case e[0] != nil:
				errs[chs[j].i] = w.applyError(chs[j], e[0])
			default:
				res[j] = r[0]
			}
		}
		return res
	}
	for j, ch := range chs {
		switch {
		case err != nil:
			errs[ch.i] = w.applyError(ch, err)
		case cerrs[j] != nil:
			errs[ch.i] = w.applyError(ch, cerrs[j])
		}
	}
	if res == nil {
		res = make([]store.ApplyResult, len(chs))
	}
	return res
}

func (w *Worker) applyError(ch *change, err error) error {
	if ch.deleted {
		return classify(fmt.Errorf("deleting %s@%d: %w", ch.docID, ch.version, err))
	}
	return classify(fmt.Errorf("applying %s@%d: %w", ch.docID, ch.version, err))
}

// source reads the document's stored record (nil for a document never
// applied).
func (w *Worker) source(ctx context.Context, tenant, docID string) (*store.SourceRecord, error) {
	rec, err := w.graph.Source(ctx, tenant, docID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading source %s: %w", docID, err)
	}
	return &rec, nil
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
	if len(ids) == 0 {
		return out, nil
	}
	// Counted from the adjacency index: a hub's edges are never read.
	for _, dir := range []store.Direction{store.Out, store.In} {
		n, err := w.graph.EdgeCounts(ctx, tenant, ids, dir)
		if err != nil {
			return nil, fmt.Errorf("reading the degrees of %d entities: %w", len(ids), err)
		}
		for _, id := range ids {
			out[id] += n[id]
		}
	}
	return out, nil
}

// checkJumps logs and counts the candidates whose degree grew by the
// factor: the apply stands (the store is consistent either way), but a
// person should look at the merge. Within a batch a document's own effect
// is bounded by its degree before plus its edges touching the entity, so
// other documents of the batch adding to the same entity are not counted
// against it.
func (w *Worker) checkJumps(ctx context.Context, chs []*change, res []store.ApplyResult, errs []error) {
	var ids []string
	for j, ch := range chs {
		if res[j].Outcome != store.Applied {
			continue
		}
		for id := range ch.before {
			ids = appendUnique(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	sort.Strings(ids)
	after, err := w.degrees(ctx, chs[0].tenant, ids)
	if err != nil {
		for j, ch := range chs {
			if res[j].Outcome == store.Applied && len(ch.before) > 0 {
				errs[ch.i] = err
			}
		}
		return
	}
	for j, ch := range chs {
		if res[j].Outcome != store.Applied {
			continue
		}
		cands := make([]string, 0, len(ch.before))
		for id := range ch.before {
			cands = append(cands, id)
		}
		sort.Strings(cands)
		for _, id := range cands {
			before := ch.before[id]
			a := min(after[id], before+ch.gain[id])
			// A new entity arriving with many edges is a document listing
			// things; an existing one multiplying its degree is a merge.
			if before > 0 && float64(a) >= w.cfg.DegreeJumpFactor*float64(before) {
				w.jumps.Inc()
				w.log.Warn("degree jump, possibly a false merge", "tenant", ch.tenant, "entity", id,
					"doc", ch.docID, "version", ch.version, "degree_before", before, "degree_after", a)
			}
		}
	}
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
	// add indexes an entity and one of its spellings of name rank 0 (a
	// catalog title; "" for none).
	add := func(id, typ, title string) {
		_, key := resolve.SplitID(id)
		ix.types[key] = appendUnique(ix.types[key], typ)
		if title == "" {
			return
		}
		if tk := resolve.Key(title); tk != key {
			ix.byTitle[typ+"\x00"+tk] = id
			ix.types[tk] = appendUnique(ix.types[tk], typ)
		}
	}
	// The titles are in the heads' spelling tallies: a store that lists
	// heads reads no fragment (an entity thousands of documents mention
	// costs one value; store.HeadsByType).
	for _, typ := range CatalogTypes {
		heads, err := store.HeadsByType(ctx, w.graph, tenant, typ)
		if err != nil {
			return nil, fmt.Errorf("reading %s entities: %w", typ, err)
		}
		for _, h := range heads {
			add(h.ID, h.Type, "")
			for _, v := range h.Names {
				if v.Rank == 0 && v.Name != "" {
					add(h.ID, h.Type, v.Name)
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
	return w.resolve(ctx, ev, false)
}

// resolve is Resolve; quiet neither counts nor logs refused mentions (a
// trial resolution that may not be applied).
func (w *Worker) resolve(ctx context.Context, ev *events.Extracted, quiet bool) (store.Contributions, error) {
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
		if quiet {
			return
		}
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
