package reporter_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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

func setup(t *testing.T) (*reporter.Worker, *embedded.Store, *stream.Bus, *prometheus.Registry) {
	return setupB(t)
}

func setupB(t testing.TB) (*reporter.Worker, *embedded.Store, *stream.Bus, *prometheus.Registry) {
	t.Helper()
	bus := streamtest.NewBus(t, streamtest.Options{})
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	w, err := reporter.New(reporter.Config{}, bus, st, nil, reg)
	require.NoError(t, err)
	return w, st, bus, reg
}

func messageData(data []byte) *stream.Message {
	return &stream.Message{Subject: "kg.communities.changed.acme", Kind: events.KindCommunitiesChanged, Tenant: "acme", Data: data}
}

func apply(t testing.TB, st store.GraphStore, doc string, version int64, failure string) {
	t.Helper()
	inc, fm := "incident:"+doc, "failure_mode:"+failure
	_, err := st.Apply(t.Context(), "acme", doc, version, store.Contributions{
		TextUnits: []events.TextUnit{{ID: doc + "-u", Text: "t"}},
		Entities: []store.EntityContribution{
			{ID: inc, Type: "incident", Name: doc, NameRank: 2, TextUnits: []string{doc + "-u"}},
			{ID: fm, Type: "failure_mode", Name: failure, NameRank: 2, TextUnits: []string{doc + "-u"}},
		},
		Edges: []store.EdgeContribution{{Source: inc, Relation: "failure", Target: fm, Weight: 1, TextUnits: []string{doc + "-u"}}},
	})
	require.NoError(t, err)
}

func message(t *testing.T, ev *events.CommunitiesChanged) *stream.Message {
	t.Helper()
	ev.Tenant = "acme"
	data, err := events.Encode(ev)
	require.NoError(t, err)
	return &stream.Message{Subject: "kg.communities.changed.acme", Kind: events.KindCommunitiesChanged, Tenant: "acme", Data: data}
}

