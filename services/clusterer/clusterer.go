// Package clusterer keeps a tenant's community hierarchy current: it
// debounces graph changes, re-clusters the whole tenant graph (every
// connected component, nothing dropped), compares communities with the
// previous run by member set and announces only the changed and removed ones.
package clusterer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
)

// WeightedEdge is one undirected edge handed to a Partitioner.
type WeightedEdge struct {
	Source, Target string
	Weight         float64
}

// Row is one node's assignment at one level of a hierarchical clustering.
// Parent is the cluster at Level-1 this cluster refines (-1 at level 0).
type Row struct {
	Node    string
	Cluster int
	Level   int
	Parent  int
}

// Partitioner clusters an undirected weighted graph hierarchically. The
// clusterer passes one edge per entity pair, oriented and sorted by entity
// title (see weighted). Cluster ids are unique across levels.
type Partitioner func(ctx context.Context, edges []WeightedEdge) ([]Row, error)

// Components is a Partitioner that puts each connected component in one
// level-0 cluster. It is the fallback when no better partitioner is given.
func Components(_ context.Context, edges []WeightedEdge) ([]Row, error) {
	parent := map[string]string{}
	find := func(x string) string {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	add := func(x string) {
		if _, ok := parent[x]; !ok {
			parent[x] = x
		}
	}
	for _, e := range edges {
		add(e.Source)
		add(e.Target)
		a, b := find(e.Source), find(e.Target)
		if a != b {
			parent[a] = b
		}
	}
	nodes := make([]string, 0, len(parent))
	for n := range parent {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	ids := map[string]int{}
	rows := make([]Row, 0, len(nodes))
	for _, n := range nodes {
		r := find(n)
		id, ok := ids[r]
		if !ok {
			id = len(ids)
			ids[r] = id
		}
		rows = append(rows, Row{Node: n, Cluster: id, Level: 0, Parent: -1})
	}
	return rows, nil
}

// Config configures the clusterer.
type Config struct {
	// Stage names the consumer (default "clusterer").
	Stage string
	// Quiet is how long the graph must be quiet before re-clustering (default 2s).
	Quiet time.Duration
	// MaxDelay bounds how long a change may wait while changes keep coming (default 30s).
	MaxDelay time.Duration
	// WeightBy is "sources" (default: edge weight = number of supporting
	// sources) or "strength" (sum of the supports' extracted strengths).
	WeightBy string
	// Partitioner clusters the graph (default Components).
	Partitioner Partitioner
	// FullEvery makes every FullEvery-th re-clustering of a tenant a full
	// one, from scratch, and the runs between incremental, from the
	// previous partition (see stable.go). 0 (the default) makes every run
	// full; 1 too.
	FullEvery int
	// MaxClusterSize is the size from which an incremental run splits a
	// community further, as hierarchical Leiden does (default 10,
	// GraphRAG's): incrementally from its previous sub-communities, or
	// with the Partitioner when it had none (see stable.go).
	MaxClusterSize int
	// FullInterval, when positive, makes a tenant's run a full one once
	// its last full run is FullInterval old, and makes a tenant whose
	// partition was computed incrementally since due for one then, even
	// without graph changes (0, the default: no such schedule).
	FullInterval time.Duration
	// Tick is how often Run checks for tenants due for re-clustering
	// (default Quiet/4, at least 10ms).
	Tick time.Duration
	// Now is the clock the debounce reads (default time.Now); tests pass a
	// fake one to drive the quiet period and MaxDelay without sleeping.
	Now func() time.Time
	// LeaseTTL, when positive, makes clustering take a lease so that
	// several replicas can run: only the holder clusters, a standby takes
	// over at most LeaseTTL after the holder dies (see lease.go). 0 (the
	// default) is a single clusterer, no lease.
	LeaseTTL time.Duration
	// LeaseHolder names this worker in the lease (default host, pid and a
	// random suffix).
	LeaseHolder string
	// GiveWay, when set, makes re-clustering and provisional placement
	// wait, within its bound, while the stages it names (the extractor
	// and the resolver) have a backlog: in one process sharing its cores,
	// documents become readable first (see stream.GiveWay).
	GiveWay *stream.GiveWay
}

func (c *Config) setDefaults() {
	if c.Stage == "" {
		c.Stage = "clusterer"
	}
	if c.Quiet == 0 {
		c.Quiet = 2 * time.Second
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = 30 * time.Second
	}
	if c.WeightBy == "" {
		c.WeightBy = "sources"
	}
	if c.Partitioner == nil {
		c.Partitioner = Components
	}
	if c.MaxClusterSize == 0 {
		c.MaxClusterSize = 10
	}
	if c.Tick == 0 {
		c.Tick = max(c.Quiet/4, 10*time.Millisecond)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.LeaseHolder == "" {
		c.LeaseHolder = leaseHolder()
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Quiet < 0 || c.MaxDelay < c.Quiet {
		return errors.New("clusterer: need 0 <= Quiet <= MaxDelay")
	}
	if c.LeaseTTL < 0 {
		return errors.New("clusterer: LeaseTTL must be >= 0")
	}
	if c.Tick <= 0 {
		return errors.New("clusterer: Tick must be > 0")
	}
	if c.FullEvery < 0 || c.MaxClusterSize < 1 || c.FullInterval < 0 {
		return errors.New("clusterer: need FullEvery >= 0, FullInterval >= 0 and MaxClusterSize >= 1")
	}
	if c.WeightBy != "sources" && c.WeightBy != "strength" {
		return fmt.Errorf("clusterer: WeightBy must be sources or strength, not %q", c.WeightBy)
	}
	if c.GiveWay != nil {
		if err := c.GiveWay.Validate(); err != nil {
			return fmt.Errorf("clusterer: %w", err)
		}
	}
	return nil
}

// Stores is what the clusterer reads and writes.
type Stores interface {
	store.GraphStore
	store.CommunityStore
}

type pending struct {
	first, last time.Time
	oldest      time.Time // earliest gateway receipt folded in
	// touched are entity ids graph changes named since the last
	// re-clustering that have not yet been given a provisional community.
	touched map[string]bool
	// now makes the tenant due at once, whatever the debounce (a
	// request, or the full-run schedule); full makes its run a full one.
	now, full bool
}

// Worker is the clusterer.
type Worker struct {
	cfg Config
	bus *stream.Bus
	st  Stores
	log *slog.Logger

	mu    sync.Mutex
	dirty map[string]*pending
	// stale holds, per tenant, what the graph changes handled since its
	// last run make to read again (see graphcache.go).
	stale map[string]*stale
	kick  chan struct{}
	// handle and handleReq are Handle for graph changes and for
	// re-clustering requests: decoded and tenant-checked.
	handle, handleReq stream.Handler
	now               func() time.Time

	// commMu serialises every write of a tenant's communities (re-clustering
	// and provisional assignment) and guards computed and owed.
	commMu sync.Mutex
	// computed holds, per tenant and community id, the community as the
	// last re-clustering computed it, for communities that provisional
	// assignment has grown since: Diff compares with what reports were
	// built from, not with the provisional state.
	computed map[string]map[string]store.Community
	// owed holds, per tenant, an announcement whose publish failed after
	// its communities were stored; the next run announces it too. owedKV
	// records it durably (see owed.go).
	owed   map[string]*events.CommunitiesChanged
	owedKV jetstream.KeyValue
	// weights holds, per tenant, the pair weights of the last stored run,
	// and sinceFull the incremental runs since the last full one: an
	// incremental run frees the endpoints of the pairs whose weight changed.
	weights   map[string]map[pairKey]float64
	sinceFull map[string]int
	// lastFull is when each tenant's last full run in this process was
	// stored (Config.FullInterval).
	lastFull map[string]time.Time
	// graphs holds, per tenant, the graph its last run read, for the next
	// to patch (see graphcache.go); guarded by commMu.
	graphs map[string]*graphCache

	graphReads *prometheus.CounterVec
	runs       *prometheus.CounterVec

	duration    *prometheus.HistogramVec
	changed     *prometheus.CounterVec
	total       *prometheus.GaugeVec
	lastChanged *prometheus.GaugeVec
	coverage    *prometheus.GaugeVec
	provisional *prometheus.CounterVec

	// lease is the clustering lease while Run takes one (LeaseTTL > 0).
	lease atomic.Pointer[lease]
	// keepLeaseOnStop leaves the lease held when Run stops, as a crash
	// does (tests).
	keepLeaseOnStop bool
}

// New returns a clusterer Worker.
func New(cfg Config, bus *stream.Bus, st Stores, log *slog.Logger, reg prometheus.Registerer) (*Worker, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if bus == nil || st == nil {
		return nil, errors.New("clusterer: bus and stores are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Worker{cfg: cfg, bus: bus, st: st, log: log, dirty: map[string]*pending{}, kick: make(chan struct{}, 1), now: cfg.Now,
		computed: map[string]map[string]store.Community{}, owed: map[string]*events.CommunitiesChanged{},
		weights: map[string]map[pairKey]float64{}, sinceFull: map[string]int{}, lastFull: map[string]time.Time{},
		stale: map[string]*stale{}, graphs: map[string]*graphCache{},
		graphReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_recluster_graph_reads_total",
			Help: "How re-clusterings read the graph: whole (first run, full run, too much changed) or patched (what changed since the last run).",
		}, []string{"read"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_reclusters_total",
			Help: "Re-clusterings stored, by mode (full: from scratch; incremental: from the previous partition).",
		}, []string{"mode"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kgstream_recluster_duration_seconds", Help: "Time to re-cluster one tenant graph.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"tenant"}),
		changed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_communities_changed_total",
			Help: "Communities announced by re-clusterings, by kind (changed: new member set, refreshed: sources moved, removed).",
		}, []string{"kind"}),
		total: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgstream_communities", Help: "Communities in the current hierarchy, by tenant.",
		}, []string{"tenant"}),
		lastChanged: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgstream_communities_last_changed",
			Help: "Communities whose member set the last re-clustering changed, by tenant (compare with kgstream_communities).",
		}, []string{"tenant"}),
		coverage: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgstream_community_coverage_ratio",
			Help: "Share of live documents with at least one entity in a community (must be 1).",
		}, []string{"tenant"}),
		provisional: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_community_provisional_members_total",
			Help: "New entities given their strongest neighbour's communities between re-clusterings, by outcome (assigned, waiting: no clustered neighbour).",
		}, []string{"outcome"}),
	}
	w.handle = stream.Typed(w.handleGraph)
	w.handleReq = stream.Typed(w.handleRequest)
	if reg != nil {
		for _, c := range []prometheus.Collector{w.duration, w.changed, w.total, w.lastChanged, w.coverage, w.provisional, w.graphReads, w.runs} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering clusterer metrics: %w", err)
			}
		}
	}
	return w, nil
}

