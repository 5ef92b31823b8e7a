package embedded

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

// everything is what a filter admitting every ACL of these tests reads.
var everything = vector.Filter{Principal: "root", Groups: []string{"eng", "secret"}}

func all(t *testing.T, ix *Index, kind vector.Kind) []vector.Hit {
	t.Helper()
	hits, err := ix.Search(t.Context(), "acme", kind, []float32{1, 0.5, 0.25}, vector.MaxK, everything)
	require.NoError(t, err)
	return hits
}

// TestPatchesSurviveReopen: sources patched, revoked and removed one row
// at a time read back, after a reopen, in the order and with the ACLs the
// index answered with before.
func TestPatchesSurviveReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "v.db")
	ix, err := Open(path, Options{NoSync: true})
	require.NoError(t, err)
	hub := vector.Item{ID: "service:kafka", Kind: vector.KindEntity, Vector: []float32{1, 1, 1}, Text: "Kafka", Metadata: map[string]string{"name": "Kafka"}}
	for i := range 30 {
		hub.Sources = append(hub.Sources, vector.Source{SourceRef: provenance.SourceRef{DocID: fmt.Sprintf("d%02d", i), Version: 1}, ACL: provenance.PublicACL()})
	}
	other := vector.Item{ID: "x", Kind: vector.KindEntity, Vector: []float32{1, 0, 0}, Text: "x", Sources: hub.Sources[:2]}
	require.NoError(t, ix.Upsert(ctx, "acme", []vector.Item{hub, other}))
	p := vector.SourcePatch{Kind: vector.KindEntity, ID: hub.ID, Text: hub.Text, Metadata: hub.Metadata,
		Put:    []vector.Source{{SourceRef: provenance.SourceRef{DocID: "d05", Version: 2}, ACL: provenance.ACL{Groups: []string{"eng"}}}, {SourceRef: provenance.SourceRef{DocID: "new", Version: 1}, ACL: provenance.PublicACL()}},
		Remove: []string{"d29", "d00"}}
	applied, err := ix.PatchSources(ctx, "acme", []vector.SourcePatch{p})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied)
	p = vector.SourcePatch{Kind: vector.KindEntity, ID: hub.ID, Text: hub.Text, Metadata: hub.Metadata,
		Put: []vector.Source{{SourceRef: provenance.SourceRef{DocID: "d29", Version: 3}, ACL: provenance.PublicACL()}}}
	_, err = ix.PatchSources(ctx, "acme", []vector.SourcePatch{p})
	require.NoError(t, err)
	require.NoError(t, ix.UpdateACL(ctx, "acme", "d01", provenance.ACL{Groups: []string{"secret"}}))
	require.NoError(t, ix.DeleteByDoc(ctx, "acme", "d02", vector.KindTextUnit))
	want := all(t, ix, vector.KindEntity)
	require.Len(t, want, 2)
	docs := want[0].DocIDs()
	if want[0].ID != hub.ID {
		docs = want[1].DocIDs()
	}
	require.Equal(t, "d01", docs[0])
	require.Equal(t, []string{"new", "d29"}, docs[len(docs)-2:], "added after the others, in the order added")
	require.NoError(t, ix.Close())

	re, err := Open(path, Options{NoSync: true})
	require.NoError(t, err)
	defer re.Close()
	require.Equal(t, want, all(t, re, vector.KindEntity))
	// The ordinals survived too: a source added now comes last.
	p = vector.SourcePatch{Kind: vector.KindEntity, ID: hub.ID, Text: hub.Text, Metadata: hub.Metadata,
		Put: []vector.Source{{SourceRef: provenance.SourceRef{DocID: "last", Version: 1}, ACL: provenance.PublicACL()}}}
	_, err = re.PatchSources(ctx, "acme", []vector.SourcePatch{p})
	require.NoError(t, err)
	for _, h := range all(t, re, vector.KindEntity) {
		if h.ID == hub.ID {
			require.Equal(t, append(slices.Clone(docs), "last"), h.DocIDs())
		}
	}
}

// TestOpenConvertsLayout1: a file whose records hold their sources (layout
// 1) opens with every item as it was, and is layout 2 from then on.
func TestOpenConvertsLayout1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	items := []vector.Item{
		{ID: "r", Kind: vector.KindReport, Vector: []float32{0, 1, 0}, Text: "r", Metadata: map[string]string{"level": "0"}, Sources: []vector.Source{
			{SourceRef: provenance.SourceRef{DocID: "z", Version: 2}, ACL: provenance.ACL{Groups: []string{"eng"}}},
			{SourceRef: provenance.SourceRef{DocID: "a", Version: 1}, ACL: provenance.PublicACL()},
		}},
		{ID: "a#u0", Kind: vector.KindTextUnit, Vector: []float32{1, 0, 0}, Text: "u", Sources: []vector.Source{
			{SourceRef: provenance.SourceRef{DocID: "a", Version: 1, TextUnit: "u0"}, ACL: provenance.PublicACL()}}},
	}
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket([]byte(bucketMeta))
		if err != nil {
			return err
		}
		if err := meta.Put([]byte(keyLayout), []byte("1")); err != nil {
			return err
		}
		root, err := tx.CreateBucket([]byte(bucketItems))
		if err != nil {
			return err
		}
		b, err := root.CreateBucket([]byte("acme"))
		if err != nil {
			return err
		}
		for _, it := range items {
			// Layout 1's record: the item's JSON with its sources.
			it = vector.Canonical(it)
			it.Vector = vector.Normalize(it.Vector)
			js, err := json.Marshal(it)
			if err != nil {
				return err
			}
			rec := binary.AppendUvarint(nil, uint64(len(js)))
			rec = append(rec, js...)
			for _, x := range it.Vector {
				rec = binary.LittleEndian.AppendUint32(rec, math.Float32bits(x))
			}
			if err := b.Put(dbKey(it.Kind, it.ID), rec); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Close())

	for range 2 { // converted, then read as layout 2
		ix, err := Open(path, Options{NoSync: true})
		require.NoError(t, err)
		reports := all(t, ix, vector.KindReport)
		require.Len(t, reports, 1)
		want := vector.Canonical(items[0])
		want.Vector = nil
		require.Equal(t, want, reports[0].Item)
		units := all(t, ix, vector.KindTextUnit)
		require.Len(t, units, 1)
		require.Equal(t, items[1].Sources, units[0].Sources)
		require.NoError(t, ix.Close())
	}
	db, err = bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		require.Equal(t, layoutVersion, string(tx.Bucket([]byte(bucketMeta)).Get([]byte(keyLayout))))
		it, err := decodeRecord(tx.Bucket([]byte(bucketItems)).Bucket([]byte("acme")).Get(dbKey(vector.KindReport, "r")))
		require.NoError(t, err)
		require.Empty(t, it.Sources, "records no longer hold sources")
		return nil
	}))
}

