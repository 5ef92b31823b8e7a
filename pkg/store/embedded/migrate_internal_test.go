package embedded

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/storetest"
)

// toWholeLayout rewrites the graphs of the closed store file at path as
// a layout 2 build stored them: each entity and edge whole, all its
// fragments in one value (store.EncodeValue, S2) under its id in
// graph/<tenant>/entities and graph/<tenant>/edges, and no heads or
// fragment buckets; with dropIndexes, also without the relation and name
// indexes (a file from before them).
func toWholeLayout(t *testing.T, path string, dropIndexes bool) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		for _, tenant := range tenantNames(tx, bucketGraph) {
			g, err := openGraph(tx, tenant, false)
			require.NoError(t, err)
			gr, err := g.snapshot(nil)
			require.NoError(t, err)
			tb, err := tenantBucket(tx, bucketGraph, tenant, false)
			require.NoError(t, err)
			ents, err := tb.CreateBucket([]byte(subEntitiesWhole))
			require.NoError(t, err)
			for _, e := range gr.Entities {
				require.NoError(t, putJSON(ents, e.ID, e, store.FastCompression))
			}
			eds, err := tb.CreateBucket([]byte(subEdgesWhole))
			require.NoError(t, err)
			for _, e := range gr.Edges {
				require.NoError(t, putJSON(eds, e.ID, e, store.FastCompression))
			}
			drop := []string{subEntityRows, subEdgeRows}
			if dropIndexes {
				drop = append(drop, subByRel, subByName)
			}
			for _, name := range drop {
				require.NoError(t, tb.DeleteBucket([]byte(name)))
			}
		}
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(keyLayout), []byte(layoutWhole))
	}))
}

// TestOpenConvertsWholeLayout: a file of whole entities and edges (layout
// 2, with and without the relation and name indexes) opens as layout 3
// and reads the same graph through every reader; it audits clean, and
// applies after the conversion leave it as they leave a store that never
// was converted.
func TestOpenConvertsWholeLayout(t *testing.T) {
	for _, dropIndexes := range []bool{false, true} {
		t.Run(fmt.Sprintf("dropIndexes=%v", dropIndexes), func(t *testing.T) {
			dir := t.TempDir()
			open := func(name string) *Store {
				s, err := Open(filepath.Join(dir, name), Options{NoSync: true})
				require.NoError(t, err)
				return s
			}
			old, never := open("old.db"), open("never.db")
			storetest.FillHubGraph(t, old)
			storetest.FillHubGraph(t, never)
			require.NoError(t, old.Close())
			toWholeLayout(t, filepath.Join(dir, "old.db"), dropIndexes)
			old = open("old.db")
			defer old.Close()
			defer never.Close()
			require.NoError(t, old.db.View(func(tx *bolt.Tx) error {
				require.Equal(t, layoutVersion, string(tx.Bucket([]byte(bucketMeta)).Get([]byte(keyLayout))))
				tb, err := tenantBucket(tx, bucketGraph, "acme", false)
				require.NoError(t, err)
				require.Nil(t, tb.Bucket([]byte(subEntitiesWhole)), "the whole entities are still there")
				require.Nil(t, tb.Bucket([]byte(subEdgesWhole)), "the whole edges are still there")
				return nil
			}))

			storetest.SameHubGraph(t, "converted", never, old)
			storetest.EditHubGraph(t, old)
			storetest.EditHubGraph(t, never)
			storetest.SameHubGraph(t, "edited after the conversion", never, old)
		})
	}
}
