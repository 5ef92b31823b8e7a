// Package status gathers what ops watch: documents, entities, edges,
// pending events per stage, dead letters, orphan edges, the vector index's
// ACL copies against the registry, and index lag. It backs
// `GET /v1/status` and `kgstream status`.
package status

import (
	"context"
	"fmt"
	"github.com/kgstream/kgstream/pkg/buildinfo"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/vector"
)

// Stores is what status reads.
type Stores interface {
	store.Registry
	store.GraphStore
	store.ReportStore
}

// Lag is a pair of quantiles in seconds, nearest rank over Samples
// samples: the union of the most recent samples (up to 4096) of every
// live process recording them.
type Lag struct {
	P50     float64 `json:"p50"`
	P99     float64 `json:"p99"`
	Samples int     `json:"samples"`
}

// Scopes of a Report's document, entity and edge counts.
const (
	// ScopeTenant counts the whole tenant (admins, and callers who may
	// read every document of it).
	ScopeTenant = "tenant"
	// ScopeReadable counts only the documents the caller may read and the
	// entities and edges those documents support.
	ScopeReadable = "readable"
)

// Report is the status of one tenant (the JSON of `kgstream status --json`).
//
// What a caller sees depends on who it is: the document, entity and edge
// counts always (of the tenant, or of what the caller may read, see
// Scope); the tenant's audit figures only when Scope is ScopeTenant; the
// pipeline figures (pending events, dead letters, outbox, lag, LLM spend,
// the processes that recorded them), which count every tenant's and every
// document's activity, only for admins. Figures a caller may not see are omitted from the JSON
// (their embedded struct is nil).
type Report struct {
	Tenant string `json:"tenant"`
	// Scope says what Documents, Applied, Entities and Edges count
	// (ScopeTenant or ScopeReadable).
	Scope     string `json:"scope,omitempty"`
	Documents int    `json:"documents"`
	Applied   int    `json:"applied"`
	Entities  int    `json:"entities"`
	Edges     int    `json:"edges"`
	// Audited is set when this report ran the audit (?audit=1 with the
	// tenant scope).
	Audited bool `json:"audited"`
	// Admin says whether the caller is an admin, who alone gets the
	// pipeline figures.
	Admin bool `json:"admin"`
	*AuditFigures
	*PipelineFigures
	// Build is the build of the process that answered.
	Build buildinfo.Info `json:"build"`
}

// AuditFigures are a tenant's consistency counts: zero unless the report
// ran the audit (Report.Audited).
type AuditFigures struct {
	OrphanEdges     int `json:"orphan_edges"`
	OrphanEntities  int `json:"orphan_entities"`
	IndexMismatches int `json:"index_mismatches"`
	StaleReports    int `json:"stale_reports"`
	// ACLMismatches counts vector items holding, for a live document,
	// another ACL than the registry's; VectorOrphans counts vector items
	// built from a document the registry has deleted or never recorded.
	// Both stay zero in a process without a vector index.
	ACLMismatches int `json:"acl_mismatches"`
	VectorOrphans int `json:"vector_orphans"`
	// StaleVectors counts vector items (orphans aside) built from a
	// version of a live document the registry no longer has: re-indexing
	// to come, like StaleReports, or lost.
	StaleVectors int      `json:"stale_vectors"`
	Problems     []string `json:"problems,omitempty"`
}

// PipelineFigures are the pipeline's figures across tenants, for admins.
// Pending events and dead letters come from JetStream, the outbox from the
// registry (see store.Outbox); index lag and LLM spend from what every
// live process recorded (Sources).
type PipelineFigures struct {
	DeadLetters uint64            `json:"dead_letters"`
	Pending     map[string]uint64 `json:"pending"`
	// OutboxPending counts the events the registry holds that JetStream
	// has not acknowledged yet (the gateway republishes them).
	OutboxPending int `json:"outbox_pending"`
	// IndexLag is the lag from the gateway's receipt to the graph applied.
	IndexLag Lag `json:"index_lag_seconds"`
	// StageLag is the lag to each stage recorded (graph, communities,
	// reports).
	StageLag map[string]Lag `json:"stage_lag_seconds"`
	// LLM is the extraction spend of the live extractors (absent when none
	// runs an LLM extractor or none has called it yet).
	LLM *LLMUsage `json:"llm,omitempty"`
	// Sources lists the figures each process recorded and how long ago:
	// a stage missing here, or not live, is silent.
	Sources []Source `json:"sources"`
}

