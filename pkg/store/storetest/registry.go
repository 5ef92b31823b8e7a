package storetest

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

func announce(t *testing.T, s store.Stores, tn string, a store.Announcement) provenance.SourceState {
	t.Helper()
	st, err := retry(func() (provenance.SourceState, error) { return s.Announce(t.Context(), tn, a) })
	require.NoError(t, err, "announcing %+v", a)
	return st
}

func state(t *testing.T, s store.Stores, tn, doc string) (provenance.SourceState, bool) {
	t.Helper()
	m, err := s.Sources(t.Context(), tn, []string{doc})
	require.NoError(t, err)
	st, ok := m[doc]
	return st, ok
}

func testAnnounceNextVersion(t *testing.T, s store.Stores) {
	acl := provenance.ACL{Groups: []string{"sre", " ops", "sre"}, Principals: []string{"bob", "alice"}}
	got := announce(t, s, tenant, store.Announcement{DocID: "page-1", ACL: acl, Source: "wiki", Title: "Page 1", UpdatedAt: "2025-01-01T00:00:00Z"})
	want := provenance.SourceState{
		Tenant: tenant, DocID: "page-1", Version: 1,
		ACL:    provenance.ACL{Groups: []string{"ops", "sre"}, Principals: []string{"alice", "bob"}},
		Source: "wiki", Title: "Page 1", UpdatedAt: "2025-01-01T00:00:00Z",
	}
	require.Equal(t, want, got)
	stored, ok := state(t, s, tenant, "page-1")
	require.True(t, ok)
	require.Equal(t, want, stored)

	got = announce(t, s, tenant, store.Announcement{DocID: "page-1", ACL: acl, Title: "Page 1 edited"})
	require.EqualValues(t, 2, got.Version)
	require.Equal(t, "Page 1 edited", got.Title)
	require.Equal(t, want.ACLRevision, got.ACLRevision, "the ACL did not change")
}

func testAnnounceExplicitVersion(t *testing.T, s store.Stores) {
	require.EqualValues(t, 5, announce(t, s, tenant, store.Announcement{DocID: "d", Version: 5, ACL: provenance.PublicACL()}).Version)
	require.EqualValues(t, 6, announce(t, s, tenant, store.Announcement{DocID: "d", ACL: provenance.PublicACL()}).Version)
	require.EqualValues(t, 9, announce(t, s, tenant, store.Announcement{DocID: "d", Version: 9, ACL: provenance.PublicACL()}).Version)
	st, _ := state(t, s, tenant, "d")
	require.EqualValues(t, 9, st.Version)
}

func testAnnounceStale(t *testing.T, s store.Stores) {
	before := announce(t, s, tenant, store.Announcement{DocID: "d", Version: 5, ACL: provenance.PublicACL(), Title: "five"})
	_, err := s.Announce(t.Context(), tenant, store.Announcement{DocID: "d", Version: 3, ACL: provenance.ACL{}, Title: "three"})
	require.ErrorIs(t, err, store.ErrStaleVersion)
	after, _ := state(t, s, tenant, "d")
	require.Equal(t, before, after, "a stale announcement changes nothing")
}

func testAnnounceIdempotent(t *testing.T, s store.Stores) {
	a := store.Announcement{DocID: "d", Version: 4, ACL: provenance.PublicACL(), Title: "t"}
	first := announce(t, s, tenant, a)
	require.Equal(t, first, announce(t, s, tenant, a), "a replay returns the same state")

	// A replay carrying a new ACL and metadata updates them, and the ACL
	// change is counted.
	a.ACL, a.Title = provenance.ACL{Groups: []string{"sre"}}, "t2"
	got := announce(t, s, tenant, a)
	require.EqualValues(t, 4, got.Version)
	require.Equal(t, provenance.ACL{Groups: []string{"sre"}}, got.ACL)
	require.Equal(t, "t2", got.Title)
	require.Equal(t, first.ACLRevision+1, got.ACLRevision)
	stored, _ := state(t, s, tenant, "d")
	require.Equal(t, got, stored)
}

