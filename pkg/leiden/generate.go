package leiden

import (
	"math/rand/v2"
	"strconv"
)

// PlantedPartition returns a deterministic planted-partition graph: groups
// of nodes/groups nodes, m distinct undirected edges (no self-loops), each
// inside its source's group with probability pIn, weight 1, in random
// order. The benchmarks and the comparison with other implementations use
// it so that everyone clusters the same input.
func PlantedPartition(nodes, m, groups int, pIn float64, seed uint64) []Edge {
	rnd := rand.New(rand.NewPCG(seed, 1))
	size := nodes / groups
	return genEdges(rnd, nodes, m, func() (int, int) {
		u := rnd.IntN(nodes)
		if rnd.Float64() < pIn {
			return u, (u/size)*size + rnd.IntN(size)
		}
		return u, rnd.IntN(nodes)
	})
}

// ErdosRenyi returns a deterministic Erdős–Rényi G(n, m) graph, weight 1,
// in random order.
func ErdosRenyi(nodes, m int, seed uint64) []Edge {
	rnd := rand.New(rand.NewPCG(seed, 2))
	return genEdges(rnd, nodes, m, func() (int, int) { return rnd.IntN(nodes), rnd.IntN(nodes) })
}

func genEdges(rnd *rand.Rand, nodes, m int, pick func() (int, int)) []Edge {
	labels := make([]string, nodes)
	for i := range labels {
		labels[i] = "n" + strconv.Itoa(i)
	}
	seen := make(map[uint64]struct{}, m)
	edges := make([]Edge, 0, m)
	for len(edges) < m {
		u, v := pick()
		if u == v {
			continue
		}
		if u > v {
			u, v = v, u
		}
		key := uint64(u)<<32 | uint64(v)
		if _, dup := seen[key]; dup {
			continue
		}
		seen[key] = struct{}{}
		edges = append(edges, Edge{labels[u], labels[v], 1})
	}
	// Random order, so that node ids are not the generator's.
	rnd.Shuffle(len(edges), func(i, j int) { edges[i], edges[j] = edges[j], edges[i] })
	return edges
}
