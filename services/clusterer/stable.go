package clusterer

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/kgstream/kgstream/pkg/store"
)

// Incremental re-clustering.
//
// Hierarchical Leiden from scratch is not stable under small changes: one
// edit can move communities far from it, and since community ids are
// member-set hashes, every moved community is a report to rewrite. Between
// full runs (Config.FullEvery) a run therefore starts from the previous
// partition and frees only
//   - the endpoints of the entity pairs whose weight changed since the last
//     stored run (added, removed or reweighted; an entity gone from the
//     graph frees its neighbours this way), and
//   - entities that were in no previous community.
//
// Freed entities start alone and move, one at a time in id order, to the
// neighbouring community with the best modularity gain (Louvain's local
// move, resolution 1) until none moves; every other entity keeps its
// level-0 community. Communities left disconnected are split into their
// components. Below level 0 the same is done one level at a time (see
// subdivide): a community whose member set is unchanged keeps its previous
// sub-hierarchy (same member sets, same ids); a changed one of at least
// MaxClusterSize members starts from the previous sub-communities and
// frees only what the edit touched, as level 0 does; only one that had no
// sub-communities, or whose local moves leave it whole, is split by the
// Partitioner on its own subgraph, as hierarchical Leiden splits large
// clusters. So the cost and the changes of a run follow what changed, not
// the size of the graph. The weights are kept in memory only: after a
// restart the first run is a full one.

// pairKey is an unordered entity pair (a < b).
type pairKey struct{ a, b string }

func keyOf(x, y string) pairKey {
	if y < x {
		x, y = y, x
	}
	return pairKey{x, y}
}

// pairWeights indexes the weights of the partitioner's edges.
func pairWeights(edges []WeightedEdge) map[pairKey]float64 {
	out := make(map[pairKey]float64, len(edges))
	for _, e := range edges {
		out[keyOf(e.Source, e.Target)] = e.Weight
	}
	return out
}

type neighbour struct {
	node   string
	weight float64
}

// stableRows partitions edges starting from prev, the communities of the
// last stored run (as computed), whose pair weights were last.
func (w *Worker) stableRows(ctx context.Context, edges []WeightedEdge, prev []store.Community, last map[pairKey]float64) ([]Row, error) {
	now := pairWeights(edges)
	free := map[string]bool{}
	for p, wt := range now {
		if old, ok := last[p]; !ok || old != wt {
			free[p.a], free[p.b] = true, true
		}
	}
	for p := range last {
		if _, ok := now[p]; !ok {
			free[p.a], free[p.b] = true, true
		}
	}

	// Previous level-0 communities, in id order, are the starting labels.
	var level0 []store.Community
	prevByID := map[string]store.Community{}
	for _, c := range prev {
		prevByID[c.ID] = c
		if c.Level == 0 {
			level0 = append(level0, c)
		}
	}
	sort.Slice(level0, func(i, j int) bool { return level0[i].ID < level0[j].ID })
	start := make([][]string, len(level0))
	for i, c := range level0 {
		start[i] = c.Members
	}
	groups, err := localMoves(ctx, edges, start, free)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, 0, len(groups))
	for id, g := range groups {
		for _, n := range g {
			rows = append(rows, Row{Node: n, Cluster: id, Level: 0, Parent: -1})
		}
	}
	next := len(groups)
	for id, g := range groups {
		sub, err := w.subdivide(ctx, edges, g, 0, id, level0, prevByID, free, &next)
		if err != nil {
			return nil, err
		}
		rows = append(rows, sub...)
	}
	return rows, nil
}

// subdivide returns the rows below the community members (cluster idx at
// level); peers are the previous run's candidates at that level (at
// level 0 all its communities; below, the previous sub-communities of the
// communities the parent overlapped). Hierarchical Leiden splits
// every community of at least MaxClusterSize members; so does this,
// incrementally:
//   - a member set equal to a previous one keeps its sub-hierarchy (same
//     member sets, same ids);
//   - a changed one starts from the previous children of the peers it
//     overlaps, restricted to its members, and frees the entities in none
//     of them and those of free (the edit's); local moves as at level 0,
//     then the same one level down;
//   - one whose overlapped peers had no children (it grew past the size),
//     or whose local moves leave it in one piece, is split from scratch by
//     the Partitioner.
func (w *Worker) subdivide(ctx context.Context, edges []WeightedEdge, members []string, level, idx int,
	peers []store.Community, prevByID map[string]store.Community, free map[string]bool, next *int) ([]Row, error) {
	if len(members) < w.cfg.MaxClusterSize {
		return nil, nil
	}
	in := make(map[string]bool, len(members))
	for _, m := range members {
		in[m] = true
	}
	var children []store.Community
	for _, pc := range peers {
		if slices.Equal(pc.Members, members) {
			var rows []Row
			var walk func(c store.Community, idx int)
			walk = func(c store.Community, idx int) {
				for _, cid := range c.Children {
					ch, ok := prevByID[cid]
					if !ok {
						continue
					}
					ci := *next
					*next++
					for _, m := range ch.Members {
						rows = append(rows, Row{Node: m, Cluster: ci, Level: ch.Level, Parent: idx})
					}
					walk(ch, ci)
				}
			}
			walk(pc, idx)
			return rows, nil
		}
	}
	for _, pc := range peers {
		if !slices.ContainsFunc(pc.Members, func(m string) bool { return in[m] }) {
			continue
		}
		for _, cid := range pc.Children {
			if ch, ok := prevByID[cid]; ok {
				children = append(children, ch)
			}
		}
	}
	var subEdges []WeightedEdge
	for _, e := range edges {
		if in[e.Source] && in[e.Target] {
			subEdges = append(subEdges, e)
		}
	}
	if len(subEdges) == 0 {
		return nil, nil
	}
	if len(children) == 0 {
		return w.split(ctx, subEdges, level, idx, next)
	}
	sort.Slice(children, func(i, j int) bool { return children[i].ID < children[j].ID })
	start := make([][]string, len(children))
	for i, c := range children {
		for _, m := range c.Members {
			if in[m] {
				start[i] = append(start[i], m)
			}
		}
	}
	groups, err := localMoves(ctx, subEdges, start, free)
	if err != nil {
		return nil, err
	}
	if len(groups) <= 1 {
		// The previous split no longer holds: ask the Partitioner.
		return w.split(ctx, subEdges, level, idx, next)
	}
	var rows []Row
	ids := make([]int, len(groups))
	for i, g := range groups {
		ids[i] = *next
		*next++
		for _, n := range g {
			rows = append(rows, Row{Node: n, Cluster: ids[i], Level: level + 1, Parent: idx})
		}
	}
	for i, g := range groups {
		sub, err := w.subdivide(ctx, subEdges, g, level+1, ids[i], children, prevByID, free, next)
		if err != nil {
			return nil, err
		}
		rows = append(rows, sub...)
	}
	return rows, nil
}

