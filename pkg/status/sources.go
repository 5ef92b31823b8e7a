package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/stream"
)

// The pipeline figures of /v1/status are held by the processes that make
// them: the resolver's index lag samples, the extractor's LLM usage. Each
// process records its own in the bus's stats bucket (one key per process
// and figure, rewritten every RecorderConfig.Every) and status, in any
// process, reads them all back. The all-in-one is one process writing
// one key per figure, so both deployments compute the same figures the
// same way.

// Figure names of the stats bucket: FigureLLM, and FigureLag+stage.
const (
	FigureLag = "lag."
	FigureLLM = "llm"
)

// DefaultRecordEvery is how often a Recorder rewrites its figures by
// default.
const DefaultRecordEvery = 5 * time.Second

// staleAfter is how many of its own intervals a figure may go unwritten
// before status leaves it out: its process stopped or cannot reach NATS.
const staleAfter = 3

// RecorderConfig names the recording process.
type RecorderConfig struct {
	// Service is what the process runs (resolver, extractor, kgstream).
	Service string
	// Process identifies this instance among the service's (default:
	// service@hostname:pid).
	Process string
	// Every is how often the figures are rewritten (default
	// DefaultRecordEvery; at most a third of stream.StatsTTL).
	Every time.Duration
}

func (c *RecorderConfig) setDefaults() {
	if c.Process == "" {
		host, _ := os.Hostname()
		c.Process = fmt.Sprintf("%s@%s:%d", c.Service, host, os.Getpid())
	}
	if c.Every == 0 {
		c.Every = DefaultRecordEvery
	}
}

// Validate checks the configuration.
func (c RecorderConfig) Validate() error {
	if c.Service == "" {
		return errors.New("status: the recorder needs a service name")
	}
	if c.Every < 0 || c.Every > stream.StatsTTL/staleAfter {
		return fmt.Errorf("status: the record interval must be positive and at most %s", stream.StatsTTL/staleAfter)
	}
	return nil
}

// record is the value of one key of the stats bucket.
type record struct {
	Process string `json:"process"`
	Service string `json:"service"`
	Figure  string `json:"figure"`
	// EverySeconds is how often the process rewrites it, which tells a
	// reader when it is stale.
	EverySeconds float64 `json:"every_seconds"`
	// Lag holds the process's most recent lag samples of the figure's
	// stage, in seconds.
	Lag []float64 `json:"lag,omitempty"`
	// LLM is the process's LLM usage by model.
	LLM map[string]*llmCounters `json:"llm,omitempty"`
}

// llmCounters are one model's LLM counters in one process.
type llmCounters struct {
	Documents        uint64  `json:"documents"`
	Calls            float64 `json:"calls"`
	PromptTokens     float64 `json:"prompt_tokens"`
	CompletionTokens float64 `json:"completion_tokens"`
	Cost             float64 `json:"cost"`
	// DocumentCalls and DocumentCost sum the calls and cost of each
	// document extracted (the per-document histograms' sums).
	DocumentCalls float64 `json:"document_calls"`
	DocumentCost  float64 `json:"document_cost"`
}

// Recorder writes the figures its process holds to the stats bucket.
type Recorder struct {
	cfg      RecorderConfig
	bus      *stream.Bus
	gatherer prometheus.Gatherer
	log      *slog.Logger

	mu      sync.Mutex
	written map[string]bool
}