func testSetACL(t *testing.T, s store.Stores) {
	ctx := t.Context()
	first := announce(t, s, tenant, store.Announcement{DocID: "d", ACL: provenance.PublicACL()})
	st, err := s.SetACL(ctx, tenant, "d", provenance.ACL{Principals: []string{"zed", "amy"}})
	require.NoError(t, err)
	require.Equal(t, first.ACLRevision+1, st.ACLRevision)
	require.Equal(t, provenance.ACL{Principals: []string{"amy", "zed"}}, st.ACL)
	require.Equal(t, first.Version, st.Version, "an ACL change is not a content version")
	st2, err := s.SetACL(ctx, tenant, "d", provenance.ACL{Principals: []string{"amy"}})
	require.NoError(t, err)
	require.Equal(t, st.ACLRevision+1, st2.ACLRevision)
	stored, _ := state(t, s, tenant, "d")
	require.Equal(t, st2, stored)

	_, err = s.SetACL(ctx, tenant, "unknown", provenance.PublicACL())
	require.ErrorIs(t, err, store.ErrNotFound)
	_, ok := state(t, s, tenant, "unknown")
	require.False(t, ok, "SetACL of an unknown document creates nothing")

	_, err = s.MarkDeleted(ctx, tenant, "d")
	require.NoError(t, err)
	_, err = s.SetACL(ctx, tenant, "d", provenance.PublicACL())
	require.ErrorIs(t, err, store.ErrNotFound, "a deleted document has no ACL to set")
}

