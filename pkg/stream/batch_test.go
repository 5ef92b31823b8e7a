package stream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
)

func runBatch(t *testing.T, bus *stream.Bus, cc stream.ConsumerConfig, h stream.BatchHandler) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bus.RunBatch(ctx, cc, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunBatch: %v", err)
		}
	})
}

func publishDocs(t *testing.T, bus *stream.Bus, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := bus.Publish(t.Context(), events.KindDocChanged, "acme", "acme/"+id+"/1/changed", doc(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
}

// delivery is one message as a batch handler saw it.
type delivery struct {
	Doc        string
	Deliveries uint64
}

// calls records every batch a handler was called with.
type calls struct {
	mu  sync.Mutex
	all [][]delivery
}

func (c *calls) record(t *testing.T, ms []*stream.Message) []delivery {
	var ds []delivery
	for _, m := range ms {
		var ev events.DocChanged
		if err := events.Decode(m.Data, &ev); err != nil {
			t.Errorf("decoding: %v", err)
		}
		ds = append(ds, delivery{ev.DocID, m.Deliveries})
	}
	c.mu.Lock()
	c.all = append(c.all, ds)
	c.mu.Unlock()
	return ds
}

func (c *calls) get() [][]delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.all)
}

func pendingIs(t *testing.T, bus *stream.Bus, stage string, want uint64) func() bool {
	return func() bool { p, err := bus.Pending(t.Context(), stage); return err == nil && p == want }
}

// The messages published before the runner starts arrive as one batch, and
// none is acknowledged while the handler runs.
func TestBatchAckedAfterHandlerReturns(t *testing.T) {
	bus, m := newBus(t)
	ids := []string{"d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7"}
	publishDocs(t, bus, ids...)
	var rec calls
	release := make(chan struct{})
	inside := make(chan uint64, 1)
	runBatch(t, bus, stream.ConsumerConfig{Stage: "b1", Kinds: []events.Kind{events.KindDocChanged},
		Batch: len(ids), BatchWait: time.Minute},
		func(ctx context.Context, ms []*stream.Message) []error {
			rec.record(t, ms)
			p, err := bus.Pending(ctx, "b1")
			if err != nil {
				t.Error(err)
			}
			inside <- p
			<-release
			return make([]error, len(ms))
		})
	p := <-inside
	if p != uint64(len(ids)) {
		t.Fatalf("pending while the handler runs = %d, want %d (nothing acked before it returns)", p, len(ids))
	}
	if got := testutil.ToFloat64(m.Events.WithLabelValues("b1", "ok")); got != 0 {
		t.Fatalf("%v acked while the handler runs", got)
	}
	close(release)
	waitFor(t, "all acked", func() bool { return testutil.ToFloat64(m.Events.WithLabelValues("b1", "ok")) == float64(len(ids)) })
	waitFor(t, "nothing pending", pendingIs(t, bus, "b1", 0))
	got := rec.get()
	if len(got) != 1 || len(got[0]) != len(ids) {
		t.Fatalf("batches = %v, want one of %d", got, len(ids))
	}
	for i, d := range got[0] {
		if d.Doc != ids[i] || d.Deliveries != 1 {
			t.Fatalf("batch[%d] = %+v, want %s delivered once, in stream order", i, d, ids[i])
		}
	}
}

// A retryable failure naks only its message, which comes back alone; the
// others of its batch are acked and not redelivered.
func TestBatchFailedMessageRedeliveredAlone(t *testing.T) {
	bus, m := newBus(t)
	ids := []string{"a", "bad", "c", "d"}
	publishDocs(t, bus, ids...)
	var rec calls
	runBatch(t, bus, stream.ConsumerConfig{Stage: "b2", Kinds: []events.Kind{events.KindDocChanged},
		Batch: len(ids), BatchWait: time.Minute, Backoff: []time.Duration{5 * time.Millisecond}},
		func(_ context.Context, ms []*stream.Message) []error {
			errs := make([]error, len(ms))
			for i, d := range rec.record(t, ms) {
				if d.Doc == "bad" && d.Deliveries == 1 {
					errs[i] = errors.New("store is busy")
				}
			}
			return errs
		})
	waitFor(t, "all acked", func() bool { return testutil.ToFloat64(m.Events.WithLabelValues("b2", "ok")) == 4 })
	waitFor(t, "nothing pending", pendingIs(t, bus, "b2", 0))
	got := rec.get()
	want := [][]delivery{
		{{"a", 1}, {"bad", 1}, {"c", 1}, {"d", 1}},
		{{"bad", 2}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batches = %v, want %v", got, want)
	}
	if r := testutil.ToFloat64(m.Events.WithLabelValues("b2", "retry")); r != 1 {
		t.Fatalf("retries = %v, want 1", r)
	}
}

// A panic naks the whole batch: nothing is acked or dead-lettered for it.
// Each message then comes back alone, so the innocent ones succeed and only
// the one that keeps panicking is dead-lettered, with the panic as reason.
func TestBatchPanicRedeliversBatch(t *testing.T) {
	bus, m := newBus(t)
	ids := []string{"a", "poison", "c"}
	publishDocs(t, bus, ids...)
	var rec calls
	runBatch(t, bus, stream.ConsumerConfig{Stage: "b3", Kinds: []events.Kind{events.KindDocChanged},
		Batch: len(ids), BatchWait: time.Minute, MaxDeliver: 3, Backoff: []time.Duration{5 * time.Millisecond}},
		func(_ context.Context, ms []*stream.Message) []error {
			for _, d := range rec.record(t, ms) {
				if d.Doc == "poison" {
					panic("boom")
				}
			}
			return make([]error, len(ms))
		})
	waitFor(t, "dead letter", func() bool { return testutil.ToFloat64(m.DeadLetters.WithLabelValues("b3")) == 1 })
	waitFor(t, "nothing pending", pendingIs(t, bus, "b3", 0))
	if ok := testutil.ToFloat64(m.Events.WithLabelValues("b3", "ok")); ok != 2 {
		t.Fatalf("acked %v, want the two innocent messages", ok)
	}
	got := rec.get()
	if len(got) < 1 || len(got[0]) != 3 {
		t.Fatalf("first batch = %v, want all three", got)
	}
	seen := map[string][]uint64{}
	for _, b := range got[1:] {
		if len(b) != 1 {
			t.Fatalf("a redelivery came in a batch of %d: %v", len(b), got)
		}
		seen[b[0].Doc] = append(seen[b[0].Doc], b[0].Deliveries)
	}
	want := map[string][]uint64{"a": {2}, "c": {2}, "poison": {2, 3}}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("redeliveries = %v, want %v", seen, want)
	}
	dls := readDLQ(t, bus, "b3")
	if len(dls) != 1 || !strings.Contains(dls[0].Error, "panicked: boom") || dls[0].Deliveries != 3 {
		t.Fatalf("dead letters = %+v", dls)
	}
}

