package extractor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/internal/metrics"
)

// Config configures the extractor worker.
type Config struct {
	// Stage names the consumer, its metrics and its dead-letter subject
	// (default "extractor").
	Stage string
	// ChunkTokens and ChunkOverlap size the text units in cl100k_base
	// tokens (defaults 1200 and 100, GraphRAG's; a negative overlap means
	// none).
	ChunkTokens, ChunkOverlap int
	// MaxDeliver bounds deliveries of one event before it is dead-lettered
	// (default: the stream package's, 5).
	MaxDeliver int
	// Backoff is the redelivery delay per delivery (default: the stream
	// package's).
	Backoff []time.Duration
	// AckWait is the server's redelivery timeout (default: the stream
	// package's); a running extraction keeps its message in progress.
	AckWait time.Duration
	// Batch is how many events are fetched ahead (default: the stream
	// package's).
	Batch int
	// Concurrency is how many events are extracted at once (default: one
	// per CPU for the offline extractor, whose work is CPU-bound, and 1
	// for the LLM extractor, whose calls the provider's rate limits bound).
	Concurrency int
	// Tokenizer is shared when set; otherwise New loads one.
	Tokenizer *chunk.Tokenizer
}

func (c *Config) setDefaults() {
	if c.Stage == "" {
		c.Stage = "extractor"
	}
	if c.ChunkTokens == 0 {
		c.ChunkTokens = chunk.DefaultTokens
	}
	switch {
	case c.ChunkOverlap == 0:
		// GraphRAG's 100 for its 1200-token windows; the same proportion for
		// smaller ones, so a small ChunkTokens alone is a valid config.
		c.ChunkOverlap = min(chunk.DefaultOverlap, c.ChunkTokens/12)
	case c.ChunkOverlap < 0:
		c.ChunkOverlap = 0
	}
}

// Validate checks the configuration (after defaults).
func (c Config) Validate() error {
	if c.ChunkTokens < 1 {
		return fmt.Errorf("extractor: ChunkTokens %d must be >= 1", c.ChunkTokens)
	}
	if c.ChunkOverlap < 0 || c.ChunkOverlap >= c.ChunkTokens {
		return fmt.Errorf("extractor: ChunkOverlap %d must be in [0, ChunkTokens %d)", c.ChunkOverlap, c.ChunkTokens)
	}
	if c.MaxDeliver < 0 {
		return fmt.Errorf("extractor: MaxDeliver %d must be >= 0", c.MaxDeliver)
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("extractor: Concurrency %d must be >= 0", c.Concurrency)
	}
	return nil
}

// Worker turns kg.doc.changed events into kg.extracted events.
type Worker struct {
	cfg     Config
	bus     *stream.Bus
	ext     Extractor
	chunker *chunk.Chunker
	log     *slog.Logger
	units   *prometheus.CounterVec
	dropped *prometheus.CounterVec
}

// New returns a worker publishing on bus what ext extracts.
func New(cfg Config, bus *stream.Bus, ext Extractor, log *slog.Logger, reg prometheus.Registerer) (*Worker, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if bus == nil || ext == nil {
		return nil, errors.New("extractor: New needs a bus and an extractor")
	}
	if cfg.Batch == 0 && ext.Name() == "llm" {
		// Only the message being handled is kept in progress: fetching many
		// ahead of slow LLM calls lets the buffered ones time out and come
		// back, spending their delivery budget.
		cfg.Batch = 1
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 1
		if ext.Name() != "llm" {
			cfg.Concurrency = runtime.GOMAXPROCS(0)
		}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tok := cfg.Tokenizer
	if tok == nil {
		var err error
		if tok, err = chunk.NewTokenizer(); err != nil {
			return nil, err
		}
	}
	chunker, err := chunk.New(tok, cfg.ChunkTokens, cfg.ChunkOverlap)
	if err != nil {
		return nil, err
	}
	return &Worker{
		cfg: cfg, bus: bus, ext: ext, chunker: chunker, log: log.With("stage", cfg.Stage),
		units: metrics.Counter(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_extract_units_total",
			Help: "Text units extracted, by extractor.",
		}, []string{"extractor"})),
		dropped: metrics.Dropped(reg),
	}, nil
}

