package clusterer_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/clusterer"
)

// reclusterings counts the re-clusterings a worker's registry observed.
func reclusterings(t *testing.T, reg prometheus.Gatherer) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == "kgstream_recluster_duration_seconds" {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

type leased struct {
	w      *clusterer.Worker
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
	alive  atomic.Bool
}

func startLeased(t *testing.T, e *env, w *clusterer.Worker, reg *prometheus.Registry) *leased {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &leased{w: w, reg: reg, cancel: cancel, done: make(chan error, 1)}
	l.alive.Store(true)
	go func() { l.done <- w.Run(ctx) }()
	t.Cleanup(func() { l.stop(t) })
	return l
}

func (l *leased) stop(t *testing.T) {
	t.Helper()
	if !l.alive.Swap(false) {
		return
	}
	l.cancel()
	require.NoError(t, <-l.done)
}

func (l *leased) holds() bool { return l.alive.Load() && l.w.HoldsLease() }

// TestLeaseOneClustererAtATime runs two clusterers with a lease on one
// JetStream: only the holder clusters while the other stands by; the
// holder dies (stopped without releasing the lease) after storing a run it
// could not announce; the standby takes over once the lease ages out,
// republishes the owed announcement and clusters what comes next, so
// every stored community is announced; a clean stop releases the lease.
func TestLeaseOneClustererAtATime(t *testing.T) {
	cfg := clusterer.Config{Quiet: 20 * time.Millisecond, MaxDelay: time.Second, LeaseTTL: 900 * time.Millisecond}
	e := newEnv(t, cfg)
	a := startLeased(t, e, e.w, e.reg)
	eventually(t, 10*time.Second, func() error {
		if !a.holds() {
			return errors.New("the first clusterer does not hold the lease")
		}
		return nil
	})
	regB := prometheus.NewRegistry()
	wb, err := clusterer.New(cfg, e.bus, e.st, testLogger(t), regB)
	require.NoError(t, err)
	b := startLeased(t, e, wb, regB)

	var both atomic.Bool
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(time.Millisecond):
			}
			if a.holds() && b.holds() {
				both.Store(true)
			}
		}
	}()

	// The holder clusters; the standby does not.
	e.publish(t, "a", 1, apply(t, e.st, "a", 1, map[string]string{"service:api": "api", "team:core": "core"},
		edge("service:api", "owned_by", "team:core", 1)))
	waitAnnouncements(t, e.bus, 1)
	require.False(t, b.holds())
	require.Zero(t, reclusterings(t, regB), "the standby clustered")

	// The holder stores a run it cannot announce, then dies.
	restore := streamtest.Narrow(t, e.bus, events.KindCommunitiesChanged)
	e.publish(t, "b", 1, apply(t, e.st, "b", 1, map[string]string{"service:db": "db", "team:data": "data"},
		edge("service:db", "owned_by", "team:data", 1)))
	eventually(t, 20*time.Second, func() error {
		if n := len(communities(t, e.st)); n != 2 {
			return fmt.Errorf("%d communities stored, want 2", n)
		}
		return nil
	})
	a.w.CrashOnStop()
	a.stop(t)
	restore()

	// The standby takes over and owes nothing to anyone.
	eventually(t, 20*time.Second, func() error {
		if !b.holds() {
			return errors.New("the standby did not take the lease over")
		}
		return nil
	})
	e.publish(t, "c", 1, apply(t, e.st, "c", 1, map[string]string{"service:web": "web", "team:front": "front"},
		edge("service:web", "owned_by", "team:front", 1)))
	eventually(t, 20*time.Second, func() error {
		announced := map[string]bool{}
		for _, ev := range announcements(t, e.bus) {
			for _, c := range ev.Changed {
				announced[c.ID] = true
			}
		}
		var missing []string
		stored := communities(t, e.st)
		for _, c := range stored {
			if !announced[c.ID] {
				missing = append(missing, c.ID)
			}
		}
		sort.Strings(missing)
		if len(stored) != 3 || len(missing) > 0 {
			return fmt.Errorf("%d communities stored, not announced: %v", len(stored), missing)
		}
		return nil
	})
	require.NotZero(t, reclusterings(t, regB), "the new holder does not cluster")

	// A clean stop releases the lease at once.
	b.stop(t)
	close(stopWatch)
	<-watched
	require.False(t, both.Load(), "two clusterers held the lease at once")
	kv, err := e.bus.JetStream().KeyValue(t.Context(), e.bus.StreamName()+"_leases")
	require.NoError(t, err)
	_, err = kv.Get(t.Context(), "clusterer")
	require.True(t, errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted), "lease after a clean stop: %v", err)
}
