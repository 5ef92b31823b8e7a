package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/errkind"
	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/store"
)

// Stores is what the query service reads: the source registry (for
// admission) and the graph, community and report stores. Every adapter's
// store.Stores satisfies it.
type Stores interface {
	store.Registry
	store.GraphStore
	store.CommunityStore
	store.ReportStore
}

// Service answers the query routes of API.md.
type Service struct {
	cfg        Config
	st         Stores
	auth       *auth.Authenticator
	log        *slog.Logger
	excluded   map[string]bool // entity ids never stepped onto by paths
	exTypes    map[string]bool // entity types never stepped onto by paths
	units      unitCache       // tokenized text units of applied versions
	names      nameWordCache   // name words and keys of entity names
	cache      caches          // per-tenant reads, dropped by events (Config.Events)
	composed   *composed       // NewService's: status, web UI, owned aliases
	regs       regViews        // per-tenant registry listings, checked by generation
	warmed     chan struct{}   // closed when the start-up warm-up is over (warm.go)
	warmedOnce sync.Once       // a second Run warms again but closes warmed once
	namesAsked sync.Map        // tenant → when a request last used its name index (keepWarm)
	namesKept  sync.Map        // tenant → when keepWarm last patched its name index (recentNames)

	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	llmFallbacks prometheus.Counter
	// readmissionDrops counts vector hits the registry refused (the index
	// lagging a revocation or deletion): a figure for operators, never
	// shown in a response.
	readmissionDrops prometheus.Counter
}

// New returns a Service. cfg's zero fields take defaults; st and a are
// required; log may be nil (discard) and reg may be nil (metrics are kept
// but not registered).
func New(cfg Config, st Stores, a *auth.Authenticator, log *slog.Logger, reg prometheus.Registerer) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("validating query config: %w", err)
	}
	if st == nil {
		return nil, errors.New("creating query service: stores are nil")
	}
	if a == nil {
		return nil, errors.New("creating query service: authenticator is nil")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		cfg:      cfg,
		st:       st,
		auth:     a,
		log:      log,
		warmed:   make(chan struct{}),
		excluded: make(map[string]bool),
		exTypes:  make(map[string]bool),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_query_requests_total",
			Help: "Query API requests by route and HTTP status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kgstream_query_duration_seconds",
			Help:    "Query API request duration by route.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		llmFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgstream_query_llm_fallbacks_total",
			Help: "Answers whose LLM step failed (call, shape or citations) and that the offline path answered instead.",
		}),
		readmissionDrops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgstream_query_readmission_drops_total",
			Help: "Vector search hits the source registry refused on re-admission (the index lagging a revocation, deletion or edit).",
		}),
	}
	s.cache.graph.succeed = (*graphSet).succeed
	for _, id := range cfg.ExcludedPathEntities {
		s.excluded[id] = true
	}
	for _, t := range cfg.ExcludedPathTypes {
		s.exTypes[t] = true
	}
	if !cfg.WarmOnStart || cfg.Events == nil {
		// Nothing to warm: Warmed (and the process's readiness) waits for
		// nothing.
		s.warmedOnce.Do(func() { close(s.warmed) })
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{s.requests, s.duration, s.llmFallbacks, s.readmissionDrops} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering query metrics: %w", err)
			}
		}
	}
	return s, nil
}

// Run blocks until ctx is done. With Config.Events set it follows
// kg.graph.changed, kg.communities.changed and kg.reports.changed and
// keeps per-tenant caches of whole-tenant reads meanwhile (warmed first
// with Config.WarmOnStart); without it nothing is cached.
func (s *Service) Run(ctx context.Context) error {
	if s.cfg.Events == nil {
		<-ctx.Done()
		return nil
	}
	return s.follow(ctx, s.cfg.Events)
}

// Route patterns, also the "route" label of the metrics.
const (
	routePaths       = "GET /v1/paths"
	routeAggregate   = "GET /v1/aggregate"
	routeEntities    = "GET /v1/entities"
	routeEntity      = "GET /v1/entities/{type}/{name}"
	routeCommunities = "GET /v1/communities"
	routeReport      = "GET /v1/reports/{id}"
	routeQuery       = "POST /v1/query"
)

// Handler returns the query routes, each behind bearer authentication.
// /metrics, /healthz and /readyz are not included: the process that mounts
// this handler serves those for all its components.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	s.handle(mux, routePaths, s.paths)
	s.handle(mux, routeAggregate, s.aggregate)
	s.handle(mux, routeEntities, s.entities)
	s.handle(mux, routeEntity, s.entity)
	s.handle(mux, routeCommunities, s.communities)
	s.handle(mux, routeReport, s.report)
	s.handle(mux, routeQuery, s.query)
	s.handleUIRoutes(mux)
	return mux
}

// handlerFunc answers one authenticated request: a body for 200, or an error
// (an *httpapi.Error, or anything else for 500/503).
type handlerFunc func(v *view, w http.ResponseWriter, r *http.Request) (any, error)

func (s *Service) handle(mux *http.ServeMux, pattern string, h handlerFunc) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, ok := auth.CallerFrom(r.Context())
		if !ok {
			// Unreachable behind Authenticated; refuse rather than read as nobody.
			httpapi.WriteError(w, s.log, httpapi.Errorf(http.StatusUnauthorized, "unauthenticated", "no caller"))
			return
		}
		v := newView(r.Context(), s, caller)
		body, err := h(v, w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, body)
	})
	authed := httpapi.Authenticated(s.auth, s.log, inner)
	// Instrumentation sits outside authentication so 401s are counted too.
	mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		authed.ServeHTTP(sw, r)
		s.requests.WithLabelValues(pattern, strconv.Itoa(sw.status)).Inc()
		s.duration.WithLabelValues(pattern).Observe(time.Since(start).Seconds())
	}))
}

// writeError maps err to a JSON error (httpapi.FromError). An admission
// failure is 503: the request fails closed rather than showing unchecked
// data. What a 5xx hides is logged.
func (s *Service) writeError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errAdmissionUnavailable):
		err = errkind.Wrap(errkind.Unavailable, "admission_unavailable", err, "source permissions cannot be checked right now; try again")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		httpapi.WriteError(w, nil, errkind.Wrap(errkind.Unavailable, "unavailable", err, "request cancelled or timed out"))
		return
	}
	var he *httpapi.Error
	if !errors.As(err, &he) && httpapi.FromError(err).Status >= 500 {
		s.log.Error("query failed", "route", r.Pattern, "error", err)
	}
	httpapi.WriteError(w, nil, err)
}

// statusWriter remembers the status code for the metrics.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer
// (MaxBytesReader uses it to close oversized requests).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
