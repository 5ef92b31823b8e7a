// Package reporter writes community reports for the communities whose member
// set changed (and rebuilds those whose sources moved on), recording the
// (source, version) set each report was built from so that the query side
// can admit it only while every one of those sources is readable and current.
//
// When a vector index and an embedder are configured, the reporter also
// keeps the index current: text units and entity descriptions on every
// graph change, ACL copies on every ACL change, and one item per report
// written (see vectors.go).
package reporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/vector"
)

// Stores is what the reporter reads and writes.
type Stores interface {
	store.Registry
	store.GraphStore
	store.CommunityStore
	store.ReportStore
}

// Config configures the reporter.
type Config struct {
	// Stage names the consumer (default "reporter").
	Stage string
	// MaxFindings bounds a report's findings (default 8).
	MaxFindings int
	// LLM, when set, writes reports in GraphRAG's shape; a report it gets
	// wrong (no finding citing known ids, a failed call) falls back to the
	// extractive writer, counted.
	LLM Writer
	// Vectors and Embedder, set together, make the reporter keep the
	// vector index current (text units, entity descriptions, reports). Nil
	// means no vector indexing.
	Vectors  vector.Index
	Embedder embed.Embedder
	// EmbedBatch bounds the texts of one Embed call (default 64).
	EmbedBatch int
	// MaxEntityText bounds the bytes of an entity description embedded
	// (default 2000): a hub's thousand fragments say nothing more.
	MaxEntityText int
	// MaxDeliver and Backoff tune redelivery (stream defaults when zero).
	MaxDeliver int
	Backoff    []time.Duration
	// ReconcileEvery is how often Run reconciles the reports with every
	// stored community (default 1m; also at start; negative: never, see
	// reconcile.go). It bounds how long a lost announcement leaves a
	// community without its report.
	ReconcileEvery time.Duration
	// ReconcileBatch bounds the reports one reconciliation pass of a
	// tenant writes (default 256); a pass that stops there is followed by
	// another at once.
	ReconcileBatch int
	// VectorBatch bounds the graph and ACL changes the vector consumer
	// re-indexes together (default 256), and VectorBatchWait is how long
	// it waits for more once the first of a batch arrived (default 50ms).
	// A batch reads, rebuilds and writes the item of an entity its
	// documents share (a hub every incident names) once, so during a
	// backfill larger batches cost less per document; when changes are
	// rare, a change's vectors wait at most VectorBatchWait more.
	VectorBatch     int
	VectorBatchWait time.Duration
	// ReconcileGap is the least time between the end of a reconciliation
	// pass and the narrow pass asked for by a communities event (default
	// 2s; negative: none). The narrow pass checks only the communities the
	// events named (see reconcile.go); the events asking within the gap
	// share one pass at its end.
	ReconcileGap time.Duration
	// ReportConcurrency is how many reports are written at once (default
	// 8 with an LLM writer, whose calls then overlap, within the LLM
	// client's own MaxConcurrency; 1 without: extractive reports are CPU
	// work, sharing the cores with the stages that make documents
	// readable). Reports are stored in the order of the communities
	// whatever order they finish in.
	ReportConcurrency int
	// GiveWay, when set, makes both consumers (reports and vectors) wait
	// before each batch, within its bound, while the stages it names (the
	// extractor and the resolver) have a backlog: in one process sharing
	// its cores, documents become readable first (see stream.GiveWay).
	GiveWay *stream.GiveWay
}

