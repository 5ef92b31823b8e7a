package clusterer_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/services/clusterer"
)

// debounceEnv runs the worker on the own graph with a fake clock. It
// returns once the consumer exists, i.e. once Run has marked the tenant
// dirty for its start-up re-clustering at the clock's start.
func debounceEnv(t *testing.T, quiet, maxDelay time.Duration) (*env, *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	e := newEnv(t, clusterer.Config{Quiet: quiet, MaxDelay: maxDelay, Tick: 5 * time.Millisecond, Now: clock.Now,
		Partitioner: clusterer.Leiden(clusterer.LeidenConfig{MaxClusterSize: 6})})
	applyOwn(t, e.st)
	e.run(t)
	e.waitConsumer(t)
	return e, clock
}

// TestDebounceQuiet: many graph changes inside the quiet period cause one
// re-clustering, after the graph has been quiet for Quiet.
func TestDebounceQuiet(t *testing.T) {
	e, clock := debounceEnv(t, time.Minute, time.Hour)
	for i := range 25 {
		e.publish(t, "PM-1", int64(i+1), store.ApplyResult{})
		e.waitHandled(t)
		require.Equal(t, int64(0), lastRun(t, e.st), "event %d: still inside the quiet period", i)
		clock.Advance(2 * time.Second)
	}
	clock.Advance(time.Minute - 2*time.Second) // quiet for exactly Quiet since the last change
	waitRun(t, e.st, 1)

	// A second burst makes run 2: had the first burst caused more than one
	// re-clustering, this would be run 3 or later.
	e.publish(t, "PM-1", 100, store.ApplyResult{})
	e.waitHandled(t)
	require.Equal(t, int64(1), lastRun(t, e.st))
	clock.Advance(time.Minute)
	waitRun(t, e.st, 2)
	waitAnnouncements(t, e.bus, 2)
	require.Equal(t, uint64(2), metric(t, e.reg, "kgstream_recluster_duration_seconds",
		map[string]string{"tenant": tenant}).GetHistogram().GetSampleCount())
}

// TestDebounceMaxDelay: changes that keep coming, each inside the quiet
// period of the one before, still cause a re-clustering every MaxDelay.
func TestDebounceMaxDelay(t *testing.T) {
	const quiet, maxDelay, step = time.Minute, 5 * time.Minute, 30 * time.Second
	e, clock := debounceEnv(t, quiet, maxDelay)
	version := int64(0)
	for run := int64(1); run <= 2; run++ {
		// The tenant has been dirty since the clock's current time.
		for waited := time.Duration(0); waited < maxDelay; waited += step {
			version++
			e.publish(t, "PM-1", version, store.ApplyResult{})
			e.waitHandled(t)
			require.Equal(t, run-1, lastRun(t, e.st), "%s after the first change: not yet due", waited)
			clock.Advance(step)
		}
		// MaxDelay has passed since the first change, though the last was
		// only step ago.
		waitRun(t, e.st, run)
		version++
		e.publish(t, "PM-1", version, store.ApplyResult{})
		e.waitHandled(t)
	}
	waitAnnouncements(t, e.bus, 2)
}

// TestHandleRejectsMalformed: a malformed graph.changed, or one whose
// tenant is not its subject's, is a permanent error (dead-lettered at
// once), a valid one is accepted.
func TestHandleRejectsMalformed(t *testing.T) {
	e := newEnv(t, clusterer.Config{})
	err := e.w.Handle(t.Context(), &stream.Message{Kind: events.KindGraphChanged, Tenant: tenant, Data: []byte(`{"schema":1`)})
	require.ErrorIs(t, err, events.ErrInvalidEvent)
	require.True(t, stream.IsPermanent(err))
	require.NoError(t, e.w.Handle(t.Context(), graphChangedMsg(t, "PM-1", 1, "incident:inc101")))
	// An event of this tenant on another tenant's subject is refused too.
	other := graphChangedMsg(t, "PM-2", 1, "incident:inc102")
	other.Tenant = "globex"
	err = e.w.Handle(t.Context(), other)
	require.ErrorIs(t, err, stream.ErrTenantMismatch)
	require.True(t, stream.IsPermanent(err))
}

// TestGiveWay: with GiveWay set, a re-clustering that is due waits while
// the stage named has a backlog, and runs once it is worked off.
func TestGiveWay(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, clusterer.Config{Quiet: time.Minute, MaxDelay: time.Hour, Tick: 5 * time.Millisecond, Now: clock.Now,
		Partitioner: clusterer.Leiden(clusterer.LeidenConfig{MaxClusterSize: 6}),
		GiveWay:     &stream.GiveWay{Stages: []string{"front"}, Above: 1, Max: time.Hour, Poll: 10 * time.Millisecond}})
	applyOwn(t, e.st)
	// "front" stands for the extractor: a durable on graph.changed nobody
	// consumes until the test drains it, so each event published is one
	// more in its backlog.
	front, err := e.bus.JetStream().CreateOrUpdateConsumer(t.Context(), e.bus.StreamName(), jetstream.ConsumerConfig{
		Durable: "front", FilterSubject: e.bus.Subjects().All(events.KindGraphChanged), AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	e.run(t)
	e.waitConsumer(t)
	e.publish(t, "PM-1", 1, store.ApplyResult{})
	e.publish(t, "PM-1", 2, store.ApplyResult{})
	e.waitHandled(t)
	clock.Advance(time.Minute) // due
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, int64(0), lastRun(t, e.st), "re-clustered while the front stage had 2 events pending")

	batch, err := front.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(t.Context()))
	}
	waitRun(t, e.st, 1)
	require.Greater(t, metric(t, e.reg, "kgstream_stage_yield_seconds_total",
		map[string]string{"stage": "clusterer"}).GetCounter().GetValue(), 0.4)
}
