// Package app composes the all-in-one kgstream process: an embedded NATS
// JetStream server (or the one at --nats), the embedded stores (or Redis),
// the embedded vector index (or Weaviate), every worker, and the gateway
// and query APIs on one address; /metrics is served on a separate ops
// address only. The distributed binaries under services/*/cmd run the same
// workers.
package app

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"github.com/kgstream/kgstream/pkg/buildinfo"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/daemon"
	kgembed "github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/httpretry"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/serve"
	"github.com/kgstream/kgstream/pkg/service"
	"github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/vector"
	"github.com/kgstream/kgstream/services/clusterer"
	"github.com/kgstream/kgstream/services/extractor"
	"github.com/kgstream/kgstream/services/extractor/llmx"
	"github.com/kgstream/kgstream/services/extractor/offline"
	extractcache "github.com/kgstream/kgstream/services/extractor/redis"
	"github.com/kgstream/kgstream/services/gateway"
	"github.com/kgstream/kgstream/services/query"
	"github.com/kgstream/kgstream/services/reporter"
	"github.com/kgstream/kgstream/services/resolver"
)

//go:embed demo
var demoFS embed.FS

// DemoFS is the bundled example corpus (a catalog and a few postmortems).
func DemoFS() fs.FS {
	sub, _ := fs.Sub(demoFS, "demo")
	return sub
}

// Config configures the all-in-one.
type Config struct {
	DataDir  string
	HTTPAddr string
	// OpsAddr serves /metrics, /healthz and /readyz (default
	// 127.0.0.1:9090, or a free loopback port when HTTPAddr asks for a free
	// port with ":0"); the API address serves no /metrics, whose labels
	// name tenants.
	OpsAddr    string
	TokensFile string
	// NATSURL selects an external NATS server instead of the embedded one.
	NATSURL string
	// RedisURL selects the Redis stores instead of the embedded ones.
	RedisURL    string
	RedisPrefix string
	// WeaviateURL selects the Weaviate vector index instead of the embedded
	// one under DataDir; WeaviateGRPC (host:port) sends its batches over
	// gRPC, WeaviateCollection prefixes its collections, WeaviateAPIKey
	// authenticates.
	WeaviateURL, WeaviateGRPC, WeaviateCollection, WeaviateAPIKey string
	// Embedder embeds text units, entity descriptions, reports and basic
	// questions (default: embed.FromEnv, the offline hashing embedder
	// unless KG_EMBED_BASE_URL is set).
	Embedder kgembed.Embedder
	// Stream and SubjectPrefix name the JetStream stream and subjects.
	Stream        string
	SubjectPrefix string
	// ExcludedPathTypes and ExcludedPathEntities are generic hubs that
	// path queries never expand through.
	ExcludedPathTypes, ExcludedPathEntities []string
	// WebhooksFile configures the webhook receivers (POST /webhooks/{provider}).
	WebhooksFile string
	// AliasesFile is the reviewed alias table (YAML), reloaded on change.
	AliasesFile string
	// Demo ingests the bundled corpus after start.
	Demo bool
	// LLM, when BaseURL is set, drives extraction, report writing and the
	// map/reduce of global answers (each falling back to the offline way
	// when the model's answer is unusable).
	LLM llm.Config
	// Quiet and MaxDelay debounce re-clustering.
	Quiet, MaxDelay time.Duration
	// FullEvery makes every FullEvery-th re-clustering a full run from
	// scratch (default 100; the others are incremental).
	FullEvery int
	// FullInterval, when positive, also makes a tenant's re-clustering a
	// full run once its last full run is that old (see
	// clusterer.Config.FullInterval).
	FullInterval time.Duration
	// GiveWay bounds how long the background stages (re-clustering,
	// provisional placement, report writing, vector indexing, and the
	// query service's background reads that keep its caches warm) wait,
	// before each batch, while the extractor and the resolver have a
	// backlog of more than 64 events: the process's cores go first to
	// making documents readable (see stream.GiveWay). The report writer
	// gives way between the reports of one event too, all those waits
	// within the one bound. Default 2s; negative: never wait.
	GiveWay time.Duration
	// AuditEvery is the orphan audit period (default 1m).
	AuditEvery time.Duration
	// MaxDeliver bounds deliveries per stage before dead-lettering.
	MaxDeliver int
	// Backoff between redeliveries.
	Backoff []time.Duration
	// DrainTimeout is how long stopping stages let their handlers in flight
	// finish before cancelling them (default stream.DefaultDrainTimeout);
	// what they did not finish is redelivered on the next start.
	DrainTimeout time.Duration
	Log          *slog.Logger
}

