package clusterer_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/clusterer"
)

func community(level int, sources []provenance.SourceRef, members ...string) store.Community {
	h := clusterer.MemberHash(members)
	return store.Community{ID: clusterer.CommunityID(level, h), Level: level, Members: members, MemberHash: h, Sources: sources}
}

func change(c store.Community) events.CommunityChange {
	return events.CommunityChange{ID: c.ID, Level: c.Level, MemberHash: c.MemberHash}
}

func TestDiff(t *testing.T) {
	v1 := []provenance.SourceRef{{DocID: "a", Version: 1}, {DocID: "b", Version: 1}}
	v2 := []provenance.SourceRef{{DocID: "a", Version: 2}, {DocID: "b", Version: 1}}
	keep := community(0, v1, "x", "y")
	moved := community(0, v1, "p", "q")
	movedNow := community(0, v2, "p", "q")
	gone := community(0, v1, "r", "s")
	goneToo := community(1, v1, "p", "q", "r", "s")
	grown := community(0, v1, "r", "s", "t")
	up := community(1, v1, "p", "q", "r", "s", "t")

	for _, tc := range []struct {
		name       string
		prev, next []store.Community
		changed    []events.CommunityChange
		refreshed  []events.CommunityChange
		removed    []string
	}{
		{name: "empty"},
		{name: "first run announces everything", next: []store.Community{keep, moved},
			changed: []events.CommunityChange{change(keep), change(moved)}},
		{name: "same member sets and sources", prev: []store.Community{keep, moved}, next: []store.Community{keep, moved}},
		{name: "a source moved to another version", prev: []store.Community{keep, moved}, next: []store.Community{keep, movedNow},
			refreshed: []events.CommunityChange{change(movedNow)}},
		{name: "member sets changed", prev: []store.Community{keep, gone, goneToo}, next: []store.Community{keep, grown, up},
			changed: []events.CommunityChange{change(grown), change(up)}, removed: sortedIDs(gone, goneToo)},
		{name: "everything removed", prev: []store.Community{keep, gone}, removed: sortedIDs(keep, gone)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed, refreshed, removed := clusterer.Diff(tc.prev, tc.next)
			require.Equal(t, tc.changed, changed)
			require.Equal(t, tc.refreshed, refreshed)
			require.Equal(t, tc.removed, removed)
		})
	}
}

func sortedIDs(cs ...store.Community) []string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	slices.Sort(ids)
	return ids
}

func TestCommunityIDStable(t *testing.T) {
	a := clusterer.CommunityID(0, clusterer.MemberHash([]string{"x", "y"}))
	require.Equal(t, a, clusterer.CommunityID(0, clusterer.MemberHash([]string{"x", "y"})))
	require.NotEqual(t, a, clusterer.CommunityID(1, clusterer.MemberHash([]string{"x", "y"})), "levels differ")
	require.NotEqual(t, a, clusterer.CommunityID(0, clusterer.MemberHash([]string{"x", "y", "z"})))
	require.NotEqual(t, clusterer.MemberHash([]string{"ab", "c"}), clusterer.MemberHash([]string{"a", "bc"}), "members are delimited")
}

// apply stores one document version with the given entities (id -> name)
// and edges.
func apply(t *testing.T, st store.GraphStore, doc string, version int64, ents map[string]string, edges ...store.EdgeContribution) store.ApplyResult {
	t.Helper()
	c := store.Contributions{Title: doc}
	for id, name := range ents {
		typ, _ := resolve.SplitID(id)
		c.Entities = append(c.Entities, store.EntityContribution{ID: id, Type: typ, Name: name, NameRank: 2})
	}
	c.Edges = edges
	res, err := st.Apply(t.Context(), tenant, doc, version, c)
	require.NoError(t, err)
	return res
}

func edge(src, rel, dst string, weight float64) store.EdgeContribution {
	return store.EdgeContribution{Source: src, Relation: rel, Target: dst, Weight: weight}
}

// capture is a Partitioner that records its input and clusters connected
// components.
type capture struct {
	mu    sync.Mutex
	edges []clusterer.WeightedEdge
}

func (c *capture) partition(ctx context.Context, edges []clusterer.WeightedEdge) ([]clusterer.Row, error) {
	c.mu.Lock()
	c.edges = append([]clusterer.WeightedEdge(nil), edges...)
	c.mu.Unlock()
	return clusterer.Components(ctx, edges)
}

