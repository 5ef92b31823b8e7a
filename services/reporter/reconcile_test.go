package reporter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/reporter"
)

// reconcileEnv is a store holding n incidents, each in the registry at
// version 1 and in the graph with its failure mode, and one community per
// incident (ids and hashes as clustering makes them), stored as run 1 and
// never announced.
type reconcileEnv struct {
	bus   *stream.Bus
	st    *embedded.Store
	comms []store.Community
}

func newReconcileEnv(t *testing.T, n int) *reconcileEnv {
	t.Helper()
	e := &reconcileEnv{bus: streamtest.NewBus(t, streamtest.Options{})}
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e.st = st
	for i := range n {
		doc := fmt.Sprintf("pm-%02d", i)
		e.announce(t, doc, 1)
		apply(t, st, doc, 1, fmt.Sprintf("mode%02d", i))
		e.comms = append(e.comms, community(fmt.Sprintf("failure_mode:mode%02d", i), "incident:"+doc))
	}
	require.NoError(t, st.ReplaceCommunities(t.Context(), "acme", 1, e.comms))
	return e
}

func (e *reconcileEnv) announce(t *testing.T, doc string, version int64) {
	t.Helper()
	_, err := e.st.Announce(t.Context(), "acme", store.Announcement{DocID: doc, Version: version})
	require.NoError(t, err)
}

// community is a level-0 community of members with its id and member hash
// as clustering computes them, and the sources of its members.
func community(members ...string) store.Community {
	h := store.MemberHash(members)
	c := store.Community{ID: "c0-" + h[:12], Level: 0, Members: members, MemberHash: h}
	for _, m := range members {
		if doc, ok := strings.CutPrefix(m, "incident:"); ok {
			c.Sources = append(c.Sources, provenance.SourceRef{DocID: doc, Version: 1})
		}
	}
	return c
}

// start runs a reporter until the test ends (or stop is called).
func (e *reconcileEnv) start(t *testing.T, cfg reporter.Config) (*reporter.Worker, *prometheus.Registry, func()) {
	t.Helper()
	reg := prometheus.NewRegistry()
	w, err := reporter.New(cfg, e.bus, e.st, nil, reg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			require.NoError(t, <-done)
		}
	}
	t.Cleanup(stop)
	return w, reg, stop
}

// reports returns the stored reports by id.
func (e *reconcileEnv) reports(t *testing.T) map[string]store.Report {
	t.Helper()
	rs, err := e.st.Reports(t.Context(), "acme")
	require.NoError(t, err)
	out := map[string]store.Report{}
	for _, r := range rs {
		out[r.ID] = r
	}
	return out
}

// waitReports polls until every community has its report with its member
// hash, and no other report is stored.
func (e *reconcileEnv) waitReports(t *testing.T, comms []store.Community) map[string]store.Report {
	t.Helper()
	var rs map[string]store.Report
	streamtest.Eventually(t, 20*time.Second, func() error {
		rs = e.reports(t)
		for _, c := range comms {
			r, ok := rs[reporter.ReportID(c.ID)]
			if !ok {
				return fmt.Errorf("%s has no report (%d stored)", c.ID, len(rs))
			}
			if r.MemberHash != c.MemberHash {
				return fmt.Errorf("report of %s has member hash %s, want %s", c.ID, r.MemberHash, c.MemberHash)
			}
		}
		if len(rs) != len(comms) {
			return fmt.Errorf("%d reports, want %d", len(rs), len(comms))
		}
		return nil
	})
	return rs
}

// TestUnannouncedCommunitiesGetReports: communities stored without any
// announcement get their reports when the reporter starts, and those
// stored later without one at its next periodic pass.
func TestUnannouncedCommunitiesGetReports(t *testing.T) {
	e := newReconcileEnv(t, 3)
	_, reg, _ := e.start(t, reporter.Config{ReconcileEvery: 50 * time.Millisecond})
	e.waitReports(t, e.comms)
	require.EqualValues(t, 3, counter(t, reg, "kgstream_reports_reconciled_total", "missing"))

	// Run 2 merges the first two incidents, again without announcing it:
	// the merged community gets its report, the two it replaces lose theirs.
	merged := community("failure_mode:mode00", "failure_mode:mode01", "incident:pm-00", "incident:pm-01")
	next := []store.Community{merged, e.comms[2]}
	require.NoError(t, e.st.ReplaceCommunities(t.Context(), "acme", 2, next))
	rs := e.waitReports(t, next)
	require.Equal(t, []provenance.SourceRef{{DocID: "pm-00", Version: 1}, {DocID: "pm-01", Version: 1}}, rs[reporter.ReportID(merged.ID)].Sources)
	require.EqualValues(t, 2, counter(t, reg, "kgstream_reports_reconciled_total", "removed"))
}

