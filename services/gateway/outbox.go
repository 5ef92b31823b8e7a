package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/kgstream/kgstream/pkg/errkind"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
)

// Registry is the source registry with its outbox: the gateway records
// every change together with the events that announce it.
type Registry interface {
	store.Registry
	store.Outbox
}

// pending is an event the registry already holds and the bus has not
// acknowledged yet: the record the registry's outbox keeps (store.Pending
// Data), in the format the older key-value outbox kept too.
type pending struct {
	Kind   events.Kind     `json:"kind"`
	Tenant string          `json:"tenant"`
	MsgID  string          `json:"msg_id"`
	Event  json.RawMessage `json:"event,omitempty"`
	// EventPayload names the event in the bus's payload bucket when it is
	// too large to keep inline (Event is then empty).
	EventPayload string `json:"event_payload,omitempty"`
	// DocID, Version and ContentHash let a republished content event
	// record its content in the registry, as an acknowledged one does.
	DocID       string `json:"doc_id,omitempty"`
	Version     int64  `json:"version,omitempty"`
	ContentHash string `json:"content_hash,omitempty"`
}

// outgoing is an event to publish once the registry holds it.
type outgoing struct {
	kind events.Kind
	id   string
	ev   events.Validator
	// meta carries what a republish records (a content event's document,
	// version and content hash).
	meta pending
}

// outbox publishes the events the registry's outbox holds. A change and
// its events are one registry write (store.Outbox), so a process dying
// between the registry write and the publish leaves the events there; an
// acknowledged publish clears them. Run republishes what is left, at start
// and periodically, and an event's idempotent message id makes a repeat
// harmless. Events too large to keep inline are kept in the bus's payload
// bucket, named by the record.
type outbox struct {
	reg   Registry
	bus   *stream.Bus
	log   *slog.Logger
	gauge prometheus.Gauge
	// migrated is set once the key-value bucket an older gateway kept its
	// outbox in has been moved into the registry (or was never there).
	migrated atomic.Bool
}

func newOutbox(reg Registry, bus *stream.Bus, log *slog.Logger) *outbox {
	return &outbox{reg: reg, bus: bus, log: log,
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kgstream_outbox_pending",
			Help: "Events the registry holds that JetStream has not acknowledged yet (the gateway's outbox).",
		})}
}

// payloadName is the name the payload bucket keeps data under.
func payloadName(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// prestore keeps in the payload bucket, before the registry transaction,
// every event of outs too large to be kept inline, and returns their
// names: the transaction then only names them. It is called with the
// events as the registry is expected to take them; one the transaction
// builds otherwise (a concurrent writer moved the document) is stored
// from within it.
func (o *outbox) prestore(ctx context.Context, outs []outgoing) (map[string]bool, error) {
	stored := map[string]bool{}
	for _, out := range outs {
		data, err := events.Encode(out.ev)
		if err != nil || len(data) <= o.bus.InlineMax() {
			continue // an encoding error is the transaction's to report
		}
		name, err := o.bus.StorePayload(ctx, data)
		if err != nil {
			return nil, fmt.Errorf("%w: storing pending event %s: %w", errPayloadStore, out.id, err)
		}
		stored[name] = true
	}
	return stored, nil
}

// records returns the registry's records of outs.
func (o *outbox) records(ctx context.Context, tenant string, outs []outgoing, stored map[string]bool) ([]store.Pending, error) {
	ps := make([]store.Pending, 0, len(outs))
	for _, out := range outs {
		data, err := events.Encode(out.ev)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errEncoding, err)
		}
		p := out.meta
		p.Kind, p.Tenant, p.MsgID, p.Event = out.kind, tenant, out.id, data
		if len(data) > o.bus.InlineMax() {
			name := payloadName(data)
			if !stored[name] {
				if name, err = o.bus.StorePayload(ctx, data); err != nil {
					return nil, fmt.Errorf("%w: storing pending event %s: %w", errPayloadStore, out.id, err)
				}
			}
			p.Event, p.EventPayload = nil, name
		}
		rec, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errEncoding, err)
		}
		ps = append(ps, store.Pending{Tenant: tenant, ID: out.id, Data: rec})
	}
	return ps, nil
}

// Errors of building the outbox's records: an event that cannot be
// encoded (the request is invalid), and the payload bucket failing to
// keep a large one (the outbox is unavailable; nothing was written).
var (
	errEncoding     = errors.New("encoding the event")
	errPayloadStore = errors.New("the payload bucket is unavailable")
)

// outboxError classifies an error of a registry write that records events.
func (c *Commands) outboxError(err error, doing string) error {
	switch {
	case errors.Is(err, errEncoding):
		return errkind.Errorf(errkind.Invalid, "invalid_document", "%w", err)
	case errors.Is(err, errPayloadStore):
		return errkind.Wrap(errkind.Unavailable, "outbox_unavailable", err, doing+": recording the event failed; retry the request")
	}
	return c.registryError(err, doing)
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
	case events.KindRecluster:
		ev = &events.Recluster{}
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
	n, err := g.registry.PendingCount(ctx)
	if err != nil {
		return 0, fmt.Errorf("counting pending events: %w", err)
	}
	return n, nil
}

