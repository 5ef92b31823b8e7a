package leiden

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Edge is one undirected weighted edge between two labelled nodes.
type Edge struct {
	Source string
	Target string
	Weight float64
}

// Sentinel errors returned by this package; callers compare with errors.Is.
var (
	// ErrEmptyNetwork is returned when there is nothing to cluster.
	ErrEmptyNetwork = errors.New("leiden: empty network")
	// ErrInvalidResolution is returned when the effective resolution is not
	// strictly positive (for modularity, resolution / (2·(m+s)) — so a graph
	// whose total weight overflows also lands here).
	ErrInvalidResolution = errors.New("leiden: resolution must be > 0")
	// ErrInvalidRandomness is returned when randomness is not strictly positive.
	ErrInvalidRandomness = errors.New("leiden: randomness must be > 0")
	// ErrInvalidIterations is returned for a negative iteration count.
	ErrInvalidIterations = errors.New("leiden: iterations must be >= 0")
	// ErrInvalidMaxClusterSize is returned for a negative maximum cluster size.
	ErrInvalidMaxClusterSize = errors.New("leiden: max cluster size must be >= 0")
	// ErrInvalidWeight is returned for a NaN, infinite or negative edge weight,
	// which would make the quality function meaningless.
	ErrInvalidWeight = errors.New("leiden: edge weight must be finite and >= 0")
	// ErrInvalidCommunity is returned for a negative starting community id.
	ErrInvalidCommunity = errors.New("leiden: starting community ids must be >= 0")
	// ErrTooLarge is returned when the adjacency does not fit 32-bit offsets.
	ErrTooLarge = errors.New("leiden: network too large")
	// ErrClusterCount is returned when a cluster slice does not match the network.
	ErrClusterCount = errors.New("leiden: cluster slice length does not match node count")
)

// graph is the compact adjacency (CSR) every phase works on. Neighbour lists
// are sorted by node id and never contain the node itself.
type graph struct {
	n    int
	offs []int32
	adj  []int32
	ew   []float64
	nw   []float64
	self float64
}

// totalEdgeWeight is m, summed in adjacency order like the library so that
// the adjusted resolution is bit-identical.
func (g *graph) totalEdgeWeight() float64 {
	s := 0.0
	for _, w := range g.ew[:g.offs[g.n]] {
		s += w
	}
	return s / 2
}

// Network is an undirected weighted graph over string labels, built with
// graspologic-native's rules; it is immutable and safe for concurrent use.
type Network struct {
	labels []string
	index  map[string]int32
	offs   []int32
	adj    []int32
	ew     []float64
	deg    []float64
	self   float64
	ones   []float64
}

