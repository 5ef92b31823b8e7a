package leiden

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
)

const (
	benchNodes = 100_000
	benchEdges = 1_000_000
)

// plantedEdges is a planted-partition graph: 100 groups of 1,000 nodes,
// each edge inside its source's group with probability 0.8.
func plantedEdges() []Edge {
	rnd := rand.New(rand.NewPCG(42, 1))
	const groups = 100
	size := benchNodes / groups
	return genEdges(rnd, func() (int, int) {
		u := rnd.IntN(benchNodes)
		if rnd.Float64() < 0.8 {
			return u, (u/size)*size + rnd.IntN(size)
		}
		return u, rnd.IntN(benchNodes)
	})
}

// erEdges is an Erdős–Rényi G(n, m) graph.
func erEdges() []Edge {
	rnd := rand.New(rand.NewPCG(42, 2))
	return genEdges(rnd, func() (int, int) { return rnd.IntN(benchNodes), rnd.IntN(benchNodes) })
}

func genEdges(rnd *rand.Rand, pick func() (int, int)) []Edge {
	labels := make([]string, benchNodes)
	for i := range labels {
		labels[i] = "n" + strconv.Itoa(i)
	}
	seen := make(map[uint64]struct{}, benchEdges)
	edges := make([]Edge, 0, benchEdges)
	for len(edges) < benchEdges {
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
	// Put edges in random order so that node ids are not the generator's.
	rnd.Shuffle(len(edges), func(i, j int) { edges[i], edges[j] = edges[j], edges[i] })
	return edges
}

var benchNets = map[string]func() []Edge{"planted": plantedEdges, "er": erEdges}
var benchCache sync.Map

func benchNetwork(b *testing.B, name string) *Network {
	if v, ok := benchCache.Load(name); ok {
		return v.(*Network)
	}
	net, err := NewNetwork(benchNets[name]())
	if err != nil {
		b.Fatal(err)
	}
	benchCache.Store(name, net)
	return net
}

func BenchmarkLeiden(b *testing.B) {
	for _, name := range []string{"planted", "er"} {
		b.Run(name, func(b *testing.B) {
			net := benchNetwork(b, name)
			b.ResetTimer()
			var q float64
			var k int
			for i := 0; i < b.N; i++ {
				cl, qq, err := Leiden(net, DefaultOptions())
				if err != nil {
					b.Fatal(err)
				}
				q, k = qq, countClusters(cl)
			}
			b.ReportMetric(q, "modularity")
			b.ReportMetric(float64(k), "clusters")
		})
	}
}

func BenchmarkHierarchical(b *testing.B) {
	for _, name := range []string{"planted", "er"} {
		b.Run(name, func(b *testing.B) {
			net := benchNetwork(b, name)
			b.ResetTimer()
			var rows []HierarchicalCluster
			for i := 0; i < b.N; i++ {
				var err error
				rows, err = Hierarchical(net, DefaultOptions(), 10)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			// Modularity of the level-0 partition, which is the flat run.
			cl := make([]int, net.NumNodes())
			levels := 0
			clusters := map[int]bool{}
			for _, r := range rows {
				if r.Level == 0 {
					cl[r.NodeIndex] = r.Cluster
				}
				levels = max(levels, r.Level+1)
				clusters[r.Cluster] = true
			}
			q, err := Quality(net, cl, 1, true)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(q, "modularity")
			b.ReportMetric(float64(levels), "levels")
			b.ReportMetric(float64(len(clusters)), "clusters")
		})
	}
}

func BenchmarkNewNetwork(b *testing.B) {
	edges := plantedEdges()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := NewNetwork(edges); err != nil {
			b.Fatal(err)
		}
	}
}