func (c *Config) setDefaults() {
	if c.FullEvery == 0 {
		c.FullEvery = 100
	}
	if c.GiveWay == 0 {
		c.GiveWay = 2 * time.Second
	}
	if c.DataDir == "" {
		c.DataDir = "./data"
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = "127.0.0.1:8080"
	}
	if c.OpsAddr == "" {
		c.OpsAddr = DefaultOpsAddr
		if strings.HasSuffix(c.HTTPAddr, ":0") {
			c.OpsAddr = "127.0.0.1:0"
		}
	}
	if c.RedisPrefix == "" {
		c.RedisPrefix = "kg"
	}
	if c.AuditEvery == 0 {
		c.AuditEvery = time.Minute
	}
	if c.Log == nil {
		c.Log, _ = daemon.NewLogger(os.Stderr, daemon.LogFormatText, "info")
	}
}

// DefaultOpsAddr is where the all-in-one serves /metrics by default.
const DefaultOpsAddr = "127.0.0.1:9090"

// Stages are the consumers of the pipeline, in order.
var Stages = status.Stages

// App is a running all-in-one.
type App struct {
	cfg  Config
	Addr string
	// OpsAddr is the bound ops address (/metrics, /healthz, /readyz).
	OpsAddr  string
	Registry *prometheus.Registry
	Stores   store.Stores
	Vectors  vector.Index
	Bus      *stream.Bus
	Status   *status.Collector

	ready *serve.Readiness
	api   *serve.Routes
	// components are the names of what the run group runs.
	components []string
	wg         sync.WaitGroup
	errc       chan error
	// stop cancels every component: the first to fail calls it.
	stop  context.CancelFunc
	close []func()
}

// Start starts everything and returns once the HTTP API is listening.
func Start(ctx context.Context, cfg Config) (_ *App, err error) {
	cfg.setDefaults()
	if cfg.TokensFile == "" && !loopback(cfg.HTTPAddr) {
		return nil, fmt.Errorf("without --tokens kgstream is a single-user development mode and serves loopback addresses only, not %q; give --tokens FILE to serve other hosts", cfg.HTTPAddr)
	}
	a := &App{cfg: cfg, Registry: prometheus.NewRegistry(), ready: &serve.Readiness{}, errc: make(chan error, 16)}
	defer func() {
		if err != nil {
			a.shutdown()
		}
	}()
	httpMetrics, err := a.registerMetrics()
	if err != nil {
		return nil, err
	}
	if err := a.openBus(ctx); err != nil {
		return nil, err
	}
	emb, err := a.openData(ctx, httpMetrics)
	if err != nil {
		return nil, err
	}
	authn, err := loadAuth(cfg)
	if err != nil {
		return nil, err
	}
	w, err := a.newWorkers(emb, authn)
	if err != nil {
		return nil, err
	}
	if err := a.serve(ctx, w); err != nil {
		return nil, err
	}
	cfg.Log.Info("kgstream is up", "addr", a.Addr, "ops", a.OpsAddr, "data", cfg.DataDir, "nats", orDefault(cfg.NATSURL, "embedded"),
		"stores", orDefault(cfg.RedisURL, "embedded"), "vectors", orDefault(cfg.WeaviateURL, "embedded"),
		"embedder", emb.Name(), "extractor", w.ex.Extractor().Name())
	return a, nil
}

// registerMetrics registers the process collectors and the build info, and
// makes the LLM limiter shared by every LLM client of this process (one per
// endpoint).
func (a *App) registerMetrics() (*httpretry.Metrics, error) {
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := buildinfo.Register(a.Registry, "kgstream"); err != nil {
		return nil, err
	}
	httpMetrics := httpretry.NewMetrics(a.Registry)
	if a.cfg.LLM.BaseURL != "" && a.cfg.LLM.Limiter == nil {
		l, err := llm.NewLimiter(a.cfg.LLM, httpMetrics)
		if err != nil {
			return nil, err
		}
		a.cfg.LLM.Limiter = l
	}
	return httpMetrics, nil
}

