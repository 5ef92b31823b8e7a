package embedded

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/storetest"
)

// TestRegistryLogGaps: a file written before the registry log existed,
// and a write of such a build after recorded ones (storetest.RegistryLogGaps).
func TestRegistryLogGaps(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "db"), Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	update := func(fn func(tx *bolt.Tx) error) { require.NoError(t, s.db.Update(fn)) }
	storetest.RegistryLogGaps(t, s,
		func() { update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte(bucketRegistryLog)) }) },
		func(doc string) {
			update(func(tx *bolt.Tx) error {
				reg, err := tenantBucket(tx, bucketRegistry, "acme", false)
				if err != nil {
					return err
				}
				st := provenance.SourceState{Tenant: "acme", DocID: doc, Version: 1, ACL: provenance.ACL{Principals: []string{"bob"}}}
				if err := putJSON(reg, doc, st, store.NoCompression); err != nil {
					return err
				}
				return bumpGenerationOnly(tx, "acme")
			})
		})
}

// bumpGenerationOnly raises tenant's registry generation as a build
// before the log did.
func bumpGenerationOnly(tx *bolt.Tx, tenant string) error {
	b := tx.Bucket([]byte(bucketRegistryGen))
	n := binary.BigEndian.Uint64(b.Get([]byte(tenant)))
	return b.Put([]byte(tenant), binary.BigEndian.AppendUint64(nil, n+1))
}