// Run consumes graph changes and re-clusters until ctx is cancelled. At
// start it re-clusters every tenant once, so changes acknowledged before a
// crash are never lost, after republishing the announcements an earlier
// process stored but did not publish (see owed.go). Between re-clusterings it gives new entities their
// strongest neighbour's communities (see Assign).
//
// With LeaseTTL set, it clusters only while it holds the clustering lease
// and stands by otherwise (see lease.go).
func (w *Worker) Run(ctx context.Context) error {
	if w.cfg.LeaseTTL > 0 {
		return w.runLeased(ctx, w.cluster)
	}
	return w.cluster(ctx)
}

// cluster is Run's work: consume graph changes and re-cluster.
func (w *Worker) cluster(ctx context.Context) error {
	// A session starts as a restarted clusterer does: what an earlier one
	// kept (before a lease was lost) may miss what another holder did
	// meanwhile, so every tenant's first run is full and reads whole.
	w.commMu.Lock()
	clear(w.graphs)
	clear(w.weights)
	clear(w.sinceFull)
	clear(w.lastFull)
	clear(w.computed)
	w.commMu.Unlock()
	tenants, err := w.st.GraphTenants(ctx)
	if err != nil {
		return fmt.Errorf("listing tenants: %w", err)
	}
	for _, t := range tenants {
		w.markDirty(t, time.Time{}, nil)
	}
	if _, err := w.PublishOwed(ctx); err != nil {
		// What could not be republished stays owed and rides on the next run.
		w.log.Warn("republishing owed announcements", "error", err)
	}
	consume := func(ctx context.Context) error {
		return w.bus.Run(ctx, stream.ConsumerConfig{Stage: w.cfg.Stage, Kinds: []events.Kind{events.KindGraphChanged}}, w.Handle)
	}
	// Requests have a stage of their own, so the graph changes' durable
	// keeps its name (a stage of several kinds has one durable per kind).
	requests := func(ctx context.Context) error {
		return w.bus.Run(ctx, stream.ConsumerConfig{Stage: w.cfg.Stage + "-requests", Kinds: []events.Kind{events.KindRecluster}}, w.Handle)
	}
	return stream.RunGroup(ctx, consume, requests, w.loop)
}