// Each message of a batch is settled by its own result: stale acked as
// stale, permanent dead-lettered at once, nil acked.
func TestBatchOutcomesPerMessage(t *testing.T) {
	bus, m := newBus(t)
	ids := []string{"ok1", "old", "broken", "ok2"}
	publishDocs(t, bus, ids...)
	var rec calls
	runBatch(t, bus, stream.ConsumerConfig{Stage: "b4", Kinds: []events.Kind{events.KindDocChanged},
		Batch: len(ids), BatchWait: time.Minute},
		func(_ context.Context, ms []*stream.Message) []error {
			errs := make([]error, len(ms))
			for i, d := range rec.record(t, ms) {
				switch d.Doc {
				case "old":
					errs[i] = fmt.Errorf("%w: superseded", stream.ErrStale)
				case "broken":
					errs[i] = stream.Permanent(errors.New("cannot apply"))
				}
			}
			return errs
		})
	waitFor(t, "nothing pending", pendingIs(t, bus, "b4", 0))
	for outcome, want := range map[string]float64{"ok": 2, "stale": 1, "dead_letter": 1, "retry": 0} {
		if got := testutil.ToFloat64(m.Events.WithLabelValues("b4", outcome)); got != want {
			t.Errorf("%s = %v, want %v", outcome, got, want)
		}
	}
	if n := len(rec.get()); n != 1 {
		t.Fatalf("handler called %d times, want once", n)
	}
	dls := readDLQ(t, bus, "b4")
	if len(dls) != 1 || dls[0].Error != "cannot apply" || dls[0].Deliveries != 1 {
		t.Fatalf("dead letters = %+v", dls)
	}
}

// A handler returning the wrong number of results gets its batch back:
// nothing is acked on a guess.
func TestBatchWrongResultCountRedelivers(t *testing.T) {
	bus, m := newBus(t)
	publishDocs(t, bus, "a", "b")
	var rec calls
	runBatch(t, bus, stream.ConsumerConfig{Stage: "b5", Kinds: []events.Kind{events.KindDocChanged},
		Batch: 2, BatchWait: time.Minute, Backoff: []time.Duration{5 * time.Millisecond}},
		func(_ context.Context, ms []*stream.Message) []error {
			if rec.record(t, ms)[0].Deliveries == 1 {
				return nil
			}
			return make([]error, len(ms))
		})
	waitFor(t, "both acked", func() bool { return testutil.ToFloat64(m.Events.WithLabelValues("b5", "ok")) == 2 })
	if got := rec.get(); len(got) != 3 || len(got[0]) != 2 {
		t.Fatalf("batches = %v, want both together then each alone", got)
	}
}

func TestPublishAll(t *testing.T) {
	bus, m := newBus(t)
	errs := bus.PublishAll(t.Context(), []stream.Outgoing{
		{Kind: events.KindDocChanged, Tenant: "acme", MsgID: "acme/x/1/changed", Event: doc("x", 1)},
		{Kind: events.KindDocChanged, Tenant: "acme", MsgID: "acme/bad/1/changed", Event: doc("", 1)},
		{Kind: events.KindDocChanged, Tenant: "acme", MsgID: "acme/y/1/changed", Event: doc("y", 1)},
		{Kind: events.KindDocChanged, Tenant: "acme", MsgID: "acme/x/1/changed", Event: doc("x", 1)},
	})
	if errs[0] != nil || errs[2] != nil || errs[3] != nil {
		t.Fatalf("errors = %v", errs)
	}
	if !errors.Is(errs[1], events.ErrInvalidEvent) {
		t.Fatalf("invalid event: %v, want ErrInvalidEvent", errs[1])
	}
	var rec calls
	runBatch(t, bus, stream.ConsumerConfig{Stage: "b6", Kinds: []events.Kind{events.KindDocChanged}},
		func(_ context.Context, ms []*stream.Message) []error {
			rec.record(t, ms)
			return make([]error, len(ms))
		})
	waitFor(t, "both acked", func() bool { return testutil.ToFloat64(m.Events.WithLabelValues("b6", "ok")) == 2 })
	var docs []string
	for _, b := range rec.get() {
		for _, d := range b {
			docs = append(docs, d.Doc)
		}
	}
	if fmt.Sprint(docs) != "[x y]" {
		t.Fatalf("published %v, want x and y once each", docs)
	}
}
