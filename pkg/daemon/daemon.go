// Package daemon is what every standalone kgstream service binary shares:
// the common flags (NATS, Redis, stream, subjects, HTTP), opening the stores
// and the bus, serving /metrics, /healthz and /readyz, and running until a
// signal arrives. Each service's main parses its flags and calls Run.
package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/kgstream/kgstream/pkg/buildinfo"
	"github.com/kgstream/kgstream/pkg/serve"
	"github.com/kgstream/kgstream/pkg/service"
	"github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	redisstore "github.com/kgstream/kgstream/pkg/store/redis"
	"github.com/kgstream/kgstream/pkg/stream"
)

// Flags are the options every service takes.
type Flags struct {
	Name          string
	NATSURL       string
	RedisURL      string
	RedisPrefix   string
	DataDir       string
	Stream        string
	SubjectPrefix string
	HTTPAddr      string
	// LogFormat ("json" or "text") and LogLevel (debug, info, warn, error)
	// configure the process's logger (NewLogger).
	LogFormat string
	LogLevel  string
	// Config is the YAML config file Parse applies (--config, KG_CONFIG).
	Config string
	// DrainTimeout is how long a stopping stage lets its handlers in flight
	// finish before cancelling them (--drain-timeout, KG_DRAIN_TIMEOUT);
	// what they did not finish is redelivered.
	DrainTimeout time.Duration
	// StatsInterval is how often the process records the status figures
	// it holds (index lag samples, LLM usage) for `GET /v1/status` in any
	// process (--stats-interval, KG_STATS_INTERVAL).
	StatsInterval time.Duration

	// envErr is a malformed environment default, reported by Run.
	envErr error
}

// Register adds the common flags to fs with defaults from the environment.
func (f *Flags) Register(fs *flag.FlagSet, defaultHTTP string) {
	fs.StringVar(&f.NATSURL, "nats", envOr("KG_NATS_URL", "nats://127.0.0.1:4222"), "NATS URL")
	fs.StringVar(&f.RedisURL, "redis", envOr("KG_REDIS_URL", ""), "Redis URL of the stores (empty: embedded store under --data, single-process only)")
	fs.StringVar(&f.RedisPrefix, "redis-prefix", envOr("KG_REDIS_PREFIX", "kg"), "Redis key prefix")
	fs.StringVar(&f.DataDir, "data", envOr("KG_DATA_DIR", "./data"), "data directory for the embedded store")
	fs.StringVar(&f.Stream, "stream", envOr("KG_STREAM", "KG"), "JetStream stream name")
	fs.StringVar(&f.SubjectPrefix, "subject-prefix", envOr("KG_SUBJECT_PREFIX", "kg"), "subject prefix")
	fs.StringVar(&f.HTTPAddr, "http", envOr("KG_HTTP_ADDR", defaultHTTP), "HTTP address for the API (if any), /metrics, /healthz and /readyz")
	fs.StringVar(&f.LogFormat, "log-format", envOr("KG_LOG_FORMAT", LogFormatJSON), "log format: json or text")
	fs.StringVar(&f.LogLevel, "log-level", envOr("KG_LOG_LEVEL", "info"), "log level: debug, info, warn or error")
	fs.StringVar(&f.Config, "config", envOr("KG_CONFIG", ""), "YAML config file holding any of these flags by name (flags and KG_* variables win over it)")
	drain, err := envDuration("KG_DRAIN_TIMEOUT", stream.DefaultDrainTimeout)
	f.envErr = errors.Join(f.envErr, err)
	fs.DurationVar(&f.DrainTimeout, "drain-timeout", drain, "on shutdown, how long handlers in flight may finish before they are cancelled and their events redelivered")
	every, err := envDuration("KG_STATS_INTERVAL", status.DefaultRecordEvery)
	f.envErr = errors.Join(f.envErr, err)
	fs.DurationVar(&f.StatsInterval, "stats-interval", every, "how often the process records its index lag samples and LLM usage for the status of every process")
}

// envDuration is the duration in the environment variable k, d when unset.
func envDuration(k string, d time.Duration) (time.Duration, error) {
	v := os.Getenv(k)
	if v == "" {
		return d, nil
	}
	got, err := time.ParseDuration(v)
	if err != nil {
		return d, fmt.Errorf("%s: %w", k, err)
	}
	return got, nil
}

// Logger returns the service's logger on stderr, as --log-format and
// --log-level ask (JSON at info when unset), tagged with the service name.
func (f *Flags) Logger() (*slog.Logger, error) {
	format, level := f.LogFormat, f.LogLevel
	if format == "" {
		format = LogFormatJSON
	}
	if level == "" {
		level = "info"
	}
	log, err := NewLogger(os.Stderr, format, level)
	if err != nil {
		return nil, err
	}
	if f.Name != "" {
		log = log.With("service", f.Name)
	}
	return log, nil
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// StoreFile and VectorFile are the embedded store's and vector index's
// files in the data directory.
const (
	StoreFile  = "kgstream.db"
	VectorFile = "vectors.db"
)

// OpenStores opens Redis stores when redisURL is set, else the embedded
// store under dataDir.
func OpenStores(ctx context.Context, dataDir, redisURL, prefix string) (store.Stores, error) {
	if redisURL != "" {
		opts, err := goredis.ParseURL(redisURL)
		if err != nil {
			return nil, fmt.Errorf("parsing redis url: %w", err)
		}
		s := redisstore.New(goredis.NewClient(opts), prefix)
		if err := s.Ping(ctx); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("connecting to redis: %w", err)
		}
		return s, nil
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating data dir: %w", err)
	}
	return embedded.Open(filepath.Join(dataDir, StoreFile), embedded.Options{})
}