// loop re-clusters the tenants that are due, every Tick or when kicked,
// and places touched entities provisionally, until ctx is done.
func (w *Worker) loop(ctx context.Context) error {
	tick := time.NewTicker(w.cfg.Tick)
	defer tick.Stop()
	// Provisional placement runs when assignDue says: under a stream of
	// graph changes at most about twice a Tick, whatever their rate, and
	// no sooner after the last than assignSpacing times what it took.
	var (
		assigned   time.Time
		assignTook time.Duration
	)
	for {
		kicked := false
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-w.kick:
			kicked = true
		}
		assign := assignDue(time.Since(assigned), assignTook, w.cfg.Tick, kicked)
		w.scheduleFull()
		due := w.due()
		if w.cfg.GiveWay != nil && (len(due) > 0 || assign && w.anyTouched()) {
			// One wait for this round's work, re-clustering and placement.
			w.bus.GiveWay(ctx, w.cfg.Stage, *w.cfg.GiveWay)
		}
		for _, t := range due {
			if err := w.recluster(ctx, t, false, true); err != nil {
				if ctx.Err() != nil {
					continue
				}
				w.log.Error("re-clustering failed, will retry", "tenant", t, "error", err)
				w.markDirty(t, time.Time{}, nil)
			}
		}
		if !assign {
			continue
		}
		assigned = time.Now()
		for t, ids := range w.takeTouched() {
			if err := w.Assign(ctx, t, ids); err != nil && ctx.Err() == nil {
				// Not retried: the re-clustering that is due anyway places them.
				w.log.Warn("provisional community assignment failed", "tenant", t, "error", err)
			}
		}
		assignTook = time.Since(assigned)
	}
}

// scheduleFull makes due for a full run every tenant whose partition was
// computed incrementally since its last full run, once that is
// Config.FullInterval old, unless the tenant waits for a run already (a
// failed run is retried by the debounce, full by the same rule). The loop
// calls it before it lists what is due: no kick.
func (w *Worker) scheduleFull() {
	if w.cfg.FullInterval <= 0 {
		return
	}
	w.commMu.Lock()
	var due []string
	now := w.now()
	for t, n := range w.sinceFull {
		if n > 0 && now.Sub(w.lastFull[t]) >= w.cfg.FullInterval {
			due = append(due, t)
		}
	}
	w.commMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range due {
		if _, waiting := w.dirty[t]; waiting {
			continue
		}
		p := w.pendingLocked(t)
		p.now, p.full = true, true
	}
}