// republishPage is how many pending events a round reads at a time.
const republishPage = 64

// Republish publishes every pending event once and returns how many are
// still pending.
func (g *Gateway) Republish(ctx context.Context) (int, error) {
	if !g.outbox.migrated.Load() {
		if err := g.outbox.migrate(ctx); err != nil {
			g.log.Warn("the old outbox bucket was not moved yet", "bucket", g.bus.OutboxBucket(), "error", err)
		}
	}
	afterTenant, afterID := "", ""
	published := 0
	for {
		page, err := g.registry.PendingEvents(ctx, afterTenant, afterID, republishPage)
		if err != nil {
			return 0, fmt.Errorf("reading pending events: %w", err)
		}
		published += g.republishEvents(ctx, page)
		if len(page) < republishPage {
			break
		}
		afterTenant, afterID = page[len(page)-1].Tenant, page[len(page)-1].ID
	}
	left, err := g.Pending(ctx)
	if err != nil {
		return 0, err
	}
	if published > 0 {
		g.log.Info("pending events republished", "events", published, "left", left)
	}
	g.outbox.gauge.Set(float64(left))
	return left, nil
}

// republishAcks is how many settlements of one page of republished
// events run at a time: on a single-writer store they share commits
// (each alone is a commit of its own, which bounded a round at about
// 200 events/s).
const republishAcks = 32

// republishEvents publishes a page of pending events without waiting for
// each acknowledgement before sending the next (stream.PublishAll), then
// clears each acknowledged one and records the content it published,
// several at a time; a failure leaves that event for the next round. It
// returns how many were published.
func (g *Gateway) republishEvents(ctx context.Context, page []store.Pending) int {
	recs := make([]store.Pending, 0, len(page))
	ps := make([]pending, 0, len(page))
	outs := make([]stream.Outgoing, 0, len(page))
	for _, rec := range page {
		var p pending
		if err := json.Unmarshal(rec.Data, &p); err != nil {
			// It can never be published; keep it for an operator to see.
			g.log.Error("pending event unreadable", "tenant", rec.Tenant, "event", rec.ID, "error", err)
			continue
		}
		ev, err := decodePending(ctx, g.bus, p)
		if err != nil {
			g.log.Error("pending event unreadable", "tenant", rec.Tenant, "event", rec.ID, "error", err)
			continue
		}
		recs, ps = append(recs, rec), append(ps, p)
		outs = append(outs, stream.Outgoing{Kind: p.Kind, Tenant: p.Tenant, MsgID: p.MsgID, Event: ev})
	}
	pctx, cancel := context.WithTimeout(ctx, g.cfg.PublishTimeout)
	errs := g.bus.PublishAll(pctx, outs)
	cancel()
	var acks errgroup.Group
	acks.SetLimit(republishAcks)
	published := 0
	for i, err := range errs {
		if err != nil {
			g.log.Warn("republishing failed", "event", ps[i].MsgID, "error", err)
			continue
		}
		published++
		rec, p := recs[i], ps[i]
		var content *store.ContentAck
		if p.ContentHash != "" && p.Tenant == rec.Tenant {
			content = &store.ContentAck{DocID: p.DocID, Version: p.Version, Hash: p.ContentHash}
		}
		acks.Go(func() error {
			g.outbox.acknowledge(ctx, rec.Tenant, []string{rec.ID}, content)
			return nil
		})
	}
	_ = acks.Wait()
	return published
}

// acknowledge clears acknowledged events and records the content they
// published in one registry write. Failing to clear them leaves them for
// Run to publish again (an idempotent repeat); failing to record the
// content only means the next identical request is published again
// (de-duplicated or applied as a replay). It reports whether the events
// were cleared.
func (o *outbox) acknowledge(ctx context.Context, tenant string, ids []string, content *store.ContentAck) bool {
	if err := o.reg.Acknowledge(ctx, tenant, ids, content); err != nil {
		o.log.Warn("acknowledged events not cleared", "tenant", tenant, "events", ids, "error", err)
		return false
	}
	return true
}

