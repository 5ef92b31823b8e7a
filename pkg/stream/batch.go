package stream

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kgstream/kgstream/pkg/events"
)

// BatchHandler processes messages fetched together (one kind, any tenants,
// in stream order) and returns one error per message, at the same index:
// each is settled as a Handler's error would be (nil acks, Stale acks as
// stale, Permanent dead-letters, anything else naks with backoff). Nothing
// is acknowledged before it returns. A message the runner could not prepare
// (an unreadable subject or payload) is settled without reaching it.
type BatchHandler func(ctx context.Context, ms []*Message) []error

// Defaults of the batch runner.
const (
	DefaultBatchSize = 64
	DefaultBatchWait = 5 * time.Millisecond
)

// batchFetchWait is how long one pull request stays open on the server.
const batchFetchWait = 5 * time.Second

// publishAllTimeout bounds how long PublishAll waits for the server's
// acknowledgements.
const publishAllTimeout = 30 * time.Second

var errNoPubAck = errors.New("no acknowledgement from the server in time")

// RunBatch consumes a stage's events with h until ctx is cancelled, up to
// cc.Batch (default DefaultBatchSize) messages per call: after the first
// message arrives, more are collected for at most cc.BatchWait (default
// DefaultBatchWait), so a busy stream fills batches and a quiet one adds
// little latency. A redelivered message is handled alone, so one message
// that fails (or makes h panic) cannot keep failing the others with it. A
// panic in h naks the whole batch for redelivery. Its kinds run as one
// group and it drains as Run does: the batch in flight gets the drain
// timeout to finish, and what it did not finish is naked.
func (b *Bus) RunBatch(ctx context.Context, cc ConsumerConfig, h BatchHandler) error {
	if cc.Batch == 0 {
		cc.Batch = DefaultBatchSize
	}
	if cc.BatchWait == 0 {
		cc.BatchWait = DefaultBatchWait
	}
	return b.run(ctx, cc, func(ctx context.Context, s *stage, c jetstream.Consumer) error {
		return b.consumeBatches(ctx, s, c, h)
	})
}

// pending is a fetched message with its metadata.
type pending struct {
	msg jetstream.Msg
	md  *jetstream.MsgMetadata
}

func (b *Bus) consumeBatches(ctx context.Context, s *stage, cons jetstream.Consumer, h BatchHandler) error {
	w := &watch{cons: cons}
	for {
		mb, err := b.fetch(ctx, s, w)
		if mb == nil {
			return err
		}
		more := b.drainFetch(ctx, s, mb, h)
		w.done()
		if !more {
			return nil
		}
		if err := b.failed(ctx, s, w, mb.Error()); err != nil {
			return err
		}
	}
}

// drainFetch handles the messages of one pull request in batches until it
// is exhausted (true) or ctx is cancelled (false; what is still buffered
// is naked so another consumer gets it without waiting for AckWait).
func (b *Bus) drainFetch(ctx context.Context, s *stage, mb jetstream.MessageBatch, h BatchHandler) bool {
	ch := mb.Messages()
	for {
		if ctx.Err() != nil {
			nakBuffered(ch)
			return false
		}
		b.giveWay(ctx, s)
		var first jetstream.Msg
		select {
		case <-ctx.Done():
			continue
		case msg, ok := <-ch:
			if !ok {
				return true
			}
			first = msg
		}
		group := make([]jetstream.Msg, 1, s.Batch)
		group[0] = first
		if md, err := first.Metadata(); err == nil && md.NumDelivered > 1 {
			// A redelivery is handled alone anyway: no reason to wait.
			b.handleGroup(ctx, s, h, group)
			continue
		}
		timer := time.NewTimer(s.BatchWait)
	collect:
		for len(group) < s.Batch {
			select {
			case msg, ok := <-ch:
				if !ok {
					break collect
				}
				group = append(group, msg)
			case <-timer.C:
				break collect
			}
		}
		timer.Stop()
		b.handleGroup(ctx, s, h, group)
	}
}

// handleGroup splits a fetched group into batches: first-time deliveries
// together, each redelivery alone, stream order kept. Once ctx is
// cancelled, the batches not yet started are naked.
func (b *Bus) handleGroup(ctx context.Context, s *stage, h BatchHandler, group []jetstream.Msg) {
	var fresh []pending
	seen := map[uint64]int{}
	handle := func(ps []pending) {
		if ctx.Err() != nil {
			for _, p := range ps {
				_ = p.msg.Nak()
			}
			return
		}
		b.handleBatch(s, h, ps)
	}
	flush := func() {
		if len(fresh) > 0 {
			handle(fresh)
			fresh = nil
			clear(seen)
		}
	}
	for _, msg := range group {
		md, err := msg.Metadata()
		if err != nil {
			b.log.Error("reading message metadata", "stage", s.Stage, "error", err)
			_ = msg.Nak()
			continue
		}
		if i, ok := seen[md.Sequence.Stream]; ok {
			// The same stream message twice (redelivered while the first
			// delivery waited here): settling the newest delivery settles
			// the message.
			fresh[i] = pending{msg, md}
			continue
		}
		if md.NumDelivered > 1 {
			flush()
			handle([]pending{{msg, md}})
			continue
		}
		seen[md.Sequence.Stream] = len(fresh)
		fresh = append(fresh, pending{msg, md})
	}
	flush()
}

