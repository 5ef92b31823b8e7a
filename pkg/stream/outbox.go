package stream

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/nats-io/nats.go/jetstream"
)

var bucketUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// OutboxBucket is the key-value bucket where the gateway keeps the events
// the registry holds and JetStream has not acknowledged yet.
func (b *Bus) OutboxBucket() string {
	return "outbox_" + bucketUnsafe.ReplaceAllString(b.cfg.Stream, "_")
}

// OutboxPending counts the events waiting in the outbox (0 when no
// gateway has opened it yet).
func (b *Bus) OutboxPending(ctx context.Context) (int, error) {
	kv, err := b.js.KeyValue(ctx, b.OutboxBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("opening bucket %s: %w", b.OutboxBucket(), err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing pending events: %w", err)
	}
	n := 0
	for range lister.Keys() {
		n++
	}
	return n, nil
}
