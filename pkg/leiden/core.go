package leiden

import (
	"math"
	"slices"
)

// grow returns s resized to n, reusing its storage when possible; contents
// are unspecified.
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, n+n/8)
}

// subBuilder extracts the intra-cluster subnetwork of one cluster with the
// library's LabeledNetworkBuilder numbering: nodes in first-seen order of the
// edge stream (members ascending, then their neighbours in adjacency order),
// neighbour lists re-sorted by the new ids. Members without an intra-cluster
// edge do not appear at all, as in the library.
type subBuilder struct {
	subID  []int32 // node of the parent graph -> id in the subnetwork, -1 if absent
	labels []int32 // subnetwork id -> node of the parent graph
	g      graph
	deg    []float64
	pairs  []nbr
}

func (b *subBuilder) build(g *graph, cl []int32, c int32, members []int32, unitWeights bool) *graph {
	if len(b.subID) < g.n {
		// Invariant: every entry is -1 between builds.
		b.subID = make([]int32, g.n)
		for i := range b.subID {
			b.subID[i] = -1
		}
	}
	subID := b.subID
	labels := b.labels[:0]
	entries := 0
	for _, u := range members {
		first := true
		for e := g.offs[u]; e < g.offs[u+1]; e++ {
			v := g.adj[e]
			if cl[v] != c {
				continue
			}
			entries++
			if first {
				first = false
				if subID[u] < 0 {
					subID[u] = int32(len(labels))
					labels = append(labels, u)
				}
			}
			if subID[v] < 0 {
				subID[v] = int32(len(labels))
				labels = append(labels, v)
			}
		}
	}
	k := len(labels)
	sg := &b.g
	sg.n = k
	sg.self = 0
	sg.offs = grow(sg.offs, k+1)
	sg.adj = grow(sg.adj, entries)
	sg.ew = grow(sg.ew, entries)
	sg.nw = grow(sg.nw, k)
	b.deg = grow(b.deg, k)
	pos := int32(0)
	for i, u := range labels {
		sg.offs[i] = pos
		start := pos
		for e := g.offs[u]; e < g.offs[u+1]; e++ {
			v := g.adj[e]
			if cl[v] != c {
				continue
			}
			sg.adj[pos] = subID[v]
			sg.ew[pos] = g.ew[e]
			pos++
		}
		sortStable(sg.adj[start:pos], sg.ew[start:pos], &b.pairs)
		s := 0.0
		for e := start; e < pos; e++ {
			s += sg.ew[e]
		}
		b.deg[i] = s
		if unitWeights {
			sg.nw[i] = g.nw[u]
		} else {
			sg.nw[i] = s
		}
	}
	sg.offs[k] = pos
	for _, u := range labels {
		subID[u] = -1
	}
	b.labels = labels
	return sg
}

// workspace holds every scratch buffer of one Leiden run so that the many
// small runs of the hierarchical mode allocate almost nothing.
type workspace struct {
	// local moving
	cw      []float64
	cnt     []int32
	unused  []int32
	queue   []int32
	stable  []bool
	nbW     []float64
	list    []int32
	compact []int32

	// refinement
	sub      subBuilder
	order    []int32
	subCl    []int32
	rcw      []float64
	rext     []float64
	single   []bool
	ncew     []float64
	recs     []float64
	rlist    []int32
	mstart   []int32
	members  []int32
	parentOf []int32

	// aggregation (ping-pong between two graphs)
	agg   [2]graph
	acc   []float64
	aseen []bool
	alist []int32
}

// compactClusters renumbers cluster ids consecutively in ascending order of
// the old ids (Clustering::remove_empty_clusters) and returns the count.
func (ws *workspace) compactClusters(cl []int32, bound int) int {
	m := grow(ws.compact, bound)
	ws.compact = m
	for i := range m {
		m[i] = -1
	}
	for _, c := range cl {
		m[c] = 0
	}
	k := int32(0)
	for i := range m {
		if m[i] == 0 {
			m[i] = k
			k++
		}
	}
	for i, c := range cl {
		cl[i] = m[c]
	}
	return int(k)
}

