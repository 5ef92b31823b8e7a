package query

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
)

// TestSucceedKeepsUnchangedReads: the set that follows a graph change
// takes over the entities and edge lists read by id but those of the
// entities the change names (both directions), and the relation lists
// with the named entities added to those they are to be patched for,
// across changes with no request between them; past maxInheritedReads
// reads, or maxStaleRelation entities to patch a list for, those start
// over.
func TestSucceedKeepsUnchangedReads(t *testing.T) {
	edge := func(src, dst string) store.Edge {
		return store.Edge{ID: store.EdgeID(src, "failure", dst), Source: src, Relation: "failure", Target: dst}
	}
	rel := relKey{"failure", "incident"}
	g := &graphSet{
		ents: map[string]storedEntity{"incident:a": {found: true}, "incident:b": {found: true}, "incident:gone": {}},
		edges: map[edgeKey][]store.Edge{
			{"incident:a", store.Out}:    {edge("incident:a", "failure_mode:x")},
			{"incident:b", store.Out}:    {edge("incident:b", "failure_mode:x")},
			{"failure_mode:x", store.In}: {edge("incident:a", "failure_mode:x"), edge("incident:b", "failure_mode:x")},
		},
		relations: map[relKey]relList{rel: {edges: []store.Edge{edge("incident:a", "failure_mode:x"), edge("incident:b", "failure_mode:x")}}},
	}
	next, ok := g.succeed(namedChange{ids: []string{"failure_mode:x", "incident:a"}})
	require.True(t, ok)
	require.Equal(t, []string{"incident:b", "incident:gone"}, slices.Sorted(maps.Keys(next.ents)))
	require.Equal(t, []edgeKey{{"incident:b", store.Out}}, sortedEdgeKeys(next.edges))
	require.Equal(t, []string{"failure_mode:x", "incident:a"}, next.relations[rel].stale)
	require.Len(t, next.relations[rel].edges, 2, "the list as it was, to be patched by its first reader")
	require.Equal(t, map[edgeKey]staleEdgeList{
		{"incident:a", store.Out}:    {edges: g.edges[edgeKey{"incident:a", store.Out}], stale: []string{"failure_mode:x", "incident:a"}},
		{"failure_mode:x", store.In}: {edges: g.edges[edgeKey{"failure_mode:x", store.In}], stale: []string{"failure_mode:x", "incident:a"}},
	}, next.staleEdges, "the named entities' lists, to be patched for the named entities")
	require.Len(t, g.ents, 3, "the set followed is left as it was")
	require.Len(t, g.edges, 3)
	require.Empty(t, g.staleEdges)

	again, ok := next.succeed(namedChange{ids: []string{"incident:c"}})
	require.True(t, ok)
	require.Equal(t, []string{"failure_mode:x", "incident:a", "incident:c"}, again.relations[rel].stale)
	require.Equal(t, next.staleEdges, again.staleEdges, "a change not naming a list's entity leaves it as it was")
	third, ok := again.succeed(namedChange{ids: []string{"incident:a", "incident:d"}})
	require.True(t, ok)
	require.Equal(t, []string{"failure_mode:x", "incident:a", "incident:d"}, third.staleEdges[edgeKey{"incident:a", store.Out}].stale)
	require.Equal(t, []string{"failure_mode:x", "incident:a"}, third.staleEdges[edgeKey{"failure_mode:x", store.In}].stale)
	require.NotContains(t, third.edges, edgeKey{"incident:a", store.Out})

	many := make([]string, maxStaleRelation)
	for i := range many {
		many[i] = fmt.Sprintf("incident:m%04d", i)
	}
	last, ok := again.succeed(namedChange{ids: many})
	require.True(t, ok)
	require.NotContains(t, last.relations, rel, "more entities to patch for than a read costs: read again")
	require.Len(t, last.ents, 2)
	manyNamed, ok := third.succeed(namedChange{ids: slices.Sorted(slices.Values(append(slices.Clone(many), "incident:a")))})
	require.True(t, ok)
	require.NotContains(t, manyNamed.staleEdges, edgeKey{"incident:a", store.Out}, "more entities to patch a list for than a read costs: read again")
	require.Contains(t, manyNamed.staleEdges, edgeKey{"failure_mode:x", store.In})

	big := &graphSet{ents: map[string]storedEntity{}}
	for i := range maxInheritedReads + 1 {
		big.ents[fmt.Sprintf("incident:e%06d", i)] = storedEntity{found: true}
	}
	_, ok = big.succeed(namedChange{ids: []string{"incident:a"}})
	require.False(t, ok, "more reads than a change should copy: dropped")
}

func sortedEdgeKeys(m map[edgeKey][]store.Edge) []edgeKey {
	out := make([]edgeKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b edgeKey) int { return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.dir, b.dir)) })
	return out
}

// TestPatchRelation: a relation list taken over by a successor is patched
// for its stale entities from their outgoing edge lists: the edges
// leaving them are dropped and read again, those of the relation only and
// of sources of the list's source type only, and the shared edge lists
// they come from keep what the relation's copy strips.
func TestPatchRelation(t *testing.T) {
	ctx := t.Context()
	db, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	a, err := auth.New(nil, nil)
	require.NoError(t, err)
	s, err := New(Config{}, db, a, nil, nil)
	require.NoError(t, err)
	s.cache.setLive(true)
	edge := func(src, rel, dst string) store.Edge {
		return store.Edge{ID: store.EdgeID(src, rel, dst), Source: src, Relation: rel, Target: dst,
			Supports: []store.Fragment{{DocID: "d", Description: "said so", Name: "n", Weight: 1}}}
	}
	k := relKey{"failure", "incident"}
	g := &graphSet{edges: map[edgeKey][]store.Edge{
		{"incident:a", store.Out}:     {edge("incident:a", "failure", "failure_mode:y"), edge("incident:a", "involved", "component:c")},
		{"failure_mode:x", store.Out}: {edge("failure_mode:x", "failure", "failure_mode:z")},
	}}
	l := relList{
		edges: []store.Edge{edge("incident:a", "failure", "failure_mode:x"), edge("incident:b", "failure", "failure_mode:x")},
		stale: []string{"failure_mode:x", "incident:a"},
	}
	v := newView(ctx, s, provenance.Caller{Tenant: "acme"})
	es, err := v.patchRelation(g, k, l)
	require.NoError(t, err)
	var ids []string
	for _, e := range es {
		ids = append(ids, store.EdgeID(e.Source, e.Relation, e.Target))
		if e.Source == "incident:a" {
			require.Empty(t, e.Supports[0].Description, "the relation's copy is stripped")
		}
	}
	slices.Sort(ids)
	require.Equal(t, []string{"incident:a|failure|failure_mode:y", "incident:b|failure|failure_mode:x"}, ids)
	require.Equal(t, "said so", g.edges[edgeKey{"incident:a", store.Out}][0].Supports[0].Description, "the shared list is left as read")
}
