package embedded

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// TestOpenCountsAnOlderRegistry: a file written before the registry counts
// were kept (no counts bucket) is counted when it is opened, and writes
// after that keep the counts.
func TestOpenCountsAnOlderRegistry(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "db")
	s, err := Open(path, Options{NoSync: true})
	require.NoError(t, err)
	for i := range 5 {
		_, err := s.Announce(ctx, "acme", store.Announcement{DocID: fmt.Sprintf("d%d", i), ACL: provenance.PublicACL()})
		require.NoError(t, err)
	}
	_, err = s.MarkDeleted(ctx, "acme", "d0")
	require.NoError(t, err)
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte(bucketRegistryCount)) }))
	require.NoError(t, s.Close())

	s, err = Open(path, Options{NoSync: true})
	require.NoError(t, err)
	defer s.Close()
	got, err := s.CountSources(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, store.SourceCounts{Live: 4, Deleted: 1}, got)
	_, err = s.MarkDeleted(ctx, "acme", "d1")
	require.NoError(t, err)
	got, err = s.CountSources(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, store.SourceCounts{Live: 3, Deleted: 2}, got)
}