// NewNetwork builds a network from edges. Node ids are assigned in
// first-seen order (source, then target, edge by edge); each edge is stored
// in both directions; for a repeated pair the first weight wins; a self-loop
// only contributes a self-link weight (first one wins) and is neither a
// neighbour nor part of the node weight.
func NewNetwork(edges []Edge) (*Network, error) {
	index := make(map[string]int32, len(edges)/4+16)
	var labels []string
	id := func(s string) int32 {
		if v, ok := index[s]; ok {
			return v
		}
		v := int32(len(labels))
		index[s] = v
		labels = append(labels, s)
		return v
	}
	src := make([]int32, len(edges))
	dst := make([]int32, len(edges))
	for i, e := range edges {
		if math.IsNaN(e.Weight) || math.IsInf(e.Weight, 0) || e.Weight < 0 {
			return nil, fmt.Errorf("%w: edge %d (%q, %q) has weight %v", ErrInvalidWeight, i, e.Source, e.Target, e.Weight)
		}
		src[i] = id(e.Source)
		dst[i] = id(e.Target)
	}
	n := len(labels)
	if 2*len(edges) > math.MaxInt32-1 {
		return nil, ErrTooLarge
	}
	selfW := make([]float64, n)
	selfSet := make([]bool, n)
	cnt := make([]int32, n+1)
	for i := range edges {
		s, t := src[i], dst[i]
		if s == t {
			continue
		}
		cnt[s+1]++
		cnt[t+1]++
	}
	for i := 0; i < n; i++ {
		cnt[i+1] += cnt[i]
	}
	total := cnt[n]
	adj := make([]int32, total)
	ew := make([]float64, total)
	pos := make([]int32, n)
	copy(pos, cnt[:n])
	for i, e := range edges {
		s, t := src[i], dst[i]
		if s == t {
			if !selfSet[s] {
				selfSet[s] = true
				selfW[s] = e.Weight
			}
			continue
		}
		adj[pos[s]] = t
		ew[pos[s]] = e.Weight
		pos[s]++
		adj[pos[t]] = s
		ew[pos[t]] = e.Weight
		pos[t]++
	}
	// Sort each list stably by neighbour (so the first occurrence of a pair
	// stays first) and drop repeats in place.
	offs := make([]int32, n+1)
	var scratch []nbr
	out := int32(0)
	for v := 0; v < n; v++ {
		lo, hi := cnt[v], cnt[v+1]
		sortStable(adj[lo:hi], ew[lo:hi], &scratch)
		offs[v] = out
		for e := lo; e < hi; e++ {
			if e > lo && adj[e] == adj[e-1] {
				continue
			}
			adj[out] = adj[e]
			ew[out] = ew[e]
			out++
		}
	}
	offs[n] = out
	adj = slices.Clip(adj[:out])
	ew = slices.Clip(ew[:out])
	deg := make([]float64, n)
	ones := make([]float64, n)
	for v := 0; v < n; v++ {
		s := 0.0
		for e := offs[v]; e < offs[v+1]; e++ {
			s += ew[e]
		}
		deg[v] = s
		ones[v] = 1
	}
	self := 0.0
	for v := 0; v < n; v++ {
		self += selfW[v]
	}
	return &Network{labels: labels, index: index, offs: offs, adj: adj, ew: ew, deg: deg, self: self, ones: ones}, nil
}

type nbr struct {
	id int32
	w  float64
}

// sortStable sorts a neighbour list by id keeping equal ids in input order;
// lists are short, so insertion sort covers the common case.
func sortStable(ids []int32, ws []float64, scratch *[]nbr) {
	n := len(ids)
	if n < 2 {
		return
	}
	sorted := true
	for i := 1; i < n; i++ {
		if ids[i] < ids[i-1] {
			sorted = false
			break
		}
	}
	if sorted {
		return
	}
	if n <= 32 {
		for i := 1; i < n; i++ {
			id, w := ids[i], ws[i]
			j := i - 1
			for j >= 0 && ids[j] > id {
				ids[j+1], ws[j+1] = ids[j], ws[j]
				j--
			}
			ids[j+1], ws[j+1] = id, w
		}
		return
	}
	s := (*scratch)[:0]
	for i := 0; i < n; i++ {
		s = append(s, nbr{ids[i], ws[i]})
	}
	slices.SortStableFunc(s, func(a, b nbr) int { return int(a.id) - int(b.id) })
	for i, x := range s {
		ids[i], ws[i] = x.id, x.w
	}
	*scratch = s
}

// NumNodes returns the number of distinct node labels.
func (net *Network) NumNodes() int { return len(net.labels) }

// NumEdges returns the number of distinct undirected non-self-loop edges.
func (net *Network) NumEdges() int { return len(net.adj) / 2 }

// Label returns the label of node i (ids are first-seen order).
func (net *Network) Label(i int) string { return net.labels[i] }

// Labels returns all labels in node-id order; the slice must not be modified.
func (net *Network) Labels() []string { return net.labels }

// Index returns the node id of a label.
func (net *Network) Index(label string) (int, bool) {
	v, ok := net.index[label]
	return int(v), ok
}

// TotalEdgeWeight returns m, the sum of distinct non-self-loop edge weights.
func (net *Network) TotalEdgeWeight() float64 { return net.graph(true).totalEdgeWeight() }

// SelfLinkWeight returns s, the sum of self-loop weights.
func (net *Network) SelfLinkWeight() float64 { return net.self }

// graph views the network with modularity (degree) or CPM (unit) node
// weights; the arrays are shared, never copied.
func (net *Network) graph(useModularity bool) *graph {
	nw := net.deg
	if !useModularity {
		nw = net.ones
	}
	return &graph{n: len(net.labels), offs: net.offs, adj: net.adj, ew: net.ew, nw: nw, self: net.self}
}
