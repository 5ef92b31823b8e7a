package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/stream"
)

func newBus(t *testing.T) (*stream.Bus, *stream.Metrics) {
	t.Helper()
	nc := stream.EmbeddedConn(t)
	m := stream.NewMetrics(prometheus.NewRegistry())
	bus, err := stream.Connect(t.Context(), stream.Config{Conn: nc}, nil, m)
	if err != nil {
		t.Fatal(err)
	}
	return bus, m
}

func doc(id string, v int64) *events.DocChanged {
	return &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: id, Version: v, Text: "t",
		ACL: provenance.PublicACL(), ReceivedAt: time.Now()}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readDLQ(t *testing.T, bus *stream.Bus, stage string) []stream.DeadLetter {
	t.Helper()
	ctx := t.Context()
	c, err := bus.JetStream().OrderedConsumer(ctx, bus.StreamName(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.Subjects().DLQ(stage)}})
	if err != nil {
		t.Fatal(err)
	}
	var out []stream.DeadLetter
	batch, err := c.FetchNoWait(100)
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		var dl stream.DeadLetter
		if err := json.Unmarshal(m.Data(), &dl); err != nil {
			t.Fatal(err)
		}
		out = append(out, dl)
	}
	return out
}

func run(t *testing.T, bus *stream.Bus, cc stream.ConsumerConfig, h stream.Handler) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bus.Run(ctx, cc, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestHandledOnceAndAcked(t *testing.T) {
	bus, m := newBus(t)
	var n atomic.Int32
	run(t, bus, stream.ConsumerConfig{Stage: "s1", Kinds: []events.Kind{events.KindDocChanged}},
		func(_ context.Context, msg *stream.Message) error {
			if msg.Tenant != "acme" || msg.Kind != events.KindDocChanged {
				return stream.Permanent(fmt.Errorf("bad routing %s %s", msg.Kind, msg.Tenant))
			}
			n.Add(1)
			return nil
		})
	for i := 0; i < 3; i++ {
		// The same id three times: JetStream de-duplicates.
		ack, err := bus.Publish(t.Context(), events.KindDocChanged, "acme", "acme/d/1/changed", doc("d", 1))
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && !ack.Duplicate {
			t.Fatal("republish with the same Nats-Msg-Id was not de-duplicated")
		}
	}
	if _, err := bus.Publish(t.Context(), events.KindDocChanged, "acme", "acme/d/2/changed", doc("d", 2)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two events handled", func() bool { return testutil.ToFloat64(m.Events.WithLabelValues("s1", "ok")) == 2 })
	if n.Load() != 2 {
		t.Fatalf("handled %d, want 2", n.Load())
	}
	waitFor(t, "nothing pending", func() bool { p, err := bus.Pending(t.Context(), "s1"); return err == nil && p == 0 })
}

func TestRetryThenDeadLetter(t *testing.T) {
	bus, m := newBus(t)
	var calls atomic.Int32
	run(t, bus, stream.ConsumerConfig{Stage: "flaky", Kinds: []events.Kind{events.KindDocChanged}, MaxDeliver: 3,
		Backoff: []time.Duration{5 * time.Millisecond}},
		func(context.Context, *stream.Message) error {
			calls.Add(1)
			return errors.New("store is down")
		})
	if _, err := bus.Publish(t.Context(), events.KindDocChanged, "acme", "acme/d/1/changed", doc("d", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dead letter", func() bool { return testutil.ToFloat64(m.DeadLetters.WithLabelValues("flaky")) == 1 })
	if c := calls.Load(); c != 3 {
		t.Fatalf("delivered %d times, want MaxDeliver=3", c)
	}
	if got := testutil.ToFloat64(m.Events.WithLabelValues("flaky", "retry")); got != 2 {
		t.Fatalf("retries = %v, want 2", got)
	}
	dls := readDLQ(t, bus, "flaky")
	if len(dls) != 1 || dls[0].Error != "store is down" || dls[0].Deliveries != 3 || dls[0].Subject != "kg.doc.changed.acme" {
		t.Fatalf("dead letter = %+v", dls)
	}
	var orig events.DocChanged
	if err := events.Decode(dls[0].Data, &orig); err != nil || orig.DocID != "d" {
		t.Fatalf("dead letter does not carry the original event: %v", err)
	}
	n, err := bus.DeadLetters(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("DeadLetters = %d, %v", n, err)
	}
}

func TestInvalidEventDeadLetteredAtOnce(t *testing.T) {
	bus, m := newBus(t)
	var calls atomic.Int32
	run(t, bus, stream.ConsumerConfig{Stage: "strict", Kinds: []events.Kind{events.KindDocChanged}},
		func(_ context.Context, msg *stream.Message) error {
			calls.Add(1)
			var ev events.DocChanged
			return events.Decode(msg.Data, &ev)
		})
	// Raw garbage straight onto the subject, bypassing Encode.
	if _, err := bus.JetStream().Publish(t.Context(), "kg.doc.changed.acme", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dead letter", func() bool { return testutil.ToFloat64(m.DeadLetters.WithLabelValues("strict")) == 1 })
	if calls.Load() != 1 {
		t.Fatalf("an invalid event was redelivered %d times", calls.Load())
	}
	dls := readDLQ(t, bus, "strict")
	if len(dls) != 1 || dls[0].RawData != "{not json" {
		t.Fatalf("dead letter = %+v", dls)
	}
}

func TestStaleAcked(t *testing.T) {
	bus, m := newBus(t)
	run(t, bus, stream.ConsumerConfig{Stage: "st", Kinds: []events.Kind{events.KindDocChanged}},
		func(context.Context, *stream.Message) error {
			return fmt.Errorf("%w: older than applied", stream.ErrStale)
		})
	if _, err := bus.Publish(t.Context(), events.KindDocChanged, "acme", "acme/d/1/changed", doc("d", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stale counted", func() bool { return testutil.ToFloat64(m.Events.WithLabelValues("st", "stale")) == 1 })
	if testutil.ToFloat64(m.DeadLetters.WithLabelValues("st")) != 0 {
		t.Fatal("a stale event was dead-lettered")
	}
}

func TestPanicIsDeadLettered(t *testing.T) {
	bus, m := newBus(t)
	run(t, bus, stream.ConsumerConfig{Stage: "p", Kinds: []events.Kind{events.KindDocChanged}},
		func(context.Context, *stream.Message) error { panic("boom") })
	if _, err := bus.Publish(t.Context(), events.KindDocChanged, "acme", "acme/d/1/changed", doc("d", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dead letter", func() bool { return testutil.ToFloat64(m.DeadLetters.WithLabelValues("p")) == 1 })
}

// TestConcurrencyHandlesMessagesAtOnce: with Concurrency 3, three
// messages are in their handlers at the same time (each waits until it
// sees the others), never more; every message is settled on its own (one
// fails permanently, the others are acked), and a stop waits for the ones
// in flight.
func TestConcurrencyHandlesMessagesAtOnce(t *testing.T) {
	bus, m := newBus(t)
	var inside, most atomic.Int32
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	h := func(_ context.Context, msg *stream.Message) error {
		n := inside.Add(1)
		defer inside.Add(-1)
		for {
			old := most.Load()
			if n <= old || most.CompareAndSwap(old, n) {
				break
			}
		}
		<-release
		var ev events.DocChanged
		if err := json.Unmarshal(msg.Data, &ev); err != nil {
			return err
		}
		if ev.DocID == "d3" {
			return stream.Permanent(errors.New("refused"))
		}
		return nil
	}
	go func() {
		done <- bus.Run(ctx, stream.ConsumerConfig{Stage: "conc", Kinds: []events.Kind{events.KindDocChanged}, Concurrency: 3}, h)
	}()
	for i := range 7 {
		id := fmt.Sprintf("d%d", i)
		if _, err := bus.Publish(t.Context(), events.KindDocChanged, "acme", "acme/"+id+"/1/changed", doc(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "three handlers at once", func() bool { return inside.Load() == 3 })
	time.Sleep(50 * time.Millisecond)
	if got := inside.Load(); got != 3 {
		t.Fatalf("%d handlers at once, want 3", got)
	}
	// Release four; then stop with the rest in flight: Run returns only
	// once they finished.
	for range 4 {
		release <- struct{}{}
	}
	waitFor(t, "four settled", func() bool {
		return testutil.ToFloat64(m.Events.WithLabelValues("conc", "ok"))+testutil.ToFloat64(m.DeadLetters.WithLabelValues("conc")) >= 4
	})
	waitFor(t, "three in flight again", func() bool { return inside.Load() == 3 })
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Run returned with handlers in flight: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if inside.Load() != 0 || most.Load() != 3 {
		t.Fatalf("inside %d, most at once %d; want 0 and 3", inside.Load(), most.Load())
	}
	if ok, dl := testutil.ToFloat64(m.Events.WithLabelValues("conc", "ok")), testutil.ToFloat64(m.DeadLetters.WithLabelValues("conc")); ok+dl != 7 || dl != 1 {
		t.Fatalf("%v acked and %v dead-lettered, want 6 and 1", ok, dl)
	}
}

// TestConnectUpdatesAChangedStream: connecting with the stream's own
// settings leaves it as it is; with another retention it is updated.
func TestConnectUpdatesAChangedStream(t *testing.T) {
	nc := stream.EmbeddedConn(t)
	maxAge := func(age time.Duration) time.Duration {
		t.Helper()
		bus, err := stream.Connect(t.Context(), stream.Config{Conn: nc, MaxAge: age}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, err := bus.JetStream().Stream(t.Context(), bus.StreamName())
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config.MaxAge
	}
	for _, age := range []time.Duration{time.Hour, time.Hour, 2 * time.Hour, 0} {
		want := age
		if age == 0 {
			want = 7 * 24 * time.Hour // the default
		}
		if got := maxAge(age); got != want {
			t.Fatalf("connected with MaxAge %s, the stream keeps %s", age, got)
		}
	}
}