// LLMUsage sums the LLM extractor's metrics over models and processes.
type LLMUsage struct {
	Documents        uint64  `json:"documents"`
	Calls            float64 `json:"calls"`
	PromptTokens     float64 `json:"prompt_tokens"`
	CompletionTokens float64 `json:"completion_tokens"`
	Cost             float64 `json:"cost"`
	CallsPerDocument float64 `json:"calls_per_document"`
	CostPerDocument  float64 `json:"cost_per_document"`
	// ByModel is the same by model (absent within a model's own figures).
	ByModel map[string]*LLMUsage `json:"by_model,omitempty"`

	documentCalls, documentCost float64
}

// Collector computes reports and keeps the audit gauges current.
type Collector struct {
	st       Stores
	bus      *stream.Bus
	vectors  vector.Index
	stages   []string
	log      *slog.Logger
	orphans  *prometheus.GaugeVec
	stale    *prometheus.GaugeVec
	aclDiffs *prometheus.GaugeVec
	vorphans *prometheus.GaugeVec
	vstale   *prometheus.GaugeVec
	recorder *Recorder
	counts   countCache
	indexes  indexCache
}

// WithVectors lets the audit compare the vector index's ACL copies with
// the registry (acl_mismatches, vector_orphans) and count the items built
// from versions the registry has moved on from (stale_vectors).
func (c *Collector) WithVectors(ix vector.Index) *Collector {
	c.vectors = ix
	return c
}

// WithRecorder has status take this process's own figures (rec's) from
// memory, current to the request, and everyone else's from the bucket.
func (c *Collector) WithRecorder(rec *Recorder) *Collector {
	c.recorder = rec
	return c
}

// Stages are the consumers of the pipeline, in order: the stages whose
// pending counts status reports.
var Stages = []string{"extractor", "resolver", "clusterer", "reporter"}

// NewCollector returns a Collector; stages are the consumer names whose
// pending counts are reported. bus may be nil (no pending or dead letters).
func NewCollector(st Stores, bus *stream.Bus, stages []string, log *slog.Logger, reg prometheus.Registerer) (*Collector, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"tenant"})
	}
	c := &Collector{st: st, bus: bus, stages: stages, log: log,
		orphans: gauge("kgstream_orphan_edges", "Edges without a live supporting source, from the last audit (must be 0)."),
		stale: gauge("kgstream_stale_reports",
			"Reports built from a source version that is no longer current (or deleted): admitted to no one until rewritten."),
		aclDiffs: gauge("kgstream_vector_acl_mismatches",
			"Vector items whose ACL copy of a live document differs from the registry's, from the last audit (must be 0 once events are applied)."),
		vstale: gauge("kgstream_vector_stale",
			"Vector items built from a version of a live document other than the registry's current one, from the last audit."),
		vorphans: gauge("kgstream_vector_orphans",
			"Vector items built from a document the registry has deleted or does not know, from the last audit."),
	}
	if reg != nil {
		for _, m := range []prometheus.Collector{c.orphans, c.stale, c.aclDiffs, c.vorphans, c.vstale} {
			if err := reg.Register(m); err != nil {
				return nil, fmt.Errorf("registering status metrics: %w", err)
			}
		}
	}
	return c, nil
}

