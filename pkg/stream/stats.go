package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StatsTTL is how long the stats bucket keeps a figure nobody rewrites:
// the figures of a process that died without removing them are gone
// after it, and readers ignore them long before (they know how often
// each process writes).
const StatsTTL = 5 * time.Minute

// Stat is one entry of the stats bucket.
type Stat struct {
	Key   string
	Value []byte
	// Written is when the server stored the value (the server's clock,
	// one clock for every writer).
	Written time.Time
}

// statsKV is the opened stats bucket, kept once opened.
type statsKV struct {
	mu sync.Mutex
	kv jetstream.KeyValue
}

// StatsBucket is the key-value bucket where every process keeps the
// figures it alone holds (its index lag samples, its LLM usage), one key
// per process and figure, for status in any process to read.
func (b *Bus) StatsBucket() string {
	return bucketUnsafe.ReplaceAllString(b.cfg.Stream, "_") + "_stats"
}

// stats opens (and with create, creates) the stats bucket; nil without
// error when it does not exist and create is false.
func (b *Bus) stats(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	b.statsKV.mu.Lock()
	defer b.statsKV.mu.Unlock()
	if b.statsKV.kv != nil {
		return b.statsKV.kv, nil
	}
	var (
		kv  jetstream.KeyValue
		err error
	)
	if create {
		kv, err = b.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b.StatsBucket(),
			Description: "kgstream per-process figures (index lag samples, LLM usage) for status",
			History:     1, TTL: StatsTTL, Storage: jetstream.MemoryStorage})
	} else {
		kv, err = b.js.KeyValue(ctx, b.StatsBucket())
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("opening bucket %s: %w", b.StatsBucket(), err)
	}
	b.statsKV.kv = kv
	return kv, nil
}

// PutStat stores value under key in the stats bucket, creating the bucket
// on first use. Keys are [-_.a-zA-Z0-9]+ (a dot separates tokens).
func (b *Bus) PutStat(ctx context.Context, key string, value []byte) error {
	kv, err := b.stats(ctx, true)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, key, value); err != nil {
		return fmt.Errorf("writing %s to %s: %w", key, b.StatsBucket(), err)
	}
	return nil
}

// DeleteStat removes key from the stats bucket (nothing when it has none).
func (b *Bus) DeleteStat(ctx context.Context, key string) error {
	kv, err := b.stats(ctx, false)
	if kv == nil || err != nil {
		return err
	}
	if err := kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("deleting %s from %s: %w", key, b.StatsBucket(), err)
	}
	return nil
}

// Stats returns every entry of the stats bucket (none before any process
// wrote one), ordered by key.
func (b *Bus) Stats(ctx context.Context) ([]Stat, error) {
	kv, err := b.stats(ctx, false)
	if kv == nil || err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", b.StatsBucket(), err)
	}
	defer func() { _ = w.Stop() }()
	var out []Stat
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reading %s: %w", b.StatsBucket(), ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("reading %s: watcher closed", b.StatsBucket())
			}
			if e == nil {
				slices.SortFunc(out, func(a, b Stat) int { return strings.Compare(a.Key, b.Key) })
				return out, nil
			}
			out = append(out, Stat{Key: e.Key(), Value: e.Value(), Written: e.Created()})
		}
	}
}

// LagStages returns the stages this process has lag samples of, sorted.
func (b *Bus) LagStages() []string {
	b.lagMu.Lock()
	defer b.lagMu.Unlock()
	var out []string
	for s, r := range b.lagRing {
		if r.added > 0 {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// LagSamplesSince returns the lag samples of a stage this process
// recorded after the first mark of them (0: from the first), oldest
// first, and the mark to pass next time; at most the ring's 4096, the
// newest, when more came since. A reader polling more often than 4096
// samples arrive sees every sample once.
func (b *Bus) LagSamplesSince(stage string, mark uint64) ([]float64, uint64) {
	b.lagMu.Lock()
	defer b.lagMu.Unlock()
	r := b.lagRing[stage]
	if r == nil {
		return nil, mark
	}
	n := min(r.added-min(mark, r.added), uint64(len(r.buf)))
	out := make([]float64, 0, n)
	for i := n; i > 0; i-- {
		out = append(out, r.buf[(r.next+len(r.buf)-int(i))%len(r.buf)])
	}
	return out, r.added
}

// LagSamples returns the most recent lag samples of a stage seen by this
// process (at most the ring's 4096), oldest first.
func (b *Bus) LagSamples(stage string) []float64 {
	vs, _ := b.LagSamplesSince(stage, 0)
	return vs
}