func (c *Config) setDefaults() {
	if c.Stage == "" {
		c.Stage = "reporter"
	}
	if c.MaxFindings == 0 {
		c.MaxFindings = 8
	}
	if c.EmbedBatch == 0 {
		c.EmbedBatch = 64
	}
	if c.MaxEntityText == 0 {
		c.MaxEntityText = 2000
	}
	if c.ReconcileEvery == 0 {
		c.ReconcileEvery = time.Minute
	}
	if c.ReconcileBatch == 0 {
		c.ReconcileBatch = 256
	}
	if c.VectorBatch == 0 {
		c.VectorBatch = 256
	}
	if c.VectorBatchWait == 0 {
		c.VectorBatchWait = 50 * time.Millisecond
	}
	if c.ReconcileGap == 0 {
		c.ReconcileGap = 2 * time.Second
	}
	if c.ReportConcurrency == 0 {
		c.ReportConcurrency = 1
		if c.LLM != nil {
			c.ReportConcurrency = 8
		}
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.MaxFindings < 1 {
		return errors.New("reporter: MaxFindings must be >= 1")
	}
	if (c.Vectors == nil) != (c.Embedder == nil) {
		return errors.New("reporter: Vectors and Embedder must be set together")
	}
	if c.EmbedBatch < 1 || c.MaxEntityText < 1 || c.ReconcileBatch < 1 || c.VectorBatch < 1 || c.ReportConcurrency < 1 {
		return errors.New("reporter: EmbedBatch, MaxEntityText, ReconcileBatch, VectorBatch and ReportConcurrency must be >= 1")
	}
	if c.VectorBatchWait < 0 {
		return errors.New("reporter: VectorBatchWait must be >= 0")
	}
	if c.GiveWay != nil {
		if err := c.GiveWay.Validate(); err != nil {
			return fmt.Errorf("reporter: %w", err)
		}
	}
	return nil
}

// Worker is the reporter.
type Worker struct {
	cfg      Config
	bus      *stream.Bus
	st       Stores
	log      *slog.Logger
	written  *prometheus.CounterVec
	took     prometheus.Histogram
	fallback prometheus.Counter
	// restamped counts reports whose citations moved to current versions
	// without a rewrite.
	restamped prometheus.Counter

	// rmu serialises the report writes of community events and of
	// reconciliation; wake asks the reconcile loop for a pass.
	// cursor holds, per tenant, where the last bounded pass stopped
	// (guarded by rmu).
	rmu  sync.Mutex
	wake chan struct{}
	// handle is Handle: the kinds routed to their typed handlers.
	handle     stream.Handler
	cursor     map[string]store.Community
	reconciled *prometheus.CounterVec
	// named holds, per tenant, the ids of the communities whose reports
	// events wrote since the tenant's last pass (guarded by rmu; see
	// ReconcileChanged).
	named  map[string]map[string]bool
	passes *prometheus.CounterVec

	// vmu serialises the vector index writes (see vectors.go).
	vmu       sync.Mutex
	memo      vectorMemo // under vmu
	vectorOps *prometheus.CounterVec
	embedded  prometheus.Counter
}

// New returns a reporter Worker.
func New(cfg Config, bus *stream.Bus, st Stores, log *slog.Logger, reg prometheus.Registerer) (*Worker, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if bus == nil || st == nil {
		return nil, errors.New("reporter: bus and stores are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Worker{cfg: cfg, bus: bus, st: st, log: log, wake: make(chan struct{}, 1), cursor: map[string]store.Community{},
		named: map[string]map[string]bool{},
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_report_reconcile_passes_total",
			Help: "Reconciliation passes, by scope (all: every community of every tenant; changed: the communities events named since the last pass).",
		}, []string{"scope"}),
		reconciled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_reports_reconciled_total",
			Help: "Reports the reconciliation with the stored communities wrote or removed, by reason (missing, sources_changed, removed).",
		}, []string{"reason"}),
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_reports_written_total",
			Help: "Reports written, by reason (members_changed, sources_changed, missing: found by reconciliation) and removed.",
		}, []string{"reason"}),
		restamped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgstream_reports_restamped_total",
			Help: "Reports whose member set and input were unchanged: citations moved to the current versions, no rewrite.",
		}),
		fallback: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgstream_report_llm_fallbacks_total",
			Help: "LLM reports rejected (failed call, invalid shape, no finding citing known ids) and written extractively instead.",
		}),
		took: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kgstream_report_write_seconds", Help: "Time to write one community report.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		vectorOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_vector_writes_total",
			Help: "Vector index writes by the reporter: upsert_<kind> per item, delete per item, delete_doc and update_acl per document.",
		}, []string{"op"}),
		embedded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgstream_embedded_texts_total",
			Help: "Texts embedded for the vector index.",
		}),
	}
	w.handle = w.handlers()
	if reg != nil {
		cs := []prometheus.Collector{w.written, w.restamped, w.took, w.fallback, w.reconciled, w.passes}
		if cfg.Vectors != nil {
			cs = append(cs, w.vectorOps, w.embedded)
		}
		for _, c := range cs {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering reporter metrics: %w", err)
			}
		}
	}
	return w, nil
}

