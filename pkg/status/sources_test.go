package status_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
)

// observeLags records one graph lag sample of about each of secs.
func observeLags(bus *stream.Bus, secs ...int) {
	now := time.Now()
	for _, s := range secs {
		bus.ObserveLag("graph", now.Add(-time.Duration(s)*time.Second))
	}
}

// seq is lo..hi.
func seq(lo, hi int) []int {
	var out []int
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

// llmRegistry is an extractor's registry with LLM metrics of its model
// calls: calls, prompt and completion tokens, cost, documents and the
// calls those made.
func llmRegistry(t *testing.T, model string, calls, prompt, completion, cost float64, docs int, docCalls float64) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kgstream_llm_calls_total", Help: "calls"}, []string{"model"})
	tok := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kgstream_llm_tokens_total", Help: "tokens"}, []string{"model", "direction"})
	co := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kgstream_llm_cost_total", Help: "cost"}, []string{"model"})
	per := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kgstream_llm_calls_per_document", Help: "per doc"}, []string{"model"})
	reg.MustRegister(c, tok, co, per)
	c.WithLabelValues(model).Add(calls)
	tok.WithLabelValues(model, "prompt").Add(prompt)
	tok.WithLabelValues(model, "completion").Add(completion)
	co.WithLabelValues(model).Add(cost)
	for range docs {
		per.WithLabelValues(model).Observe(docCalls / float64(docs))
	}
	return reg
}

func newRecorder(t *testing.T, service, process string, bus *stream.Bus, g prometheus.Gatherer, every time.Duration) *status.Recorder {
	t.Helper()
	r, err := status.NewRecorder(status.RecorderConfig{Service: service, Process: process, Every: every}, bus, g, nil)
	require.NoError(t, err)
	return r
}

// sourceOf finds process's figure among srcs.
func sourceOf(srcs []status.Source, process, figure string) (status.Source, bool) {
	for _, s := range srcs {
		if s.Process == process && s.Figure == figure {
			return s, true
		}
	}
	return status.Source{}, false
}

// TestStatusFiguresFromEveryProcess: two resolvers and two extractors,
// each its own connection to one JetStream, record their figures; the
// status of a third process (the query service, which holds none) shows
// lag quantiles over the union of both resolvers' samples (not a mean of
// their quantiles), the LLM usage summed over the extractors and models,
// and which process recorded what.
func TestStatusFiguresFromEveryProcess(t *testing.T) {
	ctx := t.Context()
	buses := streamtest.NewBuses(t, 5, streamtest.Options{})
	res1, res2, ext1, ext2, query := buses[0], buses[1], buses[2], buses[3], buses[4]
	// res1: 60 samples of 1..60s; res2: 40 of 100..139s. Over the union
	// (sorted: 1..60, 100..139) p50 is the 51st, 51s, and p99 the 100th,
	// 139s; res1 alone would say 31s and 60s.
	observeLags(res1, seq(1, 60)...)
	observeLags(res2, seq(100, 139)...)
	for i, r := range []*status.Recorder{
		newRecorder(t, "resolver", "resolver-1", res1, prometheus.NewRegistry(), time.Minute),
		newRecorder(t, "resolver", "resolver-2", res2, nil, time.Minute),
		newRecorder(t, "extractor", "extractor-1", ext1, llmRegistry(t, "m1", 8, 1000, 200, 0.5, 4, 8), time.Minute),
		newRecorder(t, "extractor", "extractor-2", ext2, llmRegistry(t, "m2", 6, 600, 100, 0.25, 2, 6), time.Minute),
	} {
		require.NoError(t, r.Record(ctx), "recorder %d", i)
	}

	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	c, err := status.NewCollector(st, query, nil, nil, nil)
	require.NoError(t, err)
	rep, err := c.Collect(ctx, "acme", false)
	require.NoError(t, err)
	p := rep.PipelineFigures
	require.NotNil(t, p)

	require.Equal(t, 100, p.IndexLag.Samples)
	require.InDelta(t, 51, p.IndexLag.P50, 0.5)
	require.InDelta(t, 139, p.IndexLag.P99, 0.5)
	require.Equal(t, p.IndexLag, p.StageLag["graph"])

	require.NotNil(t, p.LLM)
	require.Equal(t, 14.0, p.LLM.Calls)
	require.Equal(t, 1600.0, p.LLM.PromptTokens)
	require.Equal(t, 300.0, p.LLM.CompletionTokens)
	require.InDelta(t, 0.75, p.LLM.Cost, 1e-9)
	require.EqualValues(t, 6, p.LLM.Documents)
	require.InDelta(t, 14.0/6, p.LLM.CallsPerDocument, 1e-9)
	require.Len(t, p.LLM.ByModel, 2)
	require.Equal(t, 8.0, p.LLM.ByModel["m1"].Calls)
	require.EqualValues(t, 2, p.LLM.ByModel["m2"].Documents)
	require.InDelta(t, 3.0, p.LLM.ByModel["m2"].CallsPerDocument, 1e-9)

	var got []string
	for _, s := range p.Sources {
		require.True(t, s.Live, "%+v", s)
		require.GreaterOrEqual(t, s.AgeSeconds, 0.0)
		got = append(got, s.Service+" "+s.Process+" "+s.Figure)
	}
	require.Equal(t, []string{"extractor extractor-1 llm", "extractor extractor-2 llm",
		"resolver resolver-1 lag.graph", "resolver resolver-2 lag.graph"}, got,
		"every figure by its process; resolver-1's registry has no LLM metrics, so no llm figure")
}

