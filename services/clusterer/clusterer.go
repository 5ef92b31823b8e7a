// Package clusterer keeps a tenant's community hierarchy current: it
// debounces graph changes, re-clusters the whole tenant graph (every
// connected component, nothing dropped), compares communities with the
// previous run by member set and announces only the changed and removed ones.
package clusterer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"sync"
	"time"

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

// Partitioner clusters an undirected weighted graph hierarchically.
// Cluster ids are unique across levels.
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
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Quiet < 0 || c.MaxDelay < c.Quiet {
		return errors.New("clusterer: need 0 <= Quiet <= MaxDelay")
	}
	if c.WeightBy != "sources" && c.WeightBy != "strength" {
		return fmt.Errorf("clusterer: WeightBy must be sources or strength, not %q", c.WeightBy)
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
}

// Worker is the clusterer.
type Worker struct {
	cfg Config
	bus *stream.Bus
	st  Stores
	log *slog.Logger

	mu    sync.Mutex
	dirty map[string]*pending
	kick  chan struct{}
	now   func() time.Time

	duration *prometheus.HistogramVec
	changed  *prometheus.CounterVec
	total    *prometheus.GaugeVec
	coverage *prometheus.GaugeVec
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
	w := &Worker{cfg: cfg, bus: bus, st: st, log: log, dirty: map[string]*pending{}, kick: make(chan struct{}, 1), now: time.Now,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kgstream_recluster_duration_seconds", Help: "Time to re-cluster one tenant graph.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"tenant"}),
		changed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_communities_changed_total", Help: "Communities announced as changed or removed, by kind.",
		}, []string{"kind"}),
		total: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgstream_communities", Help: "Communities in the current hierarchy, by tenant.",
		}, []string{"tenant"}),
		coverage: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgstream_community_coverage_ratio",
			Help: "Share of live documents with at least one entity in a community (must be 1).",
		}, []string{"tenant"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{w.duration, w.changed, w.total, w.coverage} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering clusterer metrics: %w", err)
			}
		}
	}
	return w, nil
}

// Run consumes graph changes and re-clusters until ctx is cancelled. At
// start it re-clusters every tenant once, so changes acknowledged before a
// crash are never lost.
func (w *Worker) Run(ctx context.Context) error {
	tenants, err := w.st.GraphTenants(ctx)
	if err != nil {
		return fmt.Errorf("listing tenants: %w", err)
	}
	for _, t := range tenants {
		w.markDirty(t, time.Time{})
	}
	errc := make(chan error, 1)
	go func() {
		errc <- w.bus.Run(ctx, stream.ConsumerConfig{Stage: w.cfg.Stage, Kinds: []events.Kind{events.KindGraphChanged}}, w.Handle)
	}()
	tick := time.NewTicker(max(w.cfg.Quiet/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return <-errc
		case err := <-errc:
			return err
		case <-tick.C:
		case <-w.kick:
		}
		for _, t := range w.due() {
			if err := w.Recluster(ctx, t); err != nil {
				w.log.Error("re-clustering failed, will retry", "tenant", t, "error", err)
				w.markDirty(t, time.Time{})
			}
		}
	}
}

// Handle records a graph change; the re-clustering happens after the quiet period.
func (w *Worker) Handle(_ context.Context, m *stream.Message) error {
	var ev events.GraphChanged
	if err := events.Decode(m.Data, &ev); err != nil {
		return err
	}
	w.markDirty(ev.Tenant, ev.ReceivedAt)
	return nil
}