// Audit scans every tenant and updates the audit gauges.
func (c *Collector) Audit(ctx context.Context) error {
	tenants, err := c.st.GraphTenants(ctx)
	if err != nil {
		return fmt.Errorf("listing tenants: %w", err)
	}
	for _, t := range tenants {
		srcs, err := c.st.ListSources(ctx, t)
		if err != nil {
			return fmt.Errorf("listing the sources of %s: %w", t, err)
		}
		a, err := c.audit(ctx, t, srcs)
		if err != nil {
			return fmt.Errorf("auditing %s: %w", t, err)
		}
		if a.OrphanEdges > 0 || a.OrphanEntities > 0 || a.IndexMismatches > 0 || a.ACLMismatches > 0 || a.VectorOrphans > 0 {
			c.log.Error("audit found inconsistencies", "tenant", t, "orphan_edges", a.OrphanEdges,
				"orphan_entities", a.OrphanEntities, "index_mismatches", a.IndexMismatches,
				"acl_mismatches", a.ACLMismatches, "vector_orphans", a.VectorOrphans, "problems", a.Problems)
		}
	}
	return nil
}

// audit runs every check of one tenant (srcs: its registry, deletions
// included) and sets the gauges.
func (c *Collector) audit(ctx context.Context, tenant string, srcs []provenance.SourceState) (AuditFigures, error) {
	a, err := c.st.Audit(ctx, tenant)
	if err != nil {
		return AuditFigures{}, err
	}
	f := AuditFigures{OrphanEdges: a.OrphanEdges, OrphanEntities: a.OrphanEntities, IndexMismatches: a.IndexMismatches, Problems: a.Problems}
	c.orphans.WithLabelValues(tenant).Set(float64(a.OrphanEdges))
	if f.StaleReports, err = c.staleReports(ctx, tenant); err != nil {
		return f, fmt.Errorf("counting stale reports: %w", err)
	}
	c.stale.WithLabelValues(tenant).Set(float64(f.StaleReports))
	if c.vectors == nil {
		return f, nil
	}
	// srcs was listed before the scans: a finding is confirmed against the
	// registry read again (a document posted during the audit is no orphan).
	va, err := vector.AuditSourcesConfirmed(ctx, c.vectors, tenant, srcs, func(ctx context.Context, ids []string) (map[string]provenance.SourceState, error) {
		return c.st.Sources(ctx, tenant, ids)
	})
	if err != nil {
		return f, err
	}
	f.ACLMismatches, f.VectorOrphans, f.StaleVectors = va.ACLMismatches, va.Orphans, va.Stale
	for _, p := range va.Problems {
		if len(f.Problems) < store.MaxAuditProblems {
			f.Problems = append(f.Problems, "vector "+p)
		}
	}
	c.aclDiffs.WithLabelValues(tenant).Set(float64(va.ACLMismatches))
	c.vorphans.WithLabelValues(tenant).Set(float64(va.Orphans))
	c.vstale.WithLabelValues(tenant).Set(float64(va.Stale))
	return f, nil
}

// staleReports counts reports whose recorded sources are deleted or at
// another version than the registry's current one.
func (c *Collector) staleReports(ctx context.Context, tenant string) (int, error) {
	reps, err := c.st.Reports(ctx, tenant)
	if err != nil {
		return 0, err
	}
	var ids []string
	for _, r := range reps {
		for _, s := range r.Sources {
			ids = append(ids, s.DocID)
		}
	}
	cur, err := c.st.Sources(ctx, tenant, ids)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range reps {
		for _, s := range r.Sources {
			st, ok := cur[s.DocID]
			if !ok || st.Deleted || st.Version != s.Version {
				n++
				break
			}
		}
	}
	return n, nil
}

// Collect builds the whole report of one tenant, as an admin sees it;
// audit runs the audit now (otherwise the audit figures are zero and the
// counts come from the cheap stats).
func (c *Collector) Collect(ctx context.Context, tenant string, audit bool) (Report, error) {
	var srcs []provenance.SourceState
	if _, counts := c.st.(store.SourceCounter); audit || !counts {
		// The audit reads every document anyway; without the registry's
		// counts, listing them is how they are counted.
		var err error
		if srcs, err = c.st.ListSources(ctx, tenant); err != nil {
			return Report{Tenant: tenant}, fmt.Errorf("listing sources: %w", err)
		}
	}
	r, err := c.tenantReport(ctx, tenant, srcs, audit)
	if err != nil {
		return r, err
	}
	r.Admin = true
	r.PipelineFigures, err = c.pipeline(ctx)
	return r, err
}