// Run consumes community changes (and, with a vector index, graph and ACL
// changes) and reconciles the reports with the stored communities (see
// reconcile.go) until ctx is cancelled. The community consumer keeps the
// stage's own durable; the vector consumers have theirs under
// "<stage>-vectors-", so enabling vectors never replays old community
// events, and the stage's pending count covers both.
func (w *Worker) Run(ctx context.Context) error {
	// One run's reports can take long (an LLM writer): fetch one event at
	// a time so none waits in the buffer past its ack deadline.
	reports := stream.ConsumerConfig{Stage: w.cfg.Stage, Kinds: []events.Kind{events.KindCommunitiesChanged},
		MaxDeliver: w.cfg.MaxDeliver, Backoff: w.cfg.Backoff, Batch: 1, AckWait: 2 * time.Minute, GiveWay: w.cfg.GiveWay}
	actors := []func(context.Context) error{func(ctx context.Context) error { return w.bus.Run(ctx, reports, w.Handle) }}
	if w.vectorsOn() {
		vectors := stream.ConsumerConfig{Stage: w.cfg.Stage, Durable: w.cfg.Stage + "-vectors",
			Kinds: []events.Kind{events.KindGraphChanged, events.KindDocACL}, MaxDeliver: w.cfg.MaxDeliver, Backoff: w.cfg.Backoff,
			Batch: w.cfg.VectorBatch, BatchWait: w.cfg.VectorBatchWait, GiveWay: w.cfg.GiveWay}
		actors = append(actors, func(ctx context.Context) error { return w.bus.RunBatch(ctx, vectors, w.HandleVectors) })
	}
	if w.cfg.ReconcileEvery > 0 {
		actors = append(actors, w.reconcileLoop)
	}
	// The first to return stops the others.
	return stream.RunGroup(ctx, actors...)
}

// ReportID is the id of a community's report.
func ReportID(communityID string) string { return "r-" + communityID }

// Handle processes one event: a clustering run's community changes, or,
// with a vector index, a graph or ACL change of one document.
// Each is decoded and its tenant checked against its subject's (a
// mismatch, a malformed event or another kind is refused as permanent).
func (w *Worker) Handle(ctx context.Context, m *stream.Message) error { return w.handle(ctx, m) }

// handlers routes the reporter's event kinds to their typed handlers.
func (w *Worker) handlers() stream.Handler {
	graph, acl := stream.Typed(w.handleGraph), stream.Typed(w.handleACL)
	if !w.vectorsOn() {
		// Not ours to index: nothing configured.
		graph = func(context.Context, *stream.Message) error { return nil }
		acl = graph
	}
	return stream.Mux(map[events.Kind]stream.Handler{
		events.KindCommunitiesChanged: stream.Typed(w.handleCommunities),
		events.KindGraphChanged:       graph,
		events.KindDocACL:             acl,
	})
}

