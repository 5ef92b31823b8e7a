package query

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
)

// TestRegViewWithIsTheListing: a view brought up to date with the states
// changed since (new documents among them, before, between and after the
// ones it holds, and changed ones) is the view of the whole listing.
func TestRegViewWithIsTheListing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	byDoc := func(a, b provenance.SourceState) int { return strings.Compare(a.DocID, b.DocID) }
	for round := range 300 {
		all := map[string]provenance.SourceState{}
		for range rng.IntN(20) {
			id := fmt.Sprintf("d%02d", rng.IntN(40))
			all[id] = provenance.SourceState{DocID: id, Version: 1}
		}
		list := func() []provenance.SourceState {
			out := []provenance.SourceState{}
			for _, st := range all {
				out = append(out, st)
			}
			slices.SortFunc(out, byDoc)
			return out
		}
		old := newRegView(1, list())
		var changed []provenance.SourceState
		for range rng.IntN(10) {
			id := fmt.Sprintf("d%02d", rng.IntN(40))
			st := provenance.SourceState{DocID: id, Version: all[id].Version + 1, Deleted: rng.IntN(3) == 0}
			all[id] = st
			changed = slices.DeleteFunc(changed, func(c provenance.SourceState) bool { return c.DocID == id })
			changed = append(changed, st)
		}
		slices.SortFunc(changed, byDoc)
		got := old.with(2, changed)
		want := newRegView(2, list())
		require.Equal(t, want.states, got.states, "round %d", round)
		require.Equal(t, want.byID, got.byID, "round %d", round)
		require.Equal(t, uint64(2), got.gen)
	}
}