// handleBatch prepares the messages, calls h once for those it could
// prepare, and settles every message with its own result.
func (b *Bus) handleBatch(s *stage, h BatchHandler, ps []pending) {
	start := time.Now()
	hctx, cancel := context.WithCancel(s.work)
	msgs := make([]jetstream.Msg, len(ps))
	for i, p := range ps {
		msgs[i] = p.msg
	}
	stop := keepInProgress(s.AckWait, msgs...)

	ms := make([]*Message, len(ps))
	errs := make([]error, len(ps))
	var call []*Message
	var at []int
	for i, p := range ps {
		m := &Message{Subject: p.msg.Subject(), Data: p.msg.Data(), Header: p.msg.Headers(),
			Deliveries: p.md.NumDelivered, Sequence: p.md.Sequence.Stream}
		kind, tenant, perr := b.cfg.Subjects.Parse(m.Subject)
		m.Kind, m.Tenant = kind, tenant
		ms[i] = m
		if perr != nil {
			errs[i] = Permanent(perr)
			continue
		}
		// Handlers see the whole event, wherever it travelled.
		data, err := b.resolvePayload(hctx, m.Header, m.Data)
		if err != nil {
			if errors.Is(err, ErrPayloadGone) {
				err = Permanent(err)
			}
			errs[i] = err
			continue
		}
		full := *m
		full.Data = data
		call = append(call, &full)
		at = append(at, i)
	}
	if len(call) > 0 {
		// The handler writes into a copy: one abandoned past the drain
		// timeout may still write after this returns.
		res := slices.Clone(errs)
		if !s.await(func() { b.callBatch(hctx, s, h, call, at, res) }) {
			stop()
			cancel()
			b.abandon(s, ms[0], msgs...)
			return
		}
		errs = res
	}
	stop()
	cancel()
	per := time.Since(start).Seconds() / float64(len(ps))
	for i, p := range ps {
		b.metrics.Duration.WithLabelValues(s.Stage).Observe(per)
		b.settle(s, p.msg, ms[i], errs[i])
	}
}

// callBatch calls h with the prepared messages call and puts its results
// into errs at the indexes at.
func (b *Bus) callBatch(ctx context.Context, s *stage, h BatchHandler, call []*Message, at []int, errs []error) {
	b.metrics.BatchSize.WithLabelValues(s.Stage).Observe(float64(len(call)))
	res, panicked := safeBatchCall(ctx, h, call)
	switch {
	case panicked != nil:
		b.log.Error("batch handler panicked, redelivering the batch", "stage", s.Stage,
			"messages", len(call), "panic", fmt.Sprint(panicked.value), "stack", panicked.stack)
		for _, i := range at {
			errs[i] = fmt.Errorf("batch handler panicked: %v", panicked.value)
		}
	case len(res) != len(call):
		b.log.Error("batch handler returned the wrong number of results, redelivering the batch",
			"stage", s.Stage, "messages", len(call), "results", len(res))
		for _, i := range at {
			errs[i] = fmt.Errorf("batch handler returned %d results for %d messages", len(res), len(call))
		}
	default:
		for j, i := range at {
			errs[i] = res[j]
		}
	}
}

type panicValue struct {
	value any
	stack string
}

func safeBatchCall(ctx context.Context, h BatchHandler, ms []*Message) (res []error, p *panicValue) {
	defer func() {
		if r := recover(); r != nil {
			p = &panicValue{value: r, stack: string(debug.Stack())}
		}
	}()
	return h(ctx, ms), nil
}

// Outgoing is one event for PublishAll.
type Outgoing struct {
	Kind   events.Kind
	Tenant string
	MsgID  string
	Event  events.Validator
}

// PublishAll publishes every event as Publish would, without waiting for
// one acknowledgement before sending the next, and returns one error per
// event, at the same index: nil means that event is durable.
func (b *Bus) PublishAll(ctx context.Context, out []Outgoing) []error {
	errs := make([]error, len(out))
	futs := make([]jetstream.PubAckFuture, len(out))
	for i, o := range out {
		data, err := events.Encode(o.Event)
		if err != nil {
			errs[i] = err
			continue
		}
		subject := b.cfg.Subjects.For(o.Kind, o.Tenant)
		if len(data) > b.inlineMax {
			if _, err := b.publishRef(ctx, subject, o.MsgID, data); err != nil {
				errs[i] = fmt.Errorf("publishing %s: %w", subject, err)
			}
			continue
		}
		if futs[i], err = b.js.PublishAsync(subject, data, jetstream.WithMsgID(o.MsgID)); err != nil {
			errs[i] = fmt.Errorf("publishing %s: %w", subject, err)
		}
	}
	// An acknowledgement that never comes (a lost connection) must not
	// hold the caller forever: the event then counts as not published.
	timeout := time.NewTimer(publishAllTimeout)
	defer timeout.Stop()
	for i, f := range futs {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs[i] = fmt.Errorf("publishing %s: %w", f.Msg().Subject, err)
		case <-ctx.Done():
			errs[i] = fmt.Errorf("publishing %s: %w", f.Msg().Subject, ctx.Err())
		case <-timeout.C:
			errs[i] = fmt.Errorf("publishing %s: %w", f.Msg().Subject, errNoPubAck)
			timeout.Reset(0)
		}
	}
	return errs
}
