package leiden

import (
	"fmt"
)

// Modularity computes Newman modularity with resolution γ,
// Q = Σ_c [ L_c/m − γ (K_c/2m)² ], straight from the edge list and without
// any of the optimiser's code, so tests can use it as an oracle. Pairs are
// deduplicated like NewNetwork (first weight wins); self-loops are ignored
// (they are not part of the degrees the optimiser uses either — see
// Quality for graspologic-native's own value, which does count them in
// the normaliser). Every node of a non-self-loop edge needs a community.
func Modularity(edges []Edge, communities map[string]int, resolution float64) (float64, error) {
	type pair struct{ a, b string }
	seen := make(map[pair]struct{}, len(edges))
	deg := make(map[int]float64)
	var m, in float64
	inByC := make(map[int]float64)
	for _, e := range edges {
		if e.Source == e.Target {
			continue
		}
		p := pair{e.Source, e.Target}
		if p.b < p.a {
			p.a, p.b = p.b, p.a
		}
		if _, dup := seen[p]; dup {
			continue
		}
		seen[p] = struct{}{}
		cs, ok1 := communities[e.Source]
		ct, ok2 := communities[e.Target]
		if !ok1 || !ok2 {
			return 0, fmt.Errorf("leiden: modularity: edge (%q, %q) has a node without community", e.Source, e.Target)
		}
		m += e.Weight
		deg[cs] += e.Weight
		deg[ct] += e.Weight
		if cs == ct {
			inByC[cs] += e.Weight
		}
	}
	if m == 0 {
		return 0, ErrEmptyNetwork
	}
	q := 0.0
	for c, k := range deg {
		in = inByC[c]
		x := k / (2 * m)
		q += in/m - resolution*x*x
	}
	return q, nil
}

// Quality returns graspologic-native's quality value of a partition
// (clusters indexed by node id): [Σ intra weight (both directions, no
// self-loops) − γ' Σ_c K_c²] / (2m + s) with γ' = γ/(2(m+s)) for
// modularity, or with γ' = γ and unit node weights for CPM. It equals
// Modularity on graphs without self-loops.
func Quality(net *Network, clusters []int, resolution float64, useModularity bool) (float64, error) {
	if len(clusters) != net.NumNodes() {
		return 0, ErrClusterCount
	}
	cl := make([]int32, len(clusters))
	uniq := map[int]int32{}
	for i, c := range clusters {
		id, ok := uniq[c]
		if !ok {
			id = int32(len(uniq))
			uniq[c] = id
		}
		cl[i] = id
	}
	return quality(net.graph(useModularity), cl, len(uniq), resolution, useModularity), nil
}
