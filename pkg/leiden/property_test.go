package leiden

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

type graphKind struct {
	name       string
	selfLoops  bool
	zeroFrac   float64
	hugeWeight bool
}

// randomEdges builds a graph of several components (some of them single
// isolated edges), optional self-loops, duplicates and odd weights.
func randomEdges(rnd *rand.Rand, kind graphKind) []Edge {
	var edges []Edge
	comps := 1 + rnd.IntN(4)
	id := 0
	weight := func() float64 {
		if rnd.Float64() < kind.zeroFrac {
			return 0
		}
		if kind.hugeWeight && rnd.IntN(3) == 0 {
			return 1e100 * (1 + rnd.Float64())
		}
		return float64(1+rnd.IntN(5)) * (0.5 + rnd.Float64())
	}
	for c := 0; c < comps; c++ {
		size := 2 + rnd.IntN(40)
		if rnd.IntN(4) == 0 {
			size = 2 // isolated edge
		}
		base := id
		id += size
		p := 0.05 + rnd.Float64()*0.4
		for i := 0; i < size; i++ {
			// a spanning path keeps the component connected
			if i > 0 {
				edges = append(edges, Edge{fmt.Sprint("n", base+rnd.IntN(i)), fmt.Sprint("n", base+i), weight()})
			}
			for j := i + 1; j < size; j++ {
				if rnd.Float64() < p {
					edges = append(edges, Edge{fmt.Sprint("n", base+i), fmt.Sprint("n", base+j), weight()})
				}
			}
		}
	}
	if kind.selfLoops {
		for i := 0; i < id; i++ {
			if rnd.IntN(3) == 0 {
				edges = append(edges, Edge{fmt.Sprint("n", i), fmt.Sprint("n", i), weight()})
			}
		}
		// a node that only has a self-loop
		edges = append(edges, Edge{"lonely", "lonely", 1})
	}
	// duplicates in both directions
	for k := 0; k < len(edges)/10; k++ {
		e := edges[rnd.IntN(len(edges))]
		edges = append(edges, Edge{e.Target, e.Source, e.Weight + 1})
	}
	rnd.Shuffle(len(edges), func(i, j int) { edges[i], edges[j] = edges[j], edges[i] })
	return edges
}

// graspologicQuality recomputes the library's quality from the edge list:
// [Σ intra (both directions) − γ/(2(m+s)) Σ K²] / (2m+s).
func graspologicQuality(edges []Edge, comm map[string]int, res float64) float64 {
	type pair struct{ a, b string }
	seen := map[pair]bool{}
	selfSeen := map[string]bool{}
	var m, s, intra float64
	K := map[int]float64{}
	for _, e := range edges {
		if e.Source == e.Target {
			if !selfSeen[e.Source] {
				selfSeen[e.Source] = true
				s += e.Weight
			}
			continue
		}
		p := pair{e.Source, e.Target}
		if p.b < p.a {
			p.a, p.b = p.b, p.a
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		m += e.Weight
		K[comm[e.Source]] += e.Weight
		K[comm[e.Target]] += e.Weight
		if comm[e.Source] == comm[e.Target] {
			intra += 2 * e.Weight
		}
	}
	g := res / (2 * (m + s))
	q := intra
	for _, k := range K {
		q -= k * k * g
	}
	return q / (2*m + s)
}

func TestPropertiesRandomGraphs(t *testing.T) {
	kinds := []graphKind{
		{name: "plain"},
		{name: "selfloops", selfLoops: true},
		{name: "zeros", zeroFrac: 0.3},
		{name: "allzero", zeroFrac: 1},
		{name: "huge", hugeWeight: true},
		{name: "mixed", selfLoops: true, zeroFrac: 0.2, hugeWeight: true},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(1, uint64(len(kind.name))))
			for trial := 0; trial < 40; trial++ {
				edges := randomEdges(rnd, kind)
				net, err := NewNetwork(edges)
				if err != nil {
					t.Fatal(err)
				}
				opts := DefaultOptions()
				opts.Seed = rnd.Uint64()
				opts.Iterations = 1 + rnd.IntN(3)
				opts.Resolution = []float64{0.5, 1, 2}[rnd.IntN(3)]
				if rnd.IntN(4) == 0 {
					opts.Randomness = 0.1
				}
				if rnd.IntN(4) == 0 {
					opts.StartingCommunities = map[string]int{}
					for i := 0; i < net.NumNodes(); i++ {
						opts.StartingCommunities[net.Label(i)] = rnd.IntN(4)
					}
				}
				checkRun(t, edges, net, opts)
				cpm := opts
				cpm.UseModularity = false
				cpm.Resolution = 0.05
				checkRun(t, edges, net, cpm)
			}
		})
	}
}

func checkRun(t *testing.T, edges []Edge, net *Network, opts Options) {
	t.Helper()
	cl, q, err := Leiden(net, opts)
	if err != nil {
		if opts.UseModularity && errors.Is(err, ErrInvalidResolution) && math.IsInf(net.TotalEdgeWeight()+net.SelfLinkWeight(), 1) {
			return // m overflowed: γ' = 0, as in the library
		}
		t.Fatalf("Leiden: %v", err)
	}
	checkPartition(t, net, cl)
	comm := map[string]int{}
	for i, c := range cl {
		comm[net.Label(i)] = c
	}
	m := net.TotalEdgeWeight()
	if opts.UseModularity && m > 0 && !math.IsInf(m, 0) {
		if want := graspologicQuality(edges, comm, opts.Resolution); !approxEqual(q, want, 1e-9) && !(math.IsInf(q, -1) && math.IsInf(want, -1)) {
			t.Fatalf("quality %v, independent graspologic quality %v", q, want)
		}
		if net.SelfLinkWeight() == 0 {
			mod, err := Modularity(edges, comm, opts.Resolution)
			if err != nil {
				t.Fatal(err)
			}
			if !approxEqual(q, mod, 1e-9) && !(math.IsInf(q, -1) && math.IsInf(mod, -1)) {
				t.Fatalf("quality %v, independent modularity %v", q, mod)
			}
		}
	}
	for _, mcs := range []int{0, 2, 3, 7} {
		rows, err := Hierarchical(net, opts, mcs)
		if err != nil {
			t.Fatalf("Hierarchical(mcs=%d): %v", mcs, err)
		}
		checkHierarchy(t, net, rows)
	}
}