// assignSpacing bounds the share of a core provisional placement takes.
// Each placement reads and rewrites whole the communities its new entities
// join, at the top levels the largest of the tenant, so what one costs
// grows with the tenant, not with the entities placed. The next starts no
// sooner than assignSpacing times the last one took after it started: at
// most about a tenth of a core, however large the tenant, while entities
// wait longer for a community in a large one (the re-clustering, due
// within MaxDelay anyway, places them all).
const assignSpacing = 10

// assignDue reports whether provisional placement runs now, since after
// the last one started, which took took: at a tick once spaced by
// assignSpacing, when kicked (a graph change) also not within a Tick of
// the last, so a stream of changes runs it at most about twice a Tick.
func assignDue(since, took, tick time.Duration, kicked bool) bool {
	gap := assignSpacing * took
	if kicked {
		gap = max(gap, tick)
	}
	return since >= gap
}

// Handle records a graph change (the re-clustering happens after the
// quiet period, the provisional assignment of new entities at the next
// tick) or a re-clustering request (the tenant is due at once). A
// malformed event, or one whose tenant is not its subject's, is refused
// as permanent.
func (w *Worker) Handle(ctx context.Context, m *stream.Message) error {
	if m.Kind == events.KindRecluster {
		return w.handleReq(ctx, m)
	}
	return w.handle(ctx, m)
}

// handleRequest makes the tenant due at once, for a full run if asked.
// The request is acknowledged before the run: a process that dies before
// it loses the request, but its successor's first run of every tenant is
// a full one anyway (the pair weights an incremental run needs are kept
// in memory only).
func (w *Worker) handleRequest(_ context.Context, _ *stream.Message, ev *events.Recluster) error {
	w.log.Info("re-clustering requested", "tenant", ev.Tenant, "full", ev.Full, "request", ev.RequestID)
	w.requestRun(ev.Tenant, ev.Full)
	return nil
}

// oweFull makes tenant's next run, when due, a full one.
func (w *Worker) oweFull(tenant string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pendingLocked(tenant).full = true
}

// pendingLocked returns tenant's pending run, made dirty now if it was
// not. The caller holds mu.
func (w *Worker) pendingLocked(tenant string) *pending {
	p, ok := w.dirty[tenant]
	if !ok {
		now := w.now()
		p = &pending{first: now, last: now, touched: map[string]bool{}}
		w.dirty[tenant] = p
	}
	return p
}

// requestRun makes tenant due at once, for a full run when full.
func (w *Worker) requestRun(tenant string, full bool) {
	w.mu.Lock()
	p := w.pendingLocked(tenant)
	p.now = true
	p.full = p.full || full
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *Worker) handleGraph(_ context.Context, _ *stream.Message, ev *events.GraphChanged) error {
	w.noteChanged(ev)
	w.markDirty(ev.Tenant, ev.ReceivedAt, ev.Touched)
	return nil
}