// localMove is the library's fast local moving (full_network_clustering).
// cl holds ids < g.n and is updated in place; it returns the cluster count.
func (ws *workspace) localMove(g *graph, cl []int32, k int, gamma float64, r *rng) int {
	n := g.n
	if n <= 1 {
		return k
	}
	cw := grow(ws.cw, n)
	cnt := grow(ws.cnt, n)
	clear(cw)
	clear(cnt)
	ws.cw, ws.cnt = cw, cnt
	nw := g.nw
	for i := 0; i < n; i++ {
		c := cl[i]
		cw[c] += nw[i]
		cnt[c]++
	}
	unused := grow(ws.unused, n)
	ws.unused = unused
	nu := 0
	for i := n - 1; i >= 0; i-- {
		if cnt[i] == 0 {
			unused[nu] = int32(i)
			nu++
		}
	}
	q := grow(ws.queue, n)
	ws.queue = q
	for i := range q {
		q[i] = int32(i)
	}
	r.shuffle(q)
	stable := grow(ws.stable, n)
	clear(stable)
	ws.stable = stable
	// nbW doubles as the "seen" set: NaN marks a cluster not yet listed,
	// which keeps the hot loop at one memory access per neighbour.
	nbW := grow(ws.nbW, n)
	for i := range nbW {
		nbW[i] = math.NaN()
	}
	ws.nbW = nbW
	list := ws.list[:0]

	offs, adj, ew := g.offs, g.adj, g.ew
	head, size := 0, n
	improved := false
	for size > 0 {
		v := q[head]
		head++
		if head == n {
			head = 0
		}
		size--
		stable[v] = true
		cur := cl[v]
		wv := nw[v]
		cw[cur] -= wv
		cnt[cur]--
		if cnt[cur] == 0 {
			unused[nu] = cur
			nu++
		}
		for _, c := range list {
			nbW[c] = math.NaN()
		}
		list = list[:0]
		top := unused[nu-1]
		nbW[top] = 0
		list = append(list, top)
		lo, hi := offs[v], offs[v+1]
		for e := lo; e < hi; e++ {
			c := cl[adj[e]]
			x := nbW[c]
			if x != x {
				x = 0
				list = append(list, c)
			}
			nbW[c] = x + ew[e]
		}
		kcur := nbW[cur]
		if kcur != kcur {
			kcur = 0
		}
		best := cur
		bestQ := kcur - float64(wv*cw[cur])*gamma
		for _, c := range list {
			if qv := nbW[c] - float64(wv*cw[c])*gamma; qv > bestQ {
				best = c
				bestQ = qv
			}
		}
		cw[best] += wv
		cnt[best]++
		if best == unused[nu-1] {
			nu--
		}
		if best != cur {
			improved = true
			cl[v] = best
			for e := lo; e < hi; e++ {
				u := adj[e]
				if cl[u] != best && stable[u] {
					stable[u] = false
					t := head + size
					if t >= n {
						t -= n
					}
					q[t] = u
					size++
				}
			}
		}
	}
	ws.list = list[:0]
	if improved {
		return ws.compactClusters(cl, n)
	}
	return k
}

// approxExp is the library's (1 + x/256)^256 stand-in for exp, copied
// because it decides when the refinement turns greedy (overflow to +Inf).
func approxExp(x float64) float64 {
	if x < -256 {
		return 0
	}
	r := 1 + x/256
	r *= r
	r *= r
	r *= r
	r *= r
	r *= r
	r *= r
	r *= r
	r *= r
	return r
}

// rustBinarySearch reproduces slice::binary_search_by (Rust >= 1.82) on a
// non-decreasing slice, including which index an exact hit returns.
func rustBinarySearch(a []float64, x float64) int {
	size := len(a)
	if size == 0 {
		return 0
	}
	base := 0
	for size > 1 {
		half := size / 2
		mid := base + half
		if !(a[mid] > x) {
			base = mid
		}
		size -= half
	}
	if a[base] < x {
		return base + 1
	}
	return base
}

