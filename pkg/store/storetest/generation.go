package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// testRegistryGeneration checks the registry generation readers cache
// admission on: every registry write raises it (also concurrent ones, each
// counted), nothing lowers it, and a listing read after it holds every
// write up to it.
func testRegistryGeneration(t *testing.T, s store.Stores) {
	g, ok := s.(store.RegistryGenerations)
	require.True(t, ok, "the registry counts its writes (store.RegistryGenerations)")
	gen := func(tn string) uint64 {
		t.Helper()
		n, err := g.RegistryGeneration(t.Context(), tn)
		require.NoError(t, err)
		return n
	}
	require.Zero(t, gen(tenant), "a tenant never written is at 0")
	raised := func(what string, write func()) {
		t.Helper()
		before := gen(tenant)
		write()
		require.Greater(t, gen(tenant), before, "%s raises the generation", what)
	}
	unchanged := func(what string, write func()) {
		t.Helper()
		before := gen(tenant)
		write()
		require.GreaterOrEqual(t, gen(tenant), before, "%s does not lower the generation", what)
	}
	raised("an announcement", func() { announce(t, s, tenant, store.Announcement{DocID: "d1", ACL: provenance.PublicACL()}) })
	raised("a replay of the version", func() {
		announce(t, s, tenant, store.Announcement{DocID: "d1", Version: 1, ACL: provenance.ACL{Groups: []string{"sre"}}})
	})
	raised("an ACL change", func() {
		_, err := s.SetACL(t.Context(), tenant, "d1", provenance.ACL{Groups: []string{"oncall"}})
		require.NoError(t, err)
	})
	raised("a content record", func() {
		acknowledge(t, s, tenant, nil, &store.ContentAck{DocID: "d1", Version: 1, Hash: "h1"})
	})
	unchanged("the same content record again", func() {
		acknowledge(t, s, tenant, nil, &store.ContentAck{DocID: "d1", Version: 1, Hash: "h1"})
	})
	unchanged("a stale announcement", func() {
		_, err := s.Announce(t.Context(), tenant, store.Announcement{DocID: "d1", Version: 1})
		require.NoError(t, err)
		announce(t, s, tenant, store.Announcement{DocID: "d1", Version: 3})
		_, err = s.Announce(t.Context(), tenant, store.Announcement{DocID: "d1", Version: 2})
		require.ErrorIs(t, err, store.ErrStaleVersion)
	})
	raised("a deletion", func() {
		_, err := s.MarkDeleted(t.Context(), tenant, "d1")
		require.NoError(t, err)
	})
	unchanged("deleting again", func() {
		_, err := s.MarkDeleted(t.Context(), tenant, "d1")
		require.NoError(t, err)
	})
	was := gen(other)
	announce(t, s, other, store.Announcement{DocID: "x", ACL: provenance.PublicACL()})
	require.Greater(t, gen(other), was, "each tenant counts its own writes")

	// Concurrent writes are each counted, and a listing read after the
	// generation holds every write up to it.
	const writers, each = 4, 3
	before := gen(tenant)
	err := parallel(writers, func(i int) error {
		for j := range each {
			_, err := retry(func() (provenance.SourceState, error) {
				return s.Announce(t.Context(), tenant, store.Announcement{DocID: "c" + string(rune('a'+i)) + string(rune('a'+j)), ACL: provenance.PublicACL()})
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	after := gen(tenant)
	require.GreaterOrEqual(t, after, before+writers*each, "every concurrent write is counted")
	list, err := s.ListSources(t.Context(), tenant)
	require.NoError(t, err)
	require.Len(t, list, 1+writers*each, "the listing after the generation holds every write up to it")
}
