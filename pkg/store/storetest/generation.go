package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
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

// testRegistryChanges checks what a reader's copy of the registry is
// brought up to date with: a copy listed at any generation, with the
// states changed since put in, equals the listing at the generation read
// before asking, through random announcements, ACL changes, content
// records and deletions of a few documents; another tenant's writes are
// not among them.
func testRegistryChanges(t *testing.T, s store.Stores) {
	ctx := t.Context()
	rc, ok := s.(store.RegistryChanges)
	require.True(t, ok, "the registry records which document each write was of (store.RegistryChanges)")
	g, ok := s.(store.RegistryGenerations)
	require.True(t, ok)
	gen := generationOf(t, g.RegistryGeneration)
	changed := func(since uint64) []provenance.SourceState {
		t.Helper()
		states, ok, err := rc.SourcesChangedSince(ctx, tenant, since)
		require.NoError(t, err)
		require.True(t, ok, "a registry written by this build names every change since %d", since)
		for i := 1; i < len(states); i++ {
			require.Less(t, states[i-1].DocID, states[i].DocID, "sorted by doc id, each once")
		}
		return states
	}
	require.Empty(t, changed(0), "a tenant never written")
	list := func() []provenance.SourceState {
		t.Helper()
		l, err := s.ListSources(ctx, tenant)
		require.NoError(t, err)
		return l
	}
	// patched is copy (a listing) with states put in, by doc id.
	patched := func(copy, states []provenance.SourceState) []provenance.SourceState {
		byID := map[string]provenance.SourceState{}
		for _, st := range slices.Concat(copy, states) {
			byID[st.DocID] = st
		}
		out := slices.AppendSeq(make([]provenance.SourceState, 0, len(byID)), maps.Values(byID))
		slices.SortFunc(out, func(a, b provenance.SourceState) int { return strings.Compare(a.DocID, b.DocID) })
		return out
	}
	type copyAt struct {
		gen  uint64
		list []provenance.SourceState
	}
	copies := []copyAt{{0, nil}}
	rng := rand.New(rand.NewPCG(7, 11))
	docs := []string{"a", "b", "c", "d", "e"}
	acls := []provenance.ACL{provenance.PublicACL(), {Groups: []string{"sre"}}, {Principals: []string{"bob"}}}
	for step := range 60 {
		doc := docs[rng.IntN(len(docs))]
		switch rng.IntN(4) {
		case 0:
			announce(t, s, tenant, store.Announcement{DocID: doc, ACL: acls[rng.IntN(len(acls))], Title: fmt.Sprintf("step %d", step)})
		case 1:
			_, err := s.SetACL(ctx, tenant, doc, acls[rng.IntN(len(acls))])
			if !errors.Is(err, store.ErrNotFound) {
				require.NoError(t, err)
			}
		case 2:
			if st, err := s.Sources(ctx, tenant, []string{doc}); err == nil && st[doc].Version > 0 && !st[doc].Deleted {
				acknowledge(t, s, tenant, nil, &store.ContentAck{DocID: doc, Version: st[doc].Version, Hash: fmt.Sprintf("h%d", step)})
			}
		case 3:
			_, err := s.MarkDeleted(ctx, tenant, doc)
			if !errors.Is(err, store.ErrNotFound) {
				require.NoError(t, err)
			}
		}
		if rng.IntN(3) == 0 {
			announce(t, s, other, store.Announcement{DocID: "z" + doc, ACL: provenance.PublicACL()})
		}
		now := gen(tenant)
		want := list()
		for _, c := range copies {
			got := changed(c.gen)
			for _, st := range got {
				require.NotEqual(t, "z", st.DocID[:1], "another tenant's write")
			}
			require.Equal(t, want, patched(c.list, got), "step %d: the copy at %d brought up to %d", step, c.gen, now)
		}
		require.Empty(t, changed(now), "nothing written since %d", now)
		copies = append(copies, copyAt{now, want})
	}
}

// RegistryLogGaps checks store.RegistryChanges across the writes its log
// did not record: forget leaves the tenant's registry as a build before
// the log did (every write kept, none recorded), unrecorded writes docID
// as such a build does (its state and a raised generation, no record).
// Nothing since before an unrecorded write can be named; a recorded write
// starts the log again from the generation before its own.
func RegistryLogGaps(t *testing.T, s store.Stores, forget func(), unrecorded func(docID string)) {
	ctx := t.Context()
	rc, ok := s.(store.RegistryChanges)
	require.True(t, ok, "the registry records which document each write was of (store.RegistryChanges)")
	since := func(g uint64) ([]string, bool) {
		t.Helper()
		states, ok, err := rc.SourcesChangedSince(ctx, tenant, g)
		require.NoError(t, err)
		var ids []string
		for _, st := range states {
			ids = append(ids, st.DocID)
		}
		return ids, ok
	}
	setACL := func(doc string) {
		t.Helper()
		_, err := s.SetACL(ctx, tenant, doc, provenance.ACL{Groups: []string{"sre"}})
		require.NoError(t, err)
	}
	announce(t, s, tenant, store.Announcement{DocID: "a", ACL: provenance.PublicACL()})
	announce(t, s, tenant, store.Announcement{DocID: "b", ACL: provenance.PublicACL()}) // generation 2

	forget()
	_, ok = since(1)
	require.False(t, ok, "writes after 1 were not recorded")
	ids, ok := since(2)
	require.True(t, ok, "nothing written since the current generation")
	require.Empty(t, ids)
	setACL("a") // 3
	_, ok = since(1)
	require.False(t, ok, "still not recorded from 1")
	ids, ok = since(2)
	require.True(t, ok, "recorded from the first write after")
	require.Equal(t, []string{"a"}, ids)

	unrecorded("b") // 4
	for g := range uint64(4) {
		_, ok := since(g)
		require.False(t, ok, "the write at 4 is not recorded: since %d", g)
	}
	setACL("b") // 5
	_, ok = since(3)
	require.False(t, ok, "still: the write at 4 is not recorded")
	ids, ok = since(4)
	require.True(t, ok, "recorded again from 4")
	require.Equal(t, []string{"b"}, ids)

	_, ok, err := rc.SourcesChangedSince(ctx, other, 0)
	require.NoError(t, err)
	require.True(t, ok, "a tenant never written")
}