func TestReportsForChangedCommunitiesOnly(t *testing.T) {
	w, st, _, reg := setup(t)
	apply(t, st, "a", 1, "diskfull")
	apply(t, st, "b", 1, "diskfull")
	apply(t, st, "c", 3, "dns")
	cs := []store.Community{
		{ID: "c0-x", Level: 0, Members: []string{"failure_mode:diskfull", "incident:a", "incident:b"}, MemberHash: "x",
			Sources: []provenance.SourceRef{{DocID: "a", Version: 1}, {DocID: "b", Version: 1}}},
		{ID: "c0-y", Level: 0, Members: []string{"failure_mode:dns", "incident:c"}, MemberHash: "y",
			Sources: []provenance.SourceRef{{DocID: "c", Version: 3}}},
	}
	require.NoError(t, st.ReplaceCommunities(t.Context(), "acme", 1, cs))
	require.NoError(t, w.Handle(t.Context(), message(t, &events.CommunitiesChanged{Run: 1,
		Changed: []events.CommunityChange{{ID: "c0-x", Level: 0, MemberHash: "x"}}})))

	r, err := st.Report(t.Context(), "acme", reporter.ReportID("c0-x"))
	require.NoError(t, err)
	require.Equal(t, []provenance.SourceRef{{DocID: "a", Version: 1}, {DocID: "b", Version: 1}}, r.Sources)
	require.Equal(t, "extractive", r.Writer)
	require.NotEmpty(t, r.Findings)
	for _, f := range r.Findings {
		require.NotEmpty(t, f.Citations, "finding %q cites nothing", f.Summary)
		require.NotEmpty(t, f.Edges)
	}
	require.Contains(t, r.Summary, "3 entities")
	require.Greater(t, r.Rating, 0.0)
	_, err = st.Report(t.Context(), "acme", reporter.ReportID("c0-y"))
	require.ErrorIs(t, err, store.ErrNotFound, "an unchanged community's report is not rewritten")

	// Run 2: x removed, y refreshed (its source moved to a new version).
	require.NoError(t, st.ReplaceCommunities(t.Context(), "acme", 2, cs[1:]))
	require.NoError(t, w.Handle(t.Context(), message(t, &events.CommunitiesChanged{Run: 2,
		Refreshed: []events.CommunityChange{{ID: "c0-y", Level: 0, MemberHash: "y"}}, Removed: []string{"c0-x"}})))
	_, err = st.Report(t.Context(), "acme", reporter.ReportID("c0-x"))
	require.ErrorIs(t, err, store.ErrNotFound)
	ry, err := st.Report(t.Context(), "acme", reporter.ReportID("c0-y"))
	require.NoError(t, err)
	require.Equal(t, []provenance.SourceRef{{DocID: "c", Version: 3}}, ry.Sources)

	written := func(reason string) float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "kgstream_reports_written_total" {
				for _, m := range mf.Metric {
					if m.Label[0].GetValue() == reason {
						return m.Counter.GetValue()
					}
				}
			}
		}
		return 0
	}
	require.EqualValues(t, 1, written("members_changed"))
	require.EqualValues(t, 1, written("sources_changed"))
	require.EqualValues(t, 1, written("removed"))

	// A late event of an older run still counts, because the newer run was
	// diffed against it and announces its changes nowhere else; but only
	// for communities that exist now, and removals only of those that do not.
	require.NoError(t, st.ReplaceCommunities(t.Context(), "acme", 3, []store.Community{cs[1],
		{ID: "c0-z", Level: 0, Members: []string{"incident:a"}, MemberHash: "z"}}))
	require.NoError(t, w.Handle(t.Context(), message(t, &events.CommunitiesChanged{Run: 2,
		Changed: []events.CommunityChange{{ID: "c0-z", MemberHash: "z"}, {ID: "c0-x", MemberHash: "x"}},
		Removed: []string{"c0-y"}})))
	_, err = st.Report(t.Context(), "acme", reporter.ReportID("c0-z"))
	require.NoError(t, err, "run 2 announced c0-z; run 3 (diffed against 2) never will")
	_, err = st.Report(t.Context(), "acme", reporter.ReportID("c0-x"))
	require.ErrorIs(t, err, store.ErrNotFound, "c0-x no longer exists")
	_, err = st.Report(t.Context(), "acme", reporter.ReportID("c0-y"))
	require.NoError(t, err, "c0-y exists again in run 3: its report stays")
}

// counter reads one kgstream counter, summed over its labels (or, with
// reason, of that reason only).
func counter(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if reason == "" || len(m.Label) > 0 && m.Label[0].GetValue() == reason {
				total += m.Counter.GetValue()
			}
		}
	}
	return total
}

