package app_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/clusterer"
	"github.com/kgstream/kgstream/services/reporter"
)

// runActor runs fn until stop is called (or the test ends) and returns
// stop, which waits for fn to return and checks its error.
func runActor(t *testing.T, fn func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	stopped := false
	stop = func() {
		t.Helper()
		if !stopped {
			stopped = true
			cancel()
			require.NoError(t, <-done)
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestClustererKilledBeforeAnnouncing stores a run whose announcement
// JetStream refuses (the stream is narrowed to every subject but the
// communities'), stops that clusterer with its announcement still owed,
// and starts another once the stream takes announcements again: every
// stored community gets its report. The reporter's reconciliation is off,
// so the reports come from the announcement the new clusterer republishes.
func TestClustererKilledBeforeAnnouncing(t *testing.T) {
	bus := streamtest.NewBus(t, streamtest.Options{})
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	ctx := t.Context()
	for i := range 4 {
		doc := fmt.Sprintf("pm-%d", i)
		_, err := st.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: 1})
		require.NoError(t, err)
		inc, svc := "incident:"+doc, fmt.Sprintf("service:svc-%d", i%2)
		_, err = st.Apply(ctx, "acme", doc, 1, store.Contributions{
			TextUnits: []events.TextUnit{{ID: doc + "-u", Text: "t"}},
			Entities: []store.EntityContribution{
				{ID: inc, Type: "incident", Name: doc, NameRank: 2, TextUnits: []string{doc + "-u"}},
				{ID: svc, Type: "service", Name: svc, NameRank: 2, TextUnits: []string{doc + "-u"}},
			},
			Edges: []store.EdgeContribution{{Source: inc, Relation: "mentions", Target: svc, Weight: 1, TextUnits: []string{doc + "-u"}}},
		})
		require.NoError(t, err)
	}

	restore := narrowStream(t, bus, events.KindCommunitiesChanged)
	ccfg := clusterer.Config{Quiet: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}
	first, err := clusterer.New(ccfg, bus, st, nil, nil)
	require.NoError(t, err)
	stopFirst := runActor(t, first.Run)
	var stored []store.Community
	streamtest.Eventually(t, 20*time.Second, func() error {
		stored, err = st.Communities(ctx, "acme")
		if err != nil || len(stored) == 0 {
			return fmt.Errorf("no communities stored yet (%v)", err)
		}
		return nil
	})
	require.Len(t, stored, 2)
	stopFirst()
	rs, err := st.Reports(ctx, "acme")
	require.NoError(t, err)
	require.Empty(t, rs, "nothing was announced")

	restore()
	rep, err := reporter.New(reporter.Config{ReconcileEvery: -1}, bus, st, nil, nil)
	require.NoError(t, err)
	runActor(t, rep.Run)
	second, err := clusterer.New(ccfg, bus, st, nil, nil)
	require.NoError(t, err)
	runActor(t, second.Run)
	streamtest.Eventually(t, 20*time.Second, func() error {
		for _, c := range stored {
			r, err := st.Report(ctx, "acme", reporter.ReportID(c.ID))
			if err != nil {
				return fmt.Errorf("report of %s: %w", c.ID, err)
			}
			if r.MemberHash != c.MemberHash {
				return fmt.Errorf("report of %s has member hash %s, want %s", c.ID, r.MemberHash, c.MemberHash)
			}
		}
		return nil
	})
	// The new clusterer's start-up re-clustering may store a later run
	// of the same partition; it announces no changed community (the diff
	// is against the stored run), so with reconciliation off the reports
	// come from the owed announcement.
	now, err := st.Communities(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, withoutRun(stored), withoutRun(now), "the restart's re-clustering changed no member set")
}

func withoutRun(cs []store.Community) []store.Community {
	out := slices.Clone(cs)
	for i := range out {
		out[i].Run = 0
	}
	return out
}

// narrowStream narrows the stream (streamtest.Narrow) and checks that
// publishing the kind left out fails.
func narrowStream(t *testing.T, bus *stream.Bus, without events.Kind) (restore func()) {
	t.Helper()
	restore = streamtest.Narrow(t, bus, without)
	_, err := bus.JetStream().Publish(t.Context(), bus.Subjects().For(without, "acme"), []byte("{}"))
	require.ErrorIs(t, err, jetstream.ErrNoStreamResponse, "publishing %s must fail on the narrowed stream", without)
	return restore
}