// refineSub is the library's subnetwork clustering (refinement phase) on one
// cluster's subnetwork; it fills ws.subCl and returns the cluster count.
func (ws *workspace) refineSub(sub *graph, ext0 []float64, gamma, theta float64, r *rng) int {
	n := sub.n
	subCl := grow(ws.subCl, n)
	ws.subCl = subCl
	for i := range subCl {
		subCl[i] = int32(i)
	}
	if n == 1 {
		return 1
	}
	order := grow(ws.order, n)
	ws.order = order
	for i := range order {
		order[i] = int32(i)
	}
	r.shuffle(order)
	cw := grow(ws.rcw, n)
	ext := grow(ws.rext, n)
	single := grow(ws.single, n)
	ncew := grow(ws.ncew, n)
	ws.rcw, ws.rext, ws.single, ws.ncew = cw, ext, single, ncew
	copy(cw, sub.nw[:n])
	copy(ext, ext0[:n])
	clear(ncew)
	W := 0.0
	for i := 0; i < n; i++ {
		single[i] = true
		W += sub.nw[i]
	}
	offs, adj, ew := sub.offs, sub.adj, sub.ew
	list := ws.rlist[:0]
	recs := ws.recs[:0]
	improved := false
	for _, v := range order {
		if !single[v] || !(ext[v] >= float64(cw[v]*(W-cw[v]))*gamma) {
			continue
		}
		for _, c := range list {
			ncew[c] = 0
		}
		list = append(list[:0], v)
		recs = recs[:0]
		cw[v] = 0
		ext[v] = 0
		lo, hi := offs[v], offs[v+1]
		for e := lo; e < hi; e++ {
			c := subCl[adj[e]]
			if ncew[c] == 0 {
				list = append(list, c)
			}
			ncew[c] += ew[e]
		}
		wv := sub.nw[v]
		best := v
		maxQ := 0.0
		total := 0.0
		for _, c := range list {
			K := cw[c]
			if ext[c] >= float64(K*(W-K))*gamma {
				qv := ncew[c] - float64(wv*K)*gamma
				if qv > maxQ {
					best = c
					maxQ = qv
				}
				if qv >= 0 {
					total += approxExp(qv / theta)
				}
			}
			if !math.IsNaN(total) {
				recs = append(recs, total)
			}
			ncew[c] = 0
		}
		chosen := best
		if !math.IsInf(total, 0) && !math.IsNaN(total) {
			x := total * r.genF64()
			loc := rustBinarySearch(recs, x)
			if loc >= len(list) {
				loc = len(list) - 1
			}
			chosen = list[loc]
		}
		cw[chosen] += wv
		for e := lo; e < hi; e++ {
			if subCl[adj[e]] == chosen {
				ext[chosen] -= ew[e]
			} else {
				ext[chosen] += ew[e]
			}
		}
		if chosen != v {
			subCl[v] = chosen
			single[chosen] = false
			improved = true
		}
	}
	ws.rlist = list[:0]
	ws.recs = recs[:0]
	if improved {
		return ws.compactClusters(subCl, n)
	}
	return n
}

// membersByCluster lists nodes per cluster, ascending inside each cluster
// (Clustering::nodes_per_cluster), into ws.mstart / ws.members.
func (ws *workspace) membersByCluster(cl []int32, k int) ([]int32, []int32) {
	start := grow(ws.mstart, k+1)
	clear(start)
	for _, c := range cl {
		start[c+1]++
	}
	for i := 0; i < k; i++ {
		start[i+1] += start[i]
	}
	mem := grow(ws.members, len(cl))
	pos := grow(ws.cnt, k) // cnt is free between phases
	for i := 0; i < k; i++ {
		pos[i] = start[i]
	}
	for v, c := range cl {
		mem[pos[c]] = int32(v)
		pos[c]++
	}
	ws.mstart, ws.members, ws.cnt = start, mem, pos
	return start, mem
}

