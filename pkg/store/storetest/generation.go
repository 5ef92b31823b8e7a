package storetest

import (
	"context"
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
	gen := generationOf(t, g.RegistryGeneration)
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

// testGraphGeneration checks the graph generation readers cache what they
// compute from the graph on: every applied change raises it (an apply, a
// deletion, one of a batch, concurrent ones each counted, an edit that
// leaves every count as it was), a stale or duplicate change leaves it as
// it is, and each tenant counts its own.
func testGraphGeneration(t *testing.T, s store.Stores) {
	g, ok := s.(store.GraphGenerations)
	require.True(t, ok, "the graph store counts its changes (store.GraphGenerations)")
	gen := generationOf(t, g.GraphGeneration)
	require.Zero(t, gen(tenant), "a tenant never written is at 0")
	raised := func(what string, by uint64, write func()) {
		t.Helper()
		before := gen(tenant)
		write()
		require.GreaterOrEqual(t, gen(tenant), before+by, "%s raises the generation", what)
	}
	unchanged := func(what string, write func()) {
		t.Helper()
		before := gen(tenant)
		write()
		require.Equal(t, before, gen(tenant), "%s leaves the generation as it is", what)
	}
	c := contrib(ents(ent(db, "DB", 1), ent(api, "API", 1)), edge(api, "x", db, 1))
	raised("an apply", 1, func() { require.Equal(t, store.Applied, apply(t, s, tenant, "a", 1, c).Outcome) })
	unchanged("the same version again", func() { require.Equal(t, store.Duplicate, apply(t, s, tenant, "a", 1, c).Outcome) })
	stats := func() store.Stats {
		t.Helper()
		st, err := s.Stats(t.Context(), tenant)
		require.NoError(t, err)
		return st
	}
	was := stats()
	raised("an edit that changes no count", 1, func() { require.Equal(t, store.Applied, apply(t, s, tenant, "a", 2, c).Outcome) })
	require.Equal(t, was, stats(), "the edit changed no count")
	unchanged("an older version", func() { require.Equal(t, store.Stale, apply(t, s, tenant, "a", 1, c).Outcome) })
	raised("a batch of two applied changes", 2, func() {
		res, errs, err := s.ApplyBatch(t.Context(), tenant, []store.Change{
			{DocID: "b", Version: 1, Contributions: contrib(ents(ent(cache, "C", 1)))},
			{DocID: "a", Version: 1, Contributions: c}, // stale
			{DocID: "c", Version: 1, Contributions: contrib(ents(ent(team, "SRE", 1)))},
		})
		require.NoError(t, err)
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, []store.Outcome{store.Applied, store.Stale, store.Applied},
			[]store.Outcome{res[0].Outcome, res[1].Outcome, res[2].Outcome})
	})
	raised("a deletion", 1, func() { require.Equal(t, store.Applied, del(t, s, tenant, "b", 2).Outcome) })
	unchanged("the deletion again", func() { require.Equal(t, store.Duplicate, del(t, s, tenant, "b", 2).Outcome) })
	unchanged("another tenant's apply", func() { apply(t, s, other, "a", 1, c) })
	require.Positive(t, gen(other), "each tenant counts its own changes")

	const writers = 4
	raised("concurrent applies, each", writers, func() {
		require.NoError(t, parallel(writers, func(i int) error {
			_, err := retry(func() (store.ApplyResult, error) {
				return s.Apply(t.Context(), tenant, "p"+string(rune('a'+i)), 1, contrib(ents(ent(db, "DB", 1))))
			})
			return err
		}))
	})
	requireClean(t, s, tenant)
}

// generationOf returns a reader of a tenant's generation by read that
// fails the test on error.
func generationOf(t *testing.T, read func(ctx context.Context, tenant string) (uint64, error)) func(tenant string) uint64 {
	return func(tn string) uint64 {
		t.Helper()
		n, err := read(t.Context(), tn)
		require.NoError(t, err)
		return n
	}
}
