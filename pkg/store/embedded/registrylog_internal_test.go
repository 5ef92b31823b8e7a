package embedded

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// TestRegistryLogOfAnOlderFile: a file whose registry was written before
// the log existed cannot name what changed since a generation it did not
// log; the first write after records from there on.
func TestRegistryLogOfAnOlderFile(t *testing.T) {
	ctx := t.Context()
	s, err := Open(filepath.Join(t.TempDir(), "db"), Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	for _, doc := range []string{"a", "b"} {
		_, err := s.Announce(ctx, "acme", store.Announcement{DocID: doc, ACL: provenance.PublicACL()})
		require.NoError(t, err)
	}
	// As a build before the log left it.
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte(bucketRegistryLog)) }))
	since := func(g uint64) ([]string, bool) {
		t.Helper()
		states, ok, err := s.SourcesChangedSince(ctx, "acme", g)
		require.NoError(t, err)
		var ids []string
		for _, st := range states {
			ids = append(ids, st.DocID)
		}
		return ids, ok
	}
	_, ok := since(1)
	require.False(t, ok, "writes after 1 were not logged")
	ids, ok := since(2)
	require.True(t, ok, "nothing written since the current generation")
	require.Empty(t, ids)

	_, err = s.SetACL(ctx, "acme", "a", provenance.ACL{Groups: []string{"sre"}})
	require.NoError(t, err)
	_, ok = since(1)
	require.False(t, ok, "still not logged from 1")
	ids, ok = since(2)
	require.True(t, ok, "logged from the first write after")
	require.Equal(t, []string{"a"}, ids)
	_, ok, err = s.SourcesChangedSince(ctx, "globex", 0)
	require.NoError(t, err)
	require.True(t, ok, "a tenant never written")
}

// TestRegistryLogAfterAnUnrecordedWrite: a write of a build without the
// log, after recorded ones, raises the generation without naming its
// document: nothing since before it can be named, until a recorded write
// starts the log again from there.
func TestRegistryLogAfterAnUnrecordedWrite(t *testing.T) {
	ctx := t.Context()
	s, err := Open(filepath.Join(t.TempDir(), "db"), Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	for _, doc := range []string{"a", "b"} {
		_, err := s.Announce(ctx, "acme", store.Announcement{DocID: doc, ACL: provenance.PublicACL()})
		require.NoError(t, err)
	}
	// As an older build writes: the state and the generation, no record.
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		reg, err := tenantBucket(tx, bucketRegistry, "acme", false)
		if err != nil {
			return err
		}
		if err := putJSON(reg, "a", provenance.SourceState{Tenant: "acme", DocID: "a", Version: 1, ACL: provenance.ACL{Groups: []string{"sre"}}}, store.NoCompression); err != nil {
			return err
		}
		b := tx.Bucket([]byte(bucketRegistryGen))
		return b.Put([]byte("acme"), []byte{0, 0, 0, 0, 0, 0, 0, 3})
	}))
	for _, since := range []uint64{0, 1, 2} {
		_, ok, err := s.SourcesChangedSince(ctx, "acme", since)
		require.NoError(t, err)
		require.False(t, ok, "the write at 3 is not recorded: since %d", since)
	}
	_, err = s.SetACL(ctx, "acme", "b", provenance.ACL{Groups: []string{"sre"}})
	require.NoError(t, err)
	_, ok, err := s.SourcesChangedSince(ctx, "acme", 2)
	require.NoError(t, err)
	require.False(t, ok, "still: the write at 3 is not recorded")
	states, ok, err := s.SourcesChangedSince(ctx, "acme", 3)
	require.NoError(t, err)
	require.True(t, ok, "recorded again from 3")
	require.Len(t, states, 1)
	require.Equal(t, "b", states[0].DocID)
}