// NewRecorder returns the recorder of a process whose lag samples are in
// bus and whose LLM metrics g gathers (nil: none).
func NewRecorder(cfg RecorderConfig, bus *stream.Bus, g prometheus.Gatherer, log *slog.Logger) (*Recorder, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if bus == nil {
		return nil, errors.New("status: the recorder needs a bus")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{cfg: cfg, bus: bus, gatherer: g, log: log, written: map[string]bool{}}, nil
}

// Process returns the process name the recorder writes under.
func (r *Recorder) Process() string { return r.cfg.Process }

var keyUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// key is the stats key of one of the process's figures.
func (r *Recorder) key(figure string) string {
	return keyUnsafe.ReplaceAllString(r.cfg.Process, "_") + "." + figure
}

// Record writes every figure the process holds now.
func (r *Recorder) Record(ctx context.Context) error {
	// One at a time, so an older snapshot never overwrites a newer one.
	r.mu.Lock()
	defer r.mu.Unlock()
	recs := r.records()
	var errs []error
	for _, rec := range recs {
		body, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", rec.Figure, err)
		}
		k := r.key(rec.Figure)
		// Noted before the put: a put whose context ends while it waits
		// for the server's reply may still be stored, and remove must
		// delete it then (deleting a key never written is harmless).
		r.written[k] = true
		if err := r.bus.PutStat(ctx, k, body); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// records are the process's figures now.
func (r *Recorder) records() []record {
	every := r.cfg.Every.Seconds()
	var out []record
	for _, stage := range r.bus.LagStages() {
		vs := r.bus.LagSamples(stage)
		for i, v := range vs {
			vs[i] = math.Round(v*1e6) / 1e6
		}
		out = append(out, record{Figure: FigureLag + stage, Lag: vs})
	}
	if u := gatherLLM(r.gatherer, r.log); u != nil {
		out = append(out, record{Figure: FigureLLM, LLM: u})
	}
	for i := range out {
		out[i].Process, out[i].Service, out[i].EverySeconds = r.cfg.Process, r.cfg.Service, every
	}
	return out
}

// Run records the figures every interval until ctx ends, then removes
// them: a process that stops says so at once, one that dies ages out.
// A failed write is logged and retried at the next interval.
func (r *Recorder) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Every)
	defer t.Stop()
	for {
		if err := r.Record(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("recording status figures", "error", err)
		}
		select {
		case <-ctx.Done():
			r.remove(context.WithoutCancel(ctx))
			return nil
		case <-t.C:
		}
	}
}

// remove deletes the figures the recorder wrote.
func (r *Recorder) remove(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.written {
		if err := r.bus.DeleteStat(ctx, k); err != nil {
			r.log.Warn("removing status figures", "key", k, "error", err)
		}
		delete(r.written, k)
	}
}

// gatherLLM reads the LLM extractor's metrics, by model (nil when the
// process has made no LLM call).
func gatherLLM(g prometheus.Gatherer, log *slog.Logger) map[string]*llmCounters {
	if g == nil {
		return nil
	}
	mfs, err := g.Gather()
	if err != nil {
		log.Warn("gathering metrics", "error", err)
		return nil
	}
	out := map[string]*llmCounters{}
	of := func(labels map[string]string) *llmCounters {
		m := labels["model"]
		if out[m] == nil {
			out[m] = &llmCounters{}
		}
		return out[m]
	}
	seen := false
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetName() {
			case "kgstream_llm_calls_total":
				seen = true
				of(labels).Calls += m.GetCounter().GetValue()
			case "kgstream_llm_cost_total":
				of(labels).Cost += m.GetCounter().GetValue()
			case "kgstream_llm_tokens_total":
				if labels["direction"] == "prompt" {
					of(labels).PromptTokens += m.GetCounter().GetValue()
				} else {
					of(labels).CompletionTokens += m.GetCounter().GetValue()
				}
			case "kgstream_llm_calls_per_document":
				u := of(labels)
				u.Documents += m.GetHistogram().GetSampleCount()
				u.DocumentCalls += m.GetHistogram().GetSampleSum()
			case "kgstream_llm_cost_per_document":
				of(labels).DocumentCost += m.GetHistogram().GetSampleSum()
			}
		}
	}
	if !seen {
		return nil
	}
	return out
}

// Source is one figure one process recorded.
type Source struct {
	Process string `json:"process"`
	Service string `json:"service"`
	// Figure is lag.<stage> (its index lag samples) or llm (its LLM usage).
	Figure string `json:"figure"`
	// AgeSeconds is how long ago the process last wrote it.
	AgeSeconds float64 `json:"age_seconds"`
	// Live is false once the process has missed three of its intervals
	// (it stopped, or cannot reach NATS): its figure is then left out.
	Live bool `json:"live"`
}

