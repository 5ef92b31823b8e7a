package leiden

// HierarchicalCluster is one output row of Hierarchical: node Node belongs
// to Cluster at Level; Parent is the cluster it was split from (-1 at level
// 0); IsFinal tells whether Cluster was not split any further.
type HierarchicalCluster struct {
	Node      string
	NodeIndex int
	Cluster   int
	Level     int
	Parent    int
	IsFinal   bool
}

// Hierarchical is graspologic-native hierarchical_leiden: cluster the whole
// network, then keep re-clustering (on its own subnetwork, with its own m)
// every cluster of at least maxClusterSize nodes until none can be split.
// Cluster ids are unique across levels; rows come in the library's order
// (level 0 by cluster then node id, then each split as it happens, by new
// cluster then subnetwork node id), so a node appears once per level at
// which its cluster was split.
func Hierarchical(net *Network, opts Options, maxClusterSize int) ([]HierarchicalCluster, error) {
	if err := checkOptions(&opts); err != nil {
		return nil, err
	}
	if maxClusterSize < 0 {
		return nil, ErrInvalidMaxClusterSize
	}
	g := net.graph(opts.UseModularity)
	gamma := adjustedResolution(g, opts.Resolution, opts.UseModularity)
	init, err := startingClusters(net, opts.StartingCommunities)
	if err != nil {
		return nil, err
	}
	r := newRNG(opts.Seed)
	ws := &workspace{}
	cl, k, err := ws.run(g, init, opts.Iterations, gamma, opts.Randomness, opts.UseModularity, r)
	if err != nil {
		return nil, err
	}
	h := &hier{net: net}
	h.emitLevel0(cl, k)
	next := k
	noSplit := make([]bool, k)

	// Membership snapshot per level: a queued cluster keeps its members
	// until it is processed, and new ids are always fresh, so building its
	// subnetwork lazily at pop time sees the library's edges.
	var mstart, members []int32
	snapshot := func() {
		mstart = grow(mstart, next+1)
		clear(mstart)
		for _, c := range cl {
			mstart[c+1]++
		}
		for i := 0; i < next; i++ {
			mstart[i+1] += mstart[i]
		}
		members = grow(members, len(cl))
		pos := make([]int32, next)
		copy(pos, mstart[:next])
		for v, c := range cl {
			members[pos[c]] = int32(v)
			pos[c]++
		}
	}
	snapshot()
	var queue []int32
	for c := 0; c < k; c++ {
		if int(mstart[c+1]-mstart[c]) >= maxClusterSize {
			queue = append(queue, int32(c))
		}
	}
	var sb subBuilder
	subWS := &workspace{}
	level := 1
	unitWeights := !opts.UseModularity
	for len(queue) > 0 {
		for qi := 0; qi < len(queue); qi++ {
			parent := queue[qi]
			mem := members[mstart[parent]:mstart[parent+1]]
			sub := sb.build(g, cl, parent, mem, unitWeights)
			split := false
			if sub.n > 0 {
				sgamma := adjustedResolution(sub, opts.Resolution, opts.UseModularity)
				subCl, sk, err := subWS.run(sub, nil, opts.Iterations, sgamma, opts.Randomness, opts.UseModularity, r)
				if err != nil {
					return nil, err
				}
				if sk != 1 {
					split = true
					h.emitSplit(sb.labels, subCl, sk, int(parent), next, level)
					for i, u := range sb.labels {
						cl[u] = int32(next) + subCl[i]
					}
					next += sk
					noSplit = append(noSplit, make([]bool, sk)...)
				}
			}
			if !split {
				noSplit[parent] = true
			}
		}
		// Library quirk: subnetworks from level 2 on are always built with
		// modularity node weights.
		unitWeights = false
		level++
		snapshot()
		queue = queue[:0]
		for c := 0; c < next; c++ {
			size := int(mstart[c+1] - mstart[c])
			if size >= maxClusterSize && size > 1 && !noSplit[c] {
				queue = append(queue, int32(c))
			}
		}
	}
	return h.rows, nil
}

type hier struct {
	net   *Network
	rows  []HierarchicalCluster
	start []int // first row of each cluster id
	end   []int
}

func (h *hier) emitLevel0(cl []int32, k int) {
	start := make([]int32, k+1)
	for _, c := range cl {
		start[c+1]++
	}
	for i := 0; i < k; i++ {
		start[i+1] += start[i]
	}
	order := make([]int32, len(cl))
	pos := append([]int32(nil), start[:k]...)
	for v, c := range cl {
		order[pos[c]] = int32(v)
		pos[c]++
	}
	h.rows = make([]HierarchicalCluster, 0, 2*len(cl))
	for _, v := range order {
		h.rows = append(h.rows, HierarchicalCluster{
			Node: h.net.labels[v], NodeIndex: int(v), Cluster: int(cl[v]), Level: 0, Parent: -1, IsFinal: true,
		})
	}
	for c := 0; c < k; c++ {
		h.start = append(h.start, int(start[c]))
		h.end = append(h.end, int(start[c+1]))
	}
}

// emitSplit appends the rows of one split, sorted by (sub-cluster,
// subnetwork node id), and marks the parent's rows as not final.
func (h *hier) emitSplit(labels []int32, subCl []int32, sk int, parent, offset, level int) {
	cnt := make([]int, sk+1)
	for _, c := range subCl[:len(labels)] {
		cnt[c+1]++
	}
	for i := 0; i < sk; i++ {
		cnt[i+1] += cnt[i]
	}
	base := len(h.rows)
	h.rows = append(h.rows, make([]HierarchicalCluster, len(labels))...)
	pos := append([]int(nil), cnt[:sk]...)
	for i, u := range labels {
		c := int(subCl[i])
		h.rows[base+pos[c]] = HierarchicalCluster{
			Node: h.net.labels[u], NodeIndex: int(u), Cluster: offset + c, Level: level, Parent: parent, IsFinal: true,
		}
		pos[c]++
	}
	for c := 0; c < sk; c++ {
		h.start = append(h.start, base+cnt[c])
		h.end = append(h.end, base+cnt[c+1])
	}
	for i := h.start[parent]; i < h.end[parent]; i++ {
		h.rows[i].IsFinal = false
	}
}