// handleCommunities rewrites the reports of one clustering run's changed
// communities. A community whose report has the same member hash and input
// hash as now (see inputHash) keeps its report: only the citations move to
// the current versions (restamped, no writer call).
//
// It reads what the event names, not the tenant: the communities changed,
// refreshed or removed, by id, with their stored reports, and the reports
// citing the documents those communities and reports rest on (see
// staleCommunities).
func (w *Worker) handleCommunities(ctx context.Context, _ *stream.Message, ev *events.CommunitiesChanged) error {
	w.rmu.Lock()
	defer w.rmu.Unlock()
	// The narrow pass that follows checks the reports written here again;
	// whatever this event leaves out (an announcement lost before it, a
	// stale report citing no document the event's communities name), the
	// next full pass finds.
	defer w.wakeReconcile()
	// An older run's event is still handled: the newer run was diffed
	// against it, so its changes are announced nowhere else. Ids are member
	// set hashes, so writing the changed ones that still exist and removing
	// the removed ones that do not converges whatever the order.
	var ids []string
	for _, list := range [][]events.CommunityChange{ev.Changed, ev.Refreshed} {
		for _, ch := range list {
			ids = append(ids, ch.ID)
		}
	}
	ids = append(ids, ev.Removed...)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	byID, err := w.st.CommunitiesByID(ctx, ev.Tenant, ids)
	if err != nil {
		return fmt.Errorf("reading %d communities: %w", len(ids), err)
	}
	rids := make([]string, len(ids))
	for i, id := range ids {
		rids[i] = ReportID(id)
	}
	olds, err := w.st.ReportsByID(ctx, ev.Tenant, rids)
	if err != nil {
		return fmt.Errorf("reading the reports of %d communities: %w", len(rids), err)
	}
	if olds == nil {
		olds = map[string]store.Report{}
	}
	var jobs []job
	queued := map[string]bool{}
	add := func(list []events.CommunityChange, reason string) {
		for _, ch := range list {
			if c, ok := byID[ch.ID]; ok && !queued[ch.ID] {
				queued[ch.ID] = true
				jobs = append(jobs, job{c, reason})
			}
		}
	}
	add(ev.Changed, "members_changed")
	add(ev.Refreshed, "sources_changed")
	// Reports whose sources moved on (an edit of a document one of their
	// edges leaves into another community, say) are rebuilt too: they are
	// inadmissible until then.
	stale, err := w.staleCommunities(ctx, ev.Tenant, byID, olds, queued)
	if err != nil {
		return err
	}
	for _, c := range stale {
		jobs = append(jobs, job{c, "sources_changed"})
	}
	reps, err := w.writeReports(ctx, ev.Tenant, jobs, olds)
	if err != nil {
		return err
	}
	w.name(ev.Tenant, jobs)
	written := make([]string, 0, len(reps))
	for _, r := range reps {
		written = append(written, r.ID)
	}
	var removed []string
	for _, id := range ev.Removed {
		if _, alive := byID[id]; !alive { // else a later run has this member set again
			removed = append(removed, ReportID(id))
		}
	}
	if err := w.removeReports(ctx, ev.Tenant, removed); err != nil {
		return err
	}
	if w.vectorsOn() {
		if err := w.indexReports(ctx, ev.Tenant, reps, removed); err != nil {
			return fmt.Errorf("indexing reports: %w", err)
		}
	}
	w.bus.ObserveLag("reports", ev.OldestReceivedAt)
	if _, err := w.bus.Publish(ctx, events.KindReportsChanged, ev.Tenant, events.ReportsID(ev.Tenant, ev.Run),
		&events.ReportsChanged{Header: events.Header{Tenant: ev.Tenant}, Reports: written, Removed: removed}); err != nil {
		return fmt.Errorf("announcing reports: %w", err)
	}
	w.log.Info("reports written", "tenant", ev.Tenant, "run", ev.Run, "written", len(written), "removed", len(removed))
	return nil
}

// job is one report to write, and why.
type job struct {
	c      store.Community
	reason string
}

// Reports are stored in chunks (store.ReportStore.PutReports, one
// transaction each): a chunk is stored once it holds storeChunk reports or
// its first report has waited storeWait, and at the end. Extractive
// reports take well under a millisecond each, so a run's reports share a
// few commits instead of one each; an LLM report takes seconds, so a crash
// loses at most about storeWait of finished reports (and the writer calls
// of the reports finished since).
const (
	storeChunk = 128
	storeWait  = time.Second
)

