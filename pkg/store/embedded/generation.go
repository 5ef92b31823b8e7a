package embedded

import (
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/store"
)

// bucketRegistryGen holds each tenant's registry generation (8 bytes, big
// endian) under the tenant's name; a file written before it existed starts
// every tenant at 0.
const bucketRegistryGen = "registry-gen"

var _ store.RegistryGenerations = (*Store)(nil)

// bumpRegistryGeneration raises tenant's registry generation inside the
// registry write's transaction tx.
func bumpRegistryGeneration(tx *bolt.Tx, tenant string) error {
	b, err := tx.CreateBucketIfNotExists([]byte(bucketRegistryGen))
	if err != nil {
		return err
	}
	var n uint64
	if v := b.Get([]byte(tenant)); len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	return b.Put([]byte(tenant), binary.BigEndian.AppendUint64(nil, n+1))
}

// RegistryGeneration returns the tenant's registry generation (see
// store.RegistryGenerations).
func (s *Store) RegistryGeneration(ctx context.Context, tenant string) (uint64, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return 0, fmt.Errorf("reading the registry generation: %w", err)
	}
	var n uint64
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(bucketRegistryGen)); b != nil {
			if v := b.Get([]byte(tenant)); len(v) == 8 {
				n = binary.BigEndian.Uint64(v)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reading the registry generation of %q: %w", tenant, err)
	}
	return n, nil
}
