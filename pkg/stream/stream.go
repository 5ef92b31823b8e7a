// Package stream is the JetStream plumbing every kgstream worker shares:
// the stream definition, publishing with de-duplication ids, durable pull
// consumers with explicit ack, bounded redelivery with backoff,
// dead-lettering with the reason, and per-stage metrics. A worker is just a
// Handler; everything else is written once here.
package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/kgstream/kgstream/pkg/events"
)

// Header names kgstream sets on messages.
const (
	HeaderDLQStage      = "Kg-Dlq-Stage"
	HeaderDLQError      = "Kg-Dlq-Error"
	HeaderDLQDeliveries = "Kg-Dlq-Deliveries"
	HeaderDLQSubject    = "Kg-Dlq-Subject"
)

// Config says how to reach JetStream and which stream to use.
type Config struct {
	// URL of the NATS server; ignored when Conn is set.
	URL string
	// Conn is an existing connection (the all-in-one's in-process one).
	Conn *nats.Conn
	// Stream is the JetStream stream name (default "KG").
	Stream string
	// Subjects sets the subject prefix (default "kg").
	Subjects events.Subjects
	// Storage is file (default) or memory.
	Storage jetstream.StorageType
	// DuplicateWindow is JetStream's de-duplication window (default 1h).
	DuplicateWindow time.Duration
	// MaxAge bounds how long events are kept (default 7 days).
	MaxAge time.Duration
	// InlineMax is the largest encoded event published inline (default: the
	// server's max payload less 64 KiB). A larger one is stored in the
	// object store bucket <Stream>_payloads and the message carries a
	// reference (HeaderPayload) instead; the bus reads it back before any
	// handler runs.
	InlineMax int
	// DrainTimeout is how long a stopping stage lets the handlers in flight
	// finish before it cancels their context (default DefaultDrainTimeout);
	// a ConsumerConfig may set its own. A handler still running a second
	// after that (it ignores its context) is left behind: the stage stops
	// without it and its message is naked for redelivery.
	DrainTimeout time.Duration
}

// DefaultDrainTimeout is the drain timeout of a stage that sets none: short
// enough that a stopping process also closes its connections within the
// usual 30s a supervisor (Kubernetes' grace period) waits before killing.
const DefaultDrainTimeout = 20 * time.Second

func (c *Config) setDefaults() {
	if c.Stream == "" {
		c.Stream = "KG"
	}
	if c.Subjects.Prefix == "" {
		c.Subjects = events.DefaultSubjects
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = time.Hour
	}
	if c.MaxAge == 0 {
		c.MaxAge = 7 * 24 * time.Hour
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.URL == "" && c.Conn == nil {
		return errors.New("stream: either URL or Conn is required")
	}
	if c.DrainTimeout < 0 {
		return errors.New("stream: DrainTimeout must be >= 0")
	}
	return nil
}

// Metrics are the per-stage event metrics, registered once per registry.
type Metrics struct {
	Events      *prometheus.CounterVec
	DeadLetters *prometheus.CounterVec
	Duration    *prometheus.HistogramVec
	// Lag is kgstream_index_lag_seconds: from the gateway's receipt of a
	// change to the stage named (graph, communities, reports).
	Lag *prometheus.HistogramVec
	// BatchSize is how many messages each call of a BatchHandler got.
	BatchSize *prometheus.HistogramVec
	// Yield is kgstream_stage_yield_seconds_total: time a stage spent
	// giving way to others' backlog (see GiveWay).
	Yield *prometheus.CounterVec
}

// NewMetrics registers the event metrics on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_events_total",
			Help: "Events handled, by stage and outcome (ok, stale, retry, dead_letter, interrupted: cut short by the drain timeout and redelivered).",
		}, []string{"stage", "outcome"}),
		DeadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_dead_letters_total",
			Help: "Events sent to the dead-letter stream, by stage.",
		}, []string{"stage"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kgstream_event_handle_seconds",
			Help:    "Time to handle one event, by stage.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"stage"}),
		Lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kgstream_index_lag_seconds",
			Help:    "Time from the gateway's receipt of a change to the stage named, by stage.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}, []string{"stage"}),
		BatchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kgstream_event_batch_size",
			Help:    "Messages per call of a batch handler, by stage.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 9),
		}, []string{"stage"}),
		Yield: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_stage_yield_seconds_total",
			Help: "Time a background stage waited for the stages before it to work off their backlog, by stage.",
		}, []string{"stage"}),
	}
	if reg != nil {
		reg.MustRegister(m.Events, m.DeadLetters, m.Duration, m.Lag, m.BatchSize, m.Yield)
	}
	return m
}

