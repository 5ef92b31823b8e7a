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
	emb, err := stream.StartEmbedded(stream.EmbeddedConfig{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
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