// tenantReport counts the whole tenant and, when audit is set, audits it.
// srcs is the tenant's registry, or nil when the registry's counts are to
// be read instead (and audit is not set).
func (c *Collector) tenantReport(ctx context.Context, tenant string, srcs []provenance.SourceState, audit bool) (Report, error) {
	r := Report{Tenant: tenant, Scope: ScopeTenant, AuditFigures: &AuditFigures{}, Build: buildinfo.Read()}
	if srcs != nil {
		r.Documents = store.CountStates(srcs).Live
	} else if counter, ok := c.st.(store.SourceCounter); ok {
		counts, err := counter.CountSources(ctx, tenant)
		if err != nil {
			return r, fmt.Errorf("counting sources: %w", err)
		}
		r.Documents = counts.Live
	}
	st, err := c.st.Stats(ctx, tenant)
	if err != nil {
		return r, fmt.Errorf("reading stats: %w", err)
	}
	r.Applied, r.Entities, r.Edges = st.Sources, st.Entities, st.Edges
	if audit {
		a, err := c.audit(ctx, tenant, srcs)
		if err != nil {
			return r, fmt.Errorf("auditing: %w", err)
		}
		r.Audited, r.AuditFigures = true, &a
	}
	return r, nil
}

// pipeline reads the process's figures: pending events per stage, dead
// letters, the outbox, index lag and LLM spend.
func (c *Collector) pipeline(ctx context.Context) (*PipelineFigures, error) {
	p := &PipelineFigures{Pending: map[string]uint64{}, StageLag: map[string]Lag{}, Sources: []Source{}}
	if c.bus == nil {
		return p, nil
	}
	for _, s := range c.stages {
		n, err := c.bus.Pending(ctx, s)
		if err != nil {
			c.log.Warn("reading pending count", "stage", s, "error", err)
			continue
		}
		p.Pending[s] = n
	}
	dl, err := c.bus.DeadLetters(ctx)
	if err != nil {
		return p, err
	}
	p.DeadLetters = dl
	p.OutboxPending = c.outboxPending(ctx)
	c.fleetFigures(ctx, p)
	return p, nil
}

// outboxPending counts the events the registry's outbox holds, plus any
// still in the key-value bucket an older gateway kept them in (a gateway
// moves them into the registry at start and deletes the bucket). A failure
// is logged and counts 0.
func (c *Collector) outboxPending(ctx context.Context) int {
	n := 0
	if ob, ok := c.st.(store.Outbox); ok {
		m, err := ob.PendingCount(ctx)
		if err != nil {
			c.log.Warn("reading the outbox", "error", err)
		}
		n += m
	}
	old, err := c.bus.OutboxPending(ctx)
	if err != nil {
		c.log.Warn("reading the old outbox bucket", "error", err)
	}
	return n + old
}

// fleetFigures sets the figures the processes recorded: index lag and
// LLM spend. A failure to read them is logged and leaves them out.
func (c *Collector) fleetFigures(ctx context.Context, p *PipelineFigures) {
	f, err := readFleet(ctx, c.bus, time.Now(), c.recorder)
	if err != nil {
		c.log.Warn("reading the processes' status figures", "error", err)
		return
	}
	p.Sources, p.LLM = f.Sources, f.LLM
	for stage, vs := range f.Lag {
		p.StageLag[stage] = lagOf(vs)
	}
	p.IndexLag = p.StageLag["graph"]
}

