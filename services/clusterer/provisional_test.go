package clusterer_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/clusterer"
)

// scripted is a Partitioner that puts the nodes of each listed group in one
// level-0 cluster and every other node in a cluster of its own; tests set
// the groups the next re-clustering should find.
type scripted struct {
	mu     sync.Mutex
	groups [][]string
}

func (s *scripted) set(groups ...[]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups = groups
}

func (s *scripted) partition(_ context.Context, edges []clusterer.WeightedEdge) ([]clusterer.Row, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cluster := map[string]int{}
	for i, g := range s.groups {
		for _, n := range g {
			cluster[n] = i
		}
	}
	next := len(s.groups)
	seen := map[string]bool{}
	var rows []clusterer.Row
	for _, e := range edges {
		for _, n := range []string{e.Source, e.Target} {
			if seen[n] {
				continue
			}
			seen[n] = true
			c, ok := cluster[n]
			if !ok {
				c = next
				next++
			}
			rows = append(rows, clusterer.Row{Node: n, Cluster: c, Parent: -1})
		}
	}
	return rows, nil
}

// provisionalEnv: two communities {a, b} and {c, d} (run 1), then a new
// document adds x, linked to a and c.
func provisionalEnv(t *testing.T, weightBy string) (*env, *scripted, store.ApplyResult) {
	t.Helper()
	var s scripted
	s.set([]string{"service:a", "service:b"}, []string{"service:c", "service:d"})
	e := newEnv(t, clusterer.Config{WeightBy: weightBy, Partitioner: s.partition})
	ents := map[string]string{"service:a": "a", "service:b": "b", "service:c": "c", "service:d": "d"}
	apply(t, e.st, "doc1", 1, ents, edge("service:a", "calls", "service:b", 1), edge("service:c", "calls", "service:d", 1),
		edge("service:b", "calls", "service:c", 1))
	require.NoError(t, e.w.Recluster(t.Context(), tenant))
	// x: to a by two sources of small strength, to c by one strong source.
	apply(t, e.st, "doc2", 1, map[string]string{"service:x": "x", "service:a": "a", "service:c": "c"},
		edge("service:x", "calls", "service:a", 0.1), edge("service:c", "calls", "service:x", 5))
	res := apply(t, e.st, "doc3", 1, map[string]string{"service:x": "x", "service:a": "a", "service:y": "y", "service:z": "z"},
		edge("service:a", "calls", "service:x", 0.1), edge("service:y", "calls", "service:x", 1), edge("service:z", "calls", "service:z", 1))
	return e, &s, res
}

func byMember(cs []store.Community, id string) *store.Community {
	for i := range cs {
		if slices.Contains(cs[i].Members, id) {
			return &cs[i]
		}
	}
	return nil
}

// TestAssignStrongestNeighbour: a new entity joins the community of the
// neighbour with the heaviest edge (by sources or by strength, as the
// clusterer weighs edges), a new entity linked only to new entities joins
// in turn, one without a clustered neighbour waits; ids and member hashes
// stay and nothing is announced.
func TestAssignStrongestNeighbour(t *testing.T) {
	for _, tc := range []struct {
		weightBy, joins string
	}{
		{"sources", "service:a"},  // two sources vs one
		{"strength", "service:c"}, // 5 vs 0.2
	} {
		t.Run(tc.weightBy, func(t *testing.T) {
			e, _, res := provisionalEnv(t, tc.weightBy)
			before := communities(t, e.st)
			require.Len(t, before, 2)
			touched := append(slices.Clone(res.Touched), "service:gone") // absent ids are ignored
			require.NoError(t, e.w.Assign(t.Context(), tenant, touched))

			after := communities(t, e.st)
			require.Len(t, after, 2)
			home := byMember(before, tc.joins)
			for i, c := range after {
				b := before[i]
				require.Equal(t, b.ID, c.ID)
				require.Equal(t, b.MemberHash, c.MemberHash)
				require.Equal(t, b.Run, c.Run)
				if c.ID != home.ID {
					require.Equal(t, b, c)
					continue
				}
				// y reaches the community through x, in a second round;
				// z only links to itself and waits for the re-clustering.
				want := append(slices.Clone(b.Members), "service:x", "service:y")
				slices.Sort(want)
				require.Equal(t, want, c.Members)
				require.Contains(t, c.Sources, sourceRef("doc3", 1))
				require.Subset(t, c.Sources, b.Sources)
			}
			require.Nil(t, byMember(after, "service:z"))
			require.Equal(t, int64(1), lastRun(t, e.st))
			require.Len(t, announcements(t, e.bus), 1, "provisional membership is not announced")
			require.Equal(t, 2.0, metric(t, e.reg, "kgstream_community_provisional_members_total", map[string]string{"outcome": "assigned"}).GetCounter().GetValue())
			require.Equal(t, 1.0, metric(t, e.reg, "kgstream_community_provisional_members_total", map[string]string{"outcome": "waiting"}).GetCounter().GetValue())

			// Idempotent: assigning again changes nothing.
			require.NoError(t, e.w.Assign(t.Context(), tenant, touched))
			require.Equal(t, after, communities(t, e.st))
		})
	}
}

