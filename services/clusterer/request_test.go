package clusterer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/clusterer"
)

// requestRecluster publishes a re-clustering request as the gateway does.
func (e *env) requestRecluster(t *testing.T, id string, full bool) {
	t.Helper()
	_, err := e.bus.Publish(t.Context(), events.KindRecluster, tenant, events.ReclusterID(tenant, id),
		&events.Recluster{Header: events.Header{Tenant: tenant}, RequestID: id, Full: full, RequestedAt: time.Now()})
	require.NoError(t, err)
}

// firstTwoRuns waits for Run's consumers, then requests two runs: the
// first is full (nothing is known yet), the second incremental.
func (e *env) firstTwoRuns(t *testing.T) {
	t.Helper()
	e.waitConsumer(t)
	e.requestRecluster(t, "r1", false)
	waitRun(t, e.st, 1)
	e.requestRecluster(t, "r2", false)
	waitRun(t, e.st, 2)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "incremental", 1)
}

// waitCount polls until the counter name{label=value} reads want.
func (e *env) waitCount(t *testing.T, name, label, value string, want float64) {
	t.Helper()
	eventually(t, 20*time.Second, func() error {
		got := 0.0
		if mfs, err := e.reg.Gather(); err == nil {
			for _, mf := range mfs {
				if mf.GetName() != name {
					continue
				}
				for _, m := range mf.GetMetric() {
					for _, lp := range m.GetLabel() {
						if lp.GetName() == label && lp.GetValue() == value {
							got = m.GetCounter().GetValue()
						}
					}
				}
			}
		}
		if got != want {
			return fmt.Errorf("%s{%s=%q} = %v, want %v", name, label, value, got, want)
		}
		return nil
	})
}

// TestReclusterRequests: a request re-clusters the tenant at once, whatever
// the debounce (here an hour of quiet), incrementally unless it asks for a
// full run; with FullInterval a tenant clustered incrementally since its
// last full run gets a full one once that is FullInterval old, without any
// graph change, and an idle tenant whose last run was full gets none (its
// next run, when one is due, is full). A
// graph change naming what it changed is patched into the graph the last
// run read; a malformed request is refused as permanent.
func TestReclusterRequests(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, clusterer.Config{Quiet: time.Hour, MaxDelay: 10 * time.Hour, Tick: 5 * time.Millisecond, Now: clock.Now,
		FullEvery: 1000, FullInterval: 2 * time.Hour, Partitioner: clusterer.Leiden(clusterer.LeidenConfig{MaxClusterSize: 6})})
	touched := applyOwn(t, e.st)
	e.run(t)
	e.waitConsumer(t)

	e.requestRecluster(t, "r1", false) // the first run is full anyway
	waitRun(t, e.st, 1)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "full", 1)
	e.requestRecluster(t, "r2", false)
	waitRun(t, e.st, 2)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "incremental", 1)
	e.requestRecluster(t, "r3", true)
	waitRun(t, e.st, 3)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "full", 2)

	// A new document linking a service to a new component, announced as
	// the resolver announces it: the next run patches the graph.
	var svc string
	for _, id := range touched {
		if strings.HasPrefix(id, "service:") {
			svc = id
			break
		}
	}
	require.NotEmpty(t, svc)
	res, err := e.st.Apply(t.Context(), tenant, "PM-9", 1, store.Contributions{
		TextUnits: []events.TextUnit{{ID: "u1", Text: "text"}},
		Entities: []store.EntityContribution{{ID: svc, Type: "service", Name: "svc", NameRank: 2, TextUnits: []string{"u1"}},
			{ID: "component:newcache", Type: "component", Name: "newcache", NameRank: 2, TextUnits: []string{"u1"}}},
		Edges: []store.EdgeContribution{{Source: svc, Relation: "depends_on", Target: "component:newcache", Weight: 1, TextUnits: []string{"u1"}}}})
	require.NoError(t, err)
	_, err = e.bus.Publish(t.Context(), events.KindGraphChanged, tenant, events.GraphID(tenant, "PM-9", 1, 0),
		&events.GraphChanged{Header: events.Header{Tenant: tenant}, DocID: "PM-9", Version: 1, Touched: res.Touched,
			Contributed: []string{"component:newcache", svc}, ReceivedAt: time.Now()})
	require.NoError(t, err)
	e.published++
	e.waitHandled(t)
	e.requestRecluster(t, "r4", false)
	waitRun(t, e.st, 4)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "incremental", 2)
	// Runs 2 (nothing changed) and 4 patched; 1 and 3, full, read whole.
	e.waitCount(t, "kgstream_recluster_graph_reads_total", "read", "patched", 2)
	e.waitCount(t, "kgstream_recluster_graph_reads_total", "read", "whole", 2)
	cs := communities(t, e.st)
	require.True(t, slices.ContainsFunc(cs, func(c store.Community) bool { return slices.Contains(c.Members, "component:newcache") }),
		"the patched run clustered the new entity")

	// Incremental since the last full run: a full one once that is
	// FullInterval old, with no change and no request.
	clock.Advance(2 * time.Hour)
	waitRun(t, e.st, 5)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "full", 3)
	// Its last run full, an idle tenant gets no other (twenty ticks pass);
	// the next run, a request's, is full, its last full run being
	// FullInterval old.
	clock.Advance(2 * time.Hour)
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, int64(5), lastRun(t, e.st))
	e.requestRecluster(t, "r5", false)
	waitRun(t, e.st, 6)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "full", 4)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "incremental", 2)

	err = e.w.Handle(t.Context(), &stream.Message{Kind: events.KindRecluster, Tenant: tenant, Data: []byte(`{"schema":1,"tenant":"acme"}`)})
	require.ErrorIs(t, err, events.ErrInvalidEvent)
	require.True(t, stream.IsPermanent(err))
}