func (w *Worker) markDirty(tenant string, received time.Time, touched []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	p := w.pendingLocked(tenant)
	p.last = now
	if !received.IsZero() && (p.oldest.IsZero() || received.Before(p.oldest)) {
		p.oldest = received
	}
	for _, id := range touched {
		p.touched[id] = true
	}
	if w.cfg.Quiet == 0 || len(touched) > 0 {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

func (w *Worker) due() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	var out []string
	for t, p := range w.dirty {
		if p.now || now.Sub(p.last) >= w.cfg.Quiet || now.Sub(p.first) >= w.cfg.MaxDelay {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

func (w *Worker) take(tenant string) (oldest time.Time, full bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.dirty[tenant]
	delete(w.dirty, tenant)
	if p == nil {
		return time.Time{}, false
	}
	return p.oldest, p.full
}

// anyTouched tells whether some tenant has entities waiting for their
// provisional placement.
func (w *Worker) anyTouched() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.dirty {
		if len(p.touched) > 0 {
			return true
		}
	}
	return false
}

// takeTouched returns and forgets the touched entity ids of every tenant
// still waiting for its re-clustering; the debounce state stays.
func (w *Worker) takeTouched() map[string][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]string{}
	for t, p := range w.dirty {
		if len(p.touched) == 0 {
			continue
		}
		ids := make([]string, 0, len(p.touched))
		for id := range p.touched {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		out[t] = ids
		p.touched = map[string]bool{}
	}
	return out
}

// Recluster clusters a tenant's graph now and announces what changed:
// from scratch (GraphRAG's partition) for the first run, every FullEvery-th
// run, and whenever the previous run's weights are unknown; otherwise
// incrementally from the previous partition (see stable.go). It reads the
// graph whole: only Run's own runs, which see every graph change, patch
// the graph the last run read (see graphcache.go).
func (w *Worker) Recluster(ctx context.Context, tenant string) error {
	return w.recluster(ctx, tenant, false, false)
}

// ReclusterFull clusters a tenant's graph from scratch now, as the first
// run does, and announces what changed.
func (w *Worker) ReclusterFull(ctx context.Context, tenant string) error {
	return w.recluster(ctx, tenant, true, false)
}

// recluster re-clusters tenant, from scratch when forceFull; patch lets an
// incremental run patch the graph the last run read rather than read it
// whole.
func (w *Worker) recluster(ctx context.Context, tenant string, forceFull, patch bool) (err error) {
	w.commMu.Lock()
	defer w.commMu.Unlock()
	oldest, asked := w.take(tenant)
	if asked {
		forceFull = true
	}
	stored := false
	defer func() {
		if err != nil && asked && !stored {
			// The requested full run is still owed: the retry the loop
			// makes after Quiet (see loop) is to be full.
			w.oweFull(tenant)
		}
	}()
	start := time.Now()
	prev, err := w.st.Communities(ctx, tenant)
	if err != nil {
		return fmt.Errorf("reading communities: %w", err)
	}
	prev = w.asComputed(tenant, prev)
	last := w.weights[tenant]
	full := forceFull || w.cfg.FullEvery == 0 || last == nil || len(prev) == 0 || w.sinceFull[tenant]+1 >= w.cfg.FullEvery ||
		w.cfg.FullInterval > 0 && w.now().Sub(w.lastFull[tenant]) >= w.cfg.FullInterval
	// A full run reads the graph whole; Run's others patch the graph the
	// last run read (see graphcache.go).
	g, err := w.graphOf(ctx, tenant, full || !patch)
	if err != nil {
		return fmt.Errorf("reading graph: %w", err)
	}
	wg := w.weighted(g)
	var rows []Row
	switch {
	case len(wg.edges) == 0:
	case full:
		rows, err = w.cfg.Partitioner(ctx, wg.edges)
	default:
		rows, err = w.stableRows(ctx, wg.edges, prev, last)
	}
	if err != nil {
		return fmt.Errorf("partitioning: %w", err)
	}
	comms, err := w.fromRows(ctx, g, wg, rows)
	if err != nil {
		return err
	}
	run, err := w.st.LastRun(ctx, tenant)
	if err != nil {
		return fmt.Errorf("reading last run: %w", err)
	}
	run++
	for i := range comms {
		comms[i].Run = run
	}
	changed, refreshed, removed := Diff(prev, comms)
	ev := &events.CommunitiesChanged{Header: events.Header{Tenant: tenant}, Run: run, Changed: changed,
		Refreshed: refreshed, Removed: removed, OldestReceivedAt: oldest}
	if o := w.owed[tenant]; o != nil {
		mergeOwed(ev, o, comms)
	}
	// The announcement is recorded before the run is stored, so a process
	// dying before it is published leaves it behind (see owed.go).
	if err := w.recordOwed(ctx, ev); err != nil {
		return err
	}
	if err := w.st.ReplaceCommunities(ctx, tenant, run, comms); err != nil {
		return fmt.Errorf("storing communities: %w", err)
	}
	stored = true
	delete(w.computed, tenant)
	w.weights[tenant] = pairWeights(wg.edges)
	if full {
		w.sinceFull[tenant] = 0
		w.lastFull[tenant] = w.now()
		w.runs.WithLabelValues("full").Inc()
	} else {
		w.runs.WithLabelValues("incremental").Inc()
		w.sinceFull[tenant]++
	}
	w.duration.WithLabelValues(tenant).Observe(time.Since(start).Seconds())
	w.total.WithLabelValues(tenant).Set(float64(len(comms)))
	w.lastChanged.WithLabelValues(tenant).Set(float64(len(changed)))
	w.coverage.WithLabelValues(tenant).Set(coverage(g, comms))
	w.changed.WithLabelValues("changed").Add(float64(len(changed)))
	w.changed.WithLabelValues("refreshed").Add(float64(len(refreshed)))
	w.changed.WithLabelValues("removed").Add(float64(len(removed)))
	// The communities are stored: announce them even if shutdown began
	// meanwhile, or the next run (diffing against them) would never do so.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := w.bus.Publish(pctx, events.KindCommunitiesChanged, tenant,
		events.CommunitiesID(tenant, run), ev); err != nil {
		// The communities are stored: a later run diffs against them and
		// would never announce these, so keep the announcement owed.
		w.owed[tenant] = ev
		return fmt.Errorf("announcing communities: %w", err)
	}
	delete(w.owed, tenant)
	if err := w.clearOwed(pctx, tenant); err != nil {
		// Published: a record left behind is only announced again.
		w.log.Warn("clearing the owed announcement failed", "tenant", tenant, "run", run, "error", err)
	}
	w.bus.ObserveLag("communities", ev.OldestReceivedAt)
	w.log.Info("re-clustered", "tenant", tenant, "run", run, "full", full, "communities", len(comms),
		"changed", len(ev.Changed), "refreshed", len(ev.Refreshed), "removed", len(ev.Removed), "took", time.Since(start))
	return nil
}

// asComputed returns prev with every provisionally grown community replaced
// by the community the last re-clustering computed. When that is unknown
// (the process restarted since), the community keeps its id but loses its
// sources, so that if the new run computes the same member set its report
// is rebuilt rather than silently kept.
func (w *Worker) asComputed(tenant string, prev []store.Community) []store.Community {
	orig := w.computed[tenant]
	out := make([]store.Community, len(prev))
	for i, c := range prev {
		switch o, ok := orig[c.ID]; {
		case ok:
			out[i] = o
		case isProvisional(c):
			c.Sources = nil
			out[i] = c
		default:
			out[i] = c
		}
	}
	return out
}

// mergeOwed folds an announcement that could not be published into ev,
// keeping only what still holds for the communities now stored.
func mergeOwed(ev, owed *events.CommunitiesChanged, comms []store.Community) {
	now := make(map[string]store.Community, len(comms))
	for _, c := range comms {
		now[c.ID] = c
	}
	listed := map[string]bool{}
	for _, l := range [][]events.CommunityChange{ev.Changed, ev.Refreshed} {
		for _, c := range l {
			listed[c.ID] = true
		}
	}
	for _, id := range ev.Removed {
		listed[id] = true
	}
	add := func(from []events.CommunityChange, to *[]events.CommunityChange) {
		for _, c := range from {
			if _, ok := now[c.ID]; ok && !listed[c.ID] {
				listed[c.ID] = true
				*to = append(*to, c)
			}
		}
	}
	add(owed.Changed, &ev.Changed)
	add(owed.Refreshed, &ev.Refreshed)
	for _, id := range owed.Removed {
		if _, ok := now[id]; !ok && !listed[id] {
			listed[id] = true
			ev.Removed = append(ev.Removed, id)
		}
	}
	sort.Strings(ev.Removed)
	if !owed.OldestReceivedAt.IsZero() && (ev.OldestReceivedAt.IsZero() || owed.OldestReceivedAt.Before(ev.OldestReceivedAt)) {
		ev.OldestReceivedAt = owed.OldestReceivedAt
	}
}

// Diff compares two hierarchies by member set. changed lists communities
// whose member set is new; refreshed lists those whose member set is
// unchanged but whose sources moved to other versions (their reports are
// no longer admissible and must be rebuilt); removed lists ids that are gone.
func Diff(prev, next []store.Community) (changed, refreshed []events.CommunityChange, removed []string) {
	old := make(map[string]store.Community, len(prev))
	for _, c := range prev {
		old[c.ID] = c
	}
	seen := map[string]bool{}
	for _, c := range next {
		seen[c.ID] = true
		ch := events.CommunityChange{ID: c.ID, Level: c.Level, MemberHash: c.MemberHash}
		o, ok := old[c.ID]
		switch {
		case !ok:
			changed = append(changed, ch)
		case !sameSources(o.Sources, c.Sources):
			refreshed = append(refreshed, ch)
		}
	}
	for _, c := range prev {
		if !seen[c.ID] {
			removed = append(removed, c.ID)
		}
	}
	sort.Strings(removed)
	return changed, refreshed, removed
}

func sameSources(a, b []provenance.SourceRef) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].DocID != b[i].DocID || a[i].Version != b[i].Version {
			return false
		}
	}
	return true
}