// Bus is a connection to kgstream's stream.
type Bus struct {
	cfg     Config
	nc      *nats.Conn
	ownConn bool
	js      jetstream.JetStream
	stream  jetstream.Stream
	log     *slog.Logger
	metrics *Metrics

	lagMu   sync.Mutex
	lagRing map[string]*ring

	inlineMax int
	objMu     sync.Mutex
	obj       jetstream.ObjectStore

	statsKV statsKV

	backlogs backlogs
}

// ring keeps the most recent lag samples of one stage for quantiles.
type ring struct {
	buf  []float64
	next int
	// added counts every sample ever added (the ring is full once it
	// reaches len(buf)).
	added uint64
}

func (r *ring) add(v float64) {
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	r.added++
}

// Connect connects to NATS and creates or updates the stream.
func Connect(ctx context.Context, cfg Config, log *slog.Logger, metrics *Metrics) (*Bus, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	b := &Bus{cfg: cfg, nc: cfg.Conn, log: log, metrics: metrics}
	if b.nc == nil {
		nc, err := nats.Connect(cfg.URL, nats.Name("kgstream"), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(false))
		if err != nil {
			return nil, fmt.Errorf("connecting to NATS at %s: %w", cfg.URL, err)
		}
		b.nc, b.ownConn = nc, true
	}
	js, err := jetstream.New(b.nc)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	b.js = js
	want := streamConfig(cfg)
	// A stream that already has this configuration is not updated: every
	// process of a deployment connects, and an update racing with another
	// process creating its consumers is a path the server gets wrong (a
	// data race inside nats-server, seen under -race).
	st, err := js.Stream(ctx, cfg.Stream)
	if err != nil || !sameStreamConfig(st.CachedInfo().Config, want) {
		st, err = js.CreateOrUpdateStream(ctx, want)
	}
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("creating stream %s: %w", cfg.Stream, err)
	}
	b.stream = st
	b.setInlineMax()
	return b, nil
}

// streamConfig is the events stream's configuration (cfg with defaults).
func streamConfig(cfg Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "kgstream events",
		Subjects:    []string{cfg.Subjects.Wildcard()},
		Storage:     cfg.Storage,
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      cfg.MaxAge,
		Duplicates:  cfg.DuplicateWindow,
		Discard:     jetstream.DiscardOld,
	}
}

// sameStreamConfig reports whether the stored configuration has every
// setting Connect asks for (the server fills in the others).
func sameStreamConfig(have, want jetstream.StreamConfig) bool {
	return have.Name == want.Name && have.Description == want.Description && slices.Equal(have.Subjects, want.Subjects) &&
		have.Storage == want.Storage && have.Retention == want.Retention && have.MaxAge == want.MaxAge &&
		have.Duplicates == want.Duplicates && have.Discard == want.Discard
}

// ObserveLag records the index lag of a change received at received that
// has now reached stage.
func (b *Bus) ObserveLag(stage string, received time.Time) {
	if received.IsZero() {
		return
	}
	v := time.Since(received).Seconds()
	b.metrics.Lag.WithLabelValues(stage).Observe(v)
	b.lagMu.Lock()
	defer b.lagMu.Unlock()
	if b.lagRing == nil {
		b.lagRing = map[string]*ring{}
	}
	r := b.lagRing[stage]
	if r == nil {
		r = &ring{buf: make([]float64, 4096)}
		b.lagRing[stage] = r
	}
	r.add(v)
}

// LagQuantiles returns the p50 and p99 of the most recent lag samples of a
// stage seen by this process (ok false when there are none).
func (b *Bus) LagQuantiles(stage string) (p50, p99 float64, ok bool) {
	p50, p99, ok = Quantiles(b.LagSamples(stage))
	return p50, p99, ok
}

// Quantiles returns the p50 and p99 of samples, nearest rank (ok false
// when there are none). samples is not changed.
func Quantiles(samples []float64) (p50, p99 float64, ok bool) {
	if len(samples) == 0 {
		return 0, 0, false
	}
	vs := slices.Clone(samples)
	slices.Sort(vs)
	q := func(p float64) float64 { return vs[min(len(vs)-1, int(p*float64(len(vs))))] }
	return q(0.50), q(0.99), true
}

