package embedded

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

// stored is an item as the index holds it, with its vector.
type stored struct {
	item vector.Item
	vec  []float32
}

// dump is every item of the index, by tenant, kind and id.
func dump(t *testing.T, ix *Index) map[string]stored {
	t.Helper()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := map[string]stored{}
	for tn, ti := range ix.tenants {
		for kind, ki := range ti.kinds {
			for i, e := range ki.entries {
				out[tn+"/"+string(kind)+"/"+e.item.ID] = stored{e.full(), ki.vec(i)}
			}
		}
	}
	return out
}

// randomItem is item id of kind in variant v of four: the text and vector
// of v%2, metadata for v == 3, sources (documents, versions, ACLs) drawn
// from id and v; so a variant drawn twice is the same item, and variants 0
// and 2 differ in their sources only.
func randomItem(kind vector.Kind, id string, v int) vector.Item {
	rng := rand.New(rand.NewPCG(uint64(len(id))<<8|uint64(id[len(id)-1]), uint64(v)))
	acls := []provenance.ACL{provenance.PublicACL(), {Groups: []string{"sre"}}, {Principals: []string{"ann"}, Groups: []string{"db", "sre"}}}
	it := vector.Item{ID: id, Kind: kind, Text: fmt.Sprintf("%s text %d", id, v%2), Vector: []float32{1, float32(v % 2), float32(len(id)), 0.5}}
	if v == 3 {
		it.Metadata = map[string]string{"name": id}
	}
	docs := []string{"d0", "d1", "d2", "d3", "d4", "d5"}
	n := 1
	if kind != vector.KindTextUnit {
		n = 1 + rng.IntN(4)
	}
	first := rng.IntN(2)
	for j := range n {
		d := docs[(first+j)%len(docs)]
		s := vector.Source{SourceRef: provenance.SourceRef{DocID: d, Version: int64(1 + rng.IntN(2))}, ACL: acls[rng.IntN(len(acls))]}
		if kind == vector.KindTextUnit {
			s.TextUnit = "u" + id
		}
		it.Sources = append(it.Sources, s)
	}
	return it
}

// TestReplaceDocItemsEqualsDeleteThenUpsert: ReplaceDocItems leaves the
// index as DeleteByDoc of each document then Upsert do, on random batches
// where many items are written again unchanged, others change text,
// vector, metadata, a version or an ACL, and some go; so does the file,
// reopened.
func TestReplaceDocItemsEqualsDeleteThenUpsert(t *testing.T) {
	dir := t.TempDir()
	open := func(name string) *Index {
		ix, err := Open(filepath.Join(dir, name), Options{NoSync: true})
		require.NoError(t, err)
		return ix
	}
	want, got := open("want.db"), open("got.db")
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := vector.Kinds()
	for round := range 200 {
		var docs []vector.DocKinds
		for _, d := range []string{"d0", "d1", "d2", "d3", "d4", "d5"} {
			if rng.IntN(3) == 0 {
				dk := vector.DocKinds{DocID: d}
				if rng.IntN(3) > 0 {
					dk.Kinds = []vector.Kind{vector.KindTextUnit, vector.KindReport}
				}
				docs = append(docs, dk)
			}
		}
		var items []vector.Item
		for i := range 12 {
			if rng.IntN(2) == 0 {
				kind := kinds[i%len(kinds)]
				items = append(items, randomItem(kind, fmt.Sprintf("%s-%d", kind, i), rng.IntN(4)))
			}
		}
		for _, d := range docs {
			require.NoError(t, want.DeleteByDoc(ctx, "acme", d.DocID, d.Kinds...))
		}
		if len(items) > 0 {
			require.NoError(t, want.Upsert(ctx, "acme", items))
		}
		require.NoError(t, got.ReplaceDocItems(ctx, "acme", docs, items))
		require.Equal(t, dump(t, want), dump(t, got), "round %d", round)
	}
	require.NotEmpty(t, dump(t, got))
	require.NoError(t, want.Close())
	require.NoError(t, got.Close())
	want, got = open("want.db"), open("got.db")
	defer want.Close()
	defer got.Close()
	require.Equal(t, dump(t, want), dump(t, got), "reopened")
}

// TestReplaceDocItemsLeavesUnchangedItems: re-indexing documents whose
// items are unchanged writes nothing to the file; one changed item is
// the only one written.
func TestReplaceDocItemsLeavesUnchangedItems(t *testing.T) {
	ctx := t.Context()
	ix, err := Open(filepath.Join(t.TempDir(), "v.db"), Options{NoSync: true})
	require.NoError(t, err)
	defer ix.Close()
	var items []vector.Item
	var docs []vector.DocKinds
	var all []vector.Source
	for i := range 50 {
		d := fmt.Sprintf("d%02d", i)
		docs = append(docs, vector.DocKinds{DocID: d, Kinds: []vector.Kind{vector.KindTextUnit, vector.KindReport}})
		src := vector.Source{SourceRef: provenance.SourceRef{DocID: d, Version: 1}, ACL: provenance.ACL{Groups: []string{"sre"}}}
		all = append(all, src)
		src.TextUnit = "u0"
		items = append(items, vector.Item{ID: d + "#u0", Kind: vector.KindTextUnit, Text: "unit of " + d, Vector: []float32{1, float32(i)}, Sources: []vector.Source{src}})
	}
	// A hub community's report, built on every document.
	items = append(items, vector.Item{ID: "r-hub", Kind: vector.KindReport, Text: "hub", Vector: []float32{0, 1}, Sources: all,
		Metadata: map[string]string{"level": "0"}})
	require.NoError(t, ix.ReplaceDocItems(ctx, "acme", docs, items))
	before := dump(t, ix)
	writes := func() int64 { s := ix.db.Stats(); return s.TxStats.GetWrite() }

	w := writes()
	require.NoError(t, ix.ReplaceDocItems(ctx, "acme", docs, slices.Clone(items)))
	require.Equal(t, w, writes(), "pages written re-indexing unchanged items")
	require.Equal(t, before, dump(t, ix))

	changed := slices.Clone(items)
	changed[7].Text = "unit of d07, edited"
	w = writes()
	// d07's text unit and the report built on it, which stays as it is.
	require.NoError(t, ix.ReplaceDocItems(ctx, "acme", docs[7:8], []vector.Item{changed[7], changed[len(changed)-1]}))
	require.Greater(t, writes(), w)
	after := dump(t, ix)
	require.Equal(t, "unit of d07, edited", after["acme/text_unit/d07#u0"].item.Text)
	delete(after, "acme/text_unit/d07#u0")
	delete(before, "acme/text_unit/d07#u0")
	require.Equal(t, before, after, "the other items")
}