// failingStore fails Communities while fail is set, counting the calls.
type failingStore struct {
	*embedded.Store
	fail  atomic.Bool
	calls atomic.Int64
}

func (s *failingStore) Communities(ctx context.Context, tenant string) ([]store.Community, error) {
	s.calls.Add(1)
	if s.fail.Load() {
		return nil, errors.New("store down")
	}
	return s.Store.Communities(ctx, tenant)
}

// TestFailedRequestedRunIsRetriedByTheDebounce: a requested full run that
// fails is retried after the quiet period, not at once and again (twenty
// ticks pass with one attempt), and the retry is full. A requested run
// that stored its communities but could not announce them is not run
// again: the retry announces them and is incremental.
func TestFailedRequestedRunIsRetriedByTheDebounce(t *testing.T) {
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	e := &env{bus: startBus(t, reg), st: openStore(t), reg: reg}
	fs := &failingStore{Store: e.st}
	w, err := clusterer.New(clusterer.Config{Quiet: time.Hour, MaxDelay: 10 * time.Hour, Tick: 5 * time.Millisecond,
		Now: clock.Now, FullEvery: 1000, Partitioner: clusterer.Leiden(clusterer.LeidenConfig{MaxClusterSize: 6})},
		e.bus, fs, testLogger(t), reg)
	require.NoError(t, err)
	e.w = w
	applyOwn(t, e.st)
	e.run(t)
	e.firstTwoRuns(t)

	fs.fail.Store(true)
	before := fs.calls.Load()
	e.requestRecluster(t, "r3", true)
	eventually(t, 20*time.Second, func() error {
		if fs.calls.Load() == before {
			return errors.New("no attempt yet")
		}
		return nil
	})
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, before+1, fs.calls.Load(), "a failed run was retried before the quiet period")
	fs.fail.Store(false)
	clock.Advance(time.Hour)
	waitRun(t, e.st, 3)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "full", 2)

	// Stored, not announced: the request is done.
	restore := streamtest.Narrow(t, e.bus, events.KindCommunitiesChanged)
	e.requestRecluster(t, "r4", true)
	waitRun(t, e.st, 4)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "full", 3)
	// The announcement fails within a fraction of a second (no stream
	// takes it); only then does the stream take announcements again.
	time.Sleep(2 * time.Second)
	restore()
	clock.Advance(time.Hour)
	waitRun(t, e.st, 5)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "incremental", 2)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "full", 3)
	waitAnnouncements(t, e.bus, 4)
}

// TestSessionStartsWithAFullRun: a worker whose Run stops and starts again
// (its clustering lease lost and taken again) starts as a restarted one:
// its first run reads the graph whole and is full, though it knew the pair
// weights an incremental run needs.
func TestSessionStartsWithAFullRun(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, clusterer.Config{Quiet: time.Hour, MaxDelay: 10 * time.Hour, Tick: 5 * time.Millisecond, Now: clock.Now,
		FullEvery: 1000, Partitioner: clusterer.Leiden(clusterer.LeidenConfig{MaxClusterSize: 6})})
	applyOwn(t, e.st)
	session := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.w.Run(ctx) }()
		return func() {
			cancel()
			require.NoError(t, <-done)
		}
	}
	stop := session()
	e.firstTwoRuns(t)
	e.waitCount(t, "kgstream_recluster_graph_reads_total", "read", "patched", 1)
	stop()

	stop = session()
	defer stop()
	e.requestRecluster(t, "r3", false)
	waitRun(t, e.st, 3)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "full", 2)
	e.waitCount(t, "kgstream_recluster_graph_reads_total", "read", "whole", 2)
	e.waitCount(t, "kgstream_reclusters_total", "mode", "incremental", 1)
}
