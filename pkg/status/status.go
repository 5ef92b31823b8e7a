// Package status gathers what ops watch: documents, entities, edges,
// pending events per stage, dead letters, orphan edges and index lag. It
// backs `GET /v1/status` and `kgstream status`.
package status

import (
	"context"
	"errors"
	"fmt"
	"github.com/kgstream/kgstream/pkg/buildinfo"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
)

// Stores is what status reads.
type Stores interface {
	store.Registry
	store.GraphStore
	store.ReportStore
}

// Lag is a pair of quantiles in seconds.
type Lag struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
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
type Report struct {
	Tenant string `json:"tenant"`
	// Scope says what Documents, Applied, Entities and Edges count
	// (ScopeTenant or ScopeReadable).
	Scope           string            `json:"scope,omitempty"`
	Documents       int               `json:"documents"`
	Applied         int               `json:"applied"`
	Entities        int               `json:"entities"`
	Edges           int               `json:"edges"`
	OrphanEdges     int               `json:"orphan_edges"`
	OrphanEntities  int               `json:"orphan_entities"`
	IndexMismatches int               `json:"index_mismatches"`
	Audited         bool              `json:"audited"`
	StaleReports    int               `json:"stale_reports"`
	DeadLetters     uint64            `json:"dead_letters"`
	Pending         map[string]uint64 `json:"pending"`
	// OutboxPending counts the events the registry holds that JetStream
	// has not acknowledged yet (the gateway republishes them).
	OutboxPending int      `json:"outbox_pending"`
	IndexLag      Lag      `json:"index_lag_seconds"`
	Problems      []string `json:"problems,omitempty"`
	// LLM is the extraction spend this process saw (absent when it runs no
	// LLM extractor).
	LLM *LLMUsage `json:"llm,omitempty"`
	// Build is the build of the process that answered.
	Build buildinfo.Info `json:"build"`
}

// LLMUsage sums the LLM extractor's metrics over models.
type LLMUsage struct {
	Documents        uint64  `json:"documents"`
	Calls            float64 `json:"calls"`
	PromptTokens     float64 `json:"prompt_tokens"`
	CompletionTokens float64 `json:"completion_tokens"`
	Cost             float64 `json:"cost"`
	CallsPerDocument float64 `json:"calls_per_document"`
	CostPerDocument  float64 `json:"cost_per_document"`
}

// Collector computes reports and keeps kgstream_orphan_edges current.
type Collector struct {
	st       Stores
	bus      *stream.Bus
	stages   []string
	log      *slog.Logger
	orphans  *prometheus.GaugeVec
	stale    *prometheus.GaugeVec
	gatherer prometheus.Gatherer
}

// WithGatherer lets Collect report the LLM spend from this process's
// metrics (the all-in-one's registry).
func (c *Collector) WithGatherer(g prometheus.Gatherer) *Collector {
	c.gatherer = g
	return c
}

// llmUsage reads the extractor's LLM metrics from the gatherer.
func (c *Collector) llmUsage() *LLMUsage {
	if c.gatherer == nil {
		return nil
	}
	mfs, err := c.gatherer.Gather()
	if err != nil {
		c.log.Warn("gathering metrics", "error", err)
		return nil
	}
	u := &LLMUsage{}
	var calls, cost float64
	seen := false
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "kgstream_llm_calls_total":
				seen = true
				u.Calls += m.GetCounter().GetValue()
			case "kgstream_llm_cost_total":
				u.Cost += m.GetCounter().GetValue()
			case "kgstream_llm_tokens_total":
				for _, l := range m.GetLabel() {
					if l.GetName() == "direction" && l.GetValue() == "prompt" {
						u.PromptTokens += m.GetCounter().GetValue()
					} else if l.GetName() == "direction" {
						u.CompletionTokens += m.GetCounter().GetValue()
					}
				}
			case "kgstream_llm_calls_per_document":
				u.Documents += m.GetHistogram().GetSampleCount()
				calls += m.GetHistogram().GetSampleSum()
			case "kgstream_llm_cost_per_document":
				cost += m.GetHistogram().GetSampleSum()
			}
		}
	}
	if !seen {
		return nil
	}
	if u.Documents > 0 {
		u.CallsPerDocument = calls / float64(u.Documents)
		u.CostPerDocument = cost / float64(u.Documents)
	}
	return u
}

// NewCollector returns a Collector; stages are the consumer names whose
// pending counts are reported. bus may be nil (no pending or dead letters).
func NewCollector(st Stores, bus *stream.Bus, stages []string, log *slog.Logger, reg prometheus.Registerer) (*Collector, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Collector{st: st, bus: bus, stages: stages, log: log,
		orphans: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgstream_orphan_edges",
			Help: "Edges without a live supporting source, from the last audit (must be 0).",
		}, []string{"tenant"}),
		stale: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgstream_stale_reports",
			Help: "Reports built from a source version that is no longer current (or deleted): admitted to no one until rewritten.",
		}, []string{"tenant"}),
	}
	if reg != nil {
		for _, m := range []prometheus.Collector{c.orphans, c.stale} {
			if err := reg.Register(m); err != nil {
				return nil, fmt.Errorf("registering status metrics: %w", err)
			}
		}
	}
	return c, nil
}