// TestDeletedReportsComeBack deletes every stored report while the reporter
// is stopped: the next one writes all of them again at start, the same
// reports, reading only what is missing.
func TestDeletedReportsComeBack(t *testing.T) {
	e := newReconcileEnv(t, 4)
	_, _, stop := e.start(t, reporter.Config{})
	_, err := e.bus.Publish(t.Context(), events.KindCommunitiesChanged, "acme", events.CommunitiesID("acme", 1),
		&events.CommunitiesChanged{Header: events.Header{Tenant: "acme"}, Run: 1, Changed: changes(e.comms)})
	require.NoError(t, err)
	before := e.waitReports(t, e.comms)
	// The event is acknowledged before the stop: redelivered to the next
	// reporter, it would write the reports before the pass at start.
	streamtest.Eventually(t, 20*time.Second, func() error {
		n, err := e.bus.Pending(t.Context(), "reporter")
		if err == nil && n > 0 {
			err = fmt.Errorf("%d events pending", n)
		}
		return err
	})
	stop()

	for id := range before {
		require.NoError(t, e.st.DeleteReport(t.Context(), "acme", id))
	}
	require.Empty(t, e.reports(t))

	// ReconcileEvery is an hour: only the pass at start can bring them back.
	_, reg, _ := e.start(t, reporter.Config{ReconcileEvery: time.Hour})
	after := e.waitReports(t, e.comms)
	for id, r := range before {
		a := after[id]
		a.UpdatedAt = r.UpdatedAt
		require.Equal(t, r, a, "report %s comes back as it was", id)
	}
	require.EqualValues(t, 4, counter(t, reg, "kgstream_reports_reconciled_total", "missing"))
	require.EqualValues(t, 4, counter(t, reg, "kgstream_reports_written_total", "missing"))
}

// TestReportConsumerGivesWay: with GiveWay set, the report consumer leaves
// a communities event waiting while the stage named has a backlog,
// counting the wait in kgstream_stage_yield_seconds_total, and writes the
// report the event names once the backlog is worked off. No pass runs: the
// event alone writes it.
func TestReportConsumerGivesWay(t *testing.T) {
	e := newReconcileEnv(t, 1)
	var yields *prometheus.Registry
	e.bus, yields = meteredBus(t)
	drain := frontBacklog(t, e.bus)
	for _, v := range []int64{2, 3} {
		_, err := e.bus.Publish(t.Context(), events.KindGraphChanged, "acme", events.GraphID("acme", "pm-00", v, 0),
			&events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: "pm-00", Version: v})
		require.NoError(t, err)
	}
	_, err := e.bus.Publish(t.Context(), events.KindCommunitiesChanged, "acme", events.CommunitiesID("acme", 1),
		&events.CommunitiesChanged{Header: events.Header{Tenant: "acme"}, Run: 1, Changed: changes(e.comms)})
	require.NoError(t, err)
	e.start(t, reporter.Config{ReconcileEvery: -1,
		GiveWay: &stream.GiveWay{Stages: []string{"front"}, Above: 1, Max: time.Hour, Poll: 10 * time.Millisecond}})
	waitConsumers(t, e.bus, "reporter")
	time.Sleep(giveWayHeld)
	require.Empty(t, e.reports(t), "a report written while the front stage had 2 events pending")

	drain(2)
	e.waitReports(t, e.comms)
	requireYielded(t, yields)
}