// localMoves partitions the graph of edges starting from the communities
// start (members outside the graph ignored): the entities of free, those
// in no start community start alone and move, one at
// a time in id order, to the neighbouring community with the best
// modularity gain (Louvain's local move, resolution 1) until none moves.
// The connected components of each community are the result, each sorted,
// in the order of their smallest member.
func localMoves(ctx context.Context, edges []WeightedEdge, start [][]string, free map[string]bool) ([][]string, error) {
	nbrs := map[string][]neighbour{}
	k := map[string]float64{}
	m2 := 0.0
	for _, e := range edges {
		nbrs[e.Source] = append(nbrs[e.Source], neighbour{e.Target, e.Weight})
		k[e.Source] += e.Weight
		k[e.Target] += e.Weight
		m2 += 2 * e.Weight
		if e.Target != e.Source {
			nbrs[e.Target] = append(nbrs[e.Target], neighbour{e.Source, e.Weight})
		}
	}
	label := map[string]int{}
	for i, ms := range start {
		for _, m := range ms {
			if _, ok := nbrs[m]; ok {
				label[m] = i
			}
		}
	}
	nodes := make([]string, 0, len(nbrs))
	for n := range nbrs {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	next := len(start)
	var freed []string
	for _, n := range nodes {
		if _, ok := label[n]; !ok || free[n] {
			label[n] = next
			next++
			freed = append(freed, n)
		}
	}
	tot := map[int]float64{}
	for _, n := range nodes {
		tot[label[n]] += k[n]
	}

	for pass := 0; pass < 100; pass++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		moved := false
		for _, n := range freed {
			cur := label[n]
			tot[cur] -= k[n]
			toward := map[int]float64{}
			for _, nb := range nbrs[n] {
				if nb.node != n {
					toward[label[nb.node]] += nb.weight
				}
			}
			cands := make([]int, 0, len(toward))
			for l := range toward {
				cands = append(cands, l)
			}
			sort.Ints(cands)
			best, bestGain := cur, toward[cur]-k[n]*tot[cur]/m2
			for _, l := range cands {
				if g := toward[l] - k[n]*tot[l]/m2; g > bestGain+1e-12 {
					best, bestGain = l, g
				}
			}
			if bestGain < 0 {
				best = next // alone is better than anywhere
				next++
			}
			label[n] = best
			tot[best] += k[n]
			if best != cur {
				moved = true
			}
		}
		if !moved {
			break
		}
	}

	cluster := map[string]int{}
	var groups [][]string
	for _, n := range nodes {
		if _, done := cluster[n]; done {
			continue
		}
		id := len(groups)
		group := []string{n}
		cluster[n] = id
		for i := 0; i < len(group); i++ {
			for _, nb := range nbrs[group[i]] {
				if _, done := cluster[nb.node]; !done && label[nb.node] == label[n] {
					cluster[nb.node] = id
					group = append(group, nb.node)
				}
			}
		}
		sort.Strings(group)
		groups = append(groups, group)
	}
	return groups, nil
}

// split partitions subEdges, the subgraph of a community (cluster idx at
// level), with the Partitioner and returns its rows below level. A
// partition that keeps the subgraph in one cluster at its top level adds
// no level.
func (w *Worker) split(ctx context.Context, subEdges []WeightedEdge, level, idx int, next *int) ([]Row, error) {
	subRows, err := w.cfg.Partitioner(ctx, subEdges)
	if err != nil {
		return nil, fmt.Errorf("splitting a community of level %d: %w", level, err)
	}
	top := map[int]bool{}
	for _, r := range subRows {
		if r.Level == 0 {
			top[r.Cluster] = true
		}
	}
	drop := len(top) <= 1
	type key struct{ level, cluster int }
	remap := map[key]int{}
	for _, r := range subRows {
		if drop && r.Level == 0 {
			continue
		}
		if _, ok := remap[key{r.Level, r.Cluster}]; !ok {
			remap[key{r.Level, r.Cluster}] = *next
			*next++
		}
	}
	var out []Row
	for _, r := range subRows {
		if drop && r.Level == 0 {
			continue
		}
		lv, parent := level+r.Level+1, idx
		if drop {
			lv = level + r.Level
		}
		if r.Level > 0 && !(drop && r.Level == 1) {
			p, ok := remap[key{r.Level - 1, r.Parent}]
			if !ok {
				continue
			}
			parent = p
		}
		out = append(out, Row{Node: r.Node, Cluster: remap[key{r.Level, r.Cluster}], Level: lv, Parent: parent})
	}
	return out, nil
}