// writeReports writes the reports of jobs and returns those it stored. A
// community whose report has the same member hash and input hash as now
// (see inputHash) keeps its report: only the citations move to the current
// versions (restamped, no writer call), and nothing is stored when nothing
// moved. Only the reports of jobs are read, unless olds holds them
// already (every stored report of jobs, when not nil). On an error, the
// reports returned are those stored before it.
func (w *Worker) writeReports(ctx context.Context, tenant string, jobs []job, olds map[string]store.Report) ([]store.Report, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	cs := make([]store.Community, len(jobs))
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		cs[i], ids[i] = j.c, ReportID(j.c.ID)
	}
	ix, err := w.loadIndex(ctx, tenant, cs)
	if err != nil {
		return nil, err
	}
	if olds == nil {
		if olds, err = w.st.ReportsByID(ctx, tenant, ids); err != nil {
			return nil, fmt.Errorf("reading the reports of %d communities: %w", len(ids), err)
		}
	}
	// done is a report written but not yet stored, with what its metrics
	// record once it is.
	type done struct {
		r       store.Report
		restamp bool
		reason  string
		took    time.Duration
	}
	var (
		reps    []store.Report
		chunk   []done
		started time.Time
	)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		batch := make([]store.Report, len(chunk))
		for i, d := range chunk {
			batch[i] = d.r
		}
		if err := w.st.PutReports(ctx, tenant, batch); err != nil {
			return fmt.Errorf("storing %d reports: %w", len(batch), err)
		}
		for _, d := range chunk {
			if d.restamp {
				w.restamped.Inc()
			} else {
				w.took.Observe(d.took.Seconds())
				w.written.WithLabelValues(d.reason).Inc()
			}
		}
		reps = append(reps, batch...)
		chunk = chunk[:0]
		return nil
	}
	// Reports are written ReportConcurrency at a time and taken in the
	// order of jobs as they finish.
	type outcome struct {
		d    done
		keep bool
	}
	results := make([]chan outcome, len(jobs))
	for i := range results {
		results[i] = make(chan outcome, 1)
	}
	wctx, stop := context.WithCancel(ctx)
	var writers sync.WaitGroup
	defer func() {
		// On an early return (a failed store), the writers still running
		// are cancelled and waited for.
		stop()
		writers.Wait()
	}()
	// A re-clustering can hand thousands of reports to one event: the
	// writer gives way before each, within one bound for the whole event,
	// while documents wait to become readable.
	yield := w.bus.Yielder(w.cfg.Stage, w.cfg.GiveWay)
	writers.Go(func() {
		sem := make(chan struct{}, w.cfg.ReportConcurrency)
		for i, j := range jobs {
			if i > 0 {
				yield.GiveWay(wctx)
			}
			select {
			case sem <- struct{}{}:
			case <-wctx.Done():
				return
			}
			writers.Go(func() {
				defer func() { <-sem }()
				r, restamp, keep, took := w.writeJob(wctx, ix, j, olds)
				results[i] <- outcome{done{r: r, restamp: restamp, reason: j.reason, took: took}, keep}
			})
		}
	})
	for i := range jobs {
		var o outcome
		select {
		case o = <-results[i]:
		case <-ctx.Done():
			return reps, ctx.Err()
		}
		if !o.keep {
			continue // nothing moved
		}
		if len(chunk) == 0 {
			started = time.Now().Add(-o.d.took)
		}
		chunk = append(chunk, o.d)
		if len(chunk) >= storeChunk || time.Since(started) >= storeWait {
			if err := flush(); err != nil {
				return reps, err
			}
		}
	}
	if err := flush(); err != nil {
		return reps, err
	}
	return reps, nil
}

// removeReports deletes the reports ids, in one transaction.
func (w *Worker) removeReports(ctx context.Context, tenant string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if err := w.st.DeleteReports(ctx, tenant, ids); err != nil {
		return fmt.Errorf("removing %d reports: %w", len(ids), err)
	}
	w.written.WithLabelValues("removed").Add(float64(len(ids)))
	return nil
}