// Env is what a service's body gets.
type Env struct {
	Flags    Flags
	Log      *slog.Logger
	Registry *prometheus.Registry
	Bus      *stream.Bus
	Stores   store.Stores
	Ready    *serve.Readiness
	// Recorder records the process's status figures (Run runs it); a
	// status collector in the process may flush it (WithRecorder).
	Recorder *status.Recorder

	closers []func()
	// warming are what readiness waits for (ReadyAfter).
	warming []<-chan struct{}
}

// ReadyAfter has the process answer /readyz with 503 until ch is closed
// (as well as until it has started).
func (env *Env) ReadyAfter(ch <-chan struct{}) { env.warming = append(env.warming, ch) }

// Deps are env's connections as every service's constructor takes them.
func (env *Env) Deps() service.Deps {
	return service.Deps{Bus: env.Bus, Stores: env.Stores, Log: env.Log, Registry: env.Registry, Recorder: env.Recorder}
}

// Defer has Run call f once the service has stopped (for what the body
// opened, such as a vector index).
func (env *Env) Defer(f func()) { env.closers = append(env.closers, f) }

// Build makes a service from what the process opened; deps are
// env.Deps() plus what the service's main adds (tokens, vector index, LLM).
type Build func(ctx context.Context, env *Env) (service.Service, error)

// ServiceBody is the Body of the service build makes: its actors run as
// one group, and its routes with the OpenAPI document are the API.
func ServiceBody(build Build) Body {
	return func(ctx context.Context, env *Env) (func(context.Context) error, http.Handler, error) {
		svc, err := build(ctx, env)
		if err != nil {
			return nil, nil, err
		}
		var api http.Handler
		if service.HasAPI(svc) {
			api = service.API(svc)
		}
		if w, ok := svc.(service.Warmer); ok {
			env.ReadyAfter(w.Warmed())
		}
		actors := svc.Actors()
		return func(ctx context.Context) error { return service.Run(ctx, actors) }, api, nil
	}
}

// Body builds a service's worker and API from env. It returns the function
// to run (blocking until ctx is done) and an optional API handler.
type Body func(ctx context.Context, env *Env) (run func(context.Context) error, api http.Handler, err error)

// Run connects, builds the service with body, serves HTTP and runs it until
// SIGINT/SIGTERM. needStores says whether the service reads the stores. The
// HTTP server and the body's run function are one group: the first to
// return stops the other, and an error of either (a stage that failed) is
// Run's, which the service's main turns into a non-zero exit.
func Run(f Flags, needStores bool, body Body) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, f, needStores, body)
}

// RunContext is Run until ctx ends instead of a signal.
func RunContext(ctx context.Context, f Flags, needStores bool, body Body) error {
	return run(ctx, f, needStores, body)
}

// UsageError marks an error in the command line (exit status 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Main is a service binary's main: run parses args (a parse error wrapped
// in a UsageError) and runs the service until SIGINT or SIGTERM. -help
// exits 0, a command-line error 2, any other error 1, each error printed
// after the binary's name.
func Main(name string, run func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	var usage *UsageError
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, f Flags, needStores bool, body Body) error {
	if f.envErr != nil {
		return f.envErr
	}
	log, err := f.Logger()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := buildinfo.Register(reg, f.Name); err != nil {
		return err
	}
	scfg := stream.Config{URL: f.NATSURL, Stream: f.Stream, DrainTimeout: f.DrainTimeout}
	scfg.Subjects.Prefix = f.SubjectPrefix
	bus, err := stream.Connect(ctx, scfg, log, stream.NewMetrics(reg))
	if err != nil {
		return err
	}
	defer bus.Close()
	rec, err := status.NewRecorder(status.RecorderConfig{Service: f.Name, Every: f.StatsInterval}, bus, reg, log)
	if err != nil {
		return err
	}
	env := &Env{Flags: f, Log: log, Registry: reg, Bus: bus, Ready: &serve.Readiness{}, Recorder: rec}
	if needStores {
		st, err := OpenStores(ctx, f.DataDir, f.RedisURL, f.RedisPrefix)
		if err != nil {
			return err
		}
		defer st.Close()
		env.Stores = st
	}
	defer func() {
		for i := len(env.closers) - 1; i >= 0; i-- {
			env.closers[i]()
		}
	}()
	runBody, api, err := body(ctx, env)
	if err != nil {
		return err
	}
	l, err := serve.Listen(f.HTTPAddr)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	gctx, cancel := context.WithCancel(gctx)
	defer cancel()
	g.Go(func() error {
		defer cancel()
		return serve.Serve(gctx, l, serve.Mux(api, reg, env.Ready), log)
	})
	g.Go(func() error {
		defer cancel()
		return runBody(gctx)
	})
	g.Go(func() error { return rec.Run(gctx) })
	log.Info("service started", "http", l.Addr().String(), "nats", f.NATSURL, "drain_timeout", f.DrainTimeout)
	// Ready once every service's warm-up (ReadyAfter) is over.
	readied := make(chan struct{})
	go func() {
		defer close(readied)
		began := time.Now()
		for _, ch := range env.warming {
			select {
			case <-ch:
			case <-gctx.Done():
				return
			}
		}
		if gctx.Err() == nil {
			env.Ready.Set(true)
			if len(env.warming) > 0 {
				log.Info("service ready", "warm_up", time.Since(began).Round(time.Millisecond))
			}
		}
	}()
	<-gctx.Done()
	<-readied
	env.Ready.Set(false)
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if err != nil {
		log.Error("service stopped", "error", err)
		return err
	}
	log.Info("service stopped")
	return nil
}

// Block waits for ctx; for services whose work is all in their HTTP API.
func Block(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