// Close closes the connection if the Bus opened it.
func (b *Bus) Close() {
	if b.ownConn && b.nc != nil {
		_ = b.nc.Drain()
	}
}

// Subjects returns the subject builder in use.
func (b *Bus) Subjects() events.Subjects { return b.cfg.Subjects }

// JetStream exposes the JetStream context (for tests and tools).
func (b *Bus) JetStream() jetstream.JetStream { return b.js }

// StreamName returns the stream's name.
func (b *Bus) StreamName() string { return b.cfg.Stream }

// Publish encodes ev, publishes it on the subject of kind for tenant with
// Nats-Msg-Id msgID, and waits for JetStream's acknowledgement. Only after it
// returns nil is the event durable. An event encoded larger than InlineMax
// travels by reference through the payload bucket.
func (b *Bus) Publish(ctx context.Context, kind events.Kind, tenant, msgID string, ev events.Validator) (*jetstream.PubAck, error) {
	data, err := events.Encode(ev)
	if err != nil {
		return nil, err
	}
	subject := b.cfg.Subjects.For(kind, tenant)
	var ack *jetstream.PubAck
	if len(data) > b.inlineMax {
		ack, err = b.publishRef(ctx, subject, msgID, data)
	} else {
		ack, err = b.js.Publish(ctx, subject, data, jetstream.WithMsgID(msgID))
	}
	if err != nil {
		return nil, fmt.Errorf("publishing %s: %w", subject, err)
	}
	return ack, nil
}

// Message is one delivery of an event to a handler.
type Message struct {
	Subject    string
	Kind       events.Kind
	Tenant     string
	Data       []byte
	Header     nats.Header
	Deliveries uint64
	Sequence   uint64
}

// Handler processes one message. A nil error acks it; an error naks it for
// redelivery with backoff, up to MaxDeliver deliveries, after which it is
// dead-lettered. An error wrapping events.ErrInvalidEvent, or marked with
// Permanent, is dead-lettered at once. A handler may return Stale(reason)
// to ack and count the message as stale.
type Handler func(ctx context.Context, m *Message) error

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as one no redelivery can fix.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// ErrStale is returned (wrapped) by handlers for events older than what is
// applied: the message is acknowledged and counted as stale.
var ErrStale = errors.New("stale event")

// IsPermanent reports whether err can never succeed on redelivery.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p) || errors.Is(err, events.ErrInvalidEvent)
}

// ConsumerConfig describes one stage's durable consumer.
type ConsumerConfig struct {
	// Stage names the stage in metrics and the dead-letter subject.
	Stage string
	// Durable is the consumer name (default: Stage).
	Durable string
	// Kinds are the event kinds this stage consumes (all tenants).
	Kinds []events.Kind
	// MaxDeliver bounds deliveries before dead-lettering (default 5).
	MaxDeliver int
	// Backoff is the nak delay per delivery; the last value repeats
	// (default 100ms, 500ms, 2s, 5s).
	Backoff []time.Duration
	// AckWait is how long the server waits for an ack before redelivering
	// (default 30s); a running handler keeps its message in progress.
	AckWait time.Duration
	// Batch is how many messages are fetched ahead (default 16). Only the
	// message being handled is kept in progress, so Batch × handling time
	// must stay well under AckWait. With RunBatch it is the most messages
	// one BatchHandler call gets (default DefaultBatchSize), all kept in
	// progress while it runs.
	Batch int
	// BatchWait, with RunBatch, is how long to wait for more messages after
	// the first one of a batch arrived (default DefaultBatchWait).
	BatchWait time.Duration
	// DrainTimeout, when set, overrides the bus's Config.DrainTimeout for
	// this stage.
	DrainTimeout time.Duration
	// Concurrency, with Run, is how many messages of one consumer are
	// handled at once (default 1: one after the other). Each is settled on
	// its own; handlers must then be safe for concurrent use and must not
	// depend on the order of messages (every handler is version-gated).
	// A stop waits for every message in flight, as for one.
	Concurrency int
	// GiveWay, when set, makes the stage wait before each fetch (with
	// RunBatch, before each batch) while the stages it names have a
	// backlog; see GiveWay.
	GiveWay *GiveWay
}