func testMarkDeleted(t *testing.T, s store.Stores) {
	ctx := t.Context()
	announce(t, s, tenant, store.Announcement{DocID: "d", Version: 3, ACL: provenance.PublicACL(), Title: "t"})
	st, err := s.MarkDeleted(ctx, tenant, "d")
	require.NoError(t, err)
	require.True(t, st.Deleted)
	require.EqualValues(t, 4, st.Version, "a deletion is a new version")
	again, err := s.MarkDeleted(ctx, tenant, "d")
	require.NoError(t, err)
	require.Equal(t, st, again, "deleting a deleted document changes nothing")
	stored, _ := state(t, s, tenant, "d")
	require.Equal(t, st, stored)

	_, err = s.MarkDeleted(ctx, tenant, "never")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testRecreateAfterDelete(t *testing.T, s store.Stores) {
	ctx := t.Context()
	announce(t, s, tenant, store.Announcement{DocID: "d", Version: 2, ACL: provenance.PublicACL()})
	del, err := s.MarkDeleted(ctx, tenant, "d")
	require.NoError(t, err)
	require.EqualValues(t, 3, del.Version)

	for _, v := range []int64{2, 3} {
		_, err = s.Announce(ctx, tenant, store.Announcement{DocID: "d", Version: v, ACL: provenance.PublicACL()})
		require.ErrorIs(t, err, store.ErrStaleVersion, "version %d is not above the deletion's", v)
	}
	st := announce(t, s, tenant, store.Announcement{DocID: "d", ACL: provenance.PublicACL()})
	require.False(t, st.Deleted)
	require.EqualValues(t, 4, st.Version)
}

func testRegistryTenants(t *testing.T, s store.Stores) {
	ctx := t.Context()
	ts, err := s.Tenants(ctx)
	require.NoError(t, err)
	require.Empty(t, ts)

	announce(t, s, tenant, store.Announcement{DocID: "d", Version: 7, ACL: provenance.PublicACL(), Title: "acme's"})
	announce(t, s, other, store.Announcement{DocID: "d", ACL: provenance.ACL{Groups: []string{"g"}}, Title: "globex's"})
	a, _ := state(t, s, tenant, "d")
	b, _ := state(t, s, other, "d")
	require.EqualValues(t, 7, a.Version)
	require.EqualValues(t, 1, b.Version)
	require.Equal(t, tenant, a.Tenant)
	require.Equal(t, other, b.Tenant)
	require.Equal(t, "globex's", b.Title)

	_, err = s.MarkDeleted(ctx, other, "d")
	require.NoError(t, err)
	a, _ = state(t, s, tenant, "d")
	require.False(t, a.Deleted, "deleting in one tenant leaves the other alone")

	ts, err = s.Tenants(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{tenant, other}, ts)
}

func testRegistryUnknown(t *testing.T, s store.Stores) {
	ctx := t.Context()
	for _, id := range []string{"c", "a", "b"} {
		announce(t, s, tenant, store.Announcement{DocID: id, ACL: provenance.PublicACL()})
	}
	_, err := s.MarkDeleted(ctx, tenant, "b")
	require.NoError(t, err)

	m, err := s.Sources(ctx, tenant, []string{"a", "nope", "b"})
	require.NoError(t, err)
	require.Len(t, m, 2)
	require.Contains(t, m, "a")
	require.True(t, m["b"].Deleted)
	m, err = s.Sources(ctx, tenant, nil)
	require.NoError(t, err)
	require.Empty(t, m)

	list, err := s.ListSources(ctx, tenant)
	require.NoError(t, err)
	var ids []string
	for _, st := range list {
		ids = append(ids, st.DocID)
	}
	require.Equal(t, []string{"a", "b", "c"}, ids, "sorted, deleted ones included")

	list, err = s.ListSources(ctx, other)
	require.NoError(t, err)
	require.Empty(t, list)
}

func testRegistryInvalid(t *testing.T, s store.Stores) {
	ctx := t.Context()
	_, err := s.Announce(ctx, "Bad Tenant", store.Announcement{DocID: "d"})
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorIs(t, err, provenance.ErrInvalidTenant)
	_, err = s.Announce(ctx, tenant, store.Announcement{DocID: ""})
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorIs(t, err, provenance.ErrInvalidDocID)
	for _, id := range []string{" a", "a ", "a\u202eb", "a\u200bb", "a\x00b", "a\xffb", strings.Repeat("x", provenance.MaxDocIDBytes+1)} {
		_, err = s.Announce(ctx, tenant, store.Announcement{DocID: id})
		require.ErrorIs(t, err, provenance.ErrInvalidDocID, "%q", id)
	}
	_, err = s.Announce(ctx, tenant, store.Announcement{DocID: "d", Version: -1})
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.SetACL(ctx, "", "d", provenance.PublicACL())
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.MarkDeleted(ctx, tenant, "")
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.Sources(ctx, "UPPER", []string{"d"})
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.ListSources(ctx, "a.b")
	require.ErrorIs(t, err, store.ErrInvalid)

	ts, err := s.Tenants(ctx)
	require.NoError(t, err)
	require.Empty(t, ts, "failed calls leave no trace")
}

// testConcurrentAnnounce checks that "next version" is atomic: concurrent
// announcements of one document each get a distinct version.
func testConcurrentAnnounce(t *testing.T, s store.Stores) {
	const writers, each = 6, 4
	versions := make(chan int64, writers*each)
	err := parallel(writers, func(i int) error {
		for range each {
			st, err := retry(func() (provenance.SourceState, error) {
				return s.Announce(t.Context(), tenant, store.Announcement{DocID: "hot", ACL: provenance.PublicACL()})
			})
			if err != nil {
				return err
			}
			versions <- st.Version
		}
		return nil
	})
	require.NoError(t, err)
	close(versions)
	var got []int64
	for v := range versions {
		got = append(got, v)
	}
	slices.Sort(got)
	want := make([]int64, writers*each)
	for i := range want {
		want[i] = int64(i + 1)
	}
	require.Equal(t, want, got, "every announcement got its own version")
	st, _ := state(t, s, tenant, "hot")
	require.EqualValues(t, writers*each, st.Version, fmt.Sprint(st))
}

// testVersionBounds checks the version bounds: no announcement above
// provenance.MaxContentVersion, no next version past it, a document at the
// last content version can still be deleted, and a refused call changes
// nothing.
func testVersionBounds(t *testing.T, s store.Stores) {
	ctx := t.Context()
	for _, v := range []int64{math.MaxInt64, provenance.MaxVersion, provenance.MaxContentVersion + 1, -1} {
		_, err := s.Announce(ctx, tenant, store.Announcement{DocID: "d", Version: v, ACL: provenance.PublicACL()})
		require.ErrorIs(t, err, store.ErrInvalid, "version %d", v)
		_, ok := state(t, s, tenant, "d")
		require.False(t, ok, "a refused version %d was recorded", v)
	}
	last := announce(t, s, tenant, store.Announcement{DocID: "d", Version: provenance.MaxContentVersion, ACL: provenance.PublicACL(), Title: "last"})
	require.Equal(t, provenance.MaxContentVersion, last.Version)
	_, err := s.Announce(ctx, tenant, store.Announcement{DocID: "d", ACL: provenance.ACL{Groups: []string{"sre"}}, Title: "past"})
	require.ErrorIs(t, err, store.ErrInvalid)
	got, _ := state(t, s, tenant, "d")
	require.Equal(t, last, got, "a refused next version changes nothing")
	del, err := retry(func() (provenance.SourceState, error) { return s.MarkDeleted(ctx, tenant, "d") })
	require.NoError(t, err)
	require.Equal(t, provenance.MaxVersion, del.Version)
	require.True(t, del.Deleted)
	_, err = s.Announce(ctx, tenant, store.Announcement{DocID: "d", ACL: provenance.PublicACL()})
	require.ErrorIs(t, err, store.ErrInvalid)
	got, _ = state(t, s, tenant, "d")
	require.Equal(t, del, got)
}

// testIDsAsPeopleWriteThem checks that ids with slashes, spaces, percent
// signs, braces and non-ASCII letters are distinct keys that round-trip.
func testIDsAsPeopleWriteThem(t *testing.T, s store.Stores) {
	ids := []string{"team-a/2024/incident.md", "team-b/2024/incident.md", "Runbooks/Redis", "Runbooks%2FRedis",
		"a b", "{tenant}:reg:x", "ünïcødé/日本語", "/", ".", "..", "github:owner/repo#1", strings.Repeat("é", provenance.MaxDocIDBytes/2)}
	for i, id := range ids {
		announce(t, s, tenant, store.Announcement{DocID: id, Version: int64(i + 1), ACL: provenance.PublicACL(), Title: id})
	}
	got, err := s.Sources(t.Context(), tenant, ids)
	require.NoError(t, err)
	require.Len(t, got, len(ids))
	for i, id := range ids {
		require.Equal(t, id, got[id].DocID)
		require.EqualValues(t, i+1, got[id].Version, "%q kept its own state", id)
		require.Equal(t, id, got[id].Title)
	}
	list, err := s.ListSources(t.Context(), tenant)
	require.NoError(t, err)
	var listed []string
	for _, st := range list {
		listed = append(listed, st.DocID)
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	require.Equal(t, want, listed)
	del, err := retry(func() (provenance.SourceState, error) {
		return s.MarkDeleted(t.Context(), tenant, "team-a/2024/incident.md")
	})
	require.NoError(t, err)
	require.True(t, del.Deleted)
	other, _ := state(t, s, tenant, "team-b/2024/incident.md")
	require.False(t, other.Deleted, "deleting one path deleted another")
}

// testContentHash checks that a content hash (recorded by Acknowledge)
// is kept for the version it was recorded for only: a new version or a
// replay clears it, an ACL change keeps it, and a document that moved on
// or was deleted is left alone.
func testContentHash(t *testing.T, s store.Stores) {
	ctx := t.Context()
	acknowledge(t, s, tenant, nil, &store.ContentAck{DocID: "ghost", Version: 1, Hash: "h"})
	_, found := state(t, s, tenant, "ghost")
	require.False(t, found, "content for an unknown document creates none")
	v1 := announce(t, s, tenant, store.Announcement{DocID: "d", ACL: provenance.PublicACL()})
	require.Empty(t, v1.ContentHash)
	acknowledge(t, s, tenant, nil, &store.ContentAck{DocID: "d", Version: 1, Hash: "h1"})
	got, _ := state(t, s, tenant, "d")
	require.Equal(t, "h1", got.ContentHash)
	acl, err := retry(func() (provenance.SourceState, error) {
		return s.SetACL(ctx, tenant, "d", provenance.ACL{Groups: []string{"sre"}})
	})
	require.NoError(t, err)
	require.Equal(t, "h1", acl.ContentHash, "an ACL change keeps the content")
	replay := announce(t, s, tenant, store.Announcement{DocID: "d", Version: 1, ACL: provenance.PublicACL()})
	require.Empty(t, replay.ContentHash, "a replay is published again before it is recorded")
	acknowledge(t, s, tenant, nil, &store.ContentAck{DocID: "d", Version: 1, Hash: "h1"})
	v2 := announce(t, s, tenant, store.Announcement{DocID: "d", ACL: provenance.PublicACL()})
	require.Empty(t, v2.ContentHash)
	acknowledge(t, s, tenant, nil, &store.ContentAck{DocID: "d", Version: 1, Hash: "late"})
	got, _ = state(t, s, tenant, "d")
	require.Equal(t, v2, got, "a hash for a version the document moved on from changes nothing")
	del, err := retry(func() (provenance.SourceState, error) { return s.MarkDeleted(ctx, tenant, "d") })
	require.NoError(t, err)
	acknowledge(t, s, tenant, nil, &store.ContentAck{DocID: "d", Version: del.Version, Hash: "h3"})
	got, _ = state(t, s, tenant, "d")
	require.Equal(t, del, got, "a deleted document records no content")
}

// testSourceCounts checks the registry's counts against its listing after
// announcements, replays, ACL and content records, deletions (again, and
// of an unknown document), recreations and concurrent writers, in two
// tenants.
func testSourceCounts(t *testing.T, s store.Stores) {
	ctx := t.Context()
	c, ok := s.(store.SourceCounter)
	require.True(t, ok, "the registry keeps its counts (store.SourceCounter)")
	check := func(tn string) {
		t.Helper()
		all, err := s.ListSources(ctx, tn)
		require.NoError(t, err)
		got, err := c.CountSources(ctx, tn)
		require.NoError(t, err)
		require.Equal(t, store.CountStates(all), got, "tenant %s", tn)
	}
	check(tenant) // nothing yet
	for i := range 12 {
		announce(t, s, tenant, store.Announcement{DocID: fmt.Sprintf("d%02d", i), ACL: provenance.PublicACL()})
	}
	announce(t, s, "other", store.Announcement{DocID: "d00", ACL: provenance.PublicACL()})
	announce(t, s, tenant, store.Announcement{DocID: "d00", ACL: provenance.PublicACL()}) // a new version
	_, err := s.SetACL(ctx, tenant, "d01", provenance.ACL{Groups: []string{"g"}})
	require.NoError(t, err)
	acknowledge(t, s, tenant, nil, &store.ContentAck{DocID: "d02", Version: 1, Hash: "h"})
	for _, id := range []string{"d03", "d04", "d04", "d05"} {
		_, err := s.MarkDeleted(ctx, tenant, id)
		require.NoError(t, err)
	}
	_, err = s.MarkDeleted(ctx, tenant, "never")
	require.ErrorIs(t, err, store.ErrNotFound)
	announce(t, s, tenant, store.Announcement{DocID: "d05", ACL: provenance.PublicACL()}) // recreated
	check(tenant)
	check("other")
	require.NoError(t, parallel(6, func(i int) error {
		for j := range 3 {
			id := fmt.Sprintf("c%d-%d", i, j)
			if _, err := retry(func() (provenance.SourceState, error) {
				return s.Announce(ctx, tenant, store.Announcement{DocID: id, ACL: provenance.PublicACL()})
			}); err != nil {
				return err
			}
			if j == 1 {
				if _, err := retry(func() (provenance.SourceState, error) { return s.MarkDeleted(ctx, tenant, id) }); err != nil {
					return err
				}
			}
		}
		return nil
	}))
	check(tenant)
	got, err := c.CountSources(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, store.SourceCounts{Live: 10 + 12, Deleted: 2 + 6}, got)
}