// ConsumerConfig is the stage's consumer, as Run uses it.
func (w *Worker) ConsumerConfig() stream.ConsumerConfig {
	return stream.ConsumerConfig{Stage: w.cfg.Stage, Kinds: []events.Kind{events.KindDocChanged},
		MaxDeliver: w.cfg.MaxDeliver, Backoff: w.cfg.Backoff, AckWait: w.cfg.AckWait, Batch: w.cfg.Batch,
		Concurrency: w.cfg.Concurrency}
}

// Run consumes kg.doc.changed events until ctx is cancelled, finishing the
// event in flight.
func (w *Worker) Run(ctx context.Context) error {
	w.log.Info("extractor running", "extractor", w.ext.Name(), "chunk_tokens", w.cfg.ChunkTokens,
		"chunk_overlap", w.cfg.ChunkOverlap)
	if err := w.bus.Run(ctx, w.ConsumerConfig(), w.Handle); err != nil {
		return fmt.Errorf("running stage %s: %w", w.cfg.Stage, err)
	}
	return nil
}

// Handle processes one kg.doc.changed message: decode, chunk, extract,
// publish kg.extracted (Nats-Msg-Id tenant/doc/version/extracted, so a
// redelivery publishes nothing new).
// The event is decoded and its tenant checked against the subject by
// stream.Typed: a malformed event or another tenant's is dead-lettered.
func (w *Worker) Handle(ctx context.Context, m *stream.Message) error {
	return stream.Typed(w.handle)(ctx, m)
}

func (w *Worker) handle(ctx context.Context, _ *stream.Message, doc *events.DocChanged) error {
	out := events.Extracted{
		Header:     events.Header{Tenant: doc.Tenant},
		DocID:      doc.DocID,
		Version:    doc.Version,
		Title:      doc.Title,
		DocType:    doc.DocType,
		TextUnits:  []events.TextUnit{},
		ReceivedAt: doc.ReceivedAt,
	}
	var ents []events.RawEntity
	var rels []events.RawRelationship
	if doc.Structured != nil {
		// Already a graph: chunking or extracting it would only lose the
		// catalog's authority over names.
		out.Extractor = "structured"
		ents, rels = doc.Structured.Entities, doc.Structured.Relationships
	} else {
		units := w.chunker.Chunk(doc.DocID, doc.Version, doc.Text)
		var err error
		ents, rels, err = w.ext.Extract(ctx, doc, units)
		if err != nil {
			return fmt.Errorf("extracting %s version %d with %s: %w", doc.DocID, doc.Version, w.ext.Name(), err)
		}
		out.Extractor = w.ext.Name()
		out.TextUnits = units
		w.units.WithLabelValues(out.Extractor).Add(float64(len(units)))
	}
	if ents == nil {
		ents = []events.RawEntity{}
	}
	kept, dropped := connected(ents, rels)
	if dropped > 0 {
		w.dropped.WithLabelValues(out.Extractor).Add(float64(dropped))
		w.log.Warn("dropped relationships with unknown endpoints", "tenant", doc.Tenant, "doc", doc.DocID,
			"version", doc.Version, "extractor", out.Extractor, "dropped", dropped)
	}
	out.Entities, out.Relationships = ents, kept
	msgID := events.ExtractedID(doc.Tenant, doc.DocID, doc.Version, 0)
	if _, err := w.bus.Publish(ctx, events.KindExtracted, doc.Tenant, msgID, &out); err != nil {
		return fmt.Errorf("publishing extraction of %s version %d: %w", doc.DocID, doc.Version, err)
	}
	w.log.Info("document extracted", "tenant", doc.Tenant, "doc", doc.DocID, "version", doc.Version,
		"extractor", out.Extractor, "units", len(out.TextUnits), "entities", len(out.Entities),
		"relationships", len(out.Relationships))
	return nil
}