// MemberHash is the hash of a sorted member set (store.MemberHash).
func MemberHash(members []string) string { return store.MemberHash(members) }

// CommunityID is stable for a member set at a level: a community whose
// members do not change keeps its id across runs.
func CommunityID(level int, memberHash string) string {
	return fmt.Sprintf("c%d-%s", level, memberHash[:12])
}

// weigher accumulates the undirected weight between two entities from the
// supports of every edge between them, in either direction and of any
// relation: by the number of distinct supporting sources (GraphRAG's
// weight when each source states a relationship once), or by the sum of
// the supports' extracted strengths.
type weigher struct {
	byStrength bool
	// docs are the supports' documents and strengths, as added.
	docs []docWeight
}

type docWeight struct {
	doc string
	w   float64
}

func (w *weigher) add(rs []ref) {
	for _, r := range rs {
		v := r.weight
		if v <= 0 {
			v = 1
		}
		w.docs = append(w.docs, docWeight{r.doc, v})
	}
}

// addEdge is add for a stored edge's supports.
func (w *weigher) addEdge(e store.Edge) {
	for _, s := range e.Supports {
		v := s.Weight
		if v <= 0 {
			v = 1
		}
		w.docs = append(w.docs, docWeight{s.DocID, v})
	}
}

// weight is the number of distinct documents, or the sum of the strengths
// summed per document in the order added and then over the documents in
// doc order, so the weight, and hence the partition, does not depend on
// the order of the pair's edges beyond that.
func (w *weigher) weight() float64 {
	if len(w.docs) > 1 {
		// Stable: a document's strengths keep the order they came in.
		slices.SortStableFunc(w.docs, func(a, b docWeight) int { return strings.Compare(a.doc, b.doc) })
	}
	n, t, cur := 0, 0.0, 0.0
	for i, d := range w.docs {
		if i > 0 && d.doc != w.docs[i-1].doc {
			t += cur
			cur = 0
		}
		if i == 0 || d.doc != w.docs[i-1].doc {
			n++
		}
		cur += d.w
	}
	t += cur
	if !w.byStrength {
		return float64(n)
	}
	return t
}