// TestUnchangedInputIsRestamped: a community whose members and input are
// unchanged keeps its report, its citations moved to the current versions;
// a changed statement rewrites it; a report whose source moved on without
// any event naming a community resting on it is left to the full pass.
func TestUnchangedInputIsRestamped(t *testing.T) {
	w, st, _, reg := setup(t)
	ctx := t.Context()
	apply(t, st, "a", 1, "diskfull")
	apply(t, st, "b", 1, "diskfull")
	cs := []store.Community{{ID: "c0-x", Level: 0, Members: []string{"failure_mode:diskfull", "incident:a", "incident:b"}, MemberHash: "x"}}
	require.NoError(t, st.ReplaceCommunities(ctx, "acme", 1, cs))
	require.NoError(t, w.Handle(ctx, message(t, &events.CommunitiesChanged{Run: 1,
		Changed: []events.CommunityChange{{ID: "c0-x", MemberHash: "x"}}})))
	first, err := st.Report(ctx, "acme", reporter.ReportID("c0-x"))
	require.NoError(t, err)
	require.NotEmpty(t, first.InputHash)
	require.EqualValues(t, 1, counter(t, reg, "kgstream_reports_written_total", ""))

	// a v2 says the same: restamped to a v2, not rewritten.
	apply(t, st, "a", 2, "diskfull")
	refresh := &events.CommunitiesChanged{Run: 2, Refreshed: []events.CommunityChange{{ID: "c0-x", MemberHash: "x"}}}
	require.NoError(t, w.Handle(ctx, message(t, refresh)))
	r, err := st.Report(ctx, "acme", reporter.ReportID("c0-x"))
	require.NoError(t, err)
	require.EqualValues(t, 1, counter(t, reg, "kgstream_reports_written_total", ""))
	require.EqualValues(t, 1, counter(t, reg, "kgstream_reports_restamped_total", ""))
	require.Equal(t, []provenance.SourceRef{{DocID: "a", Version: 2}, {DocID: "b", Version: 1}}, r.Sources)
	require.Equal(t, first.Title, r.Title)
	require.Equal(t, first.Summary, r.Summary)
	require.Equal(t, first.InputHash, r.InputHash)
	var cited []provenance.SourceRef
	for _, f := range r.Findings {
		cited = append(cited, f.Citations...)
	}
	require.Contains(t, cited, provenance.SourceRef{DocID: "a", Version: 2, TextUnit: "a-u"})
	require.NotContains(t, cited, provenance.SourceRef{DocID: "a", Version: 1, TextUnit: "a-u"})

	// The same event again moves nothing: neither written nor restamped.
	require.NoError(t, w.Handle(ctx, message(t, refresh)))
	require.EqualValues(t, 1, counter(t, reg, "kgstream_reports_restamped_total", ""))

	// a v3, and an event that names no community: it reads nothing of the
	// tenant, so the report built on a v2 waits for the full pass, which
	// restamps it.
	apply(t, st, "a", 3, "diskfull")
	require.NoError(t, w.Handle(ctx, message(t, &events.CommunitiesChanged{Run: 3})))
	r, err = st.Report(ctx, "acme", reporter.ReportID("c0-x"))
	require.NoError(t, err)
	require.Equal(t, []provenance.SourceRef{{DocID: "a", Version: 2}, {DocID: "b", Version: 1}}, r.Sources)
	rec, err := w.Reconcile(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, reporter.Reconciled{Written: 1, Drifted: 1}, rec)
	r, err = st.Report(ctx, "acme", reporter.ReportID("c0-x"))
	require.NoError(t, err)
	require.Equal(t, []provenance.SourceRef{{DocID: "a", Version: 3}, {DocID: "b", Version: 1}}, r.Sources)
	require.EqualValues(t, 2, counter(t, reg, "kgstream_reports_restamped_total", ""))
	require.EqualValues(t, 1, counter(t, reg, "kgstream_reports_written_total", ""))

	// b v2 states something new of its incident: the report is rewritten.
	_, err = st.Apply(ctx, "acme", "b", 2, store.Contributions{
		TextUnits: []events.TextUnit{{ID: "b-u", Text: "t"}},
		Entities: []store.EntityContribution{
			{ID: "incident:b", Type: "incident", Name: "b", NameRank: 2, Description: "the disk filled overnight", TextUnits: []string{"b-u"}},
			{ID: "failure_mode:diskfull", Type: "failure_mode", Name: "diskfull", NameRank: 2, TextUnits: []string{"b-u"}},
		},
		Edges: []store.EdgeContribution{{Source: "incident:b", Relation: "failure", Target: "failure_mode:diskfull", Weight: 1, TextUnits: []string{"b-u"}}},
	})
	require.NoError(t, err)
	require.NoError(t, w.Handle(ctx, message(t, &events.CommunitiesChanged{Run: 4, Refreshed: refresh.Refreshed})))
	r, err = st.Report(ctx, "acme", reporter.ReportID("c0-x"))
	require.NoError(t, err)
	require.NotEqual(t, first.InputHash, r.InputHash)
	require.EqualValues(t, 1, counter(t, reg, "kgstream_reports_written_total", "sources_changed"))
	require.EqualValues(t, 2, counter(t, reg, "kgstream_reports_restamped_total", ""))
	require.Equal(t, []provenance.SourceRef{{DocID: "a", Version: 3}, {DocID: "b", Version: 2}}, r.Sources)
}