// TestAssignThenRecluster: the re-clustering after a provisional assignment
// diffs against the computed communities, so it announces exactly what it
// would have announced without the assignment (checked against a twin
// without it): a grown community whose computed member set comes back
// keeps its id and is not announced as changed; one whose member set
// really changed is announced under a new id, the old id removed.
func TestAssignThenRecluster(t *testing.T) {
	ab, cd := []string{"service:a", "service:b"}, []string{"service:c", "service:d"}
	for _, tc := range []struct {
		name   string
		groups [][]string
		// kept: the run-1 communities (by a member) whose id survives.
		kept []string
	}{
		{"entity placed elsewhere", [][]string{ab, cd, {"service:x", "service:y", "service:z"}}, []string{"service:a", "service:c"}},
		{"entity placed with its neighbour", [][]string{{"service:a", "service:b", "service:x", "service:y"}, cd}, []string{"service:c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			twin, ts, _ := provisionalEnv(t, "sources")
			ts.set(tc.groups...)
			require.NoError(t, twin.w.Recluster(t.Context(), tenant))
			want := announcements(t, twin.bus)[1]

			e, s, res := provisionalEnv(t, "sources")
			before := communities(t, e.st)
			require.NoError(t, e.w.Assign(t.Context(), tenant, res.Touched))
			require.Contains(t, byMember(communities(t, e.st), "service:a").Members, "service:x")
			s.set(tc.groups...)
			require.NoError(t, e.w.Recluster(t.Context(), tenant))
			got := announcements(t, e.bus)[1]
			require.Equal(t, want.Changed, got.Changed)
			require.Equal(t, want.Refreshed, got.Refreshed)
			require.Equal(t, want.Removed, got.Removed)

			after := communities(t, e.st)
			require.Equal(t, communities(t, twin.st), after)
			for _, m := range tc.kept {
				b, a := byMember(before, m), byMember(after, m)
				require.Equal(t, b.ID, a.ID, "same computed member set, same id")
				require.Equal(t, b.Members, a.Members, "provisional members are gone")
				require.NotContains(t, got.Changed, events.CommunityChange{ID: a.ID, Level: 0, MemberHash: a.MemberHash})
				require.NotContains(t, got.Removed, a.ID)
			}
			for _, c := range got.Changed {
				require.False(t, slices.ContainsFunc(before, func(b store.Community) bool { return b.ID == c.ID }))
			}
		})
	}
	t.Run("after a restart", func(t *testing.T) {
		groups := [][]string{ab, cd, {"service:x", "service:y", "service:z"}}
		twin, ts, _ := provisionalEnv(t, "sources")
		ts.set(groups...)
		require.NoError(t, twin.w.Recluster(t.Context(), tenant))
		want := announcements(t, twin.bus)[1]

		e, s, res := provisionalEnv(t, "sources")
		before := communities(t, e.st)
		require.NoError(t, e.w.Assign(t.Context(), tenant, res.Touched))
		// A new worker on the same store and stream no longer knows what
		// the grown community was computed from: it keeps its id, and it is
		// announced as refreshed so that its report is rebuilt, never
		// trusted on a guess.
		w2, err := clusterer.New(clusterer.Config{Partitioner: s.partition}, e.bus, e.st, testLogger(t), nil)
		require.NoError(t, err)
		s.set(groups...)
		require.NoError(t, w2.Recluster(t.Context(), tenant))
		got := announcements(t, e.bus)[1]
		require.Equal(t, want.Changed, got.Changed)
		require.Equal(t, want.Removed, got.Removed)
		grown := byMember(before, "service:a")
		require.Contains(t, got.Refreshed, events.CommunityChange{ID: grown.ID, Level: 0, MemberHash: grown.MemberHash})
		require.Subset(t, got.Refreshed, want.Refreshed)
	})
}