// TestEdgeWeight: one undirected edge per entity pair, over both directions
// and every relation, weighted by the number of distinct supporting sources
// or by the sum of the supports' strengths; oriented and sorted by title as
// GraphRAG feeds Leiden.
func TestEdgeWeight(t *testing.T) {
	for _, tc := range []struct {
		weightBy string
		want     float64
	}{
		{"sources", 2},
		{"strength", 0.5 + 2 + 3},
	} {
		t.Run(tc.weightBy, func(t *testing.T) {
			var c capture
			e := newEnv(t, clusterer.Config{WeightBy: tc.weightBy, Partitioner: c.partition})
			// Ids sort the other way round from names: "service:zeta" is Alpha.
			ents := map[string]string{"service:zeta": "Alpha", "service:alpha": "Zulu"}
			apply(t, e.st, "doc1", 1, ents,
				edge("service:alpha", "calls", "service:zeta", 0.5),
				edge("service:zeta", "depends_on", "service:alpha", 2))
			apply(t, e.st, "doc2", 1, ents, edge("service:alpha", "calls", "service:zeta", 3))
			apply(t, e.st, "doc3", 1, map[string]string{"team:b": "B", "team:a": "A"}, edge("team:b", "works_with", "team:a", 1))
			require.NoError(t, e.w.Recluster(t.Context(), tenant))
			require.Equal(t, []clusterer.WeightedEdge{
				{Source: "team:a", Target: "team:b", Weight: 1},
				{Source: "service:zeta", Target: "service:alpha", Weight: tc.want},
			}, c.edges)
		})
	}
}

// TestIsolatedEntities: an entity without any edge (and a graph without
// any edge at all) still gets a level-0 community, so its document is
// covered.
func TestIsolatedEntities(t *testing.T) {
	t.Run("among edges", func(t *testing.T) {
		e := newEnv(t, clusterer.Config{Partitioner: clusterer.Leiden(clusterer.LeidenConfig{})})
		apply(t, e.st, "doc1", 1, map[string]string{"service:a": "a", "service:b": "b"}, edge("service:a", "calls", "service:b", 1))
		apply(t, e.st, "doc2", 1, map[string]string{"team:lonely": "Lonely"})
		require.NoError(t, e.w.Recluster(t.Context(), tenant))
		cs := communities(t, e.st)
		require.Len(t, cs, 2)
		var lonely *store.Community
		for i := range cs {
			if cs[i].Members[0] == "team:lonely" {
				lonely = &cs[i]
			}
		}
		require.NotNil(t, lonely)
		require.Equal(t, 0, lonely.Level)
		require.Equal(t, []string{"team:lonely"}, lonely.Members)
		require.Equal(t, []provenance.SourceRef{{DocID: "doc2", Version: 1}}, lonely.Sources)
		ab := community(0, []provenance.SourceRef{{DocID: "doc1", Version: 1}}, "service:a", "service:b")
		ab.Run = 1
		require.Contains(t, cs, ab)
		require.Equal(t, 1.0, metric(t, e.reg, "kgstream_community_coverage_ratio", map[string]string{"tenant": tenant}).GetGauge().GetValue())
	})
	t.Run("no edges at all", func(t *testing.T) {
		e := newEnv(t, clusterer.Config{Partitioner: clusterer.Leiden(clusterer.LeidenConfig{})})
		apply(t, e.st, "doc1", 1, map[string]string{"team:x": "X", "team:y": "Y"})
		require.NoError(t, e.w.Recluster(t.Context(), tenant))
		cs := communities(t, e.st)
		require.Len(t, cs, 2)
		for _, c := range cs {
			require.Equal(t, 0, c.Level)
			require.Len(t, c.Members, 1)
		}
		require.Equal(t, 1.0, metric(t, e.reg, "kgstream_community_coverage_ratio", map[string]string{"tenant": tenant}).GetGauge().GetValue())
	})
}

func TestConfigValidate(t *testing.T) {
	bus, st := startBus(t, nil), openStore(t)
	for _, cfg := range []clusterer.Config{
		{WeightBy: "votes"},
		{Quiet: -1},
		{Quiet: 2 * time.Second, MaxDelay: time.Second},
		{Tick: -1},
	} {
		_, err := clusterer.New(cfg, bus, st, nil, nil)
		require.Error(t, err, "%+v", cfg)
	}
	_, err := clusterer.New(clusterer.Config{}, nil, st, nil, nil)
	require.Error(t, err)
}