// TestHandleRefusesOtherTenantsEvent: a communities event whose tenant is
// not its subject's is refused as permanent and writes nothing, as is an
// event of a kind the reporter does not consume.
func TestHandleRefusesOtherTenantsEvent(t *testing.T) {
	w, st, _, _ := setup(t)
	apply(t, st, "a", 1, "diskfull")
	require.NoError(t, st.ReplaceCommunities(t.Context(), "acme", 1, []store.Community{
		{ID: "c0-x", Level: 0, Members: []string{"failure_mode:diskfull", "incident:a"}, MemberHash: "x",
			Sources: []provenance.SourceRef{{DocID: "a", Version: 1}}}}))
	m := message(t, &events.CommunitiesChanged{Run: 1, Changed: []events.CommunityChange{{ID: "c0-x", Level: 0, MemberHash: "x"}}})
	m.Subject, m.Tenant = "kg.communities.changed.globex", "globex"
	err := w.Handle(t.Context(), m)
	require.ErrorIs(t, err, stream.ErrTenantMismatch)
	require.True(t, stream.IsPermanent(err))
	_, err = st.Report(t.Context(), "acme", reporter.ReportID("c0-x"))
	require.ErrorIs(t, err, store.ErrNotFound, "a refused event wrote a report")

	m = message(t, &events.CommunitiesChanged{Run: 1})
	m.Kind = events.KindReportsChanged
	err = w.Handle(t.Context(), m)
	require.ErrorIs(t, err, stream.ErrUnknownKind)
	require.True(t, stream.IsPermanent(err))

	// The same event on its own tenant's subject is handled.
	require.NoError(t, w.Handle(t.Context(), message(t, &events.CommunitiesChanged{Run: 1,
		Changed: []events.CommunityChange{{ID: "c0-x", Level: 0, MemberHash: "x"}}})))
	_, err = st.Report(t.Context(), "acme", reporter.ReportID("c0-x"))
	require.NoError(t, err)
}

// meteredBus is a bus whose stage metrics (the yield among them) are
// registered on the registry it returns.
func meteredBus(t *testing.T) (*stream.Bus, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	return streamtest.NewBus(t, streamtest.Options{Metrics: stream.NewMetrics(reg)}), reg
}

// frontBacklog creates "front", standing for a stage a GiveWay names (the
// resolver): a durable on graph.changed nobody consumes until the test
// calls drain, so each graph change published is one more in its
// backlog. drain acknowledges n of them.
func frontBacklog(t *testing.T, bus *stream.Bus) (drain func(n int)) {
	t.Helper()
	front, err := bus.JetStream().CreateOrUpdateConsumer(t.Context(), bus.StreamName(), jetstream.ConsumerConfig{
		Durable: "front", FilterSubject: bus.Subjects().All(events.KindGraphChanged), AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	return func(n int) {
		t.Helper()
		batch, err := front.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		got := 0
		for m := range batch.Messages() {
			require.NoError(t, m.DoubleAck(t.Context()))
			got++
		}
		require.Equal(t, n, got, "front messages drained")
	}
}

// waitConsumers polls until the consumers named exist: from then on,
// their stage gives way before each batch.
func waitConsumers(t *testing.T, bus *stream.Bus, names ...string) {
	t.Helper()
	streamtest.Eventually(t, 20*time.Second, func() error {
		for _, n := range names {
			if _, err := bus.JetStream().Consumer(t.Context(), bus.StreamName(), n); err != nil {
				return fmt.Errorf("consumer %s: %w", n, err)
			}
		}
		return nil
	})
}

// giveWayHeld is how long a test checks that a stage giving way did
// nothing, once its consumers exist: ample for a batch it would have taken.
const giveWayHeld = 300 * time.Millisecond

// requireYielded checks that the reporter counted at least giveWayHeld
// giving way. A wait is counted when it ends: call it once the stage
// handled what it waited to handle.
func requireYielded(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	require.GreaterOrEqual(t, counter(t, reg, "kgstream_stage_yield_seconds_total", "reporter"), giveWayHeld.Seconds())
}