// refine runs the refinement over every cluster in id order, writing the
// refined cluster of each node into refined. It returns the number of
// refined clusters and the starting partition of the aggregate network
// (parent cluster per refined cluster) in ws.parentOf.
func (ws *workspace) refine(g *graph, cl []int32, k int, refined []int32, useModularity bool, gamma, theta float64, r *rng) int {
	start, mem := ws.membersByCluster(cl, k)
	parentOf := grow(ws.parentOf, g.n)[:0]
	next := int32(0)
	extraParent := int32(k)
	for c := 0; c < k; c++ {
		members := mem[start[c]:start[c+1]]
		if len(members) == 1 {
			refined[members[0]] = next
			next++
			parentOf = append(parentOf, int32(c))
			continue
		}
		sub := ws.sub.build(g, cl, int32(c), members, !useModularity)
		if sub.n > 0 {
			kc := ws.refineSub(sub, ws.sub.deg, gamma, theta, r)
			for i, u := range ws.sub.labels {
				refined[u] = next + ws.subCl[i]
			}
			next += int32(kc)
			for j := 0; j < kc; j++ {
				parentOf = append(parentOf, int32(c))
			}
		}
		if sub.n < len(members) {
			// Members without an intra-cluster edge: own refined cluster and
			// own starting community, so they cannot glue the rest together.
			ws.markOrphans(members, refined, &next, &parentOf, &extraParent)
		}
	}
	ws.parentOf = parentOf
	return int(next)
}

// markOrphans handles members of a cluster that the subnetwork left out.
func (ws *workspace) markOrphans(members, refined []int32, next *int32, parentOf *[]int32, extra *int32) {
	in := ws.sub.subID
	for i, u := range ws.sub.labels {
		in[u] = int32(i)
	}
	for _, u := range members {
		if in[u] >= 0 {
			continue
		}
		refined[u] = *next
		*next++
		*parentOf = append(*parentOf, *extra)
		*extra++
	}
	for _, u := range ws.sub.labels {
		in[u] = -1
	}
}

// aggregate builds the network of refined clusters into dst: weights of
// edges between refined clusters are summed (per pair in the library's
// node-then-neighbour order), edges inside a refined cluster vanish.
func (ws *workspace) aggregate(g *graph, refined []int32, R int, dst *graph) *graph {
	start, mem := ws.membersByCluster(refined, R)
	dst.n = R
	dst.self = 0
	dst.offs = grow(dst.offs, R+1)
	dst.nw = grow(dst.nw, R)
	// The parent's entry count bounds the aggregate's: no regrowth.
	dst.adj = grow(dst.adj, int(g.offs[g.n]))[:0]
	dst.ew = grow(dst.ew, int(g.offs[g.n]))[:0]
	acc := grow(ws.acc, R)
	seen := grow(ws.aseen, R)
	clear(seen)
	ws.acc, ws.aseen = acc, seen
	list := ws.alist[:0]
	for c := 0; c < R; c++ {
		dst.offs[c] = int32(len(dst.adj))
		w := 0.0
		list = list[:0]
		for _, u := range mem[start[c]:start[c+1]] {
			w += g.nw[u]
			for e := g.offs[u]; e < g.offs[u+1]; e++ {
				d := refined[g.adj[e]]
				if d == int32(c) {
					continue
				}
				if !seen[d] {
					seen[d] = true
					acc[d] = 0
					list = append(list, d)
				}
				acc[d] += g.ew[e]
			}
		}
		dst.nw[c] = w
		if len(list) > 64 && len(list) > R/16 {
			// Dense enough that a scan beats sorting.
			for d := int32(0); d < int32(R); d++ {
				if seen[d] {
					dst.adj = append(dst.adj, d)
					dst.ew = append(dst.ew, acc[d])
					seen[d] = false
				}
			}
			continue
		}
		slices.Sort(list)
		for _, d := range list {
			dst.adj = append(dst.adj, d)
			dst.ew = append(dst.ew, acc[d])
			seen[d] = false
		}
	}
	dst.offs[R] = int32(len(dst.adj))
	ws.alist = list[:0]
	return dst
}

// maxStalled bounds consecutive levels at which refinement merges nothing;
// with positive weights a single retry already succeeds almost surely.
const maxStalled = 32

