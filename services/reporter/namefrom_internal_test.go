package reporter

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/store"
)

// TestNameFromEqualsTheScan: the name an edge's far end gets, from the
// index of a hub's fragments as from the scan of a small entity's, is the
// one the scan of every fragment in order finds: that of the first
// fragment naming it from a document supporting the edge. Fragments come
// in any order, a document may have several, names may be empty.
func TestNameFromEqualsTheScan(t *testing.T) {
	scan := func(e store.Entity, supports []store.Fragment) (string, bool) {
		docs := map[string]bool{}
		for _, s := range supports {
			docs[s.DocID] = true
		}
		for _, f := range e.Sources {
			if docs[f.DocID] && f.Name != "" {
				return f.Name, true
			}
		}
		return "", false
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 400 {
		n := rng.IntN(3 * namerScan)
		docs := 1 + rng.IntN(2*n+1)
		e := store.Entity{ID: "component:hub", Type: "component"}
		for i := range n {
			f := store.Fragment{DocID: fmt.Sprintf("d%03d", rng.IntN(docs))}
			if rng.IntN(3) > 0 {
				f.Name = fmt.Sprintf("hub %d", i)
			}
			e.Sources = append(e.Sources, f)
		}
		ix := newIndex(store.Graph{Entities: []store.Entity{e}})
		for range 8 {
			var supports []store.Fragment
			for range rng.IntN(4) {
				supports = append(supports, store.Fragment{DocID: fmt.Sprintf("d%03d", rng.IntN(docs+2))})
			}
			want, wantOK := scan(e, supports)
			got, ok := ix.nameFrom(e.ID, supports)
			require.Equal(t, wantOK, ok, "round %d", round)
			require.Equal(t, want, got, "round %d", round)
		}
	}
	_, ok := newIndex(store.Graph{}).nameFrom("component:gone", []store.Fragment{{DocID: "d000"}})
	require.False(t, ok)
}
