package clusterer_test

import (
	"errors"
	"sort"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/clusterer"
)

func owedKeys(t *testing.T, bus *stream.Bus) []string {
	t.Helper()
	kv, err := bus.JetStream().KeyValue(t.Context(), bus.StreamName()+"_owed")
	require.NoError(t, err)
	keys, err := kv.Keys(t.Context())
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil
	}
	require.NoError(t, err)
	return keys
}

// TestOwedAnnouncementSurvivesRestart stores a run whose announcement
// cannot be published, drops the worker (its memory with it) and starts
// another: the new one republishes the recorded announcement, naming every
// stored community, and clears the record.
func TestOwedAnnouncementSurvivesRestart(t *testing.T) {
	e := newEnv(t, clusterer.Config{})
	apply(t, e.st, "a", 1, map[string]string{"service:api": "api", "team:core": "core"}, edge("service:api", "owned_by", "team:core", 1))
	apply(t, e.st, "b", 1, map[string]string{"service:db": "db", "team:data": "data"}, edge("service:db", "owned_by", "team:data", 1))

	restore := streamtest.Narrow(t, e.bus, events.KindCommunitiesChanged)
	err := e.w.Recluster(t.Context(), tenant)
	require.ErrorContains(t, err, "announcing communities")
	stored := communities(t, e.st)
	require.Len(t, stored, 2, "the run is stored although its announcement failed")
	require.Empty(t, announcements(t, e.bus))
	require.Equal(t, []string{tenant}, owedKeys(t, e.bus), "the announcement is recorded with the run")

	// The worker dies; the stream takes announcements again.
	restore()
	w2, err := clusterer.New(clusterer.Config{}, e.bus, e.st, testLogger(t), nil)
	require.NoError(t, err)
	n, err := w2.PublishOwed(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	evs := announcements(t, e.bus)
	require.Len(t, evs, 1)
	require.Equal(t, lastRun(t, e.st), evs[0].Run)
	var announced, want []string
	for _, c := range evs[0].Changed {
		announced = append(announced, c.ID)
	}
	for _, c := range stored {
		want = append(want, c.ID)
	}
	sort.Strings(announced)
	sort.Strings(want)
	require.Equal(t, want, announced, "every stored community is announced")
	require.Empty(t, owedKeys(t, e.bus), "a published announcement is cleared")

	// Nothing is owed any more: a further start republishes nothing, and
	// the next run, diffing against the stored one, announces no change.
	n, err = w2.PublishOwed(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, w2.Recluster(t.Context(), tenant))
	evs = announcements(t, e.bus)
	require.Len(t, evs, 2)
	require.Empty(t, evs[1].Changed)
	require.Empty(t, owedKeys(t, e.bus))
}

// TestOwedRunNeverStoredRidesOnTheNextRun leaves a record whose run was
// never stored (the process died between recording and storing): it is
// not published under that run's id, and the next run carries what of it
// still holds.
func TestOwedRunNeverStoredRidesOnTheNextRun(t *testing.T) {
	e := newEnv(t, clusterer.Config{})
	apply(t, e.st, "a", 1, map[string]string{"service:api": "api", "team:core": "core"}, edge("service:api", "owned_by", "team:core", 1))
	kv, err := e.bus.JetStream().CreateOrUpdateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: e.bus.StreamName() + "_owed", History: 1})
	require.NoError(t, err)
	data, err := events.Encode(&events.CommunitiesChanged{Header: events.Header{Tenant: tenant}, Run: 1,
		Changed: []events.CommunityChange{{ID: "c0-gone", Level: 0, MemberHash: "gone"}}})
	require.NoError(t, err)
	_, err = kv.Put(t.Context(), tenant, data)
	require.NoError(t, err)

	n, err := e.w.PublishOwed(t.Context())
	require.NoError(t, err)
	require.Zero(t, n, "run 1 was never stored")
	require.Empty(t, announcements(t, e.bus))
	require.NoError(t, e.w.Recluster(t.Context(), tenant))
	evs := announcements(t, e.bus)
	require.Len(t, evs, 1)
	require.Equal(t, int64(1), evs[0].Run)
	require.Len(t, evs[0].Changed, 1, "the community that does not exist is dropped, the stored one announced")
	require.NotEqual(t, "c0-gone", evs[0].Changed[0].ID)
	require.Empty(t, owedKeys(t, e.bus))
}
