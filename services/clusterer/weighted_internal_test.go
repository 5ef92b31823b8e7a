package clusterer

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// scanOrder is the edge order weighted gives, made as it was first
// written: a comparison of (title, id) keys looked up at every step of
// the sort. It is the reference of TestWeightedIsTheScan.
func scanOrder(edges []WeightedEdge, ents map[string]store.Entity) {
	type key struct{ name, id string }
	k := func(id string) key {
		if e, ok := ents[id]; ok && e.Name != "" {
			return key{e.Name, id}
		}
		return key{id, id}
	}
	less := func(a, b key) bool { return a.name < b.name || (a.name == b.name && a.id < b.id) }
	for i, e := range edges {
		if less(k(e.Target), k(e.Source)) {
			edges[i].Source, edges[i].Target = e.Target, e.Source
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		si, sj := k(edges[i].Source), k(edges[j].Source)
		if si != sj {
			return less(si, sj)
		}
		return less(k(edges[i].Target), k(edges[j].Target))
	})
}

// clusterGraph reduces a store graph to what clustering reads.
func clusterGraph(g store.Graph) cgraph {
	var in interner
	out := cgraph{nodes: make([]node, len(g.Entities)), links: make([]link, len(g.Edges))}
	for i, e := range g.Entities {
		out.nodes[i] = in.node(e)
	}
	for i, e := range g.Edges {
		out.links[i] = in.link(e)
	}
	return out
}

// mapWeigher is weigher as first written: a map of documents per pair.
type mapWeigher struct {
	byStrength bool
	docs       map[string]float64
}

func (w *mapWeigher) add(e store.Edge) {
	if w.docs == nil {
		w.docs = map[string]float64{}
	}
	for _, s := range e.Supports {
		v := s.Weight
		if v <= 0 {
			v = 1
		}
		w.docs[s.DocID] += v
	}
}

func (w *mapWeigher) weight() float64 {
	if !w.byStrength {
		return float64(len(w.docs))
	}
	docs := make([]string, 0, len(w.docs))
	for d := range w.docs {
		docs = append(docs, d)
	}
	sort.Strings(docs)
	t := 0.0
	for _, d := range docs {
		t += w.docs[d]
	}
	return t
}

// scanWeighted is weighted's pair list made with maps of ids, as first
// written.
func scanWeighted(g store.Graph, byStrength bool) []WeightedEdge {
	ents := map[string]store.Entity{}
	for _, e := range g.Entities {
		ents[e.ID] = e
	}
	type pair struct{ a, b string }
	pairs := map[pair]*mapWeigher{}
	for _, e := range g.Edges {
		a, b := e.Source, e.Target
		if b < a {
			a, b = b, a
		}
		p := pair{a, b}
		if pairs[p] == nil {
			pairs[p] = &mapWeigher{byStrength: byStrength}
		}
		pairs[p].add(e)
	}
	var edges []WeightedEdge
	for p, wt := range pairs {
		edges = append(edges, WeightedEdge{Source: p.a, Target: p.b, Weight: wt.weight()})
	}
	scanOrder(edges, ents)
	return edges
}

// scanSources is sourcesOf as first written: sets of refs, looked up by id.
func scanSources(g store.Graph, members []string) []provenance.SourceRef {
	ents := map[string]store.Entity{}
	for _, e := range g.Entities {
		ents[e.ID] = e
	}
	in := map[string]bool{}
	for _, m := range members {
		in[m] = true
	}
	set := map[provenance.SourceRef]bool{}
	for _, m := range members {
		for _, f := range ents[m].Sources {
			set[provenance.SourceRef{DocID: f.DocID, Version: f.Version}] = true
		}
	}
	for _, e := range g.Edges {
		if in[e.Source] && in[e.Target] {
			for _, s := range e.Supports {
				set[provenance.SourceRef{DocID: s.DocID, Version: s.Version}] = true
			}
		}
	}
	out := make([]provenance.SourceRef, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sortRefs(out)
	return out
}

// randomGraph draws a graph with what the ordering and the sources must
// cope with: entities sharing a name or having none, names sorting unlike
// their ids, edges both ways and several per pair, self loops, edge ends
// that are no stored entity, and fragments and supports repeating a
// document at several versions.
func randomGraph(r *rand.Rand) store.Graph {
	nodes := 2 + r.IntN(40)
	id := func() string { return fmt.Sprintf("t%d:n%02d", r.IntN(3), r.IntN(nodes)) }
	names := []string{"", "", "alpha", "Alpha", "beta", "zeta", "mid", "Ünicode", "a b"}
	refs := func() []store.Fragment {
		var out []store.Fragment
		for range r.IntN(4) {
			out = append(out, store.Fragment{DocID: fmt.Sprintf("d%d", r.IntN(8)), Version: int64(1 + r.IntN(3)),
				Weight: []float64{0, 0.1, 0.2, 0.7, 1, 2}[r.IntN(6)]})
		}
		return out
	}
	var g store.Graph
	seen := map[string]bool{}
	for range r.IntN(nodes + 1) {
		e := store.Entity{ID: id(), Name: names[r.IntN(len(names))], Sources: refs()}
		if !seen[e.ID] {
			seen[e.ID] = true
			g.Entities = append(g.Entities, e)
		}
	}
	for i := range r.IntN(3 * nodes) {
		g.Edges = append(g.Edges, store.Edge{ID: fmt.Sprint(i), Source: id(), Target: id(), Relation: "r", Supports: refs()})
	}
	return g
}

// TestWeightedIsTheScan: weighted's pair list (oriented, weighted and
// ordered by title through node ranks) and the sources of a community
// (through numbered refs and scratch marks) are what the map-based code
// they replaced gives, on random graphs and member sets.
func TestWeightedIsTheScan(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for i := range 3000 {
		g := randomGraph(r)
		for _, by := range []string{"sources", "strength"} {
			w := &Worker{cfg: Config{WeightBy: by}}
			wg := w.weighted(clusterGraph(g))
			want := scanWeighted(g, by == "strength")
			if len(want) == 0 {
				require.Empty(t, wg.edges, "graph %d", i)
			} else {
				require.Equal(t, want, wg.edges, "graph %d, weights by %s", i, by)
			}
			seen, in := make([]bool, len(wg.refs)), make([]bool, len(wg.node))
			for range 5 {
				var members []string
				for _, e := range g.Entities {
					if r.IntN(2) == 0 {
						members = append(members, e.ID)
					}
				}
				for _, e := range g.Edges {
					if r.IntN(4) == 0 {
						members = append(members, e.Target)
					}
				}
				if r.IntN(5) == 0 {
					members = append(members, "nowhere:x")
				}
				got := wg.sourcesOf(members, seen, in)
				require.Equal(t, scanSources(g, members), got, "graph %d, members %v", i, members)
			}
			require.NotContains(t, seen, true, "scratch marks left set")
			require.NotContains(t, in, true, "scratch marks left set")
		}
	}
}
