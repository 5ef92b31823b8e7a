package stream_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
)

// syncBuffer is a log sink the stage's goroutines and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func logBus(t *testing.T, cfg stream.Config) (*stream.Bus, *stream.Metrics, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	m := stream.NewMetrics(prometheus.NewRegistry())
	bus := streamtest.NewBus(t, streamtest.Options{Config: cfg, Metrics: m,
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the bus's log:\n%s", logs.String())
		}
	})
	return bus, m, logs
}

// startRun runs bus.Run in the background; the channel gets its result.
func startRun(ctx context.Context, bus *stream.Bus, cc stream.ConsumerConfig, h stream.Handler) <-chan error {
	done := make(chan error, 1)
	go func() { done <- bus.Run(ctx, cc, h) }()
	return done
}

func waitRun(t *testing.T, done <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		t.Fatalf("Run did not return within %s", within)
		return nil
	}
}

// TestRunStopsAllKindsWhenOneConsumerIsGone: a stage of two kinds whose
// doc.deleted durable is deleted on the server fails as a whole: Run
// returns ErrConsumerGone and the doc.changed consumer stops too.
func TestRunStopsAllKindsWhenOneConsumerIsGone(t *testing.T) {
	bus, _, logs := logBus(t, stream.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var calls atomic.Int32
	cc := stream.ConsumerConfig{Stage: "grp", Kinds: []events.Kind{events.KindDocChanged, events.KindDocDeleted}}
	done := startRun(ctx, bus, cc, func(context.Context, *stream.Message) error {
		calls.Add(1)
		return nil
	})
	publish(t, bus, "acme/d/1/changed", doc("d", 1))
	waitFor(t, "the first event handled", func() bool { return calls.Load() == 1 })

	if err := bus.JetStream().DeleteConsumer(t.Context(), bus.StreamName(), "grp-doc_deleted"); err != nil {
		t.Fatal(err)
	}
	err := waitRun(t, done, 30*time.Second)
	if !errors.Is(err, stream.ErrConsumerGone) || !strings.Contains(err.Error(), "grp-doc_deleted") {
		t.Fatalf("Run = %v, want ErrConsumerGone naming grp-doc_deleted", err)
	}
	// Run has returned, so the doc.changed consumer has too: a new event
	// waits unhandled and unacknowledged on its durable. It is pending,
	// or, when the stopped fetch dropped its inbox only after Run's flush
	// reached the server, held for the last pull request (see
	// nakBuffered) until AckWait; either way no handler sees it. A
	// consumer still running would have handled it well within the
	// quiet half second.
	publish(t, bus, "acme/d/2/changed", doc("d", 2))
	info, err := bus.JetStream().Consumer(t.Context(), bus.StreamName(), "grp-doc_changed")
	if err != nil {
		t.Fatal(err)
	}
	unacked := func() bool {
		i, err := info.Info(t.Context())
		return err == nil && i.NumPending+uint64(i.NumAckPending) == 1
	}
	waitFor(t, "the new event stored", unacked)
	time.Sleep(500 * time.Millisecond)
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler called %d times, want 1", n)
	}
	if !unacked() {
		t.Fatal("the new event was acknowledged after the stage stopped")
	}
	for _, want := range []string{`msg="stage started" stage=grp`, `msg="stage stopped" stage=grp reason=failed`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}

// TestRunBatchStopsWhenConsumerIsGone: the batch runner fails the same way.
func TestRunBatchStopsWhenConsumerIsGone(t *testing.T) {
	bus, _, logs := logBus(t, stream.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cc := stream.ConsumerConfig{Stage: "bgrp", Kinds: []events.Kind{events.KindDocChanged, events.KindDocDeleted}}
	done := make(chan error, 1)
	go func() {
		done <- bus.RunBatch(ctx, cc, func(_ context.Context, ms []*stream.Message) []error { return make([]error, len(ms)) })
	}()
	// Started: both consumers are created, so no retry of a creation
	// whose answer was lost can bring the deleted one back.
	waitFor(t, "the stage started", func() bool {
		return strings.Contains(logs.String(), `msg="stage started" stage=bgrp`)
	})
	if err := bus.JetStream().DeleteConsumer(t.Context(), bus.StreamName(), "bgrp-doc_changed"); err != nil {
		t.Fatal(err)
	}
	if err := waitRun(t, done, 30*time.Second); !errors.Is(err, stream.ErrConsumerGone) {
		t.Fatalf("RunBatch = %v, want ErrConsumerGone", err)
	}
}

// TestDrainTimeoutNaksUnfinished: a handler that only returns when its
// context is cancelled is cut short by the drain timeout once Run's
// context ends; its message is redelivered to the next run, not
// dead-lettered.
func TestDrainTimeoutNaksUnfinished(t *testing.T) {
	const drain = 300 * time.Millisecond
	bus, m, logs := logBus(t, stream.Config{DrainTimeout: drain})
	cc := stream.ConsumerConfig{Stage: "slow", Kinds: []events.Kind{events.KindDocChanged}}
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan struct{}, 1)
	var cause atomic.Value
	done := startRun(ctx, bus, cc, func(hctx context.Context, _ *stream.Message) error {
		started <- struct{}{}
		<-hctx.Done()
		cause.Store(context.Cause(hctx))
		return hctx.Err()
	})
	publish(t, bus, "acme/d/1/changed", doc("d", 1))
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("handler not called")
	}
	cancel()
	if err := waitRun(t, done, drain+10*time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if c, _ := cause.Load().(error); !errors.Is(c, stream.ErrDrainTimeout) {
		t.Fatalf("handler's context cause = %v, want ErrDrainTimeout", c)
	}
	if got := testutil.ToFloat64(m.Events.WithLabelValues("slow", "interrupted")); got != 1 {
		t.Fatalf("interrupted = %v, want 1", got)
	}
	if !strings.Contains(logs.String(), `msg="stage stopped" stage=slow reason="cancelled; drain timeout passed`) {
		t.Errorf("logs lack the stop reason:\n%s", logs.String())
	}

	// The next process gets it again, at once (a nak, not AckWait).
	var deliveries atomic.Uint64
	run(t, bus, cc, func(_ context.Context, msg *stream.Message) error {
		deliveries.Store(msg.Deliveries)
		return nil
	})
	waitFor(t, "redelivery", func() bool { return deliveries.Load() != 0 })
	if d := deliveries.Load(); d != 2 {
		t.Fatalf("redelivered with Deliveries %d, want 2", d)
	}
	if dls := readDLQ(t, bus, "slow"); len(dls) != 0 {
		t.Fatalf("dead letters = %+v, want none", dls)
	}
}

// TestDrainLetsInFlightFinish: a handler that finishes within the drain
// timeout after Run's context ended is acknowledged; its context was never
// cancelled.
func TestDrainLetsInFlightFinish(t *testing.T) {
	bus, m, _ := logBus(t, stream.Config{})
	cc := stream.ConsumerConfig{Stage: "fin", Kinds: []events.Kind{events.KindDocChanged}, DrainTimeout: 20 * time.Second}
	ctx, cancel := context.WithCancel(t.Context())
	started, release := make(chan struct{}, 1), make(chan struct{})
	var cancelled atomic.Bool
	done := startRun(ctx, bus, cc, func(hctx context.Context, _ *stream.Message) error {
		started <- struct{}{}
		<-release
		cancelled.Store(hctx.Err() != nil)
		return nil
	})
	publish(t, bus, "acme/d/1/changed", doc("d", 1))
	<-started
	cancel()
	close(release)
	if err := waitRun(t, done, 30*time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if cancelled.Load() {
		t.Fatal("the handler's context was cancelled within the drain timeout")
	}
	if got := testutil.ToFloat64(m.Events.WithLabelValues("fin", "ok")); got != 1 {
		t.Fatalf("ok = %v, want 1", got)
	}
	info, err := bus.JetStream().Consumer(t.Context(), bus.StreamName(), "fin")
	if err != nil {
		t.Fatal(err)
	}
	i, err := info.Info(t.Context())
	if err != nil || i.NumPending != 0 || i.NumAckPending != 0 {
		t.Fatalf("consumer info %+v, %v: want everything acknowledged", i, err)
	}
}

func publish(t *testing.T, bus *stream.Bus, id string, ev *events.DocChanged) {
	t.Helper()
	if _, err := bus.Publish(t.Context(), events.KindDocChanged, "acme", id, ev); err != nil {
		t.Fatal(err)
	}
}

// A stage stopped before its consumers exist has stopped, not failed:
// Run returns nil, as it does for a stop after it started.
func TestRunStoppedWhileStartingIsNotAFailure(t *testing.T) {
	bus := streamtest.NewBus(t, streamtest.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := bus.Run(ctx, stream.ConsumerConfig{Stage: "early", Kinds: []events.Kind{events.KindGraphChanged, events.KindDocACL}},
		func(context.Context, *stream.Message) error { return nil })
	if err != nil {
		t.Fatalf("Run after a stop while starting: %v", err)
	}
}