// improve is one iteration of improve_clustering: local moving, then (while
// it leaves fewer clusters than nodes) refinement, aggregation and the same
// on the aggregate, with the result mapped back into cl. The library
// recurses; a loop with a stack of refinement maps is equivalent.
func (ws *workspace) improve(g0 *graph, cl0 []int32, k0 int, useModularity bool, gamma, theta float64, r *rng) int {
	var maps [][]int32
	g, cl, k := g0, cl0, k0
	stalled := 0
	for level := 0; ; level++ {
		k = ws.localMove(g, cl, k, gamma, r)
		if k >= g.n {
			break
		}
		refined := make([]int32, g.n)
		R := ws.refine(g, cl, k, refined, useModularity, gamma, theta, r)
		if R == g.n {
			// Refinement merged nothing, so the next level is this one again.
			// The library just recurses, which normally ends after a few
			// random retries; in degenerate inputs (zero weights, γ' = +Inf)
			// it never ends. After maxStalled retries in a row, stop with
			// every node of this level alone: the refined (connected)
			// clusters are then the result.
			stalled++
			if stalled >= maxStalled {
				for i := range cl {
					cl[i] = int32(i)
				}
				k = g.n
				break
			}
		} else {
			stalled = 0
		}
		maps = append(maps, refined)
		dst := &ws.agg[level&1]
		g = ws.aggregate(g, refined, R, dst)
		next := make([]int32, R)
		copy(next, ws.parentOf[:R])
		cl = next
		bound := 0
		for _, p := range next {
			bound = max(bound, int(p)+1)
		}
		// Orphan-only clusters can leave gaps; compacting is a no-op otherwise.
		k = ws.compactClusters(next, bound)
	}
	for i := len(maps) - 1; i >= 0; i-- {
		refined := maps[i]
		var out []int32
		if i == 0 {
			out = cl0
		} else {
			out = make([]int32, len(refined))
		}
		for v, rc := range refined {
			out[v] = cl[rc]
		}
		cl = out
	}
	return k
}

// run is the library's leiden(): checks, sanity pass on a starting
// partition, then `iterations` improvement rounds. cl may hold a starting
// partition (compact ids) or nil for singletons; it returns the partition
// and its cluster count.
func (ws *workspace) run(g *graph, cl []int32, iterations int, gamma, theta float64, useModularity bool, r *rng) ([]int32, int, error) {
	if !(theta > 0) {
		return nil, 0, ErrInvalidRandomness
	}
	if !(gamma > 0) {
		return nil, 0, ErrInvalidResolution
	}
	if g.n == 0 {
		return nil, 0, ErrEmptyNetwork
	}
	var k int
	if cl == nil {
		cl = make([]int32, g.n)
		for i := range cl {
			cl[i] = int32(i)
		}
		k = g.n
	} else {
		k = ws.sanitize(g, cl)
	}
	for it := 0; it < iterations; it++ {
		k = ws.improve(g, cl, k, useModularity, gamma, theta, r)
	}
	return cl, k, nil
}

// sanitize is guarantee_clustering_sanity: a node with no neighbour in its
// (non-singleton) community starts alone. Unlike the library (HashMap
// order, possible gaps) it is deterministic and compacts the result.
func (ws *workspace) sanitize(g *graph, cl []int32) int {
	k := 0
	for _, c := range cl {
		if int(c) >= k {
			k = int(c) + 1
		}
	}
	start, mem := ws.membersByCluster(cl, k)
	next := int32(k)
	for c := 0; c < k; c++ {
		members := mem[start[c]:start[c+1]]
		if len(members) < 2 {
			continue
		}
		for _, u := range members {
			linked := false
			for e := g.offs[u]; e < g.offs[u+1]; e++ {
				if cl[g.adj[e]] == int32(c) {
					linked = true
					break
				}
			}
			if !linked {
				cl[u] = next
				next++
			}
		}
	}
	return ws.compactClusters(cl, int(next))
}

// adjustedResolution is γ' of the library: γ / (2(m+s)) for modularity.
func adjustedResolution(g *graph, resolution float64, useModularity bool) float64 {
	if useModularity {
		return resolution / (2 * (g.totalEdgeWeight() + g.self))
	}
	return resolution
}

// quality is graspologic-native's own quality value, summed in its order.
func quality(g *graph, cl []int32, k int, resolution float64, useModularity bool) float64 {
	gamma := adjustedResolution(g, resolution, useModularity)
	cw := make([]float64, k)
	q := 0.0
	for v := 0; v < g.n; v++ {
		c := cl[v]
		cw[c] += g.nw[v]
		for e := g.offs[v]; e < g.offs[v+1]; e++ {
			if cl[g.adj[e]] == c {
				q += g.ew[e]
			}
		}
	}
	for _, w := range cw {
		q -= w * w * gamma
	}
	return q / (2*g.totalEdgeWeight() + g.self)
}