// Audit scans every tenant and updates the orphan gauge.
func (c *Collector) Audit(ctx context.Context) error {
	tenants, err := c.st.GraphTenants(ctx)
	if err != nil {
		return fmt.Errorf("listing tenants: %w", err)
	}
	for _, t := range tenants {
		a, err := c.st.Audit(ctx, t)
		if err != nil {
			return fmt.Errorf("auditing %s: %w", t, err)
		}
		c.orphans.WithLabelValues(t).Set(float64(a.OrphanEdges))
		n, err := c.staleReports(ctx, t)
		if err != nil {
			return fmt.Errorf("counting stale reports of %s: %w", t, err)
		}
		c.stale.WithLabelValues(t).Set(float64(n))
		if a.OrphanEdges > 0 || a.OrphanEntities > 0 || a.IndexMismatches > 0 {
			c.log.Error("audit found inconsistencies", "tenant", t, "orphan_edges", a.OrphanEdges,
				"orphan_entities", a.OrphanEntities, "index_mismatches", a.IndexMismatches, "problems", a.Problems)
		}
	}
	return nil
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

// Collect builds the report of one tenant; audit recounts orphans from the
// store (otherwise the counts come from the cheap stats).
func (c *Collector) Collect(ctx context.Context, tenant string, audit bool) (Report, error) {
	r := Report{Tenant: tenant, Pending: map[string]uint64{}, Build: buildinfo.Read()}
	srcs, err := c.st.ListSources(ctx, tenant)
	if err != nil {
		return r, fmt.Errorf("listing sources: %w", err)
	}
	for _, s := range srcs {
		if !s.Deleted {
			r.Documents++
		}
	}
	st, err := c.st.Stats(ctx, tenant)
	if err != nil {
		return r, fmt.Errorf("reading stats: %w", err)
	}
	r.Applied, r.Entities, r.Edges = st.Sources, st.Entities, st.Edges
	if audit {
		a, err := c.st.Audit(ctx, tenant)
		if err != nil {
			return r, fmt.Errorf("auditing: %w", err)
		}
		r.Audited = true
		r.OrphanEdges, r.OrphanEntities, r.IndexMismatches, r.Problems = a.OrphanEdges, a.OrphanEntities, a.IndexMismatches, a.Problems
		c.orphans.WithLabelValues(tenant).Set(float64(a.OrphanEdges))
		if r.StaleReports, err = c.staleReports(ctx, tenant); err != nil {
			return r, fmt.Errorf("counting stale reports: %w", err)
		}
		c.stale.WithLabelValues(tenant).Set(float64(r.StaleReports))
	}
	r.LLM = c.llmUsage()
	if c.bus != nil {
		for _, s := range c.stages {
			n, err := c.bus.Pending(ctx, s)
			if err != nil {
				c.log.Warn("reading pending count", "stage", s, "error", err)
				continue
			}
			r.Pending[s] = n
		}
		dl, err := c.bus.DeadLetters(ctx)
		if err != nil {
			return r, err
		}
		r.DeadLetters = dl
		if r.OutboxPending, err = c.bus.OutboxPending(ctx); err != nil {
			c.log.Warn("reading the outbox", "error", err)
		}
		if p50, p99, ok := c.bus.LagQuantiles("graph"); ok {
			r.IndexLag = Lag{P50: p50, P99: p99}
		}
	}
	return r, nil
}

// CollectFor builds the report of the caller's tenant as the caller may
// see it. An admin, or a caller every document of the tenant admits, gets
// the tenant's counts; anyone else gets counts of what they may read only
// (documents, and the entities and edges those support), and no audit
// problem lines, which name documents. Pending events, dead letters, lag
// and LLM spend are the process's pipeline figures either way.
func (c *Collector) CollectFor(ctx context.Context, caller provenance.Caller, audit bool) (Report, error) {
	r, err := c.Collect(ctx, caller.Tenant, audit)
	if err != nil {
		return r, err
	}
	r.Scope = ScopeTenant
	if caller.Admin {
		return r, nil
	}
	srcs, err := c.st.ListSources(ctx, caller.Tenant)
	if err != nil {
		return r, fmt.Errorf("listing sources: %w", err)
	}
	var readable []string
	hidden := false
	for _, s := range srcs {
		switch {
		case provenance.Readable(caller, s):
			readable = append(readable, s.DocID)
		case s.Deleted && s.ACL.Admits(caller):
			// A deletion of a document the caller could read hides nothing.
		default:
			hidden = true
		}
	}
	if !hidden {
		return r, nil
	}
	r.Scope, r.Problems = ScopeReadable, nil
	r.Documents, r.Applied = len(readable), 0
	entities, edges := map[string]struct{}{}, map[string]struct{}{}
	for _, id := range readable {
		rec, err := c.st.Source(ctx, caller.Tenant, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return r, fmt.Errorf("reading source %q: %w", id, err)
		}
		if rec.Deleted {
			continue
		}
		r.Applied++
		for _, e := range rec.Entities {
			entities[e] = struct{}{}
		}
		for _, e := range rec.Edges {
			edges[e] = struct{}{}
		}
	}
	r.Entities, r.Edges = len(entities), len(edges)
	return r, nil
}

// Handler serves GET /v1/status[?audit=1] for the caller's tenant, counting
// what the caller may read (see CollectFor).
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