// TestNothingToWriteCommitsNothing: a deletion, patch or ACL update that
// finds nothing to change (an ACL update to the ACL the sources hold
// already) commits no transaction (and syncs nothing): a
// new document's re-index deletes its items first, and it has none.
func TestNothingToWriteCommitsNothing(t *testing.T) {
	ctx := t.Context()
	ix, err := Open(filepath.Join(t.TempDir(), "v.db"), Options{NoSync: true})
	require.NoError(t, err)
	defer ix.Close()
	txid := func() int {
		var id int
		require.NoError(t, ix.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }))
		return id
	}
	it := vector.Item{ID: "e", Kind: vector.KindEntity, Vector: []float32{1, 0}, Text: "e",
		Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: "d", Version: 1}, ACL: provenance.PublicACL()}}}
	require.NoError(t, ix.Upsert(ctx, "acme", []vector.Item{it}))
	before := txid()
	require.NoError(t, ix.DeleteByDoc(ctx, "acme", "new-doc"))
	require.Equal(t, before, txid())
	require.NoError(t, ix.DeleteByDoc(ctx, "acme", "d", vector.KindTextUnit))
	require.Equal(t, before, txid())
	require.NoError(t, ix.Delete(ctx, "acme", []string{"absent"}))
	require.Equal(t, before, txid())
	require.NoError(t, ix.UpdateACL(ctx, "acme", "new-doc", provenance.PublicACL()))
	require.Equal(t, before, txid())
	// The ACL every source of d holds already (writers are not stored).
	require.NoError(t, ix.UpdateACL(ctx, "acme", "d", provenance.ACL{Public: true, Writers: provenance.Writers{Principals: []string{"w"}}}))
	require.Equal(t, before, txid(), "an unchanged ACL commits nothing")
	applied, err := ix.PatchSources(ctx, "acme", []vector.SourcePatch{{Kind: vector.KindEntity, ID: "e", Text: "other", Remove: []string{"d"}}})
	require.NoError(t, err)
	require.Equal(t, []bool{false}, applied)
	require.Equal(t, before, txid(), "no transaction committed")
	require.NoError(t, ix.DeleteByDoc(ctx, "acme", "d"))
	require.Greater(t, txid(), before)
	require.Empty(t, all(t, ix, vector.KindEntity))
}

// TestUpsertReplacesRows: an item written again keeps the rows of the
// documents it still has, numbered as written, and loses the others; a
// reopened index reads it as written.
func TestUpsertReplacesRows(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "v.db")
	ix, err := Open(path, Options{NoSync: true})
	require.NoError(t, err)
	it := vector.Item{ID: "e", Kind: vector.KindEntity, Vector: []float32{1, 0, 0}, Text: "e"}
	for _, d := range []string{"a", "b", "c", "d"} {
		it.Sources = append(it.Sources, vector.Source{SourceRef: provenance.SourceRef{DocID: d, Version: 1}, ACL: provenance.PublicACL()})
	}
	require.NoError(t, ix.Upsert(ctx, "acme", []vector.Item{it}))
	// c and a stay, swapped, b changes version, d goes, z comes.
	it.Sources = []vector.Source{it.Sources[2], it.Sources[0], it.Sources[1], {SourceRef: provenance.SourceRef{DocID: "z", Version: 1}, ACL: provenance.PublicACL()}}
	it.Sources[2].Version = 2
	require.NoError(t, ix.Upsert(ctx, "acme", []vector.Item{it}))
	want := []string{"c", "a", "b", "z"}
	require.Equal(t, want, all(t, ix, vector.KindEntity)[0].DocIDs())
	require.NoError(t, ix.Close())

	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	var rows []string
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketSources)).Bucket([]byte("acme")).ForEach(func(k, _ []byte) error {
			rows = append(rows, string(k))
			return nil
		})
	}))
	require.NoError(t, db.Close())
	var wantRows []string
	for _, d := range []string{"a", "b", "c", "z"} {
		wantRows = append(wantRows, string(sourceKey(key{vector.KindEntity, "e"}, d)))
	}
	require.Equal(t, wantRows, rows, "d's row is gone")

	re, err := Open(path, Options{NoSync: true})
	require.NoError(t, err)
	defer re.Close()
	hits := all(t, re, vector.KindEntity)
	require.Len(t, hits, 1)
	require.Equal(t, want, hits[0].DocIDs())
	require.Equal(t, int64(2), hits[0].Sources[2].Version)
}
