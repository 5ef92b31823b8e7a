package embedded

import (
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// bucketRegistryCount holds each tenant's registry counts under the
// tenant's name: live then deleted documents, 8 bytes each, big endian.
// Open counts a file written before it existed.
const bucketRegistryCount = "registry-count"

var _ store.SourceCounter = (*Store)(nil)

func readCounts(b *bolt.Bucket, tenant string) store.SourceCounts {
	v := b.Get([]byte(tenant))
	if len(v) != 16 {
		return store.SourceCounts{}
	}
	return store.SourceCounts{Live: int(binary.BigEndian.Uint64(v)), Deleted: int(binary.BigEndian.Uint64(v[8:]))}
}

func putCounts(b *bolt.Bucket, tenant string, c store.SourceCounts) error {
	v := binary.BigEndian.AppendUint64(nil, uint64(c.Live))
	return b.Put([]byte(tenant), binary.BigEndian.AppendUint64(v, uint64(c.Deleted)))
}

// countRegistryWrite updates tenant's counts for a registry write
// replacing cur with next, inside the write's transaction.
func countRegistryWrite(tx *bolt.Tx, tenant string, cur *provenance.SourceState, next provenance.SourceState) error {
	b, err := tx.CreateBucketIfNotExists([]byte(bucketRegistryCount))
	if err != nil {
		return err
	}
	c := readCounts(b, tenant)
	live, deleted := store.CountChange(cur, next)
	c.Live += live
	c.Deleted += deleted
	return putCounts(b, tenant, c)
}

// buildRegistryCounts counts every tenant's registry, for a file written
// before the counts were kept.
func buildRegistryCounts(tx *bolt.Tx) error {
	if tx.Bucket([]byte(bucketRegistryCount)) != nil {
		return nil
	}
	counts, err := tx.CreateBucket([]byte(bucketRegistryCount))
	if err != nil {
		return err
	}
	for _, tenant := range tenantNames(tx, bucketRegistry) {
		var c store.SourceCounts
		err := tx.Bucket([]byte(bucketRegistry)).Bucket([]byte(tenant)).ForEach(func(k, v []byte) error {
			var st provenance.SourceState
			if err := unmarshal(k, v, &st); err != nil {
				return err
			}
			c.Add(st)
			return nil
		})
		if err != nil {
			return fmt.Errorf("counting the registry of %q: %w", tenant, err)
		}
		if err := putCounts(counts, tenant, c); err != nil {
			return err
		}
	}
	return nil
}

// CountSources returns the tenant's registry counts (see
// store.SourceCounter).
func (s *Store) CountSources(ctx context.Context, tenant string) (store.SourceCounts, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return store.SourceCounts{}, fmt.Errorf("counting sources: %w", err)
	}
	var c store.SourceCounts
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(bucketRegistryCount)); b != nil {
			c = readCounts(b, tenant)
		}
		return nil
	})
	if err != nil {
		return store.SourceCounts{}, fmt.Errorf("counting the sources of %q: %w", tenant, err)
	}
	return c, nil
}
