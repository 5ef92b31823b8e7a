package clusterer_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/clusterer"
)

// seedConfig clusters as the seed-postmortems fixture was produced:
// GraphRAG's hierarchical Leiden call with max cluster size 6 and edge
// weight = number of supporting sources.
func seedConfig() clusterer.Config {
	return clusterer.Config{WeightBy: "sources", Partitioner: clusterer.Leiden(clusterer.LeidenConfig{MaxClusterSize: 6})}
}

// memberSet is a community's level and member set, the identity Diff keys on.
func memberSet(c store.Community) string {
	return fmt.Sprintf("%d:%s", c.Level, strings.Join(c.Members, ","))
}

// cliques applies groups of size members, every pair of a group linked,
// group i linked to group i+1 by one edge (a ring).
func cliques(t *testing.T, st store.GraphStore, groups, size int) {
	t.Helper()
	node := func(g, i int) string { return fmt.Sprintf("service:g%02dn%d", g, i) }
	for g := range groups {
		ents := map[string]string{}
		var es []store.EdgeContribution
		for i := range size {
			ents[node(g, i)] = fmt.Sprintf("G%d N%d", g, i)
			for j := i + 1; j < size; j++ {
				es = append(es, edge(node(g, i), "calls", node(g, j), 1))
			}
		}
		n := node((g+1)%groups, 0)
		ents[n] = "ring"
		es = append(es, edge(node(g, size-1), "calls", n, 1))
		apply(t, st, fmt.Sprintf("group-%02d", g), 1, ents, es...)
	}
}

func levelZero(cs []store.Community) map[string]store.Community {
	out := map[string]store.Community{}
	for _, c := range cs {
		if c.Level == 0 {
			out[c.ID] = c
		}
	}
	return out
}

// TestIncrementalReclusterIsStable: between full runs, a re-clustering
// moves only what the edit touched. Every previous level-0 community none
// of whose members the edit touched keeps its id; the touched entities go
// where their edges pull them; a full run gives the from-scratch partition
// again.
func TestIncrementalReclusterIsStable(t *testing.T) {
	cfg := clusterer.Config{Partitioner: clusterer.Leiden(clusterer.LeidenConfig{MaxClusterSize: 10}), FullEvery: 100}

	t.Run("cliques", func(t *testing.T) {
		e := newEnv(t, cfg)
		cliques(t, e.st, 12, 6)
		require.NoError(t, e.w.Recluster(t.Context(), tenant))
		before := communities(t, e.st)
		// A new entity tied to four members of group 5, and a new edge
		// between groups 2 and 9.
		res := apply(t, e.st, "edit", 1, map[string]string{"service:new": "New", "service:g05n1": "a", "service:g05n2": "b",
			"service:g05n3": "c", "service:g05n4": "d", "service:g02n2": "e", "service:g09n2": "f"},
			edge("service:new", "calls", "service:g05n1", 1), edge("service:new", "calls", "service:g05n2", 1),
			edge("service:new", "calls", "service:g05n3", 1), edge("service:new", "calls", "service:g05n4", 1),
			edge("service:g02n2", "calls", "service:g09n2", 1))
		require.NoError(t, e.w.Recluster(t.Context(), tenant))
		after := communities(t, e.st)
		ev := announcements(t, e.bus)[1]

		now := levelZero(after)
		for id, c := range levelZero(before) {
			touched := slices.ContainsFunc(c.Members, func(m string) bool { return slices.Contains(res.Touched, m) })
			if !touched {
				require.Contains(t, now, id, "untouched community %v moved", c.Members)
			}
		}
		home := byMember(after, "service:new")
		require.NotNil(t, home)
		require.Contains(t, home.Members, "service:g05n1", "the new entity joins the group it is tied to")
		require.Equal(t, byMember(after, "service:g02n2").ID, byMember(after, "service:g02n0").ID, "one bridge does not pull a clique member away")
		require.LessOrEqual(t, len(ev.Changed), 3, "%+v", ev.Changed)
		require.LessOrEqual(t, len(ev.Removed), 3, "%+v", ev.Removed)

		// A full run is the from-scratch partition of the same graph.
		twin := newEnv(t, clusterer.Config{Partitioner: cfg.Partitioner})
		cliques(t, twin.st, 12, 6)
		apply(t, twin.st, "edit", 1, map[string]string{"service:new": "New", "service:g05n1": "a", "service:g05n2": "b",
			"service:g05n3": "c", "service:g05n4": "d", "service:g02n2": "e", "service:g09n2": "f"},
			edge("service:new", "calls", "service:g05n1", 1), edge("service:new", "calls", "service:g05n2", 1),
			edge("service:new", "calls", "service:g05n3", 1), edge("service:new", "calls", "service:g05n4", 1),
			edge("service:g02n2", "calls", "service:g09n2", 1))
		require.NoError(t, twin.w.Recluster(t.Context(), tenant))
		require.NoError(t, e.w.ReclusterFull(t.Context(), tenant))
		full, scratch := communities(t, e.st), communities(t, twin.st)
		require.Equal(t, len(scratch), len(full))
		for i := range full {
			require.Equal(t, scratch[i].ID, full[i].ID)
			require.Equal(t, scratch[i].Members, full[i].Members)
		}
	})

}

