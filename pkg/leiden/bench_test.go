package leiden

import (
	"sync"
	"testing"
)

const (
	benchNodes = 100_000
	benchEdges = 1_000_000
)

// plantedEdges is a planted-partition graph: 100 groups of 1,000 nodes,
// each edge inside its source's group with probability 0.8.
func plantedEdges() []Edge { return PlantedPartition(benchNodes, benchEdges, 100, 0.8, 42) }

// erEdges is an Erdős–Rényi G(n, m) graph.
func erEdges() []Edge { return ErdosRenyi(benchNodes, benchEdges, 42) }

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