// staleCommunities lists the stored communities, not queued, whose report
// cites a version the registry no longer has (or a deleted document's) of
// a document that moved in this run: one that the named communities rest
// on (now) or that their stored reports, olds, cite (then, a deleted one
// too). Those reports are found through the by-source index
// (ReportCitationsOf), not by reading every report's citations; only the
// registry entries of those documents and the stale reports' communities
// are read. The reports of the communities it returns are added to olds.
func (w *Worker) staleCommunities(ctx context.Context, tenant string, named map[string]store.Community, olds map[string]store.Report, queued map[string]bool) ([]store.Community, error) {
	var docs []string
	for _, c := range named {
		for _, s := range c.Sources {
			docs = append(docs, s.DocID)
		}
	}
	for _, r := range olds {
		for _, s := range r.Sources {
			docs = append(docs, s.DocID)
		}
	}
	if len(docs) == 0 {
		return nil, nil
	}
	slices.Sort(docs)
	docs = slices.Compact(docs)
	cites, err := w.st.ReportCitationsOf(ctx, tenant, docs)
	if err != nil {
		return nil, fmt.Errorf("reading the citations of the reports citing %d documents: %w", len(docs), err)
	}
	cur, err := w.st.Sources(ctx, tenant, docs)
	if err != nil {
		return nil, fmt.Errorf("reading sources: %w", err)
	}
	var ids []string
	for rid, refs := range cites {
		id, ok := strings.CutPrefix(rid, ReportID(""))
		if !ok || queued[id] {
			continue
		}
		for _, s := range refs {
			if _, moved := slices.BinarySearch(docs, s.DocID); !moved {
				continue
			}
			if !currentIn(cur, s) {
				ids = append(ids, id)
				break
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	// A report whose community is gone is the full pass's to remove.
	byID, err := w.st.CommunitiesByID(ctx, tenant, ids)
	if err != nil {
		return nil, fmt.Errorf("reading %d communities: %w", len(ids), err)
	}
	out := make([]store.Community, 0, len(byID))
	var rids []string
	for _, id := range ids {
		if c, ok := byID[id]; ok {
			out = append(out, c)
			rids = append(rids, ReportID(id))
		}
	}
	reps, err := w.st.ReportsByID(ctx, tenant, rids)
	if err != nil {
		return nil, fmt.Errorf("reading the reports of %d communities: %w", len(rids), err)
	}
	maps.Copy(olds, reps)
	return out, nil
}

// writeJob writes the report of one job: restamped when its community's
// report has the same member hash and input hash as now (keep is false
// when nothing moved: no report to store), written anew otherwise. took
// is how long it took.
func (w *Worker) writeJob(ctx context.Context, ix *index, j job, olds map[string]store.Report) (r store.Report, restamp, keep bool, took time.Duration) {
	start := time.Now()
	// The context is read by the hash, the restamp and the LLM writer:
	// made once.
	x := ix.context(j.c)
	hash := w.inputHashOf(ix, j.c, x)
	old, had := olds[ReportID(j.c.ID)]
	restamp = had && old.MemberHash == j.c.MemberHash && old.InputHash == hash
	if restamp {
		r = ix.restamp(old, x)
		if slices.Equal(r.Sources, old.Sources) && sameCitations(r.Findings, old.Findings) {
			return r, true, false, time.Since(start)
		}
	} else {
		r = w.write(ctx, j.c, ix, x)
		r.InputHash = hash
	}
	return r, restamp, true, time.Since(start)
}

// write uses the LLM writer when configured, the extractive one otherwise
// or when the LLM's report is rejected.
func (w *Worker) write(ctx context.Context, c store.Community, ix *index, x *Context) store.Report {
	if w.cfg.LLM != nil {
		r, err := w.cfg.LLM.Write(ctx, c, x)
		if err == nil {
			return r
		}
		if ctx.Err() != nil {
			// Cancelled: the report is not stored, nothing was rejected.
			return w.Extractive(c, ix)
		}
		w.fallback.Inc()
		w.log.Warn("LLM report rejected, writing it extractively", "community", c.ID, "error", err)
	}
	return w.Extractive(c, ix)
}

// context is the community's members and the edges leaving them.
func (ix *index) context(c store.Community) *Context {
	x := &Context{}
	in := make(map[string]bool, len(c.Members))
	for _, m := range c.Members {
		in[m] = true
		if e, ok := ix.ents[m]; ok {
			x.Members = append(x.Members, e)
		}
	}
	seen := map[string]bool{}
	for _, m := range c.Members {
		for _, e := range ix.adj[m] {
			if in[e.Source] && !seen[e.ID] {
				seen[e.ID] = true
				x.Edges = append(x.Edges, e)
			}
		}
	}
	sort.Slice(x.Edges, func(i, j int) bool { return x.Edges[i].ID < x.Edges[j].ID })
	return x
}

// index holds the entities and edges reports are written from: every
// member of the communities to write, the edges leaving them and their far
// ends (or, from a snapshot, the whole graph).
type index struct {
	ents  map[string]store.Entity
	adj   map[string][]store.Edge
	edges map[string]store.Edge
	// fields are the entities' input hash fields made so far (see
	// entityFields); namers, by entity, the position of the first
	// fragment naming it of each document (see nameFrom).
	// Reports written at once share the index: mu guards fields and
	// namers (what they hold once made is only read).
	mu     sync.Mutex
	fields map[entityFieldsKey][]byte
	namers map[string]map[string]int
}

func newIndex(g store.Graph) *index {
	ix := &index{ents: make(map[string]store.Entity, len(g.Entities)), adj: map[string][]store.Edge{},
		edges: make(map[string]store.Edge, len(g.Edges))}
	for _, e := range g.Entities {
		ix.ents[e.ID] = e
	}
	for _, e := range g.Edges {
		ix.edges[e.ID] = e
		ix.adj[e.Source] = append(ix.adj[e.Source], e)
		if e.Target != e.Source {
			ix.adj[e.Target] = append(ix.adj[e.Target], e)
		}
	}
	return ix
}

// Extractive writes a report without an LLM: the title names the most
// connected members, the summary counts members by type and relationships,
// and each finding states one member's relationships inside the community,
// citing the supports of exactly those relationships.
//
// Rating (0-10) is a documented heuristic: 2·log2(1 + distinct documents),
// plus 1 when the community holds an incident linked to a failure mode,
// capped at 10. More independent evidence means a more important theme.
func (w *Worker) Extractive(c store.Community, ix *index) store.Report {
	in := make(map[string]bool, len(c.Members))
	for _, m := range c.Members {
		in[m] = true
	}
	// A report states what its members say: every edge leaving a member,
	// also when its target sits in another community (an incident's failure
	// mode is a fact about the incident wherever the clustering put it).
	var internal []store.Edge
	seen := map[string]bool{}
	degree := map[string]int{}
	for _, m := range c.Members {
		for _, e := range ix.adj[m] {
			if in[e.Source] && !seen[e.ID] {
				seen[e.ID] = true
				internal = append(internal, e)
				degree[e.Source]++
				if in[e.Target] {
					degree[e.Target]++
				}
			}
		}
	}
	sort.Slice(internal, func(i, j int) bool { return internal[i].ID < internal[j].ID })
	members := append([]string(nil), c.Members...)
	sort.SliceStable(members, func(i, j int) bool {
		if degree[members[i]] != degree[members[j]] {
			return degree[members[i]] > degree[members[j]]
		}
		return members[i] < members[j]
	})
	name := func(id string) string {
		if e, ok := ix.ents[id]; ok && e.Name != "" {
			return e.Name
		}
		return id
	}
	// A target outside the community is named by the spelling of a document
	// that supports the edge (those documents are among the report's
	// sources), never by a display name only some other document supplied.
	targetName := func(e store.Edge) string {
		if in[e.Target] {
			return name(e.Target)
		}
		if name, ok := ix.nameFrom(e.Target, e.Supports); ok {
			return name
		}
		_, key, _ := strings.Cut(e.Target, ":")
		return key
	}
	var top []string
	for _, m := range members[:min(3, len(members))] {
		top = append(top, name(m))
	}
	types := map[string]int{}
	for _, m := range c.Members {
		types[ix.ents[m].Type]++
	}
	var typeParts []string
	for _, t := range sortedKeys(types) {
		typeParts = append(typeParts, fmt.Sprintf("%d %s", types[t], t))
	}
	sources := map[provenance.SourceRef]bool{}
	hasFailure := false
	var findings []store.Finding
	for _, m := range members {
		if len(findings) >= w.cfg.MaxFindings {
			break
		}
		var parts []string
		var cites []provenance.SourceRef
		var edgeIDs []string
		for _, e := range internal {
			if e.Source != m {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s", strings.ReplaceAll(e.Relation, "_", " "), targetName(e)))
			edgeIDs = append(edgeIDs, e.ID)
			cites = append(cites, citations(e.Supports)...)
			if e.Relation == "failure" || ix.ents[e.Target].Type == "failure_mode" {
				hasFailure = true
			}
		}
		if len(parts) == 0 {
			continue
		}
		findings = append(findings, store.Finding{
			Summary:     fmt.Sprintf("%s (%s): %s", name(m), ix.ents[m].Type, strings.Join(parts, "; ")),
			Explanation: fmt.Sprintf("%d relationship(s) of %s inside this community, each cited by the documents that state it.", len(parts), name(m)),
			Entities:    []string{m},
			Edges:       edgeIDs,
			Citations:   dedupRefs(cites),
		})
	}
	for _, m := range c.Members {
		for _, f := range ix.ents[m].Sources {
			sources[provenance.SourceRef{DocID: f.DocID, Version: f.Version}] = true
		}
	}
	for _, e := range internal {
		for _, s := range e.Supports {
			sources[provenance.SourceRef{DocID: s.DocID, Version: s.Version}] = true
		}
	}
	srcList := make([]provenance.SourceRef, 0, len(sources))
	docs := map[string]bool{}
	for r := range sources {
		srcList = append(srcList, r)
		docs[r.DocID] = true
	}
	sortRefs(srcList)
	rating := 2 * math.Log2(1+float64(len(docs)))
	if hasFailure {
		rating++
	}
	rating = math.Min(10, math.Round(rating*10)/10)
	return store.Report{
		ID: ReportID(c.ID), Community: c.ID, Level: c.Level,
		Title: strings.Join(top, ", "),
		Summary: fmt.Sprintf("Community of %d entities (%s) with %d relationships, drawn from %d documents.",
			len(c.Members), strings.Join(typeParts, ", "), len(internal), len(docs)),
		Findings:          findings,
		Rating:            rating,
		RatingExplanation: fmt.Sprintf("2*log2(1+%d documents)%s, capped at 10", len(docs), map[bool]string{true: " + 1 for a failure mode", false: ""}[hasFailure]),
		Sources:           srcList,
		MemberHash:        c.MemberHash,
		Writer:            "extractive",
		UpdatedAt:         time.Now().UTC(),
	}
}

// nameFrom returns the name of the first fragment of the entity id (in
// its fragments' order) that names it and comes from a document of
// supports. A hub is the far end of many edges: the first fragment naming
// it of each of its documents is indexed once, so each edge looks up its
// supports' documents instead of scanning every fragment.
func (ix *index) nameFrom(id string, supports []store.Fragment) (string, bool) {
	t, ok := ix.ents[id]
	if !ok {
		return "", false
	}
	if len(t.Sources) <= namerScan {
		docs := make(map[string]bool, len(supports))
		for _, s := range supports {
			docs[s.DocID] = true
		}
		for _, f := range t.Sources {
			if docs[f.DocID] && f.Name != "" {
				return f.Name, true
			}
		}
		return "", false
	}
	ix.mu.Lock()
	at, ok := ix.namers[id]
	ix.mu.Unlock()
	if !ok {
		at = make(map[string]int, len(t.Sources))
		for i, f := range t.Sources {
			if _, seen := at[f.DocID]; !seen && f.Name != "" {
				at[f.DocID] = i
			}
		}
		ix.mu.Lock()
		if ix.namers == nil {
			ix.namers = map[string]map[string]int{}
		}
		ix.namers[id] = at
		ix.mu.Unlock()
	}
	first := -1
	for _, s := range supports {
		if i, ok := at[s.DocID]; ok && (first < 0 || i < first) {
			first = i
		}
	}
	if first < 0 {
		return "", false
	}
	return t.Sources[first].Name, true
}

// namerScan is the number of fragments up to which nameFrom scans them
// rather than index them.
const namerScan = 32

func citations(fs []store.Fragment) []provenance.SourceRef {
	var out []provenance.SourceRef
	for _, f := range fs {
		if len(f.TextUnits) == 0 {
			out = append(out, provenance.SourceRef{DocID: f.DocID, Version: f.Version})
		}
		for _, u := range f.TextUnits {
			out = append(out, provenance.SourceRef{DocID: f.DocID, Version: f.Version, TextUnit: u})
		}
	}
	return out
}

func dedupRefs(in []provenance.SourceRef) []provenance.SourceRef {
	set := map[provenance.SourceRef]bool{}
	var out []provenance.SourceRef
	for _, r := range in {
		if !set[r] {
			set[r] = true
			out = append(out, r)
		}
	}
	sortRefs(out)
	return out
}

func sortRefs(s []provenance.SourceRef) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].DocID != s[j].DocID {
			return s[i].DocID < s[j].DocID
		}
		if s[i].Version != s[j].Version {
			return s[i].Version < s[j].Version
		}
		return s[i].TextUnit < s[j].TextUnit
	})
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