func TestErrors(t *testing.T) {
	net, err := NewNetwork([]Edge{{"a", "b", 1}, {"b", "c", 1}})
	if err != nil {
		t.Fatal(err)
	}
	bad := func(mod func(*Options), want error) {
		t.Helper()
		o := DefaultOptions()
		mod(&o)
		if _, _, err := Leiden(net, o); !errors.Is(err, want) {
			t.Errorf("Leiden: got %v, want %v", err, want)
		}
		if _, err := Hierarchical(net, o, 10); !errors.Is(err, want) {
			t.Errorf("Hierarchical: got %v, want %v", err, want)
		}
	}
	bad(func(o *Options) { o.Randomness = 0 }, ErrInvalidRandomness)
	bad(func(o *Options) { o.Randomness = -1 }, ErrInvalidRandomness)
	bad(func(o *Options) { o.Resolution = 0 }, ErrInvalidResolution)
	bad(func(o *Options) { o.Resolution = -1; o.UseModularity = false }, ErrInvalidResolution)
	bad(func(o *Options) { o.Iterations = -1 }, ErrInvalidIterations)
	bad(func(o *Options) { o.StartingCommunities = map[string]int{"a": -1} }, ErrInvalidCommunity)
	if _, err := Hierarchical(net, DefaultOptions(), -1); !errors.Is(err, ErrInvalidMaxClusterSize) {
		t.Errorf("got %v, want ErrInvalidMaxClusterSize", err)
	}
	empty, err := NewNetwork(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Leiden(empty, DefaultOptions()); !errors.Is(err, ErrEmptyNetwork) {
		t.Errorf("empty: got %v", err)
	}
	for _, w := range []float64{math.NaN(), math.Inf(1), -1} {
		if _, err := NewNetwork([]Edge{{"a", "b", w}}); !errors.Is(err, ErrInvalidWeight) {
			t.Errorf("weight %v: got %v", w, err)
		}
	}
}

func TestNetworkConstruction(t *testing.T) {
	net, err := NewNetwork([]Edge{
		{"b", "a", 2}, {"a", "b", 5}, {"c", "c", 3}, {"c", "c", 4}, {"a", "c", 1}, {"d", "d", 7},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := net.Labels(); fmt.Sprint(got) != "[b a c d]" {
		t.Fatalf("labels %v", got)
	}
	g := net.graph(true)
	// b: [a:2]  a: [b:2 c:1]  c: [a:1]  d: []
	want := "0:[1/2] 1:[0/2 2/1] 2:[1/1] 3:[]"
	got := ""
	for v := 0; v < g.n; v++ {
		if v > 0 {
			got += " "
		}
		got += fmt.Sprintf("%d:[", v)
		for e := g.offs[v]; e < g.offs[v+1]; e++ {
			if e > g.offs[v] {
				got += " "
			}
			got += fmt.Sprintf("%d/%g", g.adj[e], g.ew[e])
		}
		got += "]"
	}
	if got != want {
		t.Fatalf("adjacency %s, want %s", got, want)
	}
	if fmt.Sprint(g.nw) != "[2 3 1 0]" || net.SelfLinkWeight() != 10 || net.TotalEdgeWeight() != 3 {
		t.Fatalf("weights %v self %v m %v", g.nw, net.SelfLinkWeight(), net.TotalEdgeWeight())
	}
}

func TestReadEdges(t *testing.T) {
	edges, err := ReadEdges(stringsReader("a\tb\t1.5\r\n\nb\tc\n"))
	if err != nil || len(edges) != 2 || edges[0].Weight != 1.5 || edges[1].Weight != 1 {
		t.Fatalf("got %v %v", edges, err)
	}
	for _, in := range []string{"a\tb\tx\n", "a b 1\n", "a\tb\t1\nc\n", "a\tb\t-2\n", "a\tb\tNaN\n", "\tb\t1\n"} {
		if _, err := ReadEdges(stringsReader(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
	if _, err := ReadEdges(stringsReader("a\tb\t1\nc\td\tz\n")); err == nil || !containsStr(err.Error(), "line 2") {
		t.Errorf("want line number, got %v", err)
	}
}

func TestDeterminismAndTrials(t *testing.T) {
	// A planted partition of 12 groups: enough structure for several trials
	// to disagree, small enough to run in a moment.
	edges := PlantedPartition(240, 1200, 12, 0.7, 11)
	net, err := NewNetwork(edges)
	if err != nil {
		t.Fatal(err)
	}
	a, qa, err := Leiden(net, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	b, qb, err := Leiden(net, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a) != fmt.Sprint(b) || qa != qb {
		t.Fatal("same seed, different result")
	}
	opts := DefaultOptions()
	opts.Trials = 5
	c, qc, err := Leiden(net, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The first trial is the single run, so the best of five is no worse.
	if qc < qa {
		t.Fatalf("best of 5 trials %v < single run %v", qc, qa)
	}
	checkPartition(t, net, c)
	if m := modularityOf(t, edges, net, c, 1); !approxEqual(m, qc, 1e-12) {
		t.Fatalf("quality %v vs modularity %v", qc, m)
	}
}