// planted applies a noisy two-level planted partition, built the same way
// every time: supers super-groups of groups groups of size entities; a
// pair is linked with probability 0.7 within a group, 0.12 within a
// super-group and 0.004 otherwise. One document per group.
func planted(t *testing.T, st store.GraphStore, supers, groups, size int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	node := func(s, g, i int) string { return fmt.Sprintf("service:s%dg%dn%d", s, g, i) }
	type at struct{ s, g, i int }
	var all []at
	for s := range supers {
		for g := range groups {
			for i := range size {
				all = append(all, at{s, g, i})
			}
		}
	}
	docs := map[string]*struct {
		ents map[string]string
		es   []store.EdgeContribution
	}{}
	for x, a := range all {
		for _, b := range all[x+1:] {
			p := 0.004
			switch {
			case a.s == b.s && a.g == b.g:
				p = 0.7
			case a.s == b.s:
				p = 0.12
			}
			if rng.Float64() >= p {
				continue
			}
			doc := fmt.Sprintf("group-s%dg%d", a.s, a.g)
			d := docs[doc]
			if d == nil {
				d = &struct {
					ents map[string]string
					es   []store.EdgeContribution
				}{ents: map[string]string{}}
				docs[doc] = d
			}
			na, nb := node(a.s, a.g, a.i), node(b.s, b.g, b.i)
			d.ents[na], d.ents[nb] = na, nb
			d.es = append(d.es, edge(na, "calls", nb, 1))
		}
	}
	for _, doc := range slices.Sorted(maps.Keys(docs)) {
		apply(t, st, doc, 1, docs[doc].ents, docs[doc].es...)
	}
}

// TestIncrementalReclusterKeepsSubCommunities: below level 0 a
// re-clustering is incremental too. An edit inside one large level-0
// community changes that community and the sub-communities holding what
// it touched; every other community, at every level, keeps its id.
func TestIncrementalReclusterKeepsSubCommunities(t *testing.T) {
	cfg := clusterer.Config{Partitioner: clusterer.Leiden(clusterer.LeidenConfig{MaxClusterSize: 10}), FullEvery: 100}
	e := newEnv(t, cfg)
	planted(t, e.st, 4, 5, 6)
	require.NoError(t, e.w.Recluster(t.Context(), tenant))
	before := communities(t, e.st)
	deep := 0
	for _, c := range before {
		if c.Level > 0 {
			deep++
		}
	}
	require.Greater(t, deep, 4, "the planted graph has sub-communities")

	// A new entity tied to three members of one group.
	res := apply(t, e.st, "edit", 1, map[string]string{"service:new": "New", "service:s1g2n0": "a",
		"service:s1g2n1": "b", "service:s1g2n2": "c"},
		edge("service:new", "calls", "service:s1g2n0", 1), edge("service:new", "calls", "service:s1g2n1", 1),
		edge("service:new", "calls", "service:s1g2n2", 1))
	require.NoError(t, e.w.Recluster(t.Context(), tenant))
	after := map[string]store.Community{}
	for _, c := range communities(t, e.st) {
		after[c.ID] = c
	}
	untouchedStay(t, "the edit", before, after, res.Touched)
	home := byMember(slices.Collect(maps.Values(after)), "service:new")
	require.NotNil(t, home)
	require.Contains(t, home.Members, "service:s1g2n0", "the new entity joins the group it is tied to")

	// The edit deleted: its entity leaves the graph, its community loses a
	// member; what it did not touch stays.
	before = slices.Collect(maps.Values(after))
	res, err := e.st.Delete(t.Context(), tenant, "edit", 2)
	require.NoError(t, err)
	require.NoError(t, e.w.Recluster(t.Context(), tenant))
	after = map[string]store.Community{}
	for _, c := range communities(t, e.st) {
		after[c.ID] = c
	}
	untouchedStay(t, "the deletion", before, after, res.Touched)
	require.Nil(t, byMember(slices.Collect(maps.Values(after)), "service:new"))
}

// untouchedStay fails t unless every community of before that holds no
// touched entity is in after, or gained only touched entities (a freed
// entity may join an untouched community).
func untouchedStay(t *testing.T, what string, before []store.Community, after map[string]store.Community, touched []string) {
	t.Helper()
	isTouched := func(m string) bool { return slices.Contains(touched, m) }
	kept, grew := 0, 0
	for _, c := range before {
		if slices.ContainsFunc(c.Members, isTouched) {
			continue
		}
		if _, ok := after[c.ID]; ok {
			kept++
			continue
		}
		var now []string
		for _, a := range after {
			if a.Level == c.Level && slices.Contains(a.Members, c.Members[0]) {
				now = slices.DeleteFunc(slices.Clone(a.Members), isTouched)
			}
		}
		if !slices.Equal(now, c.Members) {
			t.Errorf("after %s, untouched community %s (level %d) %v is now %v", what, c.ID, c.Level, c.Members, now)
			continue
		}
		grew++
	}
	t.Logf("after %s: %d communities before, %d untouched kept, %d gained touched entities", what, len(before), kept, grew)
}
