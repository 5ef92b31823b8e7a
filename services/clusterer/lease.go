package clusterer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kgstream/kgstream/pkg/stream"
)

// The clustering lease.
//
// With Config.LeaseTTL set, more than one clusterer may run: only the
// holder of the lease, a key (the stage name) in the KV bucket
// "<stream>_leases" whose TTL is LeaseTTL, consumes graph changes and
// clusters. The holder renews the key every LeaseTTL/3 by a
// compare-and-set on its revision; the others try every LeaseTTL/3 to
// create it, which succeeds only once it is gone: released by a clean stop
// (a delete at the holder's revision) or aged out of the bucket after
// LeaseTTL without renewal (the holder died). A holder whose renewal finds
// another revision, or that could not renew for LeaseTTL, has lost the
// lease and stops clustering at once. The new holder starts as a restarted
// clusterer does: every tenant is due, owed announcements are republished,
// and the graph changes the old holder had not acknowledged are
// redelivered to it.

// ErrLeaseLost is why a holder stopped clustering: its lease was taken
// over or could not be renewed in time.
var ErrLeaseLost = errors.New("clustering lease lost")

type lease struct {
	kv     jetstream.KeyValue
	key    string
	holder string
	ttl    time.Duration
	log    *slog.Logger
	rev    uint64
	held   atomic.Bool
}

// leaseHolder names this process in the lease: host, pid and a random
// suffix, so two workers of one process are two holders.
func leaseHolder() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

func (w *Worker) openLease(ctx context.Context) (*lease, error) {
	name := w.bus.StreamName() + "_leases"
	kv, err := w.bus.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name,
		Description: "the clustering lease: which clusterer replica clusters", History: 1, TTL: w.cfg.LeaseTTL})
	if err != nil {
		return nil, fmt.Errorf("opening bucket %s: %w", name, err)
	}
	return &lease{kv: kv, key: w.cfg.Stage, holder: w.cfg.LeaseHolder, ttl: w.cfg.LeaseTTL, log: w.log}, nil
}

func (l *lease) every() time.Duration { return max(l.ttl/3, time.Millisecond) }

// acquire waits until this worker holds the lease or ctx is done.
func (l *lease) acquire(ctx context.Context) error {
	t := time.NewTicker(l.every())
	defer t.Stop()
	waiting := false
	for {
		rev, err := l.kv.Create(ctx, l.key, []byte(l.holder))
		if err == nil {
			l.rev = rev
			l.held.Store(true)
			l.log.Info("clustering lease taken", "holder", l.holder, "ttl", l.ttl)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			l.log.Warn("taking the clustering lease", "error", err)
		} else if !waiting {
			waiting = true
			holder := ""
			if e, err := l.kv.Get(ctx, l.key); err == nil {
				holder = string(e.Value())
			}
			l.log.Info("standing by: another clusterer holds the lease", "holder", holder)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// keep renews the lease until ctx is done (nil) or the lease is lost
// (ErrLeaseLost).
func (l *lease) keep(ctx context.Context) error {
	t := time.NewTicker(l.every())
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		rev, err := l.kv.Update(ctx, l.key, []byte(l.holder), l.rev)
		switch {
		case err == nil:
			l.rev, renewed = rev, time.Now()
			continue
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists):
		case time.Since(renewed) < l.ttl:
			l.log.Warn("renewing the clustering lease, will retry", "error", err)
			continue
		}
		l.held.Store(false)
		l.log.Warn("clustering lease lost", "holder", l.holder, "error", err)
		return ErrLeaseLost
	}
}

// release gives the lease up, if this worker still holds it.
func (l *lease) release(ctx context.Context) {
	if !l.held.Swap(false) {
		return
	}
	if err := l.kv.Delete(ctx, l.key, jetstream.LastRevision(l.rev)); err != nil {
		l.log.Warn("releasing the clustering lease", "error", err)
		return
	}
	l.log.Info("clustering lease released", "holder", l.holder)
}

// runLeased runs hold whenever this worker holds the lease, standing by
// otherwise, until ctx is done. A clean stop releases the lease.
func (w *Worker) runLeased(ctx context.Context, hold func(context.Context) error) error {
	l, err := w.openLease(ctx)
	if err != nil {
		return err
	}
	w.lease.Store(l)
	for {
		if err := l.acquire(ctx); err != nil {
			return nil // stopped while standing by
		}
		err := stream.RunGroup(ctx, hold, l.keep)
		if errors.Is(err, ErrLeaseLost) && ctx.Err() == nil {
			continue // stand by again
		}
		if w.keepLeaseOnStop {
			l.held.Store(false) // left in the bucket to age out
			return err
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		l.release(rctx)
		cancel()
		return err
	}
}

// HoldsLease reports whether this worker holds the clustering lease (true
// without a lease: it is the only clusterer).
func (w *Worker) HoldsLease() bool {
	if w.cfg.LeaseTTL <= 0 {
		return true
	}
	l := w.lease.Load()
	return l != nil && l.held.Load()
}
