package embedded

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/store"
)

// migrateToHeads converts every tenant graph of a layout 1 or 2 file, in
// the transaction tx: each whole entity of graph/<tenant>/entities and
// edge of graph/<tenant>/edges becomes its head and one fragment per
// document (store.SplitEntity, store.SplitEdge), and the old buckets go.
// Names and indexes are kept as they are: the graph reads the same.
func migrateToHeads(tx *bolt.Tx) error {
	for _, tenant := range tenantNames(tx, bucketGraph) {
		t, err := tenantBucket(tx, bucketGraph, tenant, false)
		if err != nil {
			return err
		}
		if t.Bucket([]byte(subEntitiesWhole)) == nil && t.Bucket([]byte(subEdgesWhole)) == nil {
			continue
		}
		// Only the new buckets: indexes a file lacks are built afterwards
		// (buildGraphIndexes), which an empty one created here would stop.
		var g graphBuckets
		for _, sub := range []struct {
			name string
			b    **bolt.Bucket
		}{{subEntityRows, &g.entityRows}, {subEdgeRows, &g.edgeRows}} {
			if *sub.b, err = t.CreateBucketIfNotExists([]byte(sub.name)); err != nil {
				return err
			}
		}
		if err := splitWhole(t, subEntitiesWhole, g.entityRows, func(v []byte) (any, []store.Fragment, error) {
			var e store.Entity
			if err := store.DecodeValue(v, &e); err != nil {
				return nil, nil, err
			}
			h, frags := store.SplitEntity(e)
			return h, frags, nil
		}); err != nil {
			return fmt.Errorf("converting the entities of %q: %w", tenant, err)
		}
		if err := splitWhole(t, subEdgesWhole, g.edgeRows, func(v []byte) (any, []store.Fragment, error) {
			var e store.Edge
			if err := store.DecodeValue(v, &e); err != nil {
				return nil, nil, err
			}
			h, frags := store.SplitEdge(e)
			return h, frags, nil
		}); err != nil {
			return fmt.Errorf("converting the edges of %q: %w", tenant, err)
		}
	}
	return nil
}

// splitWhole writes the head and fragments of every value of the tenant
// bucket t's sub-bucket name into the rows bucket, then deletes it.
func splitWhole(t *bolt.Bucket, name string, rows *bolt.Bucket, split func([]byte) (any, []store.Fragment, error)) error {
	whole := t.Bucket([]byte(name))
	if whole == nil {
		return nil
	}
	err := whole.ForEach(func(k, v []byte) error {
		h, fs, err := split(v)
		if err != nil {
			return fmt.Errorf("decoding %q: %w", k, err)
		}
		var data []byte
		switch h := h.(type) {
		case store.EntityHead:
			data, err = store.EncodeEntityHead(h)
		case store.EdgeHead:
			data, err = store.EncodeEdgeHead(h)
		}
		if err != nil {
			return fmt.Errorf("encoding the head of %q: %w", k, err)
		}
		if err := rows.Put(headKey(string(k)), data); err != nil {
			return err
		}
		for _, f := range fs {
			data, err := store.EncodeFragment(f)
			if err != nil {
				return fmt.Errorf("encoding the fragment of %q by %q: %w", k, f.DocID, err)
			}
			if err := rows.Put(pair(string(k), f.DocID), data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return t.DeleteBucket([]byte(name))
}