func (w *Worker) markDirty(tenant string, received time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	p, ok := w.dirty[tenant]
	if !ok {
		p = &pending{first: now}
		w.dirty[tenant] = p
	}
	p.last = now
	if !received.IsZero() && (p.oldest.IsZero() || received.Before(p.oldest)) {
		p.oldest = received
	}
	if w.cfg.Quiet == 0 {
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
		if now.Sub(p.last) >= w.cfg.Quiet || now.Sub(p.first) >= w.cfg.MaxDelay {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

func (w *Worker) take(tenant string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.dirty[tenant]
	delete(w.dirty, tenant)
	if p == nil {
		return time.Time{}
	}
	return p.oldest
}

// Recluster clusters a tenant's graph now and announces what changed.
func (w *Worker) Recluster(ctx context.Context, tenant string) error {
	oldest := w.take(tenant)
	start := time.Now()
	g, err := w.st.Snapshot(ctx, tenant)
	if err != nil {
		return fmt.Errorf("reading graph: %w", err)
	}
	comms, err := w.build(ctx, g)
	if err != nil {
		return err
	}
	prev, err := w.st.Communities(ctx, tenant)
	if err != nil {
		return fmt.Errorf("reading communities: %w", err)
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
	if err := w.st.ReplaceCommunities(ctx, tenant, run, comms); err != nil {
		return fmt.Errorf("storing communities: %w", err)
	}
	w.duration.WithLabelValues(tenant).Observe(time.Since(start).Seconds())
	w.total.WithLabelValues(tenant).Set(float64(len(comms)))
	w.coverage.WithLabelValues(tenant).Set(coverage(g, comms))
	w.changed.WithLabelValues("changed").Add(float64(len(changed)))
	w.changed.WithLabelValues("removed").Add(float64(len(removed)))
	w.bus.ObserveLag("communities", oldest)
	ev := &events.CommunitiesChanged{Header: events.Header{Tenant: tenant}, Run: run, Changed: changed,
		Refreshed: refreshed, Removed: removed, OldestReceivedAt: oldest}
	if _, err := w.bus.Publish(ctx, events.KindCommunitiesChanged, tenant,
		events.MsgID(tenant, "_communities", run, "changed"), ev); err != nil {
		return fmt.Errorf("announcing communities: %w", err)
	}
	w.log.Info("re-clustered", "tenant", tenant, "run", run, "communities", len(comms),
		"changed", len(changed), "refreshed", len(refreshed), "removed", len(removed), "took", time.Since(start))
	return nil
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

// MemberHash is the hash of a sorted member set.
func MemberHash(members []string) string {
	h := sha256.New()
	for _, m := range members {
		h.Write([]byte(m))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// CommunityID is stable for a member set at a level: a community whose
// members do not change keeps its id across runs.
func CommunityID(level int, memberHash string) string {
	return fmt.Sprintf("c%d-%s", level, memberHash[:12])
}

func (w *Worker) build(ctx context.Context, g store.Graph) ([]store.Community, error) {
	// Undirected weights: one edge per unordered pair, weight by the number
	// of distinct supporting sources over both directions and relations.
	type pair struct{ a, b string }
	srcs := map[pair]map[string]float64{}
	adj := map[string][]store.Edge{}
	for _, e := range g.Edges {
		a, b := e.Source, e.Target
		if b < a {
			a, b = b, a
		}
		p := pair{a, b}
		if srcs[p] == nil {
			srcs[p] = map[string]float64{}
		}
		for _, s := range e.Supports {
			w := s.Weight
			if w <= 0 {
				w = 1
			}
			srcs[p][s.DocID] += w
		}
		adj[e.Source] = append(adj[e.Source], e)
		if e.Target != e.Source {
			adj[e.Target] = append(adj[e.Target], e)
		}
	}
	edges := make([]WeightedEdge, 0, len(srcs))
	for p, s := range srcs {
		wt := float64(len(s))
		if w.cfg.WeightBy == "strength" {
			wt = 0
			for _, v := range s {
				wt += v
			}
		}
		edges = append(edges, WeightedEdge{Source: p.a, Target: p.b, Weight: wt})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].Source != edges[j].Source {
			return edges[i].Source < edges[j].Source
		}
		return edges[i].Target < edges[j].Target
	})
	var rows []Row
	if len(edges) > 0 {
		var err error
		rows, err = w.cfg.Partitioner(ctx, edges)
		if err != nil {
			return nil, fmt.Errorf("partitioning: %w", err)
		}
	}
	// Entities without an edge still belong somewhere: each is its own
	// level-0 community, so every document stays covered.
	clustered := map[string]bool{}
	maxID := -1
	for _, r := range rows {
		clustered[r.Node] = true
		maxID = max(maxID, r.Cluster)
	}
	for _, e := range g.Entities {
		if !clustered[e.ID] {
			maxID++
			rows = append(rows, Row{Node: e.ID, Cluster: maxID, Level: 0, Parent: -1})
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
	ents := make(map[string]store.Entity, len(g.Entities))
	for _, e := range g.Entities {
		ents[e.ID] = e
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
			Sources: sourcesOf(ms, ents, adj)})
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

// sourcesOf is every (doc, version) that supports a member or an edge
// between two members: what a report on this community would be built from.
func sourcesOf(members []string, ents map[string]store.Entity, adj map[string][]store.Edge) []provenance.SourceRef {
	in := make(map[string]bool, len(members))
	for _, m := range members {
		in[m] = true
	}
	set := map[provenance.SourceRef]bool{}
	for _, m := range members {
		for _, f := range ents[m].Sources {
			set[provenance.SourceRef{DocID: f.DocID, Version: f.Version}] = true
		}
		for _, e := range adj[m] {
			if in[e.Source] && in[e.Target] {
				for _, s := range e.Supports {
					set[provenance.SourceRef{DocID: s.DocID, Version: s.Version}] = true
				}
			}
		}
	}
	out := make([]provenance.SourceRef, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].DocID != out[j].DocID {
			return out[i].DocID < out[j].DocID
		}
		return out[i].Version < out[j].Version
	})
	return out
}

func coverage(g store.Graph, comms []store.Community) float64 {
	docs := map[string]bool{}
	for _, e := range g.Entities {
		for _, f := range e.Sources {
			docs[f.DocID] = true
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
	for _, e := range g.Entities {
		if inComm[e.ID] {
			for _, f := range e.Sources {
				covered[f.DocID] = true
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