// openBus connects to NATS (the embedded server in DataDir/nats unless a
// URL is given).
func (a *App) openBus(ctx context.Context) error {
	cfg := a.cfg
	scfg := stream.Config{URL: cfg.NATSURL, Stream: cfg.Stream, DrainTimeout: cfg.DrainTimeout}
	scfg.Subjects.Prefix = cfg.SubjectPrefix
	if cfg.NATSURL == "" {
		if err := os.MkdirAll(filepath.Join(cfg.DataDir, "nats"), 0o755); err != nil {
			return fmt.Errorf("creating data dir: %w", err)
		}
		emb, err := stream.StartEmbedded(stream.EmbeddedConfig{StoreDir: filepath.Join(cfg.DataDir, "nats")})
		if err != nil {
			return err
		}
		a.close = append(a.close, emb.Shutdown)
		nc, err := emb.Connect()
		if err != nil {
			return err
		}
		a.close = append(a.close, nc.Close)
		scfg.Conn = nc
	}
	bus, err := stream.Connect(ctx, scfg, cfg.Log, stream.NewMetrics(a.Registry))
	if err != nil {
		return err
	}
	a.Bus = bus
	a.close = append(a.close, bus.Close)
	return nil
}

// openData opens the stores and the vector index and returns the embedder.
func (a *App) openData(ctx context.Context, httpMetrics *httpretry.Metrics) (kgembed.Embedder, error) {
	cfg := a.cfg
	st, err := daemon.OpenStores(ctx, cfg.DataDir, cfg.RedisURL, cfg.RedisPrefix)
	if err != nil {
		return nil, err
	}
	a.Stores = st
	a.close = append(a.close, func() { _ = st.Close() })
	vix, err := OpenVectors(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a.Vectors = vix
	a.close = append(a.close, func() { _ = vix.Close() })
	if cfg.Embedder != nil {
		return cfg.Embedder, nil
	}
	emb, err := kgembed.FromEnvMetrics(os.Getenv, httpMetrics)
	if err != nil {
		return nil, fmt.Errorf("configuring the embedder: %w", err)
	}
	return emb, nil
}

// loadAuth reads the tokens file; without one, the development mode's
// single caller is an admin of tenant default.
func loadAuth(cfg Config) (*auth.Authenticator, error) {
	if cfg.TokensFile == "" {
		dev := auth.DevCaller
		authn, _ := auth.New(nil, &dev)
		cfg.Log.Warn("no --tokens: development mode; requests without a token run as an admin of tenant default", "http", cfg.HTTPAddr)
		return authn, nil
	}
	toks, err := auth.LoadFile(cfg.TokensFile)
	if err != nil {
		return nil, err
	}
	authn, err := auth.New(toks, nil)
	if err != nil {
		return nil, fmt.Errorf("loading tokens: %w", err)
	}
	return authn, nil
}

// workers are the all-in-one's services, each built by the constructor
// its service binary uses, and the process's status recorder.
type workers struct {
	gw  *gateway.Service
	ex  *extractor.Service
	rs  *resolver.Service
	cl  *clusterer.Service
	rp  *reporter.Service
	qs  *query.Service
	rec *status.Recorder
}

// services are the workers in pipeline order, the API's first.
func (w *workers) services() []service.Service {
	return []service.Service{w.gw, w.ex, w.rs, w.cl, w.rp, w.qs}
}

// extractionCache is the LLM extraction cache: in Redis when the stores
// are, else in memory.
func (a *App) extractionCache() (llmx.Cache, error) {
	if a.cfg.RedisURL == "" {
		return llmx.NewLRUCache(0), nil
	}
	opts, err := goredis.ParseURL(a.cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("parsing redis url: %w", err)
	}
	rdb := goredis.NewClient(opts)
	a.close = append(a.close, func() { _ = rdb.Close() })
	return extractcache.New(rdb, a.cfg.RedisPrefix+":xcache:", 30*24*time.Hour)
}

// newWorkers builds every service on the process's bus, stores, vector
// index, LLM and authenticator; the query service shares the resolver's
// alias table.
func (a *App) newWorkers(emb kgembed.Embedder, authn *auth.Authenticator) (*workers, error) {
	cfg := a.cfg
	w := &workers{}
	var err error
	// One process, one set of figures: recorded and read back like those
	// of the separate services.
	if w.rec, err = status.NewRecorder(status.RecorderConfig{Service: "kgstream"}, a.Bus, a.Registry, cfg.Log); err != nil {
		return nil, err
	}
	d := service.Deps{Bus: a.Bus, Stores: a.Stores, Log: cfg.Log, Registry: a.Registry, Auth: authn,
		Vectors: a.Vectors, Embedder: emb, Recorder: w.rec}
	if cfg.LLM.BaseURL != "" {
		if d.LLM, err = llm.New(cfg.LLM); err != nil {
			return nil, fmt.Errorf("configuring the LLM client: %w", err)
		}
	}
	if w.gw, err = gateway.NewService(gateway.ServiceConfig{WebhooksFile: cfg.WebhooksFile}, d); err != nil {
		return nil, err
	}
	xcfg := extractor.ServiceConfig{Config: extractor.Config{MaxDeliver: cfg.MaxDeliver, Backoff: cfg.Backoff}, Prices: pricesFromEnv(cfg.LLM.Model)}
	if xcfg.Cache, err = a.extractionCache(); err != nil {
		return nil, err
	}
	// KG_GAZETTEER lists operators' gazetteer files (comma-separated),
	// looked for besides the bundled one.
	if xcfg.Extra, err = offline.LoadGazetteers(os.Getenv("KG_GAZETTEER")); err != nil {
		return nil, fmt.Errorf("loading the gazetteer: %w", err)
	}
	if w.ex, err = extractor.NewService(xcfg, d); err != nil {
		return nil, err
	}
	if w.rs, err = resolver.NewService(resolver.ServiceConfig{Config: resolver.Config{MaxDeliver: cfg.MaxDeliver, Backoff: cfg.Backoff},
		AliasesFile: cfg.AliasesFile}, d); err != nil {
		return nil, err
	}
	var gw *stream.GiveWay
	if cfg.GiveWay > 0 {
		// The stage names are the extractor's and the resolver's defaults,
		// which this process keeps.
		gw = &stream.GiveWay{Stages: []string{"extractor", "resolver"}, Max: cfg.GiveWay}
	}
	if w.cl, err = clusterer.NewService(clusterer.Config{Quiet: cfg.Quiet, MaxDelay: cfg.MaxDelay, FullEvery: cfg.FullEvery,
		FullInterval: cfg.FullInterval, GiveWay: gw}, d); err != nil {
		return nil, err
	}
	if w.rp, err = reporter.NewService(reporter.Config{MaxDeliver: cfg.MaxDeliver, Backoff: cfg.Backoff, GiveWay: gw}, d); err != nil {
		return nil, err
	}
	qcfg := query.ServiceConfig{Config: query.DefaultConfig()}
	qcfg.Aliases = w.rs.Aliases()
	qcfg.ExcludedPathTypes, qcfg.ExcludedPathEntities = cfg.ExcludedPathTypes, cfg.ExcludedPathEntities
	qcfg.GiveWay = gw
	if w.qs, err = query.NewService(qcfg, d); err != nil {
		return nil, err
	}
	a.Status = w.qs.Status()
	return w, nil
}

// serve opens the API and ops listeners and runs every service's actors,
// the servers, the audit and the status recorder, each in the run group
// (the first to fail stops the rest). The API is the services' routes.
func (a *App) serve(ctx context.Context, w *workers) error {
	cfg, log := a.cfg, a.cfg.Log
	a.api = service.API(w.services()...)
	l, err := serve.Listen(cfg.HTTPAddr)
	if err != nil {
		return err
	}
	a.Addr = l.Addr().String()
	ol, err := serve.Listen(cfg.OpsAddr)
	if err != nil {
		_ = l.Close()
		return fmt.Errorf("opening the ops listener: %w", err)
	}
	a.OpsAddr = ol.Addr().String()

	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.stop = cancel
	a.close = append(a.close, func() { cancel(); a.wg.Wait() })
	a.goRun("http", func() error { return serve.Serve(wctx, l, serve.Mux(a.api, nil, a.ready), log) })
	a.goRun("ops", func() error { return serve.Serve(wctx, ol, serve.Mux(nil, a.Registry, a.ready), log) })
	for _, svc := range w.services() {
		for _, act := range svc.Actors() {
			a.goRun(act.Name, func() error { return act.Run(wctx) })
		}
	}
	a.goRun("audit", func() error { return a.auditLoop(wctx) })
	a.goRun("status figures", func() error { return w.rec.Run(wctx) })
	a.ready.Set(true)
	return nil
}

// Components names what the run group runs: the servers, every service's
// actors, the audit and the status recorder.
func (a *App) Components() []string { return slices.Clone(a.components) }

// Routes is the API's routes, as the services list them (and the OpenAPI
// document): nil before Start has opened the listeners.
func (a *App) Routes() *serve.Routes { return a.api }

// OpenVectors opens the Weaviate vector index when cfg names one, else the
// embedded index in DataDir/vectors.db.
func OpenVectors(ctx context.Context, cfg Config) (vector.Index, error) {
	return daemon.OpenVectors(ctx, daemon.VectorConfig{Dir: cfg.DataDir, URL: cfg.WeaviateURL, GRPC: cfg.WeaviateGRPC,
		Collection: cfg.WeaviateCollection, APIKey: cfg.WeaviateAPIKey}, cfg.Log)
}

// pricesFromEnv reads KG_LLM_PRICE_PROMPT and KG_LLM_PRICE_COMPLETION
// (currency units per million tokens) for the configured model, so status
// can estimate the cost per document.
func pricesFromEnv(model string) llmx.PriceTable {
	p, errP := strconv.ParseFloat(os.Getenv("KG_LLM_PRICE_PROMPT"), 64)
	c, errC := strconv.ParseFloat(os.Getenv("KG_LLM_PRICE_COMPLETION"), 64)
	if errP != nil && errC != nil {
		return nil
	}
	return llmx.PriceTable{model: {PromptPerMTok: p, CompletionPerMTok: c}}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// goRun runs one component of the group: the first to fail stops the
// others (they drain as on shutdown) and its error reaches Wait.
func (a *App) goRun(name string, f func() error) {
	a.components = append(a.components, name)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := f(); err != nil && !errors.Is(err, context.Canceled) {
			a.cfg.Log.Error("component stopped", "component", name, "error", err)
			select {
			case a.errc <- fmt.Errorf("%s: %w", name, err):
			default: // the channel holds one per component; never block
			}
			a.stop()
		}
	}()
}

// auditLoop recounts orphans periodically; the first audit comes soon
// after start so the gauge exists before the first full period.
func (a *App) auditLoop(ctx context.Context) error {
	wait := min(5*time.Second, a.cfg.AuditEvery)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if err := a.Status.Audit(ctx); err != nil && ctx.Err() == nil {
			a.cfg.Log.Warn("audit failed", "error", err)
		}
		wait = a.cfg.AuditEvery
	}
}