// Fleet is what the live processes recorded.
type Fleet struct {
	// Sources lists every figure recorded, live or not, by process.
	Sources []Source
	// Lag is the union of the live processes' lag samples, by stage.
	Lag map[string][]float64
	// LLM sums the live processes' LLM usage (nil: none).
	LLM *LLMUsage
}

// ReadFleet reads the stats bucket of bus as of now.
func ReadFleet(ctx context.Context, bus *stream.Bus, now time.Time) (Fleet, error) {
	return readFleet(ctx, bus, now, nil)
}

// fleetEntry is one recorded figure and its age.
type fleetEntry struct {
	rec record
	age float64
}

// readFleet is ReadFleet with own's figures taken as they are now, from
// memory, in place of what own last wrote: the answering process's
// figures are current without a write per request.
func readFleet(ctx context.Context, bus *stream.Bus, now time.Time, own *Recorder) (Fleet, error) {
	f := Fleet{Sources: []Source{}, Lag: map[string][]float64{}}
	stats, err := bus.Stats(ctx)
	if err != nil {
		return f, err
	}
	var entries []fleetEntry
	mine := map[string]bool{}
	if own != nil {
		for _, rec := range own.records() {
			entries = append(entries, fleetEntry{rec: rec})
			mine[own.key(rec.Figure)] = true
		}
	}
	for _, s := range stats {
		if mine[s.Key] {
			continue
		}
		var rec record
		if err := json.Unmarshal(s.Value, &rec); err != nil {
			return f, fmt.Errorf("decoding status figure %s: %w", s.Key, err)
		}
		entries = append(entries, fleetEntry{rec: rec, age: max(0, now.Sub(s.Written).Seconds())})
	}
	for _, e := range entries {
		rec, age := e.rec, e.age
		live := age <= staleAfter*rec.EverySeconds
		f.Sources = append(f.Sources, Source{Process: rec.Process, Service: rec.Service, Figure: rec.Figure,
			AgeSeconds: math.Round(age*1000) / 1000, Live: live})
		if !live {
			continue
		}
		if stage, ok := strings.CutPrefix(rec.Figure, FigureLag); ok {
			f.Lag[stage] = append(f.Lag[stage], rec.Lag...)
		}
		for model, c := range rec.LLM {
			if f.LLM == nil {
				f.LLM = &LLMUsage{ByModel: map[string]*LLMUsage{}}
			}
			f.LLM.add(c)
			if f.LLM.ByModel[model] == nil {
				f.LLM.ByModel[model] = &LLMUsage{}
			}
			f.LLM.ByModel[model].add(c)
		}
	}
	sort.SliceStable(f.Sources, func(i, j int) bool {
		a, b := f.Sources[i], f.Sources[j]
		return a.Process < b.Process || a.Process == b.Process && a.Figure < b.Figure
	})
	if f.LLM != nil {
		f.LLM.means()
		for _, u := range f.LLM.ByModel {
			u.means()
		}
	}
	return f, nil
}

// lagOf is the Lag of samples.
func lagOf(samples []float64) Lag {
	p50, p99, _ := stream.Quantiles(samples)
	return Lag{P50: p50, P99: p99, Samples: len(samples)}
}

// add counts c in u.
func (u *LLMUsage) add(c *llmCounters) {
	u.Documents += c.Documents
	u.Calls += c.Calls
	u.PromptTokens += c.PromptTokens
	u.CompletionTokens += c.CompletionTokens
	u.Cost += c.Cost
	u.documentCalls += c.DocumentCalls
	u.documentCost += c.DocumentCost
}

// means sets the per-document means from the sums.
func (u *LLMUsage) means() {
	if u.Documents > 0 {
		u.CallsPerDocument = u.documentCalls / float64(u.Documents)
		u.CostPerDocument = u.documentCost / float64(u.Documents)
	}
}