// titleRanks returns the rank of each of ids (by index) in GraphRAG's
// node order: by title (name(id), or the id when it has none), ties
// broken by id. ids are distinct, so the ranks are too.
func titleRanks(ids []string, name func(string) string) []int {
	type key struct {
		title, id string
		i         int
	}
	keys := make([]key, len(ids))
	for i, id := range ids {
		t := name(id)
		if t == "" {
			t = id
		}
		keys[i] = key{t, id, i}
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(strings.Compare(a.title, b.title), strings.Compare(a.id, b.id)) })
	out := make([]int, len(keys))
	for r, k := range keys {
		out[k.i] = r
	}
	return out
}

// weightedGraph is a tenant graph as the partitioner sees it: one
// undirected weighted edge per entity pair, in GraphRAG's order, plus what
// community sources are computed from, by node number.
type weightedGraph struct {
	edges []WeightedEdge
	// node numbers every entity and every edge end.
	node map[string]int32
	// refs are the distinct (document, version) pairs supporting an entity
	// or an edge, sorted (compareRefs): a ref's number is its place here.
	refs []provenance.SourceRef
	// entRefs are the refs of each node's fragments, edgeRefs those of
	// each stored edge's supports, ends each stored edge's two nodes, and
	// incident each node's stored edges (a self loop once).
	entRefs, edgeRefs [][]int32
	ends              [][2]int32
	incident          [][]int32
}

// weighted turns a snapshot into its weighted pair graph. The pairs are
// oriented and sorted the way Microsoft GraphRAG feeds them to
// hierarchical Leiden: each pair as (min, max) and the list sorted, both
// by entity title (our display name), ties between same-named entities
// broken by id. Leiden's node numbering follows the edge order, so this is
// what makes our communities GraphRAG's on the same graph. The nodes are
// ranked by that key once, and the pairs sorted by rank.
func (w *Worker) weighted(g cgraph) weightedGraph {
	wg := weightedGraph{node: make(map[string]int32, len(g.nodes))}
	nodeOf := func(id string) int32 {
		n, ok := wg.node[id]
		if !ok {
			n = int32(len(wg.node))
			wg.node[id] = n
		}
		return n
	}
	// Refs numbered as met, renumbered in sorted order below.
	refNum := map[provenance.SourceRef]int32{}
	refOf := func(doc string, version int64) int32 {
		r := provenance.SourceRef{DocID: doc, Version: version}
		n, ok := refNum[r]
		if !ok {
			n = int32(len(refNum))
			refNum[r] = n
		}
		return n
	}
	names := make(map[string]string, len(g.nodes))
	// Entities are numbered first: each number is below len(g.nodes).
	wg.entRefs = make([][]int32, len(g.nodes))
	for _, e := range g.nodes {
		n := nodeOf(e.id)
		names[e.id] = e.name
		rs := make([]int32, len(e.refs))
		for i, f := range e.refs {
			rs[i] = refOf(f.doc, f.version)
		}
		wg.entRefs[n] = rs
	}
	// Undirected weights: one edge per unordered pair of nodes.
	type pair struct{ a, b int32 }
	pairs := map[pair]int32{} // pair -> its index in order and weighers
	var order []pair          // first-seen order, for a deterministic edge list
	var weighers []weigher
	wg.edgeRefs = make([][]int32, len(g.links))
	wg.ends = make([][2]int32, len(g.links))
	for i, e := range g.links {
		a, b := nodeOf(e.source), nodeOf(e.target)
		wg.ends[i] = [2]int32{a, b}
		rs := make([]int32, len(e.refs))
		for j, s := range e.refs {
			rs[j] = refOf(s.doc, s.version)
		}
		wg.edgeRefs[i] = rs
		if b < a {
			a, b = b, a
		}
		p := pair{a, b}
		k, ok := pairs[p]
		if !ok {
			k = int32(len(order))
			pairs[p] = k
			order = append(order, p)
			weighers = append(weighers, weigher{byStrength: w.cfg.WeightBy == "strength"})
		}
		weighers[k].add(e.refs)
	}
	// Edge ends that are no stored entity have no refs of their own.
	wg.entRefs = append(wg.entRefs, make([][]int32, len(wg.node)-len(wg.entRefs))...)
	wg.incident = make([][]int32, len(wg.node))
	for i, ab := range wg.ends {
		wg.incident[ab[0]] = append(wg.incident[ab[0]], int32(i))
		if ab[1] != ab[0] {
			wg.incident[ab[1]] = append(wg.incident[ab[1]], int32(i))
		}
	}
	// Sorted refs, and each number moved to its ref's place among them.
	wg.refs = make([]provenance.SourceRef, len(refNum))
	for r, n := range refNum {
		wg.refs[n] = r
	}
	sorted := make([]int32, len(wg.refs))
	for i := range sorted {
		sorted[i] = int32(i)
	}
	slices.SortFunc(sorted, func(x, y int32) int { return compareRefs(wg.refs[x], wg.refs[y]) })
	place := make([]int32, len(sorted))
	refs := make([]provenance.SourceRef, len(sorted))
	for i, n := range sorted {
		place[n] = int32(i)
		refs[i] = wg.refs[n]
	}
	wg.refs = refs
	for _, lists := range [][][]int32{wg.entRefs, wg.edgeRefs} {
		for _, rs := range lists {
			for i, n := range rs {
				rs[i] = place[n]
			}
		}
	}
	// The pair graph in GraphRAG's order: nodes ranked by title once.
	ids := make([]string, len(wg.node))
	for id, n := range wg.node {
		ids[n] = id
	}
	rank := titleRanks(ids, func(id string) string { return names[id] })
	// Each pair sorted by its ranks (a < b) as one key: ranks are below
	// 2^32, and pairs are distinct, so keys are too.
	type ranked struct {
		key  uint64
		i    int32
		swap bool // the pair's second node ranks first
	}
	rs := make([]ranked, len(order))
	for i, p := range order {
		a, b := rank[p.a], rank[p.b]
		r := ranked{i: int32(i), swap: b < a}
		if r.swap {
			a, b = b, a
		}
		r.key = uint64(a)<<32 | uint64(b)
		rs[i] = r
	}
	slices.SortFunc(rs, func(x, y ranked) int { return cmp.Compare(x.key, y.key) })
	wg.edges = make([]WeightedEdge, len(rs))
	for i, r := range rs {
		p := order[r.i]
		src, dst := ids[p.a], ids[p.b]
		if r.swap {
			src, dst = dst, src
		}
		wg.edges[i] = WeightedEdge{Source: src, Target: dst, Weight: weighers[r.i].weight()}
	}
	return wg
}