// Err delivers the component failures, the first first.
func (a *App) Err() <-chan error { return a.errc }

// Wait blocks until ctx ends (nil) or a component fails: the others have
// then been told to stop, and the failure is returned. Close still has to
// be called.
func (a *App) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-a.errc:
		return err
	}
}

// loopback reports whether addr (host:port) listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// URL is the base URL of the HTTP API.
func (a *App) URL() string { return "http://" + a.Addr }

// OpsURL is the base URL of the ops listener (/metrics, /healthz, /readyz).
func (a *App) OpsURL() string { return "http://" + a.OpsAddr }

// Close drains and stops everything: unready first, then the workers and
// the HTTP server finish what they hold, then connections and stores close.
func (a *App) Close() {
	a.ready.Set(false)
	a.shutdown()
}

func (a *App) shutdown() {
	for i := len(a.close) - 1; i >= 0; i-- {
		a.close[i]()
	}
	a.close = nil
}

// Run starts the all-in-one, ingests the demo when asked, and blocks until
// ctx is cancelled (nil) or a component fails (its error, after every
// component has stopped).
func Run(ctx context.Context, cfg Config) error {
	a, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	if cfg.Demo {
		token, err := demoToken(cfg.TokensFile)
		if err != nil {
			return err
		}
		if err := IngestDemo(ctx, a.URL(), token); err != nil {
			if ctx.Err() != nil {
				// Stopped while the demo was going in: a stop, not a failure;
				// what was accepted stays and the rest goes in next time.
				a.cfg.Log.Warn("stopped before the demo corpus was all ingested; the next start with the demo ingests the rest")
				return nil
			}
			return fmt.Errorf("ingesting the demo corpus: %w", err)
		}
		a.cfg.Log.Info("demo corpus ingested; try: curl -s '" + a.URL() + "/v1/paths?start=service:token-issuer&rels=~mentions'")
	}
	return a.Wait(ctx)
}

// demoToken picks the token the demo ingest sends: none without a tokens
// file (anonymous callers may write), else the file's first writer token,
// else its first admin token. The demo is written as that token's tenant.
func demoToken(tokensFile string) (string, error) {
	if tokensFile == "" {
		return "", nil
	}
	toks, err := auth.LoadFile(tokensFile)
	if err != nil {
		return "", err
	}
	for _, want := range []func(auth.Token) bool{
		func(t auth.Token) bool { return t.Writer },
		func(t auth.Token) bool { return t.Admin },
	} {
		for _, t := range toks {
			if want(t) {
				return t.Token, nil
			}
		}
	}
	return "", fmt.Errorf("ingesting the demo corpus: %s has no writer or admin token to write it with", tokensFile)
}