// CollectFor builds the report of the caller's tenant as the caller may
// see it. An admin gets everything (Collect). A caller every document of
// the tenant admits gets the tenant's counts and audit figures. Anyone
// else gets counts of what they may read only (documents, and the entities
// and edges those support) and no audit figures, which count and name
// documents they may not read. No one but an admin gets the pipeline
// figures: they count every tenant's and every document's activity.
//
// A caller's counts without the audit are kept (see countCache) and served
// again while neither the tenant's registry nor its graph has changed.
func (c *Collector) CollectFor(ctx context.Context, caller provenance.Caller, audit bool) (Report, error) {
	if caller.Admin {
		return c.Collect(ctx, caller.Tenant, audit)
	}
	if !audit {
		if r, ok := c.counts.collect(ctx, c, caller); ok {
			return r, nil
		}
	}
	return c.collectFor(ctx, caller, audit)
}

// collectFor is CollectFor of a caller who is no admin, computed now.
func (c *Collector) collectFor(ctx context.Context, caller provenance.Caller, audit bool) (Report, error) {
	srcs, err := c.st.ListSources(ctx, caller.Tenant)
	if err != nil {
		return Report{Tenant: caller.Tenant}, fmt.Errorf("listing sources: %w", err)
	}
	var readable []provenance.SourceState
	hidden := false
	for _, s := range srcs {
		switch {
		case provenance.Readable(caller, s):
			readable = append(readable, s)
		case s.Deleted && s.ACL.Admits(caller):
			// A deletion of a document the caller could read hides nothing.
		default:
			hidden = true
		}
	}
	if !hidden {
		return c.tenantReport(ctx, caller.Tenant, srcs, audit)
	}
	return c.readableReport(ctx, caller.Tenant, readable)
}

// sourceIndexChunk is how many documents' indexes readableReport reads
// in one call.
const sourceIndexChunk = 1024

// readableReport counts the readable documents of tenant (their registry
// states) and the entities and edges they support.
func (c *Collector) readableReport(ctx context.Context, tenant string, readable []provenance.SourceState) (Report, error) {
	r := Report{Tenant: tenant, Scope: ScopeReadable, Documents: len(readable), Build: buildinfo.Read()}
	entities, edges := map[string]struct{}{}, map[string]struct{}{}
	count := func(ix store.SourceIndex) {
		if ix.Deleted {
			return
		}
		r.Applied++
		for _, e := range ix.Entities {
			entities[e] = struct{}{}
		}
		for _, e := range ix.Edges {
			edges[e] = struct{}{}
		}
	}
	// The indexes kept (see indexCache); the others read, the records'
	// contribution indexes alone, a chunk at a time: not their text units
	// nor their stored extractions (store.IndexesOf).
	from := c.indexes.begin()
	var unread []string
	for _, s := range readable {
		if ix, ok := c.indexes.get(tenant, s); ok {
			count(ix)
		} else {
			unread = append(unread, s.DocID)
		}
	}
	for start := 0; start < len(unread); start += sourceIndexChunk {
		ixs, err := store.IndexesOf(ctx, c.st, tenant, unread[start:min(start+sourceIndexChunk, len(unread))])
		if err != nil {
			return r, fmt.Errorf("reading source indexes: %w", err)
		}
		c.indexes.keep(tenant, ixs, from)
		for _, ix := range ixs {
			count(ix)
		}
	}
	r.Entities, r.Edges = len(entities), len(edges)
	return r, nil
}

// Handler serves GET /v1/status[?audit=1] for the caller's tenant, with
// the figures the caller may see (see CollectFor).
func (c *Collector) Handler(a *auth.Authenticator) http.Handler {
	return httpapi.Authenticated(a, c.log, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, _ := auth.CallerFrom(r.Context())
		audit := r.URL.Query().Get("audit") != ""
		rep, err := c.CollectFor(r.Context(), caller, audit)
		if err != nil {
			httpapi.WriteError(w, c.log, httpapi.Errorf(http.StatusServiceUnavailable, "status_unavailable", "%v", err))
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, rep)
	}))
}
