package leiden

import (
	"fmt"
	"math"
	"slices"
)

// Options configures a Leiden run. The zero value is not useful (zero
// resolution and randomness are rejected, as in the library); start from
// DefaultOptions.
type Options struct {
	// Resolution γ; higher gives more, smaller communities.
	Resolution float64
	// Randomness θ of the refinement; must be > 0. Small values make the
	// refinement nearly greedy.
	Randomness float64
	// Iterations is the number of improve rounds; 0 returns the starting
	// partition (after its sanity pass) unchanged, as in the library.
	Iterations int
	// Seed of the generator; the same seed gives the same partition.
	Seed uint64
	// UseModularity selects modularity (true) or CPM (false) as objective.
	UseModularity bool
	// StartingCommunities optionally seeds the partition (label ->
	// community id >= 0). Labels not in the network are ignored; nodes not
	// listed start alone.
	StartingCommunities map[string]int
	// Trials repeats the flat run with the same generator and keeps the best
	// quality; values < 1 mean 1. Hierarchical ignores it, like the library.
	Trials int
}

// DefaultOptions returns exactly the call Microsoft GraphRAG makes: seed
// 0xDEADBEEF, resolution 1, randomness 0.001, one iteration, modularity.
func DefaultOptions() Options {
	return Options{
		Resolution:    1.0,
		Randomness:    0.001,
		Iterations:    1,
		Seed:          0xDEADBEEF,
		UseModularity: true,
		Trials:        1,
	}
}

// startingClusters maps StartingCommunities to compact ids the way
// communities_to_clustering does: unlisted nodes get fresh ids after the
// largest given one, then ids are compacted in ascending order.
func startingClusters(net *Network, comm map[string]int) ([]int32, error) {
	if comm == nil {
		return nil, nil
	}
	n := net.NumNodes()
	maxC := -1
	for label, c := range comm {
		if c < 0 {
			return nil, fmt.Errorf("%w: %q -> %d", ErrInvalidCommunity, label, c)
		}
		if c > maxC {
			maxC = c
		}
	}
	ids := make([]int, n)
	for i := range ids {
		ids[i] = maxC + 1 + i
	}
	for label, c := range comm {
		if v, ok := net.index[label]; ok {
			ids[v] = c
		}
	}
	// Compact without a dense table sized by the (user-chosen) max id.
	uniq := make(map[int]int32, n)
	keys := make([]int, 0, n)
	for _, c := range ids {
		if _, ok := uniq[c]; !ok {
			uniq[c] = 0
			keys = append(keys, c)
		}
	}
	slices.Sort(keys)
	for i, c := range keys {
		uniq[c] = int32(i)
	}
	cl := make([]int32, n)
	for v, c := range ids {
		cl[v] = uniq[c]
	}
	return cl, nil
}

func checkOptions(opts *Options) error {
	if opts.Iterations < 0 {
		return ErrInvalidIterations
	}
	if !(opts.Randomness > 0) {
		return ErrInvalidRandomness
	}
	return nil
}

// Leiden clusters the network once (graspologic-native leiden()). It
// returns the community of every node, indexed by node id, and the
// library's quality value (for modularity without self-loops this is the
// standard modularity).
func Leiden(net *Network, opts Options) ([]int, float64, error) {
	if err := checkOptions(&opts); err != nil {
		return nil, 0, err
	}
	g := net.graph(opts.UseModularity)
	gamma := adjustedResolution(g, opts.Resolution, opts.UseModularity)
	init, err := startingClusters(net, opts.StartingCommunities)
	if err != nil {
		return nil, 0, err
	}
	r := newRNG(opts.Seed)
	trials := max(opts.Trials, 1)
	ws := &workspace{}
	var best []int32
	bestQ := -math.MaxFloat64 // the library starts from f64::MIN
	for t := 0; t < trials; t++ {
		var start []int32
		if init != nil {
			start = append([]int32(nil), init...)
		}
		cl, k, err := ws.run(g, start, opts.Iterations, gamma, opts.Randomness, opts.UseModularity, r)
		if err != nil {
			return nil, 0, err
		}
		q := quality(g, cl, k, opts.Resolution, opts.UseModularity)
		if best == nil || q > bestQ {
			best, bestQ = cl, q
		}
	}
	out := make([]int, len(best))
	for i, c := range best {
		out[i] = int(c)
	}
	return out, bestQ, nil
}
