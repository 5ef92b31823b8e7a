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
//     stored run (added, removed or reweighted),
//   - entities that were in no previous community, and
//   - every member of a previous level-0 community that lost a member (an
//     entity gone from the graph).
//
// Freed entities start alone and move, one at a time in id order, to the
// neighbouring community with the best modularity gain (Louvain's local
// move, resolution 1) until none moves; every other entity keeps its
// level-0 community. Communities left disconnected are split into their
// components. Below level 0, a community whose member set is unchanged
// keeps its previous sub-hierarchy (same member sets, same ids); a changed
// one of at least MaxClusterSize members is split again by the
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
	for _, c := range prev {
		if c.Level == 0 {
			level0 = append(level0, c)
		}
	}
	sort.Slice(level0, func(i, j int) bool { return level0[i].ID < level0[j].ID })
	label := map[string]int{}
	for i, c := range level0 {
		lost := false
		for _, m := range c.Members {
			if _, ok := nbrs[m]; !ok {
				lost = true
			}
		}
		for _, m := range c.Members {
			if _, ok := nbrs[m]; !ok {
				continue
			}
			if lost {
				free[m] = true
			} else {
				label[m] = i
			}
		}
	}
	nodes := make([]string, 0, len(nbrs))
	for n := range nbrs {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	next := len(level0)
	var freed []string
	for _, n := range nodes {
		if _, ok := label[n]; !ok {
			free[n] = true
		}
		if free[n] {
			label[n] = next
			next++
			freed = append(freed, n)
		}
	}
	tot := map[int]float64{}
	for _, n := range nodes {
		tot[label[n]] += k[n]
	}

	// Local moves of the freed entities only.
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

	// Connected components of each label are the level-0 clusters, in the
	// order of their smallest member.
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
	rows := make([]Row, 0, len(nodes))
	for id, g := range groups {
		for _, n := range g {
			rows = append(rows, Row{Node: n, Cluster: id, Level: 0, Parent: -1})
		}
	}

	// Below level 0: unchanged member sets keep their sub-hierarchy,
	// changed large ones are split again.
	prevByHash := map[string]store.Community{}
	prevByID := map[string]store.Community{}
	for _, c := range prev {
		prevByID[c.ID] = c
		if c.Level == 0 {
			prevByHash[c.MemberHash] = c
		}
	}
	nextCluster := len(groups)
	for id, g := range groups {
		if len(g) < w.cfg.MaxClusterSize {
			continue
		}
		if pc, ok := prevByHash[MemberHash(g)]; ok && slices.Equal(pc.Members, g) {
			var walk func(c store.Community, idx int)
			walk = func(c store.Community, idx int) {
				for _, cid := range c.Children {
					ch, ok := prevByID[cid]
					if !ok {
						continue
					}
					ci := nextCluster
					nextCluster++
					for _, m := range ch.Members {
						rows = append(rows, Row{Node: m, Cluster: ci, Level: ch.Level, Parent: idx})
					}
					walk(ch, ci)
				}
			}
			walk(pc, id)
			continue
		}
		sub, err := w.split(ctx, edges, g, id, &nextCluster)
		if err != nil {
			return nil, err
		}
		rows = append(rows, sub...)
	}
	return rows, nil
}

// split partitions the subgraph of members (cluster idx at level 0) with
// the Partitioner and returns its rows one level down. A partition that
// keeps the subgraph in one cluster at its top level adds no level.
func (w *Worker) split(ctx context.Context, edges []WeightedEdge, members []string, idx int, next *int) ([]Row, error) {
	in := make(map[string]bool, len(members))
	for _, m := range members {
		in[m] = true
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
	subRows, err := w.cfg.Partitioner(ctx, subEdges)
	if err != nil {
		return nil, fmt.Errorf("splitting a community of %d: %w", len(members), err)
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
		level, parent := r.Level+1, idx
		if drop {
			level = r.Level
		}
		if r.Level > 0 && !(drop && r.Level == 1) {
			p, ok := remap[key{r.Level - 1, r.Parent}]
			if !ok {
				continue
			}
			parent = p
		}
		out = append(out, Row{Node: r.Node, Cluster: remap[key{r.Level, r.Cluster}], Level: level, Parent: parent})
	}
	return out, nil
}