// TestAssignViaRun: Run assigns the new entities a graph.changed names
// without waiting for the quiet period.
func TestAssignViaRun(t *testing.T) {
	clock := newFakeClock()
	cfg := seedConfig()
	// Never due unless the clock moves, which it does not.
	cfg.Quiet, cfg.MaxDelay, cfg.Tick, cfg.Now = time.Hour, 2*time.Hour, 5*time.Millisecond, clock.Now
	e := newEnv(t, cfg)
	applyOwn(t, e.st)
	require.NoError(t, e.w.Recluster(t.Context(), tenant))
	before := communities(t, e.st)
	e.run(t)
	e.waitConsumer(t)

	// INC-200 affects ledger-api, a service of the graph, and names a new one.
	unit := "INC-200#0"
	inc, svc, billing := resolve.ID("incident", "INC-200"), resolve.ID("service", "ledger-api"), resolve.ID("service", "billing-api")
	require.NotNil(t, byMember(before, svc), "ledger-api is in a community before INC-200")
	res, err := e.st.Apply(t.Context(), tenant, "INC-200", 1, store.Contributions{
		TextUnits: []events.TextUnit{{ID: unit, Text: "INC-200: billing-api called ledger-api too often."}},
		Entities: []store.EntityContribution{
			{ID: inc, Type: "incident", Name: "INC-200", NameRank: 2, TextUnits: []string{unit}},
			{ID: svc, Type: "service", Name: "ledger-api", NameRank: 2, TextUnits: []string{unit}},
			{ID: billing, Type: "service", Name: "billing-api", NameRank: 2, TextUnits: []string{unit}},
		},
		Edges: []store.EdgeContribution{
			{Source: inc, Relation: "affected", Target: svc, Weight: 1, TextUnits: []string{unit}},
			{Source: billing, Relation: "depends_on", Target: svc, Weight: 1, TextUnits: []string{unit}},
		},
	})
	require.NoError(t, err)
	e.publish(t, "INC-200", 1, res)
	eventually(t, 20*time.Second, func() error {
		if byMember(communities(t, e.st), billing) == nil {
			return fmt.Errorf("billing-api is in no community yet")
		}
		return nil
	})
	after := communities(t, e.st)
	for i, c := range after {
		b := before[i]
		require.Equal(t, b.ID, c.ID)
		if slices.Contains(b.Members, svc) {
			require.Contains(t, c.Members, inc)
			require.Contains(t, c.Members, billing)
			require.Contains(t, c.Sources, provenance.SourceRef{DocID: "INC-200", Version: 1})
		} else {
			require.Equal(t, b.Members, c.Members)
		}
	}
	require.Equal(t, int64(1), lastRun(t, e.st))
}

// countingStore is the real store, counting the whole-tenant community
// reads and writes and recording the ids of in-place updates.
type countingStore struct {
	clusterer.Stores
	mu               sync.Mutex
	listed, replaced int
	updated          []string
}

func (s *countingStore) Communities(ctx context.Context, tenant string) ([]store.Community, error) {
	s.mu.Lock()
	s.listed++
	s.mu.Unlock()
	return s.Stores.Communities(ctx, tenant)
}

func (s *countingStore) ReplaceCommunities(ctx context.Context, tenant string, run int64, cs []store.Community) error {
	s.mu.Lock()
	s.replaced++
	s.mu.Unlock()
	return s.Stores.ReplaceCommunities(ctx, tenant, run, cs)
}

func (s *countingStore) UpdateCommunities(ctx context.Context, tenant string, run int64, cs []store.Community) error {
	s.mu.Lock()
	for _, c := range cs {
		s.updated = append(s.updated, c.ID)
	}
	s.mu.Unlock()
	return s.Stores.UpdateCommunities(ctx, tenant, run, cs)
}

// TestAssignTouchesOnlyNeighbourCommunities: provisional placement reads
// the communities of the new entities' neighbours through the member index
// and writes back only the one that grew; a community far away is neither
// listed nor rewritten.
func TestAssignTouchesOnlyNeighbourCommunities(t *testing.T) {
	var s scripted
	s.set([]string{"service:a", "service:b"}, []string{"service:c", "service:d"}, []string{"service:p", "service:q"})
	reg := prometheus.NewRegistry()
	st := &countingStore{Stores: openStore(t)}
	w, err := clusterer.New(clusterer.Config{Partitioner: s.partition}, startBus(t, reg), st, testLogger(t), reg)
	require.NoError(t, err)
	apply(t, st, "doc1", 1, map[string]string{"service:a": "a", "service:b": "b", "service:c": "c", "service:d": "d"},
		edge("service:a", "calls", "service:b", 1), edge("service:c", "calls", "service:d", 1))
	apply(t, st, "doc9", 1, map[string]string{"service:p": "p", "service:q": "q"}, edge("service:p", "calls", "service:q", 1))
	require.NoError(t, w.Recluster(t.Context(), tenant))
	before := communities(t, st)
	require.Len(t, before, 3)
	res := apply(t, st, "doc2", 1, map[string]string{"service:x": "x", "service:a": "a"}, edge("service:x", "calls", "service:a", 1))

	st.listed, st.replaced = 0, 0
	require.NoError(t, w.Assign(t.Context(), tenant, res.Touched))
	require.Zero(t, st.listed, "no whole-tenant community read")
	require.Zero(t, st.replaced, "no whole-tenant community write")
	home := byMember(before, "service:a")
	require.Equal(t, []string{home.ID}, st.updated, "only the grown community is written")
	after := communities(t, st)
	for i, c := range after {
		if c.ID == home.ID {
			require.Equal(t, []string{"service:a", "service:b", "service:x"}, c.Members)
			continue
		}
		require.Equal(t, before[i], c)
	}
}