func (c *ConsumerConfig) setDefaults() {
	if c.Durable == "" {
		c.Durable = c.Stage
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = 5
	}
	if len(c.Backoff) == 0 {
		c.Backoff = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second, 5 * time.Second}
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.Batch == 0 {
		c.Batch = 16
	}
}

// Validate checks the consumer configuration.
func (c ConsumerConfig) Validate() error {
	if c.Stage == "" {
		return errors.New("stream: consumer stage is required")
	}
	if len(c.Kinds) == 0 {
		return errors.New("stream: consumer needs at least one event kind")
	}
	if c.MaxDeliver < 1 {
		return errors.New("stream: MaxDeliver must be >= 1")
	}
	if c.Batch < 1 || c.BatchWait < 0 {
		return errors.New("stream: Batch must be >= 1 and BatchWait >= 0")
	}
	if c.DrainTimeout < 0 {
		return errors.New("stream: DrainTimeout must be >= 0")
	}
	if c.Concurrency < 0 {
		return errors.New("stream: Concurrency must be >= 0")
	}
	if c.GiveWay != nil {
		if err := c.GiveWay.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// consumerName is the durable of one kind of a stage. A stage consuming one
// kind uses its Durable as is; a stage consuming several has one durable per
// kind, because servers before 2.10 take one filter subject per consumer.
// Ordering across kinds is not needed: every handler is version-gated.
func consumerName(durable string, kinds []events.Kind, k events.Kind) string {
	if len(kinds) == 1 {
		return durable
	}
	return durable + "-" + strings.ReplaceAll(string(k), ".", "_")
}

// consumerRetry bounds how long a stage keeps trying to create its
// consumer at start (a JetStream API timeout while the server is busy or
// electing a leader) before it fails.
const consumerRetry = 30 * time.Second

func (b *Bus) consumer(ctx context.Context, cc ConsumerConfig, k events.Kind) (jetstream.Consumer, error) {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = 100*time.Millisecond, 2*time.Second, consumerRetry
	return backoff.RetryNotifyWithData(func() (jetstream.Consumer, error) {
		return b.createConsumer(ctx, cc, k)
	}, backoff.WithContext(bo, ctx), func(err error, d time.Duration) {
		b.log.Warn("creating consumer, will retry", "stage", cc.Stage, "kind", k, "in", d, "error", err)
	})
}

func (b *Bus) createConsumer(ctx context.Context, cc ConsumerConfig, k events.Kind) (jetstream.Consumer, error) {
	// MaxDeliver is enforced here rather than by the server: the server stops
	// redelivering silently at its limit, while we must dead-letter first and
	// keep retrying the dead-letter publish if it fails.
	return b.js.CreateOrUpdateConsumer(ctx, b.cfg.Stream, jetstream.ConsumerConfig{
		Durable:       consumerName(cc.Durable, cc.Kinds, k),
		FilterSubject: b.cfg.Subjects.All(k),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cc.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: cc.Batch * 2,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
}

// Pending returns how many messages a stage's consumers have not yet
// acknowledged (waiting plus in flight), summed over the consumers named
// durable or "durable-..." (a stage's consumer per kind, and stages named
// after it such as "reporter-vectors"). ErrNoConsumer when there is none
// yet.
func (b *Bus) Pending(ctx context.Context, durable string) (uint64, error) {
	by, err := b.listBacklogs(ctx)
	if err != nil {
		return 0, err
	}
	var total uint64
	found := false
	for name, n := range by {
		if name == durable || strings.HasPrefix(name, durable+"-") {
			found = true
			total += n
		}
	}
	if !found {
		return 0, fmt.Errorf("%w: %s", ErrNoConsumer, durable)
	}
	return total, nil
}

// ErrNoConsumer means a stage has not created its consumer yet.
var ErrNoConsumer = errors.New("no such consumer")

// DeadLetters counts the messages in the dead-letter subjects.
func (b *Bus) DeadLetters(ctx context.Context) (uint64, error) {
	info, err := b.stream.Info(ctx, jetstream.WithSubjectFilter(b.cfg.Subjects.Prefix+".dlq.>"))
	if err != nil {
		return 0, fmt.Errorf("reading stream %s: %w", b.cfg.Stream, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}

// DeadLetter is the body of a dead-lettered message.
type DeadLetter struct {
	Stage      string `json:"stage"`
	Subject    string `json:"subject"`
	Error      string `json:"error"`
	Deliveries uint64 `json:"deliveries"`
	Sequence   uint64 `json:"sequence"`
	MsgID      string `json:"msg_id,omitempty"`
	// Payload names the payload bucket's object holding the event when it
	// travelled by reference; Data is then the reference.
	Payload  string          `json:"payload,omitempty"`
	FailedAt time.Time       `json:"failed_at"`
	Data     json.RawMessage `json:"data,omitempty"`
	RawData  string          `json:"raw_data,omitempty"` // when Data is not JSON
}

// Run consumes a stage's events with h until ctx is cancelled. Each kind
// is consumed by its own durable, concurrently, as one group: the first
// consumer to fail (its durable deleted, say) stops the others and Run
// returns its error. On cancellation it stops fetching, naks what is
// buffered and lets the handlers in flight finish for the drain timeout,
// then cancels their context; a message whose handler did not finish is
// naked for the next process. h runs behind Recover.
func (b *Bus) Run(ctx context.Context, cc ConsumerConfig, h Handler) error {
	h = Chain(h, Recover)
	return b.run(ctx, cc, func(ctx context.Context, s *stage, c jetstream.Consumer) error {
		return b.consume(ctx, s, c, h)
	})
}

// stage is one run of a stage: its configuration and the context its
// handlers run in, which outlives the run's context by the drain timeout.
type stage struct {
	ConsumerConfig
	// work is the handlers' context: cancelled with cause ErrDrainTimeout
	// once the drain timeout has passed after the run's context ended.
	work context.Context
}

// run creates a stage's consumers and runs consume on each, as a group,
// until all return.
func (b *Bus) run(ctx context.Context, cc ConsumerConfig, consume func(context.Context, *stage, jetstream.Consumer) error) error {
	cc.setDefaults()
	if cc.DrainTimeout == 0 {
		cc.DrainTimeout = b.cfg.DrainTimeout
	}
	if err := cc.Validate(); err != nil {
		return err
	}
	// Create the series so dashboards see 0 rather than nothing.
	b.metrics.DeadLetters.WithLabelValues(cc.Stage)
	b.metrics.Events.WithLabelValues(cc.Stage, "ok")
	conss := make([]jetstream.Consumer, len(cc.Kinds))
	for i, k := range cc.Kinds {
		c, err := b.consumer(ctx, cc, k)
		if err != nil {
			if ctx.Err() != nil {
				// Stopped while starting: a stop, not a failure.
				return nil
			}
			return fmt.Errorf("creating consumer %s: %w", consumerName(cc.Durable, cc.Kinds, k), err)
		}
		conss[i] = c
	}
	g, gctx := errgroup.WithContext(ctx)
	work, release := drainContext(gctx, cc.DrainTimeout)
	defer release()
	s := &stage{ConsumerConfig: cc, work: work}
	b.log.Info("stage started", "stage", cc.Stage, "kinds", cc.Kinds, "drain_timeout", cc.DrainTimeout)
	for _, c := range conss {
		g.Go(func() error { return consume(gctx, s, c) })
	}
	err := g.Wait()
	// The fetches' unsubscriptions reach the server before Run returns,
	// almost always (see nakBuffered).
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushWait)
	_ = b.nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		b.log.Error("stage stopped", "stage", cc.Stage, "reason", "failed", "error", err)
	} else {
		b.log.Info("stage stopped", "stage", cc.Stage, "reason", stopReason(ctx, work))
	}
	return err
}

// ErrDrainTimeout is the cause of a handler's cancelled context when its
// stage stopped and the drain timeout passed before it finished.
var ErrDrainTimeout = errors.New("drain timeout passed")

// drainContext returns the handlers' context of a run: not cancelled with
// ctx, but d after it. release cancels it at once.
func drainContext(ctx context.Context, d time.Duration) (work context.Context, release func()) {
	work, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-work.Done():
			return
		case <-ctx.Done():
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-work.Done():
		case <-t.C:
			cancel(ErrDrainTimeout)
		}
	}()
	return work, func() { cancel(nil) }
}

func stopReason(ctx, work context.Context) string {
	if errors.Is(context.Cause(work), ErrDrainTimeout) {
		return "cancelled; drain timeout passed, unfinished messages naked"
	}
	if ctx.Err() != nil {
		return "cancelled"
	}
	return "consumers returned"
}

// interrupted reports whether err came from a handler the drain timeout
// cut short: its message is redelivered, never dead-lettered.
func (s *stage) interrupted(err error) bool {
	return err != nil && errors.Is(context.Cause(s.work), ErrDrainTimeout)
}

// ErrConsumerGone means a stage's durable consumer no longer exists on the
// server (an operator deleted it): the stage cannot go on.
var ErrConsumerGone = errors.New("consumer no longer exists")

// maxGone is how many consecutive fetches must find a consumer gone
// before its stage fails: one answer could be a passing glitch.
const maxGone = 3

// flushWait bounds the flush at the end of a run.
const flushWait = 2 * time.Second

// fetchPause is the wait after a failed fetch, so a persistent failure is
// not a hot loop.
const fetchPause = 250 * time.Millisecond

// watch follows the fetch failures of one consumer.
type watch struct {
	cons jetstream.Consumer
	gone int
	// cancel ends the pull request of the last batch fetched.
	cancel context.CancelFunc
}

// done ends the last batch's pull request.
func (w *watch) done() {
	if w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
}

// failed records the outcome of one fetch: nil (or no messages) resets the
// count; another error pauses, and if the consumer is gone counts towards
// maxGone, at which the stage's error is returned.
func (b *Bus) failed(ctx context.Context, s *stage, w *watch, err error) error {
	if err == nil || errors.Is(err, jetstream.ErrNoMessages) || ctx.Err() != nil {
		w.gone = 0
		return nil
	}
	name := w.cons.CachedInfo().Name
	if b.consumerGone(ctx, w.cons, err) {
		w.gone++
		if w.gone >= maxGone {
			return fmt.Errorf("consuming %s: %w: %w", name, ErrConsumerGone, err)
		}
		b.log.Warn("consumer not found", "stage", s.Stage, "consumer", name, "times", w.gone, "error", err)
	} else {
		w.gone = 0
		b.log.Warn("fetching messages", "stage", s.Stage, "consumer", name, "error", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(fetchPause):
	}
	return nil
}

// consumerGone tells whether a fetch failed because the consumer is gone.
// A pull on a deleted consumer reports "consumer deleted" once, then "no
// responders": the server is asked which.
func (b *Bus) consumerGone(ctx context.Context, cons jetstream.Consumer, err error) bool {
	if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
		return true
	}
	_, ierr := cons.Info(ctx)
	return errors.Is(ierr, jetstream.ErrConsumerNotFound)
}

// fetch pulls up to Batch messages; nil once ctx ends, an error once the
// consumer is gone. Fetch buffers what one pull request delivers in a
// channel twice that size, so it never drops a message as a slow
// consumer, however long the handling takes. The pull request ends with
// ctx: a stopped stage leaves no request open on the server, which would
// take messages (a naked one) to an inbox nobody reads until AckWait.
func (b *Bus) fetch(ctx context.Context, s *stage, w *watch) (jetstream.MessageBatch, error) {
	for ctx.Err() == nil {
		// The server expires the request a little before the context
		// (FetchContext keeps a margin), so a quiet fetch ends normally.
		fctx, cancel := context.WithTimeout(ctx, batchFetchWait)
		mb, err := w.cons.Fetch(s.Batch, jetstream.FetchContext(fctx))
		if err == nil {
			w.cancel = cancel
			return mb, nil
		}
		cancel()
		if err := b.failed(ctx, s, w, err); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// consume handles a consumer's messages one at a time. It pulls with
// Fetch (no idle heartbeats at this expiry), whose buffer holds twice what
// one request can deliver. The Messages iterator's buffer holds only Batch
// and its idle heartbeats share it, so a full buffer under a backlog made
// the client drop messages as a slow consumer; a dropped message waited
// AckWait for its redelivery.
func (b *Bus) consume(ctx context.Context, s *stage, cons jetstream.Consumer, h Handler) error {
	w := &watch{cons: cons}
	// With Concurrency > 1, messages are handled on their own goroutines,
	// at most Concurrency at once; consume returns once all have settled.
	var inflight sync.WaitGroup
	defer inflight.Wait()
	slots := make(chan struct{}, max(s.Concurrency, 1))
	handle := func(msg jetstream.Msg) {
		if s.Concurrency <= 1 {
			b.handle(s, h, msg)
			return
		}
		slots <- struct{}{}
		inflight.Add(1)
		go func() {
			defer func() { <-slots; inflight.Done() }()
			b.handle(s, h, msg)
		}()
	}
	for {
		b.giveWay(ctx, s)
		mb, err := b.fetch(ctx, s, w)
		if mb == nil {
			return err
		}
		ch := mb.Messages()
	fetch:
		for {
			if ctx.Err() != nil {
				w.done()
				nakBuffered(ch)
				return nil
			}
			select {
			case <-ctx.Done():
			case msg, ok := <-ch:
				if !ok {
					break fetch
				}
				handle(msg)
			}
		}
		w.done()
		if err := b.failed(ctx, s, w, mb.Error()); err != nil {
			return err
		}
	}
}

// nakBuffered naks what a stopped consumer still holds, so it is
// redelivered at once rather than after AckWait. It returns once the
// fetch has closed ch: ch's pull request ends with the run's context,
// which is done when nakBuffered is called, and the fetch's buffer never
// blocks it, so the close comes at once. The fetch drops its inbox right
// after closing ch; run then flushes the connection, so the server has
// almost always dropped the request (it delivers only to an inbox with
// interest) before Run returns and no later message goes to an inbox
// nobody reads. When the fetch's goroutine drops the inbox only after
// that flush (a busy machine can hold it between the two), a message
// arriving in between waits AckWait for its redelivery.
func nakBuffered(ch <-chan jetstream.Msg) {
	for msg := range ch {
		_ = msg.Nak()
	}
}

// keepInProgress tells the server every AckWait/3 that msgs are still
// being handled, until the returned stop is called.
func keepInProgress(ackWait time.Duration, msgs ...jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(ackWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				for _, m := range msgs {
					_ = m.InProgress()
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (b *Bus) handle(s *stage, h Handler, msg jetstream.Msg) {
	md, err := msg.Metadata()
	if err != nil {
		b.log.Error("reading message metadata", "stage", s.Stage, "error", err)
		_ = msg.Nak()
		return
	}
	m := &Message{Subject: msg.Subject(), Data: msg.Data(), Header: msg.Headers(),
		Deliveries: md.NumDelivered, Sequence: md.Sequence.Stream}
	kind, tenant, perr := b.cfg.Subjects.Parse(m.Subject)
	m.Kind, m.Tenant = kind, tenant

	start := time.Now()
	// Keep the message in progress while a slow handler (an LLM call) runs.
	hctx, cancel := context.WithCancel(s.work)
	stop := keepInProgress(s.AckWait, msg)
	var herr error
	finished := s.await(func() {
		if perr != nil {
			herr = Permanent(perr)
			return
		}
		// Handlers see the whole event, wherever it travelled.
		data, err := b.resolvePayload(hctx, m.Header, m.Data)
		switch {
		case err == nil:
			full := *m
			full.Data = data
			herr = h(hctx, &full)
		case errors.Is(err, ErrPayloadGone):
			herr = Permanent(err)
		default:
			herr = err
		}
	})
	stop()
	cancel()
	if !finished {
		b.abandon(s, m, msg)
		return
	}
	b.metrics.Duration.WithLabelValues(s.Stage).Observe(time.Since(start).Seconds())
	b.settle(s, msg, m, herr)
}

// abandonGrace is how long, after the drain timeout cancelled the
// handlers' context, a stopping stage still waits for a handler to return.
const abandonGrace = time.Second

// await runs fn and reports whether it returned. It does not wait for a
// handler that ignores its context: once the drain timeout has cancelled
// the handlers' context and abandonGrace passed, it returns false with fn
// still running, so a stuck handler cannot hold the shutdown.
func (s *stage) await(fn func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
		return true
	case <-s.work.Done():
	}
	t := time.NewTimer(abandonGrace)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// abandon leaves to redelivery (a nak) the messages of a handler still
// running past the drain timeout; whatever it returns later is ignored.
func (b *Bus) abandon(s *stage, m *Message, msgs ...jetstream.Msg) {
	b.log.Error("handler ignored its cancelled context past the drain timeout; stopping without it, its messages are redelivered",
		"stage", s.Stage, "subject", m.Subject, "messages", len(msgs), "drain_timeout", s.DrainTimeout)
	for _, msg := range msgs {
		_ = msg.Nak()
		b.metrics.Events.WithLabelValues(s.Stage, "abandoned").Inc()
	}
}

// settle acks, naks with backoff or dead-letters one delivered message by
// its handler's result.
func (b *Bus) settle(s *stage, msg jetstream.Msg, m *Message, err error) {
	ctx := s.work
	switch {
	case s.interrupted(err):
		b.log.Warn("handler interrupted by the drain timeout, redelivering", "stage", s.Stage, "subject", m.Subject,
			"delivery", m.Deliveries, "error", err)
		b.metrics.Events.WithLabelValues(s.Stage, "interrupted").Inc()
		_ = msg.Nak()
	case err == nil:
		b.ack(s.ConsumerConfig, msg, "ok")
	case errors.Is(err, ErrStale):
		b.log.Info("stale event acknowledged", "stage", s.Stage, "subject", m.Subject, "reason", err.Error())
		b.ack(s.ConsumerConfig, msg, "stale")
	case IsPermanent(err) || int(m.Deliveries) >= s.MaxDeliver:
		b.deadLetter(ctx, s.ConsumerConfig, msg, m, err)
	default:
		i := int(m.Deliveries) - 1
		if i >= len(s.Backoff) {
			i = len(s.Backoff) - 1
		}
		b.log.Warn("handling event failed, will retry", "stage", s.Stage, "subject", m.Subject,
			"delivery", m.Deliveries, "error", err)
		b.metrics.Events.WithLabelValues(s.Stage, "retry").Inc()
		_ = msg.NakWithDelay(s.Backoff[i])
	}
}

func (b *Bus) ack(cc ConsumerConfig, msg jetstream.Msg, outcome string) {
	if err := msg.DoubleAck(context.Background()); err != nil {
		// The server will redeliver; handlers are idempotent.
		b.log.Warn("acknowledging message", "stage", cc.Stage, "error", err)
	}
	b.metrics.Events.WithLabelValues(cc.Stage, outcome).Inc()
}

func (b *Bus) deadLetter(ctx context.Context, cc ConsumerConfig, msg jetstream.Msg, m *Message, cause error) {
	dl := DeadLetter{Stage: cc.Stage, Subject: m.Subject, Error: cause.Error(), Deliveries: m.Deliveries,
		Sequence: m.Sequence, MsgID: m.Header.Get(jetstream.MsgIDHeader), Payload: m.Header.Get(HeaderPayload),
		FailedAt: time.Now().UTC()}
	if json.Valid(m.Data) {
		dl.Data = m.Data
	} else {
		dl.RawData = string(m.Data)
	}
	body, _ := json.Marshal(dl)
	if len(body) > b.inlineMax && dl.Payload == "" {
		// An inline event near the limit (or one JSON escaping inflates)
		// is kept by reference, like a large event.
		name, ref, err := b.storePayload(ctx, m.Data)
		if err != nil {
			b.log.Error("dead-lettering failed, will retry", "stage", cc.Stage, "subject", m.Subject, "error", err)
			_ = msg.NakWithDelay(cc.Backoff[len(cc.Backoff)-1])
			return
		}
		dl.Payload, dl.Data, dl.RawData = name, ref, ""
		body, _ = json.Marshal(dl)
	}
	out := nats.NewMsg(b.cfg.Subjects.DLQ(cc.Stage))
	out.Data = body
	out.Header.Set(HeaderDLQStage, cc.Stage)
	out.Header.Set(HeaderDLQError, truncate(cause.Error(), 1024))
	out.Header.Set(HeaderDLQDeliveries, strconv.FormatUint(m.Deliveries, 10))
	out.Header.Set(HeaderDLQSubject, m.Subject)
	out.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("dlq/%s/%d", cc.Stage, m.Sequence))
	if _, err := b.js.PublishMsg(ctx, out); err != nil {
		// Never drop: keep the original and try again later.
		b.log.Error("dead-lettering failed, will retry", "stage", cc.Stage, "subject", m.Subject, "error", err)
		_ = msg.NakWithDelay(cc.Backoff[len(cc.Backoff)-1])
		return
	}
	b.log.Error("event dead-lettered", "stage", cc.Stage, "subject", m.Subject,
		"deliveries", m.Deliveries, "error", cause)
	b.metrics.DeadLetters.WithLabelValues(cc.Stage).Inc()
	b.ack(cc, msg, "dead_letter")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
