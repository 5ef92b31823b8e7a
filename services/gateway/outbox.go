package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
)

// pending is an event the registry already holds and the bus has not
// acknowledged yet, as the outbox keeps it.
type pending struct {
	Kind   events.Kind     `json:"kind"`
	Tenant string          `json:"tenant"`
	MsgID  string          `json:"msg_id"`
	Event  json.RawMessage `json:"event,omitempty"`
	// EventPayload names the event in the bus's payload bucket when it is
	// too large for a key-value record (Event is then empty).
	EventPayload string `json:"event_payload,omitempty"`
	// DocID, Version and ContentHash let a republished content event
	// record its content in the registry, as an acknowledged one does.
	DocID       string `json:"doc_id,omitempty"`
	Version     int64  `json:"version,omitempty"`
	ContentHash string `json:"content_hash,omitempty"`
}

// outbox keeps pending publishes in a JetStream key-value bucket of their
// own (file storage, shared by every gateway replica, surviving restarts),
// written right after the registry write and removed once the bus
// acknowledged the event. Run republishes what is left, at start and
// periodically: a process that died between the registry write and the
// publish, or a publish that failed and was never retried, leaves the
// event there, and its idempotent message id makes a repeat harmless.
type outbox struct {
	js     jetstream.JetStream
	bucket string
	gauge  prometheus.Gauge

	mu sync.Mutex
	kv jetstream.KeyValue
}

func newOutbox(bus *stream.Bus) *outbox {
	return &outbox{js: bus.JetStream(), bucket: bus.OutboxBucket(),
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kgstream_outbox_pending",
			Help: "Events the registry holds that JetStream has not acknowledged yet (the gateway's outbox).",
		})}
}

func (o *outbox) open(ctx context.Context) (jetstream.KeyValue, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.kv != nil {
		return o.kv, nil
	}
	kv, err := o.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: o.bucket,
		Description: "events the gateway recorded and has not published yet", History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, fmt.Errorf("opening bucket %s: %w", o.bucket, err)
	}
	o.kv = kv
	return kv, nil
}

// key names a pending event by its message id (which may hold any
// character an id may, and a key may not).
func outboxKey(msgID string) string {
	sum := sha256.Sum256([]byte(msgID))
	return hex.EncodeToString(sum[:])
}

func (o *outbox) put(ctx context.Context, p pending) error {
	kv, err := o.open(ctx)
	if err != nil {
		return err
	}
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encoding pending %s: %w", p.MsgID, err)
	}
	if _, err := kv.Put(ctx, outboxKey(p.MsgID), data); err != nil {
		return fmt.Errorf("recording pending %s: %w", p.MsgID, err)
	}
	o.gauge.Inc()
	return nil
}

func (o *outbox) done(ctx context.Context, msgID string) error {
	kv, err := o.open(ctx)
	if err != nil {
		return err
	}
	if err := kv.Purge(ctx, outboxKey(msgID)); err != nil {
		return fmt.Errorf("clearing pending %s: %w", msgID, err)
	}
	o.gauge.Dec()
	return nil
}

// all returns every pending event, and sets the gauge to their number.
func (o *outbox) all(ctx context.Context) ([]pending, error) {
	kv, err := o.open(ctx)
	if err != nil {
		return nil, err
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing pending events: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	out := make([]pending, 0, len(keys))
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading pending event %s: %w", k, err)
		}
		var p pending
		if err := json.Unmarshal(e.Value(), &p); err != nil {
			return nil, fmt.Errorf("decoding pending event %s: %w", k, err)
		}
		out = append(out, p)
	}
	o.gauge.Set(float64(len(out)))
	return out, nil
}

// decodePending returns the event of p, ready to publish again.
func decodePending(ctx context.Context, bus *stream.Bus, p pending) (events.Validator, error) {
	if p.EventPayload != "" {
		data, err := bus.LoadPayload(ctx, p.EventPayload)
		if err != nil {
			return nil, fmt.Errorf("reading pending event %s: %w", p.MsgID, err)
		}
		p.Event = data
	}
	var ev events.Validator
	switch p.Kind {
	case events.KindDocChanged:
		ev = &events.DocChanged{}
	case events.KindDocDeleted:
		ev = &events.DocDeleted{}
	case events.KindDocACL:
		ev = &events.DocACL{}
	case events.KindReresolve:
		ev = &events.Reresolve{}
	case events.KindExtracted:
		// Kept by earlier versions, which re-published extractions for
		// re-resolution.
		ev = &events.Extracted{}
	default:
		return nil, fmt.Errorf("pending event %s has the unknown kind %q", p.MsgID, p.Kind)
	}
	if err := events.Decode(p.Event, ev); err != nil {
		return nil, fmt.Errorf("decoding pending event %s: %w", p.MsgID, err)
	}
	return ev, nil
}

// Pending returns the number of events the outbox holds.
func (g *Gateway) Pending(ctx context.Context) (int, error) {
	ps, err := g.outbox.all(ctx)
	return len(ps), err
}

// Republish publishes every pending event once and returns how many are
// still pending.
func (g *Gateway) Republish(ctx context.Context) (int, error) {
	ps, err := g.outbox.all(ctx)
	if err != nil {
		return 0, err
	}
	left := 0
	for _, p := range ps {
		ev, err := decodePending(ctx, g.bus, p)
		if err != nil {
			// It can never be published; keep it for an operator to see.
			g.log.Error("pending event unreadable", "event", p.MsgID, "error", err)
			left++
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, g.cfg.PublishTimeout)
		_, err = g.bus.Publish(pctx, p.Kind, p.Tenant, p.MsgID, ev)
		cancel()
		if err != nil {
			g.log.Warn("republishing failed", "event", p.MsgID, "error", err)
			left++
			continue
		}
		if p.ContentHash != "" {
			if _, err := g.registry.RecordContent(ctx, p.Tenant, p.DocID, p.Version, p.ContentHash); err != nil {
				g.log.Warn("content hash not recorded", "tenant", p.Tenant, "doc", p.DocID, "error", err)
			}
		}
		if err := g.outbox.done(ctx, p.MsgID); err != nil {
			g.log.Warn("pending event not cleared", "event", p.MsgID, "error", err)
		}
		g.log.Info("pending event republished", "event", p.MsgID)
	}
	g.outbox.gauge.Set(float64(left))
	// Every acknowledged event leaves a purge marker under its own key;
	// drop the old ones so the bucket does not grow with the traffic.
	if kv, err := g.outbox.open(ctx); err == nil {
		if err := kv.PurgeDeletes(ctx, jetstream.DeleteMarkersOlderThan(time.Minute)); err != nil {
			g.log.Warn("outbox markers not purged", "error", err)
		}
	}
	return left, nil
}

// Run republishes the outbox at start and then every Config.OutboxEvery
// until ctx ends. A failed round is logged and retried at the next tick.
func (g *Gateway) Run(ctx context.Context) error {
	tick := time.NewTicker(g.cfg.OutboxEvery)
	defer tick.Stop()
	for {
		if _, err := g.Republish(ctx); err != nil && ctx.Err() == nil {
			g.log.Warn("outbox round failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
