package stream_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
)

// frontConsumer creates a durable on doc.changed that nobody consumes
// until the test fetches from it: its backlog is the documents published.
func frontConsumer(t *testing.T, bus *stream.Bus, name string) jetstream.Consumer {
	t.Helper()
	c, err := bus.JetStream().CreateOrUpdateConsumer(t.Context(), bus.StreamName(), jetstream.ConsumerConfig{
		Durable: name, FilterSubject: bus.Subjects().All(events.KindDocChanged), AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// drain acknowledges n messages of c.
func drain(t *testing.T, c jetstream.Consumer, n int) {
	t.Helper()
	batch, err := c.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(t.Context()); err != nil {
			t.Fatal(err)
		}
		got++
	}
	if got != n {
		t.Fatalf("drained %d messages, want %d", got, n)
	}
}

// A stage that gives way handles nothing while the stage it names has a
// backlog above the bound, and everything once that backlog is worked
// off; the time it waited is counted. Both consumers, one message at a
// time (Run) and in batches (RunBatch).
func TestGiveWayHoldsTheStageWhileTheOtherHasABacklog(t *testing.T) {
	for _, batched := range []bool{false, true} {
		name := "run"
		if batched {
			name = "batch"
		}
		t.Run(name, func(t *testing.T) {
			bus, m := newBus(t)
			front := frontConsumer(t, bus, "front")
			publishDocs(t, bus, "a", "b", "c", "d", "e")
			waitFor(t, "the front backlog", pendingIs(t, bus, "front", 5))

			var handled atomic.Int64
			cc := stream.ConsumerConfig{Stage: "back", Kinds: []events.Kind{events.KindDocChanged},
				GiveWay: &stream.GiveWay{Stages: []string{"front"}, Above: 2, Max: time.Hour, Poll: 10 * time.Millisecond}}
			if batched {
				runBatch(t, bus, cc, func(_ context.Context, ms []*stream.Message) []error {
					handled.Add(int64(len(ms)))
					return make([]error, len(ms))
				})
			} else {
				run(t, bus, cc, func(context.Context, *stream.Message) error { handled.Add(1); return nil })
			}
			// Long enough for an unheld stage to have handled everything
			// many times over.
			time.Sleep(500 * time.Millisecond)
			if n := handled.Load(); n != 0 {
				t.Fatalf("handled %d messages while the front stage had 5 pending", n)
			}
			// Down to 2 pending: at the bound, the stage goes on.
			drain(t, front, 3)
			waitFor(t, "the back stage to handle every message", func() bool { return handled.Load() == 5 })
			if waited := testutil.ToFloat64(m.Yield.WithLabelValues("back")); waited < 0.4 {
				t.Errorf("kgstream_stage_yield_seconds_total{stage=back} = %v, want the half second it waited", waited)
			}
		})
	}
}

// The wait ends after Max whatever the backlog: a sustained stream never
// starves the stage that gives way.
func TestGiveWayIsBounded(t *testing.T) {
	bus, _ := newBus(t)
	frontConsumer(t, bus, "front")
	publishDocs(t, bus, "a", "b", "c")
	waitFor(t, "the front backlog", pendingIs(t, bus, "front", 3))
	g := stream.GiveWay{Stages: []string{"front"}, Above: 1, Max: 200 * time.Millisecond, Poll: 10 * time.Millisecond}
	if waited := bus.GiveWay(t.Context(), "back", g); waited < g.Max || waited > 10*time.Second {
		t.Fatalf("waited %v, want Max (%v)", waited, g.Max)
	}
	// A cancelled context ends the wait at once.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	g.Max = time.Hour
	if waited := bus.GiveWay(ctx, "back", g); waited > 10*time.Second {
		t.Fatalf("waited %v with a cancelled context", waited)
	}
}

// A Yielder gives way as often as it is asked, all its waits together
// bounded by Max: the work it holds is put off by Max at most. Once the
// backlog is down to the bound it does not wait; a nil GiveWay never
// waits.
func TestYielderBoundsAllItsWaitsTogether(t *testing.T) {
	bus, m := newBus(t)
	front := frontConsumer(t, bus, "front")
	publishDocs(t, bus, "a", "b", "c")
	waitFor(t, "the front backlog", pendingIs(t, bus, "front", 3))
	g := stream.GiveWay{Stages: []string{"front"}, Above: 1, Max: 300 * time.Millisecond, Poll: 10 * time.Millisecond}

	y := bus.Yielder("back", &g)
	var total time.Duration
	for range 5 {
		total += y.GiveWay(t.Context())
	}
	if total < g.Max || total > g.Max+5*g.Poll+500*time.Millisecond {
		t.Fatalf("five waits with the backlog there took %v in all, want Max (%v) in all", total, g.Max)
	}
	if waited := testutil.ToFloat64(m.Yield.WithLabelValues("back")); waited < g.Max.Seconds() {
		t.Errorf("kgstream_stage_yield_seconds_total{stage=back} = %v, want the %v waited", waited, g.Max)
	}
	if waited := bus.Yielder("back", nil).GiveWay(t.Context()); waited != 0 {
		t.Errorf("a Yielder without GiveWay waited %v", waited)
	}

	// A fresh Yielder with the backlog at the bound goes on at once.
	drain(t, front, 2)
	waitFor(t, "the front backlog down to 1", pendingIs(t, bus, "front", 1))
	time.Sleep(2 * g.Poll) // the bus's last reading is at most Poll old
	g.Max = time.Hour
	done := make(chan time.Duration, 1)
	go func() { done <- bus.Yielder("back", &g).GiveWay(t.Context()) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("gave way with the backlog at the bound")
	}
}

// Only the named stages' own consumers count: "extractor" is not the
// stage "extractor-catalog", and a stage consuming several kinds counts
// all its consumers.
func TestGiveWayCountsOnlyTheNamedStages(t *testing.T) {
	bus, _ := newBus(t)
	frontConsumer(t, bus, "extractor-catalog")
	publishDocs(t, bus, "a", "b", "c")
	waitFor(t, "the other stage's backlog", pendingIs(t, bus, "extractor-catalog", 3))
	g := stream.GiveWay{Stages: []string{"extractor"}, Above: 1, Max: time.Hour, Poll: 10 * time.Millisecond}
	done := make(chan time.Duration, 1)
	go func() { done <- bus.GiveWay(t.Context(), "back", g) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("gave way to extractor-catalog's backlog when told extractor")
	}

	// A stage of two kinds has a consumer per kind, named after each.
	for _, k := range []events.Kind{events.KindDocChanged, events.KindDocDeleted} {
		if _, err := bus.JetStream().CreateOrUpdateConsumer(t.Context(), bus.StreamName(), jetstream.ConsumerConfig{
			Durable:       "resolver-" + strings.ReplaceAll(string(k), ".", "_"),
			FilterSubject: bus.Subjects().All(k), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the resolver's backlog", pendingIs(t, bus, "resolver", 3))
	if n, err := bus.Backlog(t.Context(), "resolver", "extractor"); err != nil || n != 3 {
		t.Fatalf("Backlog(resolver, extractor) = %d, %v; want the resolver's 3 (extractor-catalog is another stage)", n, err)
	}
	g = stream.GiveWay{Stages: []string{"resolver"}, Above: 2, Max: 200 * time.Millisecond, Poll: 10 * time.Millisecond}
	time.Sleep(2 * g.Poll) // the bus's last reading is at most Poll old
	if waited := bus.GiveWay(t.Context(), "back", g); waited < g.Max {
		t.Fatalf("waited %v for a stage of two kinds with 3 pending (bound 2), want Max", waited)
	}
}

func TestGiveWayValidate(t *testing.T) {
	for _, g := range []stream.GiveWay{{}, {Stages: []string{""}}, {Stages: []string{"x"}, Max: -1}, {Stages: []string{"x"}, Poll: -1}} {
		if g.Validate() == nil {
			t.Errorf("%+v: valid", g)
		}
		cc := stream.ConsumerConfig{Stage: "s", Kinds: []events.Kind{events.KindDocChanged}, Batch: 1, MaxDeliver: 1, GiveWay: &g}
		if cc.Validate() == nil {
			t.Errorf("consumer with %+v: valid", g)
		}
	}
	if err := (stream.GiveWay{Stages: []string{"x"}}).Validate(); err != nil {
		t.Error(err)
	}
}
