package query

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/store"
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
			{"incident:a", store.Out}: {edge("incident:a", "failure_mode:x")},
			{"incident:b", store.Out}: {edge("incident:b", "failure_mode:x")},
			{"failure_mode:x", store.In}: {edge("incident:a", "failure_mode:x"), edge("incident:b", "failure_mode:x")},
		},
		relations: map[relKey]relList{rel: {edges: []store.Edge{edge("incident:a", "failure_mode:x"), edge("incident:b", "failure_mode:x")}}},
	}
	next, ok := g.succeed([]string{"failure_mode:x", "incident:a"})
	require.True(t, ok)
	require.Equal(t, []string{"incident:b", "incident:gone"}, slices.Sorted(maps.Keys(next.ents)))
	require.Equal(t, []edgeKey{{"incident:b", store.Out}}, sortedEdgeKeys(next.edges))
	require.Equal(t, []string{"failure_mode:x", "incident:a"}, next.relations[rel].stale)
	require.Len(t, next.relations[rel].edges, 2, "the list as it was, to be patched by its first reader")
	require.Len(t, g.ents, 3, "the set followed is left as it was")
	require.Len(t, g.edges, 3)

	again, ok := next.succeed([]string{"incident:c"})
	require.True(t, ok)
	require.Equal(t, []string{"failure_mode:x", "incident:a", "incident:c"}, again.relations[rel].stale)

	many := make([]string, maxStaleRelation)
	for i := range many {
		many[i] = fmt.Sprintf("incident:m%04d", i)
	}
	last, ok := again.succeed(many)
	require.True(t, ok)
	require.NotContains(t, last.relations, rel, "more entities to patch for than a read costs: read again")
	require.Len(t, last.ents, 2)

	big := &graphSet{ents: map[string]storedEntity{}}
	for i := range maxInheritedReads + 1 {
		big.ents[fmt.Sprintf("incident:e%06d", i)] = storedEntity{found: true}
	}
	_, ok = big.succeed([]string{"incident:a"})
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
