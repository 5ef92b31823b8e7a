package leiden

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func approxEqual(a, b, tol float64) bool {
	if a == b {
		return true
	}
	d := math.Abs(a - b)
	return d <= tol || d <= tol*math.Max(math.Abs(a), math.Abs(b))
}

func countClusters(cl []int) int {
	s := map[int]bool{}
	for _, c := range cl {
		s[c] = true
	}
	return len(s)
}

func modularityOf(t testing.TB, edges []Edge, net *Network, cl []int, res float64) float64 {
	t.Helper()
	comm := make(map[string]int, len(cl))
	for i, c := range cl {
		comm[net.Label(i)] = c
	}
	q, err := Modularity(edges, comm, res)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// checkPartition asserts the flat invariants: one cluster per node, ids
// compact, every community connected through the network's edges.
func checkPartition(t testing.TB, net *Network, cl []int) {
	t.Helper()
	if len(cl) != net.NumNodes() {
		t.Fatalf("%d clusters for %d nodes", len(cl), net.NumNodes())
	}
	k := countClusters(cl)
	for _, c := range cl {
		if c < 0 || c >= k {
			t.Fatalf("cluster id %d outside [0,%d)", c, k)
		}
	}
	nodes := make([]int, net.NumNodes())
	for i := range nodes {
		nodes[i] = i
	}
	if err := connected(net, nodes, func(v int) int { return cl[v] }); err != nil {
		t.Fatal(err)
	}
}

// connected checks that, restricted to nodes, each group is connected.
func connected(net *Network, nodes []int, group func(int) int) error {
	in := make(map[int]bool, len(nodes))
	for _, v := range nodes {
		in[v] = true
	}
	visited := make(map[int]bool, len(nodes))
	root := map[int]int{}
	for _, v := range nodes {
		if visited[v] {
			continue
		}
		g := group(v)
		if r, ok := root[g]; ok {
			return fmt.Errorf("group %d is disconnected: nodes %q and %q", g, net.Label(r), net.Label(v))
		}
		root[g] = v
		stack := []int{v}
		visited[v] = true
		for len(stack) > 0 {
			u := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for e := net.offs[u]; e < net.offs[u+1]; e++ {
				w := int(net.adj[e])
				if in[w] && !visited[w] && group(w) == g {
					visited[w] = true
					stack = append(stack, w)
				}
			}
		}
	}
	return nil
}

// checkHierarchy asserts the hierarchical invariants: level 0 covers every
// node once; a node appears at most once per level; a row at level L>0
// names as parent the node's cluster at level L-1, which is then not final;
// clusters are connected; final flags match "was never split".
func checkHierarchy(t testing.TB, net *Network, rows []HierarchicalCluster) {
	t.Helper()
	type key struct{ node, level int }
	at := map[key]int{}
	levelOfCluster := map[int]int{}
	split := map[int]bool{}
	final := map[int]bool{}
	for _, r := range rows {
		k := key{r.NodeIndex, r.Level}
		if _, dup := at[k]; dup {
			t.Fatalf("node %q twice at level %d", r.Node, r.Level)
		}
		if net.Label(r.NodeIndex) != r.Node {
			t.Fatalf("row label %q does not match node %d", r.Node, r.NodeIndex)
		}
		at[k] = r.Cluster
		if l, ok := levelOfCluster[r.Cluster]; ok && l != r.Level {
			t.Fatalf("cluster %d at levels %d and %d", r.Cluster, l, r.Level)
		}
		levelOfCluster[r.Cluster] = r.Level
		if f, ok := final[r.Cluster]; ok && f != r.IsFinal {
			t.Fatalf("cluster %d has mixed final flags", r.Cluster)
		}
		final[r.Cluster] = r.IsFinal
		if r.Level == 0 {
			if r.Parent != -1 {
				t.Fatalf("level-0 row with parent %d", r.Parent)
			}
			continue
		}
		p, ok := at[key{r.NodeIndex, r.Level - 1}]
		if !ok || p != r.Parent {
			t.Fatalf("node %q level %d: parent %d, but its level-%d cluster is %d (present %v)", r.Node, r.Level, r.Parent, r.Level-1, p, ok)
		}
		split[r.Parent] = true
	}
	for i := 0; i < net.NumNodes(); i++ {
		if _, ok := at[key{i, 0}]; !ok {
			t.Fatalf("node %q has no level-0 cluster", net.Label(i))
		}
	}
	for c, f := range final {
		if f == split[c] {
			t.Fatalf("cluster %d: final=%v but split=%v", c, f, split[c])
		}
	}
	byLevel := map[int][]int{}
	for k := range at {
		byLevel[k.level] = append(byLevel[k.level], k.node)
	}
	for l, nodes := range byLevel {
		if err := connected(net, nodes, func(v int) int { return at[key{v, l}] }); err != nil {
			t.Fatalf("level %d: %v", l, err)
		}
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

func containsStr(s, sub string) bool { return strings.Contains(s, sub) }