// TestReportWriterGivesWayWithinAnEvent: an event naming several
// communities gives way between its reports while the stage named has a
// backlog (the consumer gives way only before the event), and all those
// waits together stay within one Max: with a backlog that never goes, six
// reports are written after Max, not Max per report. The event is handed
// to the handler directly, so the waits counted are its own.
func TestReportWriterGivesWayWithinAnEvent(t *testing.T) {
	e := newReconcileEnv(t, 6)
	var yields *prometheus.Registry
	e.bus, yields = meteredBus(t)
	frontBacklog(t, e.bus)
	for _, v := range []int64{2, 3} {
		_, err := e.bus.Publish(t.Context(), events.KindGraphChanged, "acme", events.GraphID("acme", "pm-00", v, 0),
			&events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: "pm-00", Version: v})
		require.NoError(t, err)
	}
	waitConsumers(t, e.bus, "front")
	const bound = 400 * time.Millisecond
	w, err := reporter.New(reporter.Config{ReconcileEvery: -1,
		GiveWay: &stream.GiveWay{Stages: []string{"front"}, Above: 1, Max: bound, Poll: 10 * time.Millisecond}}, e.bus, e.st, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	data, err := json.Marshal(events.CommunitiesChanged{Header: events.Header{Schema: events.SchemaVersion, Tenant: "acme"}, Run: 1, Changed: changes(e.comms)})
	require.NoError(t, err)
	require.NoError(t, w.Handle(t.Context(), &stream.Message{Kind: events.KindCommunitiesChanged, Tenant: "acme", Data: data}))
	e.waitReports(t, e.comms)
	got := counter(t, yields, "kgstream_stage_yield_seconds_total", "reporter")
	require.GreaterOrEqual(t, got, bound.Seconds(), "the reports did not give way to the backlog")
	// Not the bound before each of the five reports after the first.
	require.Less(t, got, 2*bound.Seconds(), "each report waited the whole bound")
}

func changes(cs []store.Community) []events.CommunityChange {
	out := make([]events.CommunityChange, len(cs))
	for i, c := range cs {
		out[i] = events.CommunityChange{ID: c.ID, Level: c.Level, MemberHash: c.MemberHash}
	}
	return out
}

// TestReconcileFindsLostRefreshes: reports whose sources changed without
// an announcement are rewritten by a pass. One cites a version the
// registry no longer has; another's community rests on a document the
// report does not cite (a new document about a member, whose refresh was
// lost). A report that is current is left alone.
func TestReconcileFindsLostRefreshes(t *testing.T) {
	e := newReconcileEnv(t, 3)
	w, reg := e.worker(t, reporter.Config{})
	r, err := w.Reconcile(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, reporter.Reconciled{Written: 3, Drifted: 3}, r)
	first := e.reports(t)

	// pm-00 moves to version 2; pm-new states something of mode01.
	e.announce(t, "pm-00", 2)
	apply(t, e.st, "pm-00", 2, "mode00")
	e.announce(t, "pm-new", 1)
	_, err = e.st.Apply(t.Context(), "acme", "pm-new", 1, store.Contributions{
		TextUnits: []events.TextUnit{{ID: "n-u", Text: "t"}},
		Entities:  []store.EntityContribution{{ID: "failure_mode:mode01", Type: "failure_mode", Name: "mode01", NameRank: 2, Description: "seen again", TextUnits: []string{"n-u"}}},
	})
	require.NoError(t, err)
	// The clusterer's run 2 has the same member sets; pm-new is among the
	// sources of the second community. Nobody announces it.
	next := append([]store.Community(nil), e.comms...)
	next[0].Sources = []provenance.SourceRef{{DocID: "pm-00", Version: 2}}
	next[1].Sources = []provenance.SourceRef{{DocID: "pm-01", Version: 1}, {DocID: "pm-new", Version: 1}}
	require.NoError(t, e.st.ReplaceCommunities(t.Context(), "acme", 2, next))

	r, err = w.Reconcile(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, reporter.Reconciled{Written: 2, Drifted: 2}, r)
	now := e.reports(t)
	require.Equal(t, []provenance.SourceRef{{DocID: "pm-00", Version: 2}}, now[reporter.ReportID(next[0].ID)].Sources)
	require.Equal(t, []provenance.SourceRef{{DocID: "pm-01", Version: 1}, {DocID: "pm-new", Version: 1}}, now[reporter.ReportID(next[1].ID)].Sources)
	id2 := reporter.ReportID(next[2].ID)
	require.Equal(t, first[id2], now[id2], "a current report is not touched")
	require.EqualValues(t, 2, counter(t, reg, "kgstream_reports_reconciled_total", "sources_changed"))

	// Converged: another pass finds nothing.
	r, err = w.Reconcile(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, reporter.Reconciled{}, r)
}