// TestStatusFiguresAgeOut: a process that stopped recording without
// removing its figures (it died) is listed as not live once it missed
// three of its intervals, and its figures leave the totals; the one still
// recording stays. A process that stops normally removes its figures.
func TestStatusFiguresAgeOut(t *testing.T) {
	ctx := t.Context()
	buses := streamtest.NewBuses(t, 3, streamtest.Options{})
	dead, alive, reader := buses[0], buses[1], buses[2]
	observeLags(dead, 1, 2, 3)
	observeLags(alive, 10, 11)
	const every = 100 * time.Millisecond
	require.NoError(t, newRecorder(t, "resolver", "dead", dead, llmRegistry(t, "m", 5, 50, 5, 0, 1, 5), every).Record(ctx))
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- newRecorder(t, "resolver", "alive", alive, llmRegistry(t, "m", 2, 20, 2, 0, 1, 2), every).Run(rctx)
	}()

	streamtest.Eventually(t, 10*time.Second, func() error {
		f, err := status.ReadFleet(ctx, reader, time.Now())
		if err != nil {
			return err
		}
		d, ok := sourceOf(f.Sources, "dead", "lag.graph")
		a, aok := sourceOf(f.Sources, "alive", "lag.graph")
		switch {
		case !ok || !aok:
			return fmt.Errorf("sources %+v", f.Sources)
		case d.Live:
			return fmt.Errorf("dead still live at %.3fs", d.AgeSeconds)
		case !a.Live:
			return fmt.Errorf("alive is not live: %+v", a)
		case len(f.Lag["graph"]) != 2:
			return fmt.Errorf("graph samples %v, want alive's two", f.Lag["graph"])
		case f.LLM == nil || f.LLM.Calls != 2:
			return fmt.Errorf("llm %+v, want alive's 2 calls", f.LLM)
		}
		return nil
	})

	// Far in the future nothing is live: the figures are gone, the
	// sources stay listed until the bucket forgets them.
	f, err := status.ReadFleet(ctx, reader, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Empty(t, f.Lag)
	require.Nil(t, f.LLM)
	require.Len(t, f.Sources, 4)

	stop()
	require.NoError(t, <-done)
	f, err = status.ReadFleet(ctx, reader, time.Now())
	require.NoError(t, err)
	var procs []string
	for _, s := range f.Sources {
		procs = append(procs, s.Process+" "+s.Figure)
	}
	require.Equal(t, []string{"dead lag.graph", "dead llm"}, procs, "a stopped recorder removed its figures")
}

// TestRecorderConfig: a recorder needs a service and an interval the
// bucket's TTL outlives.
func TestRecorderConfig(t *testing.T) {
	bus := streamtest.NewBus(t, streamtest.Options{})
	_, err := status.NewRecorder(status.RecorderConfig{}, bus, nil, nil)
	require.ErrorContains(t, err, "service")
	_, err = status.NewRecorder(status.RecorderConfig{Service: "x", Every: stream.StatsTTL}, bus, nil, nil)
	require.ErrorContains(t, err, "interval")
	r, err := status.NewRecorder(status.RecorderConfig{Service: "resolver"}, bus, nil, nil)
	require.NoError(t, err)
	require.Contains(t, r.Process(), "resolver@")
}