// migrate moves what an older gateway left in its key-value outbox bucket
// (outbox_<stream>) into the registry's outbox, where this round
// republishes it, and deletes the bucket once it is empty. It runs until
// it succeeds once; the bucket is not read after that.
func (o *outbox) migrate(ctx context.Context) error {
	js := o.bus.JetStream()
	bucket := o.bus.OutboxBucket()
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		o.migrated.Store(true)
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening bucket %s: %w", bucket, err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("listing bucket %s: %w", bucket, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	moved, kept := 0, 0
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading %s of bucket %s: %w", k, bucket, err)
		}
		var p pending
		if err := json.Unmarshal(e.Value(), &p); err != nil || store.ValidatePending(store.Pending{Tenant: p.Tenant, ID: p.MsgID}) != nil {
			o.log.Error("an old pending event is unreadable and stays in its bucket", "bucket", bucket, "key", k, "error", err)
			kept++
			continue
		}
		if err := o.reg.RecordPending(ctx, []store.Pending{{Tenant: p.Tenant, ID: p.MsgID, Data: e.Value()}}); err != nil {
			return fmt.Errorf("moving pending event %s: %w", p.MsgID, err)
		}
		if err := kv.Purge(ctx, k); err != nil {
			return fmt.Errorf("clearing %s of bucket %s: %w", k, bucket, err)
		}
		moved++
	}
	if kept == 0 {
		if err := js.DeleteKeyValue(ctx, bucket); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("deleting bucket %s: %w", bucket, err)
		}
	}
	o.migrated.Store(true)
	o.log.Info("the old outbox bucket was moved into the registry; it is not read again",
		"bucket", bucket, "moved", moved, "unreadable", kept)
	return nil
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

// publishRecorded publishes events the registry holds as pending, in
// order, then clears every one acknowledged in one registry write, which
// also records content once all of them are. It returns whether the first
// was a duplicate. A failure stops there and leaves that event and the
// rest pending, for Run to republish.
func (c *Commands) publishRecorded(ctx context.Context, tenant string, outs []outgoing, content *store.ContentAck) (bool, error) {
	// The registry already holds the change: a client hanging up must not
	// cancel the publish that makes it durable.
	ctx = context.WithoutCancel(ctx)
	c.outbox.gauge.Add(float64(len(outs)))
	first := false
	acked := make([]string, 0, len(outs))
	var err error
	for i, out := range outs {
		var dup, settled bool
		dup, settled, err = c.publishOne(ctx, tenant, out)
		if settled {
			acked = append(acked, out.id)
		}
		if err != nil {
			content = nil
			break
		}
		if i == 0 {
			first = dup
		}
	}
	// The gauge counts what this request added; a round of Run sets it
	// from the store when it ends, so republishEvents leaves it alone.
	if c.outbox.acknowledge(ctx, tenant, acked, content) {
		c.outbox.gauge.Sub(float64(len(acked)))
	}
	return first && err == nil, err
}

// publishOne publishes out and reports whether it was a duplicate and
// whether it is settled: acknowledged, or refused by the bus for good (it
// can never be published), so it is not to be kept pending.
func (c *Commands) publishOne(ctx context.Context, tenant string, out outgoing) (dup, settled bool, err error) {
	pctx, cancel := context.WithTimeout(ctx, c.publishTimeout)
	ack, err := c.bus.Publish(pctx, out.kind, tenant, out.id, out.ev)
	cancel()
	switch {
	case errors.Is(err, events.ErrInvalidEvent):
		// Checked before the registry moved, so this is not expected.
		return false, true, errkind.Errorf(errkind.Invalid, "invalid_document", "%w", err)
	case err != nil:
		// The registry holds the change and its event: Run republishes it,
		// and a client's retry is an idempotent replay with the same id.
		return false, false, errkind.Wrap(errkind.Unavailable, "publish_failed", fmt.Errorf("publishing %s: %w", out.id, err),
			"publishing the event failed; retry the request")
	}
	return ack.Duplicate, true, nil
}

// publishAlone records an event that follows no registry change (a
// re-resolution) as pending, then publishes it.
func (c *Commands) publishAlone(ctx context.Context, tenant string, out outgoing) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.publishTimeout)
	defer cancel()
	ps, err := c.outbox.records(ctx, tenant, []outgoing{out}, nil)
	if err != nil {
		return false, c.outboxError(err, "recording the event")
	}
	if err := c.registry.RecordPending(ctx, ps); err != nil {
		return false, c.outboxError(err, "recording the event")
	}
	dup, err := c.publishRecorded(ctx, tenant, []outgoing{out}, nil)
	if err != nil {
		return false, queuedError{err}
	}
	return dup, nil
}

// queuedError is the failure to publish an event the outbox holds: Run
// publishes it later.
type queuedError struct{ error }

func (e queuedError) Unwrap() error { return e.error }

// recording returns the store.PendingFunc of a registry write whose
// events build returns for the transition it makes, and a function that
// returns the events of the transition the registry took (those of build's
// last call: an optimistic registry may call it more than once).
func (c *Commands) recording(ctx context.Context, tenant string, stored map[string]bool,
	build func(cur *provenance.SourceState, next provenance.SourceState) []outgoing) (store.PendingFunc, func() []outgoing) {
	var last []outgoing
	pend := func(cur *provenance.SourceState, next provenance.SourceState) ([]store.Pending, error) {
		last = build(cur, next)
		return c.outbox.records(ctx, tenant, last, stored)
	}
	return pend, func() []outgoing { return last }
}