// TestReconcileIsBounded: a pass writes at most ReconcileBatch reports;
// passes that follow each other pick up where the last stopped, and
// ReconcileAll runs them until every report is written.
func TestReconcileIsBounded(t *testing.T) {
	e := newReconcileEnv(t, 5)
	w, _ := e.worker(t, reporter.Config{ReconcileBatch: 2})
	r, err := w.Reconcile(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, reporter.Reconciled{Written: 2, Drifted: 5, More: true}, r)
	require.Len(t, e.reports(t), 2)
	r, err = w.Reconcile(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, reporter.Reconciled{Written: 2, Drifted: 3, More: true}, r)
	require.Len(t, e.reports(t), 4)

	for id := range e.reports(t) {
		require.NoError(t, e.st.DeleteReport(t.Context(), "acme", id))
	}
	total := w.ReconcileAll(t.Context())
	require.Equal(t, 5, total.Written)
	e.waitReports(t, e.comms)
}

// worker returns a reporter that is not running (tests call Reconcile).
func (e *reconcileEnv) worker(t *testing.T, cfg reporter.Config) (*reporter.Worker, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	w, err := reporter.New(cfg, e.bus, e.st, nil, reg)
	require.NoError(t, err)
	return w, reg
}

// TestEventPassWaitsForTheGap: a communities event asks for a narrow
// reconciliation pass, which runs no sooner than ReconcileGap after the
// previous pass. With an hour's gap it has not run once the event is
// handled; with no gap it runs.
func TestEventPassWaitsForTheGap(t *testing.T) {
	for _, tc := range []struct {
		name string
		gap  time.Duration
	}{{"hour", time.Hour}, {"none", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newReconcileEnv(t, 3)
			_, reg, _ := e.start(t, reporter.Config{ReconcileEvery: time.Hour, ReconcileGap: tc.gap})
			e.waitReports(t, e.comms)
			merged := community("failure_mode:mode00", "failure_mode:mode01", "incident:pm-00", "incident:pm-01")
			next := []store.Community{merged, e.comms[2]}
			require.NoError(t, e.st.ReplaceCommunities(t.Context(), "acme", 2, next))
			_, err := e.bus.Publish(t.Context(), events.KindCommunitiesChanged, "acme", events.CommunitiesID("acme", 2),
				&events.CommunitiesChanged{Header: events.Header{Tenant: "acme"}, Run: 2, Changed: changes(next[:1]),
					Removed: []string{e.comms[0].ID, e.comms[1].ID}})
			require.NoError(t, err)
			e.waitReports(t, next)
			if tc.gap < 0 {
				streamtest.Eventually(t, 20*time.Second, func() error {
					if n := counter(t, reg, "kgstream_report_reconcile_passes_total", "changed"); n != 1 {
						return fmt.Errorf("%v narrow passes, want 1", n)
					}
					return nil
				})
				return
			}
			streamtest.Eventually(t, 20*time.Second, func() error {
				n, err := e.bus.Pending(t.Context(), "reporter")
				if err == nil && n > 0 {
					err = fmt.Errorf("%d events pending", n)
				}
				return err
			})
			time.Sleep(300 * time.Millisecond)
			require.Zero(t, counter(t, reg, "kgstream_report_reconcile_passes_total", "changed"))
			require.EqualValues(t, 1, counter(t, reg, "kgstream_report_reconcile_passes_total", "all"))
		})
	}
}

// countingStore is the embedded store counting the calls that read a
// whole tenant (every community, every report citation, every report).
type countingStore struct {
	*embedded.Store
	mu    sync.Mutex
	calls map[string]int
}

func (s *countingStore) count(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[name]++
}

func (s *countingStore) wholeTenantReads() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

func (s *countingStore) Communities(ctx context.Context, tenant string) ([]store.Community, error) {
	s.count("Communities")
	return s.Store.Communities(ctx, tenant)
}

func (s *countingStore) ReportCitations(ctx context.Context, tenant string) (map[string][]provenance.SourceRef, error) {
	s.count("ReportCitations")
	return s.Store.ReportCitations(ctx, tenant)
}

func (s *countingStore) Reports(ctx context.Context, tenant string) ([]store.Report, error) {
	s.count("Reports")
	return s.Store.Reports(ctx, tenant)
}

