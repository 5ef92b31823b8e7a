package embedded

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

// fileRows is every record and source row of the index's file, by bucket,
// tenant and key.
func fileRows(t *testing.T, ix *Index) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, ix.db.View(func(tx *bolt.Tx) error {
		for _, name := range []string{bucketItems, bucketSources} {
			err := tx.Bucket([]byte(name)).ForEachBucket(func(tn []byte) error {
				return tx.Bucket([]byte(name)).Bucket(tn).ForEach(func(k, v []byte) error {
					out[name+"/"+string(tn)+"/"+string(k)] = string(v)
					return nil
				})
			})
			if err != nil {
				return err
			}
		}
		return nil
	}))
	return out
}

// memoryRows is what the file holds of the items in memory when each
// record and row is written from them: the record of each item, and a row
// per source with its ordinal.
func memoryRows(t *testing.T, ix *Index) map[string]string {
	t.Helper()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := map[string]string{}
	for tn, ti := range ix.tenants {
		for kind, ki := range ti.kinds {
			for i, e := range ki.entries {
				it := e.item
				it.Vector = ki.vec(i)
				rec, err := encode(it)
				require.NoError(t, err)
				out[bucketItems+"/"+tn+"/"+string(dbKey(kind, it.ID))] = string(rec)
				for _, s := range e.srcs {
					js, err := json.Marshal(s.asSource(s.acl.acl))
					require.NoError(t, err)
					row := append(binary.AppendUvarint(nil, s.ord), js...)
					out[bucketSources+"/"+tn+"/"+string(sourceKey(key{kind, it.ID}, s.doc.id))] = string(row)
				}
			}
		}
	}
	return out
}

// TestFileHoldsWhatMemoryHolds: after every write of a random sequence
// (items written again with the same or other text, vector, metadata,
// sources, versions, ACLs and order; sources patched, so numbered apart
// from their positions; ACLs updated; documents' items replaced), every
// record and source row of the file is the one written from the item as
// the index holds it: a record or row left as it was must be the one
// writing it again would write.
func TestFileHoldsWhatMemoryHolds(t *testing.T) {
	ctx := t.Context()
	ix, err := Open(filepath.Join(t.TempDir(), "v.db"), Options{NoSync: true})
	require.NoError(t, err)
	defer ix.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	kinds := vector.Kinds()
	docs := []string{"d0", "d1", "d2", "d3", "d4", "d5"}
	acls := []provenance.ACL{provenance.PublicACL(), {Groups: []string{"sre"}}, {Principals: []string{"ann"}, Groups: []string{"db", "sre"}}}
	item := func(i int) vector.Item {
		kind := kinds[i%len(kinds)]
		it := randomItem(kind, fmt.Sprintf("%s-%d", kind, i), rng.IntN(4))
		rng.Shuffle(len(it.Sources), func(a, b int) { it.Sources[a], it.Sources[b] = it.Sources[b], it.Sources[a] })
		return it
	}
	for round := range 300 {
		switch op := rng.IntN(4); op {
		case 0, 1:
			var items []vector.Item
			for i := range 12 {
				if rng.IntN(2) == 0 {
					items = append(items, item(i))
				}
			}
			if op == 0 {
				if len(items) > 0 {
					require.NoError(t, ix.Upsert(ctx, "acme", items))
				}
				break
			}
			var dks []vector.DocKinds
			for _, d := range docs {
				if rng.IntN(4) == 0 {
					dks = append(dks, vector.DocKinds{DocID: d, Kinds: []vector.Kind{vector.KindTextUnit, vector.KindReport}})
				}
			}
			require.NoError(t, ix.ReplaceDocItems(ctx, "acme", dks, items))
		case 2:
			var patches []vector.SourcePatch
			for i := range 12 {
				kind := kinds[i%len(kinds)]
				id := fmt.Sprintf("%s-%d", kind, i)
				ix.mu.RLock()
				e := ix.tenants["acme"].entry(key{kind, id})
				var text string
				var meta map[string]string
				if e != nil {
					text, meta = e.item.Text, e.item.Metadata
				}
				ix.mu.RUnlock()
				if e == nil || kind == vector.KindTextUnit {
					continue
				}
				p := vector.SourcePatch{Kind: kind, ID: id, Text: text, Metadata: meta}
				d := docs[rng.IntN(len(docs))]
				if rng.IntN(3) == 0 {
					p.Remove = []string{d}
				} else {
					p.Put = []vector.Source{{SourceRef: provenance.SourceRef{DocID: d, Version: int64(1 + rng.IntN(3))}, ACL: acls[rng.IntN(len(acls))]}}
				}
				patches = append(patches, p)
			}
			_, err := ix.PatchSources(ctx, "acme", patches)
			require.NoError(t, err)
		case 3:
			require.NoError(t, ix.UpdateACL(ctx, "acme", docs[rng.IntN(len(docs))], acls[rng.IntN(len(acls))]))
		}
		require.Equal(t, memoryRows(t, ix), fileRows(t, ix), "round %d", round)
	}
	require.NotEmpty(t, fileRows(t, ix))
}
