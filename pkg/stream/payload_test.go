package stream_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
)

// bigText is n bytes of words, different for each seed.
func bigText(seed, n int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		fmt.Fprintf(&sb, "word%d-%d ", seed, i)
	}
	return sb.String()[:n]
}

// lastStored reads the last message the stream holds on subject.
func lastStored(t *testing.T, bus *stream.Bus, subject string) jetstream.Msg {
	t.Helper()
	c, err := bus.JetStream().OrderedConsumer(t.Context(), bus.StreamName(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverLastPolicy})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatalf("reading the last message of %s: %v", subject, err)
	}
	return m
}

func TestLargeEventsTravelByReference(t *testing.T) {
	bus, m := newBus(t)
	ctx := t.Context()
	if bus.InlineMax() >= 1<<20 || bus.InlineMax() < 512<<10 {
		t.Fatalf("InlineMax = %d, want the server's max payload less a margin", bus.InlineMax())
	}
	var (
		mu     sync.Mutex
		seen   = map[string]string{} // doc id -> text handled
		failed atomic.Bool
	)
	run(t, bus, stream.ConsumerConfig{Stage: "big", Kinds: []events.Kind{events.KindDocChanged},
		Backoff: []time.Duration{5 * time.Millisecond}},
		func(_ context.Context, msg *stream.Message) error {
			var ev events.DocChanged
			if err := events.Decode(msg.Data, &ev); err != nil {
				return err
			}
			// The first large event fails for good once; its replay succeeds.
			if ev.DocID == "big-b" && failed.CompareAndSwap(false, true) {
				return stream.Permanent(fmt.Errorf("refusing %s once", ev.DocID))
			}
			mu.Lock()
			seen[ev.DocID] = ev.Text
			mu.Unlock()
			return nil
		})
	textOf := func(id string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		s, ok := seen[id]
		return s, ok
	}

	large := doc("big-a", 1)
	large.Text = bigText(1, 3_500_000)
	ack, err := bus.Publish(ctx, events.KindDocChanged, "acme", "acme/big-a/1/changed", large)
	if err != nil {
		t.Fatalf("publishing a 3.5 MB event: %v", err)
	}
	if ack.Duplicate {
		t.Fatal("first publish reported as duplicate")
	}
	// The stream holds a small reference; EventData gives the whole event.
	stored := lastStored(t, bus, "kg.doc.changed.acme")
	if !stream.ByReference(stored) || len(stored.Data()) > 1024 {
		t.Fatalf("stored message: by reference %v, %d bytes", stream.ByReference(stored), len(stored.Data()))
	}
	whole, err := bus.EventData(ctx, stored)
	if err != nil {
		t.Fatal(err)
	}
	var back events.DocChanged
	if err := events.Decode(whole, &back); err != nil || back.Text != large.Text {
		t.Fatalf("event read back from the payload bucket differs (%v)", err)
	}
	waitFor(t, "large event handled", func() bool { _, ok := textOf("big-a"); return ok })
	if got, _ := textOf("big-a"); got != large.Text {
		t.Fatalf("handler saw %d bytes of text, want %d", len(got), len(large.Text))
	}

	// A republish with the same id is de-duplicated and stores nothing new.
	ack, err = bus.Publish(ctx, events.KindDocChanged, "acme", "acme/big-a/1/changed", large)
	if err != nil || !ack.Duplicate {
		t.Fatalf("republish: duplicate %v, %v", ack != nil && ack.Duplicate, err)
	}
	obs, err := bus.JetStream().ObjectStore(ctx, bus.PayloadBucket())
	if err != nil {
		t.Fatal(err)
	}
	st, err := obs.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != 7*24*time.Hour+time.Hour {
		t.Fatalf("payload TTL = %s, want the stream's MaxAge plus 1h", st.TTL())
	}
	countObjects := func() int {
		list, err := obs.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	if n := countObjects(); n != 1 {
		t.Fatalf("payload objects = %d, want 1", n)
	}

	// Small events still travel inline.
	if _, err := bus.Publish(ctx, events.KindDocChanged, "acme", "acme/small/1/changed", doc("small", 1)); err != nil {
		t.Fatal(err)
	}
	if stored := lastStored(t, bus, "kg.doc.changed.acme"); stream.ByReference(stored) {
		t.Fatal("a small event travelled by reference")
	}
	waitFor(t, "small event handled", func() bool { _, ok := textOf("small"); return ok })

	// A dead letter keeps the reference, and its replay is handled whole.
	other := doc("big-b", 1)
	other.Text = bigText(2, 2_000_000)
	if _, err := bus.Publish(ctx, events.KindDocChanged, "acme", "acme/big-b/1/changed", other); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dead letter", func() bool { return testutil.ToFloat64(m.DeadLetters.WithLabelValues("big")) == 1 })
	dls := readDLQ(t, bus, "big")
	if len(dls) != 1 || dls[0].Payload == "" || len(dls[0].Data) > 1024 {
		t.Fatalf("dead letter does not keep the reference: %d letters, payload %q, %d bytes",
			len(dls), dls[0].Payload, len(dls[0].Data))
	}
	if _, err := bus.Replay(ctx, dls[0]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replay handled", func() bool { _, ok := textOf("big-b"); return ok })
	if got, _ := textOf("big-b"); got != other.Text {
		t.Fatalf("replay handled %d bytes of text, want %d", len(got), len(other.Text))
	}
	if n := countObjects(); n != 2 {
		t.Fatalf("payload objects = %d, want 2", n)
	}
}

func TestMissingPayloadIsDeadLettered(t *testing.T) {
	bus, m := newBus(t)
	ctx := t.Context()
	large := doc("gone", 1)
	large.Text = bigText(3, 1_500_000)
	if _, err := bus.Publish(ctx, events.KindDocChanged, "acme", "acme/gone/1/changed", large); err != nil {
		t.Fatal(err)
	}
	stored := lastStored(t, bus, "kg.doc.changed.acme")
	obs, err := bus.JetStream().ObjectStore(ctx, bus.PayloadBucket())
	if err != nil {
		t.Fatal(err)
	}
	if err := obs.Delete(ctx, stored.Headers().Get(stream.HeaderPayload)); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EventData(ctx, stored); err == nil || !strings.Contains(err.Error(), stream.ErrPayloadGone.Error()) {
		t.Fatalf("EventData of a deleted payload: %v", err)
	}
	var calls atomic.Int32
	run(t, bus, stream.ConsumerConfig{Stage: "lost", Kinds: []events.Kind{events.KindDocChanged}, MaxDeliver: 5,
		Backoff: []time.Duration{5 * time.Millisecond}},
		func(context.Context, *stream.Message) error { calls.Add(1); return nil })
	waitFor(t, "dead letter", func() bool { return testutil.ToFloat64(m.DeadLetters.WithLabelValues("lost")) == 1 })
	if calls.Load() != 0 {
		t.Fatalf("the handler ran %d times without its payload", calls.Load())
	}
	dls := readDLQ(t, bus, "lost")
	if len(dls) != 1 || dls[0].Deliveries != 1 || !strings.Contains(dls[0].Error, "payload is gone") ||
		dls[0].Payload != stored.Headers().Get(stream.HeaderPayload) {
		t.Fatalf("dead letter = %+v", dls)
	}
}

func TestOversizeDeadLetterKeepsTheEventByReference(t *testing.T) {
	bus, m := newBus(t)
	ctx := t.Context()
	// Not JSON, and escaping makes it six times larger in a dead letter.
	raw := []byte(strings.Repeat("\x01", 600_000))
	var replayed atomic.Int32
	run(t, bus, stream.ConsumerConfig{Stage: "odd", Kinds: []events.Kind{events.KindDocChanged}},
		func(_ context.Context, msg *stream.Message) error {
			if msg.Header.Get("Nats-Msg-Id") != "" && strings.HasPrefix(msg.Header.Get("Nats-Msg-Id"), "replay/") {
				if string(msg.Data) == string(raw) {
					replayed.Add(1)
				}
				return nil
			}
			return stream.Permanent(fmt.Errorf("cannot read %d bytes", len(msg.Data)))
		})
	if _, err := bus.JetStream().Publish(ctx, "kg.doc.changed.acme", raw); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dead letter", func() bool { return testutil.ToFloat64(m.DeadLetters.WithLabelValues("odd")) == 1 })
	dls := readDLQ(t, bus, "odd")
	if len(dls) != 1 || dls[0].Payload == "" || dls[0].RawData != "" {
		t.Fatalf("dead letter: %d letters, payload %q, %d bytes of raw data", len(dls), dls[0].Payload, len(dls[0].RawData))
	}
	if _, err := bus.Replay(ctx, dls[0]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replay handled whole", func() bool { return replayed.Load() == 1 })
}