// TestEventPassChecksOnlyNamedCommunities: the narrow pass after a
// communities event rewrites the drifted report of a community the event
// named, without reading every community, report citation or report of the
// tenant; a drifted report of a community no event named is left to the
// full pass, which finds it.
func TestEventPassChecksOnlyNamedCommunities(t *testing.T) {
	e := newReconcileEnv(t, 3)
	cs := &countingStore{Store: e.st, calls: map[string]int{}}
	w, err := reporter.New(reporter.Config{}, e.bus, cs, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	r, err := w.Reconcile(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, 3, r.Written)

	// Run 2 merges the first two incidents; its event names the merged
	// community, whose report the handler writes.
	merged := community("failure_mode:mode00", "failure_mode:mode01", "incident:pm-00", "incident:pm-01")
	next := []store.Community{merged, e.comms[2]}
	require.NoError(t, e.st.ReplaceCommunities(t.Context(), "acme", 2, next))
	require.NoError(t, w.Handle(t.Context(), message(t, &events.CommunitiesChanged{Run: 2, Changed: changes(next[:1]),
		Removed: []string{e.comms[0].ID, e.comms[1].ID}})))
	e.waitReports(t, next)

	// Then pm-00 and pm-02 move to version 2 without a clustering run:
	// both reports cite a version the registry no longer has.
	for _, doc := range []string{"pm-00", "pm-02"} {
		e.announce(t, doc, 2)
	}
	apply(t, e.st, "pm-00", 2, "mode00")
	apply(t, e.st, "pm-02", 2, "mode02")

	before := cs.wholeTenantReads()
	r = w.ReconcileChanged(t.Context())
	require.Equal(t, reporter.Reconciled{Written: 1, Drifted: 1}, r)
	require.Equal(t, before, cs.wholeTenantReads(), "the narrow pass reads nothing whole")
	now := e.reports(t)
	require.Equal(t, []provenance.SourceRef{{DocID: "pm-00", Version: 2}, {DocID: "pm-01", Version: 1}},
		now[reporter.ReportID(merged.ID)].Sources)
	require.Equal(t, []provenance.SourceRef{{DocID: "pm-02", Version: 1}}, now[reporter.ReportID(e.comms[2].ID)].Sources)

	// Checked once: the next narrow pass has nothing to check.
	require.Equal(t, reporter.Reconciled{}, w.ReconcileChanged(t.Context()))
	require.Equal(t, before, cs.wholeTenantReads())

	// The full pass finds the report no event named.
	r, err = w.Reconcile(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, reporter.Reconciled{Written: 1, Drifted: 1}, r)
	require.Equal(t, []provenance.SourceRef{{DocID: "pm-02", Version: 2}}, e.reports(t)[reporter.ReportID(e.comms[2].ID)].Sources)

	// Without reconciliation, events record nothing for a pass that never
	// comes.
	off, err := reporter.New(reporter.Config{ReconcileEvery: -1}, e.bus, cs, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	e.announce(t, "pm-01", 2)
	apply(t, e.st, "pm-01", 2, "mode01")
	require.NoError(t, off.Handle(t.Context(), message(t, &events.CommunitiesChanged{Run: 2, Changed: changes(next[:1])})))
	e.announce(t, "pm-01", 3)
	apply(t, e.st, "pm-01", 3, "mode01")
	require.Equal(t, reporter.Reconciled{}, off.ReconcileChanged(t.Context()))
}

// storeCalls counts the report writes of a store: PutReport and PutReports
// calls and the reports the latter stored, DeleteReport and DeleteReports
// calls.
type storeCalls struct {
	*embedded.Store
	mu                     sync.Mutex
	puts, batches, batched int
	largest                int // the largest batch
	deletes, deleteBatches int
}

func (s *storeCalls) PutReport(ctx context.Context, tenant string, r store.Report) error {
	s.mu.Lock()
	s.puts++
	s.mu.Unlock()
	return s.Store.PutReport(ctx, tenant, r)
}

func (s *storeCalls) PutReports(ctx context.Context, tenant string, rs []store.Report) error {
	s.mu.Lock()
	s.batches++
	s.batched += len(rs)
	s.largest = max(s.largest, len(rs))
	s.mu.Unlock()
	return s.Store.PutReports(ctx, tenant, rs)
}

// TestReportsAreStoredInChunks: a pass writing 130 reports stores them in
// transactions of at most 128 (the chunk bound), none one by one: two when
// writing them takes under a second, more on a machine slow enough to pass
// the time bound too.
func TestReportsAreStoredInChunks(t *testing.T) {
	e := newReconcileEnv(t, 130)
	sc := &storeCalls{Store: e.st}
	w, err := reporter.New(reporter.Config{}, e.bus, sc, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	r, err := w.Reconcile(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, 130, r.Written)
	require.Equal(t, 0, sc.puts)
	require.GreaterOrEqual(t, sc.batches, 2)
	require.LessOrEqual(t, sc.largest, 128)
	require.Equal(t, 130, sc.batched)
	require.Len(t, e.reports(t), 130)
}

// slowWriter is a report writer taking a while per report (as an LLM
// does); it fails, so the extractive writer writes the report. As each
// report is finished it records how many reports the store holds.
type slowWriter struct {
	st     *embedded.Store
	took   time.Duration
	mu     sync.Mutex
	stored []int
}

func (s *slowWriter) Name() string { return "slow" }

func (s *slowWriter) Write(ctx context.Context, c store.Community, _ *reporter.Context) (store.Report, error) {
	time.Sleep(s.took)
	rs, err := s.st.Reports(ctx, "acme")
	if err != nil {
		return store.Report{}, err
	}
	s.mu.Lock()
	s.stored = append(s.stored, len(rs))
	s.mu.Unlock()
	return store.Report{}, fmt.Errorf("no report for %s", c.ID)
}

// TestSlowReportsAreStoredAsTheyFinish: with a writer taking 600ms a
// report, the reports finished are stored within about a second, not at
// the end of the pass: a crash loses little finished work.
func TestSlowReportsAreStoredAsTheyFinish(t *testing.T) {
	e := newReconcileEnv(t, 3)
	sw := &slowWriter{st: e.st, took: 600 * time.Millisecond}
	// One report at a time, so that when each starts is known.
	w, err := reporter.New(reporter.Config{LLM: sw, ReportConcurrency: 1}, e.bus, e.st, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	r, err := w.Reconcile(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, 3, r.Written)
	// The first two took 1.2s: stored before the third is finished.
	require.Equal(t, []int{0, 0, 2}, sw.stored)
}

func (s *storeCalls) DeleteReport(ctx context.Context, tenant, id string) error {
	s.mu.Lock()
	s.deletes++
	s.mu.Unlock()
	return s.Store.DeleteReport(ctx, tenant, id)
}

func (s *storeCalls) DeleteReports(ctx context.Context, tenant string, ids []string) error {
	s.mu.Lock()
	s.deleteBatches++
	s.mu.Unlock()
	return s.Store.DeleteReports(ctx, tenant, ids)
}

// TestRemovedReportsGoInOneTransaction: the reports of the communities a
// run removed go in one store call, whether the run's event or a
// reconciliation pass removes them.
func TestRemovedReportsGoInOneTransaction(t *testing.T) {
	e := newReconcileEnv(t, 4)
	sc := &storeCalls{Store: e.st}
	w, err := reporter.New(reporter.Config{}, e.bus, sc, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	_, err = w.Reconcile(t.Context(), "acme")
	require.NoError(t, err)

	// Run 2 merges the first two incidents; its event removes their reports.
	merged := community("failure_mode:mode00", "failure_mode:mode01", "incident:pm-00", "incident:pm-01")
	next := []store.Community{merged, e.comms[2], e.comms[3]}
	require.NoError(t, e.st.ReplaceCommunities(t.Context(), "acme", 2, next))
	require.NoError(t, w.Handle(t.Context(), message(t, &events.CommunitiesChanged{Run: 2, Changed: changes(next[:1]),
		Removed: []string{e.comms[0].ID, e.comms[1].ID}})))
	e.waitReports(t, next)
	require.Equal(t, 0, sc.deletes)
	require.Equal(t, 1, sc.deleteBatches)

	// Run 3 drops the last two without an announcement: the full pass
	// removes both reports at once.
	require.NoError(t, e.st.ReplaceCommunities(t.Context(), "acme", 3, next[:1]))
	r, err := w.Reconcile(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, 2, r.Removed)
	e.waitReports(t, next[:1])
	require.Equal(t, 0, sc.deletes)
	require.Equal(t, 2, sc.deleteBatches)
}

// TestEventReadsOnlyWhatItNames: the handler of a communities event reads
// the communities it names and the reports citing the documents those rest
// on, never every community, report citation or report of the tenant; it
// still rebuilds the report of a community the event does not name when
// that report cites a version of such a document the registry no longer
// has: moved on (the document the refreshed community rests on now) or
// deleted (the document its old report cited).
func TestEventReadsOnlyWhatItNames(t *testing.T) {
	e := newReconcileEnv(t, 3)
	// "link" mentions the failure modes of the first two communities: both
	// reports cite it, neither community's sources name it.
	e.announce(t, "link", 1)
	linkAt := func(v int64) {
		t.Helper()
		_, err := e.st.Apply(t.Context(), "acme", "link", v, store.Contributions{
			TextUnits: []events.TextUnit{{ID: "link-u", Text: "t"}},
			Entities: []store.EntityContribution{
				{ID: "failure_mode:mode00", Type: "failure_mode", Name: "mode00", NameRank: 2, TextUnits: []string{"link-u"}},
				{ID: "failure_mode:mode01", Type: "failure_mode", Name: "mode01", NameRank: 2, TextUnits: []string{"link-u"}},
			},
		})
		require.NoError(t, err)
	}
	linkAt(1)
	cs := &countingStore{Store: e.st, calls: map[string]int{}}
	w, err := reporter.New(reporter.Config{}, e.bus, cs, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	r, err := w.Reconcile(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, 3, r.Written)
	cites := func(c store.Community) []provenance.SourceRef {
		t.Helper()
		return e.reports(t)[reporter.ReportID(c.ID)].Sources
	}
	doc := func(c store.Community) string { return strings.TrimPrefix(c.Members[1], "incident:") }
	require.Equal(t, []provenance.SourceRef{{DocID: "link", Version: 1}, {DocID: doc(e.comms[1]), Version: 1}}, cites(e.comms[1]))

	// link moves to version 2; run 2 refreshes the first community, which
	// rests on it now. The second community's report is found through
	// link, the third's is not read.
	e.announce(t, "link", 2)
	linkAt(2)
	first := e.comms[0]
	first.Sources = []provenance.SourceRef{{DocID: "link", Version: 2}, {DocID: doc(first), Version: 1}}
	first.Run = 2
	require.NoError(t, e.st.ReplaceCommunities(t.Context(), "acme", 2, []store.Community{first, e.comms[1], e.comms[2]}))
	before := cs.wholeTenantReads()
	require.NoError(t, w.Handle(t.Context(), message(t, &events.CommunitiesChanged{Run: 2, Refreshed: changes([]store.Community{first})})))
	require.Equal(t, before, cs.wholeTenantReads(), "the handler reads nothing whole")
	for _, c := range e.comms[:2] {
		require.Equal(t, []provenance.SourceRef{{DocID: "link", Version: 2}, {DocID: doc(c), Version: 1}}, cites(c))
	}
	require.Equal(t, []provenance.SourceRef{{DocID: doc(e.comms[2]), Version: 1}}, cites(e.comms[2]))

	// link is deleted; run 3 refreshes the first community, which no
	// longer rests on it: its old report names link, through which the
	// second community's report is found.
	st, err := e.st.MarkDeleted(t.Context(), "acme", "link")
	require.NoError(t, err)
	_, err = e.st.Delete(t.Context(), "acme", "link", st.Version)
	require.NoError(t, err)
	first.Sources, first.Run = []provenance.SourceRef{{DocID: doc(first), Version: 1}}, 3
	require.NoError(t, e.st.ReplaceCommunities(t.Context(), "acme", 3, []store.Community{first, e.comms[1], e.comms[2]}))
	require.NoError(t, w.Handle(t.Context(), message(t, &events.CommunitiesChanged{Run: 3, Refreshed: changes([]store.Community{first})})))
	require.Equal(t, before, cs.wholeTenantReads(), "the handler reads nothing whole")
	for _, c := range e.comms {
		require.Equal(t, []provenance.SourceRef{{DocID: doc(c), Version: 1}}, cites(c))
	}
}
