package clusterer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// joinedSources is what withMembers makes a grown community's sources: the
// set of its sources, the joiners' fragments and the supports of their
// edges into the grown member set, sorted by sortRefs.
func joinedSources(c store.Community, members []string, joined []*cand) []provenance.SourceRef {
	set := map[provenance.SourceRef]bool{}
	for _, s := range c.Sources {
		set[s] = true
	}
	for _, j := range joined {
		for _, f := range j.ent.Sources {
			set[provenance.SourceRef{DocID: f.DocID, Version: f.Version}] = true
		}
		for _, ed := range j.edges {
			other := ed.Target
			if other == j.ent.ID {
				other = ed.Source
			}
			if slices.Contains(members, other) {
				for _, s := range ed.Supports {
					set[provenance.SourceRef{DocID: s.DocID, Version: s.Version}] = true
				}
			}
		}
	}
	out := make([]provenance.SourceRef, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sortRefs(out)
	return out
}

// randomGrowth is a community of random sources (sorted and distinct, as
// computed, unless shuffled) and random joiners with fragments and edges
// into it and elsewhere.
func randomGrowth(rng *rand.Rand, shuffled bool) (store.Community, []*cand) {
	ref := func() provenance.SourceRef {
		return provenance.SourceRef{DocID: fmt.Sprintf("d%03d", rng.IntN(200)), Version: int64(1 + rng.IntN(3))}
	}
	c := store.Community{ID: "c0-x", MemberHash: "h"}
	for i := range 1 + rng.IntN(30) {
		c.Members = append(c.Members, fmt.Sprintf("e%02d", i))
	}
	if shuffled {
		rng.Shuffle(len(c.Members), func(i, j int) { c.Members[i], c.Members[j] = c.Members[j], c.Members[i] })
	}
	for range rng.IntN(300) {
		c.Sources = append(c.Sources, ref())
	}
	sortRefs(c.Sources)
	c.Sources = slices.Compact(c.Sources)
	if shuffled {
		rng.Shuffle(len(c.Sources), func(i, j int) { c.Sources[i], c.Sources[j] = c.Sources[j], c.Sources[i] })
		c.Sources = append(c.Sources, c.Sources[:len(c.Sources)/4]...)
	}
	var joined []*cand
	for k := range 1 + rng.IntN(4) {
		j := &cand{ent: store.Entity{ID: fmt.Sprintf("%c%d", "aeu"[rng.IntN(3)], k)}}
		for range rng.IntN(4) {
			r := ref()
			j.ent.Sources = append(j.ent.Sources, store.Fragment{DocID: r.DocID, Version: r.Version})
		}
		for range rng.IntN(4) {
			e := store.Edge{Source: j.ent.ID, Target: fmt.Sprintf("e%02d", rng.IntN(40))}
			if rng.IntN(2) == 0 {
				e.Source, e.Target = e.Target, e.Source
			}
			for range 1 + rng.IntN(3) {
				r := ref()
				e.Supports = append(e.Supports, store.Fragment{DocID: r.DocID, Version: r.Version})
			}
			j.edges = append(j.edges, e)
		}
		joined = append(joined, j)
	}
	return c, joined
}

// TestWithMembersMergesSources: merging the joiners and their sources into
// the community's sorted members and sources gives what sorting them all
// (the sources as a set) gives; so it does when the community's are not
// sorted.
func TestWithMembersMergesSources(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		c, joined := randomGrowth(rng, i%5 == 4)
		before := cloneCommunity(c)
		got := withMembers(c, joined)
		require.Equal(t, before, c, "the community grown is left as it was")
		want := joinedSources(c, got.Members, joined)
		require.Equal(t, want, got.Sources, "case %d", i)
		require.Equal(t, c.ID, got.ID)
		members := slices.Clone(c.Members)
		for _, j := range joined {
			members = append(members, j.ent.ID)
		}
		slices.Sort(members)
		require.Equal(t, members, got.Members, "case %d", i)
	}
}

// BenchmarkWithMembers grows a community of 5000 sources by three new
// entities.
func BenchmarkWithMembers(b *testing.B) {
	c := store.Community{ID: "c0-hub", MemberHash: "h"}
	for i := range 5000 {
		c.Members = append(c.Members, fmt.Sprintf("incident:d%05d", i))
		c.Sources = append(c.Sources, provenance.SourceRef{DocID: fmt.Sprintf("d%05d", i), Version: 1})
	}
	var joined []*cand
	for k := range 3 {
		d := fmt.Sprintf("n%d", k)
		joined = append(joined, &cand{ent: store.Entity{ID: "incident:" + d, Sources: []store.Fragment{{DocID: d, Version: 1}}},
			edges: []store.Edge{{Source: "incident:" + d, Target: "incident:d00042", Supports: []store.Fragment{{DocID: d, Version: 1}}}}})
	}
	b.ReportAllocs()
	for b.Loop() {
		withMembers(c, joined)
	}
}