// sourcesOf is every (doc, version) that supports a member or an edge
// between two members: what a report on this community would be built
// from, sorted. seen and in are scratch marks, one per ref and per node,
// that sourcesOf leaves as it found them.
func (wg *weightedGraph) sourcesOf(members []string, seen, in []bool) []provenance.SourceRef {
	nodes := make([]int32, 0, len(members))
	for _, m := range members {
		if n, ok := wg.node[m]; ok {
			nodes = append(nodes, n)
			in[n] = true
		}
	}
	var got []int32
	mark := func(rs []int32) {
		for _, r := range rs {
			if !seen[r] {
				seen[r] = true
				got = append(got, r)
			}
		}
	}
	for _, n := range nodes {
		mark(wg.entRefs[n])
		for _, e := range wg.incident[n] {
			if ab := wg.ends[e]; in[ab[0]] && in[ab[1]] {
				mark(wg.edgeRefs[e])
			}
		}
	}
	for _, n := range nodes {
		in[n] = false
	}
	slices.Sort(got)
	out := make([]provenance.SourceRef, len(got))
	for i, r := range got {
		out[i] = wg.refs[r]
		seen[r] = false
	}
	return out
}

// fromRows turns a partition into communities: ids from member sets,
// parents and children from the rows, sources from the graph.
func (w *Worker) fromRows(ctx context.Context, g cgraph, wg weightedGraph, rows []Row) ([]store.Community, error) {
	seen, in := make([]bool, len(wg.refs)), make([]bool, len(wg.node))
	// Entities without an edge still belong somewhere: each is its own
	// level-0 community, so every document stays covered.
	clustered := map[string]bool{}
	maxID := -1
	for _, r := range rows {
		clustered[r.Node] = true
		maxID = max(maxID, r.Cluster)
	}
	for _, e := range g.nodes {
		if !clustered[e.id] {
			maxID++
			rows = append(rows, Row{Node: e.id, Cluster: maxID, Level: 0, Parent: -1})
		}
	}
	type key struct{ level, cluster int }
	members := map[key][]string{}
	parentOf := map[key]int{}
	for _, r := range rows {
		k := key{r.Level, r.Cluster}
		members[k] = append(members[k], r.Node)
		parentOf[k] = r.Parent
	}
	ids := map[key]string{}
	var out []store.Community
	keys := make([]key, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].level != keys[j].level {
			return keys[i].level < keys[j].level
		}
		return keys[i].cluster < keys[j].cluster
	})
	for _, k := range keys {
		ms := members[k]
		sort.Strings(ms)
		ms = compact(ms)
		h := MemberHash(ms)
		ids[k] = CommunityID(k.level, h)
		out = append(out, store.Community{ID: ids[k], Level: k.level, Members: ms, MemberHash: h,
			Sources: wg.sourcesOf(ms, seen, in)})
	}
	byID := map[string]int{}
	for i, c := range out {
		byID[c.ID] = i
	}
	for _, k := range keys {
		if p := parentOf[k]; k.level > 0 && p >= 0 {
			pid, ok := ids[key{k.level - 1, p}]
			if !ok {
				continue
			}
			ci := byID[ids[k]]
			out[ci].Parent = pid
			pi := byID[pid]
			out[pi].Children = append(out[pi].Children, ids[k])
		}
	}
	for i := range out {
		sort.Strings(out[i].Children)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func coverage(g cgraph, comms []store.Community) float64 {
	docs := map[string]bool{}
	for _, e := range g.nodes {
		for _, f := range e.refs {
			docs[f.doc] = true
		}
	}
	if len(docs) == 0 {
		return 1
	}
	covered := map[string]bool{}
	inComm := map[string]bool{}
	for _, c := range comms {
		for _, m := range c.Members {
			inComm[m] = true
		}
	}
	for _, e := range g.nodes {
		if inComm[e.id] {
			for _, f := range e.refs {
				covered[f.doc] = true
			}
		}
	}
	return float64(len(covered)) / float64(len(docs))
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
