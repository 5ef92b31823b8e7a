package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// outboxCases are the conformance cases of store.Outbox: a registry
// change and the pending events it records are one write.
var outboxCases = []struct {
	name string
	fn   func(t *testing.T, s store.Stores)
}{
	{"Outbox/RecordedWithTheChange", testOutboxRecordedWithTheChange},
	{"Outbox/RefusedWriteRecordsNothing", testOutboxRefusedWriteRecordsNothing},
	{"Outbox/ConcurrentChangesEachRecorded", testOutboxConcurrent},
	{"Outbox/InterruptedTransactionRecordsOnlyWhatCommitted", testOutboxInterrupted},
	{"Outbox/Paging", testOutboxPaging},
	{"Outbox/DeletionAtALaterVersionIsOneWrite", testOutboxDeletionAtALaterVersion},
	{"Outbox/AcknowledgeClearsOnlyTheNamedEvents", testAcknowledgeClears},
	{"Outbox/AcknowledgeRecordsContentAtTheCurrentVersion", testAcknowledgeContent},
	{"Outbox/AcknowledgeTenantsIsolated", testAcknowledgeTenants},
}

// eventOf is a PendingFunc recording one event named after the transition:
// <tenant>/<doc>/<next version>/<kind>, its data naming both states.
func eventOf(tn, kind string) store.PendingFunc {
	return func(cur *provenance.SourceState, next provenance.SourceState) ([]store.Pending, error) {
		from := int64(0)
		if cur != nil {
			from = cur.Version
		}
		return []store.Pending{{Tenant: tn, ID: fmt.Sprintf("%s/%s/%d/%s", tn, next.DocID, next.Version, kind),
			Data: fmt.Appendf(nil, `{"from":%d,"to":%d,"acl_revision":%d,"deleted":%t}`, from, next.Version, next.ACLRevision, next.Deleted)}}, nil
	}
}

func pendingOf(t *testing.T, s store.Stores) map[string]string {
	t.Helper()
	ps, err := s.PendingEvents(t.Context(), "", "", 0)
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range ps {
		out[p.Tenant+" "+p.ID] = string(p.Data)
	}
	n, err := s.PendingCount(t.Context())
	require.NoError(t, err)
	require.Equal(t, len(ps), n, "PendingCount agrees with PendingEvents")
	return out
}

func retryState(fn func() (provenance.SourceState, error)) (provenance.SourceState, error) {
	return retry(fn)
}

// testOutboxRecordedWithTheChange checks that every accepted transition
// holds the events its PendingFunc returned, computed from the states the
// transaction saw, and that clearing removes exactly one.
func testOutboxRecordedWithTheChange(t *testing.T, s store.Stores) {
	ctx := t.Context()
	require.Empty(t, pendingOf(t, s))
	v1, err := retryState(func() (provenance.SourceState, error) {
		return s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: "d", ACL: provenance.PublicACL()}, eventOf(tenant, "changed"))
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, v1.Version)
	stored, _ := state(t, s, tenant, "d")
	require.Equal(t, v1, stored)
	require.Equal(t, map[string]string{
		"acme acme/d/1/changed": `{"from":0,"to":1,"acl_revision":0,"deleted":false}`,
	}, pendingOf(t, s))

	acl, err := retryState(func() (provenance.SourceState, error) {
		return s.SetACLRecording(ctx, tenant, "d", provenance.ACL{Groups: []string{"sre"}}, eventOf(tenant, "acl"))
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, acl.ACLRevision)
	del, err := retryState(func() (provenance.SourceState, error) {
		return s.DeleteRecording(ctx, tenant, store.Announcement{DocID: "d"}, eventOf(tenant, "deleted"))
	})
	require.NoError(t, err)
	require.True(t, del.Deleted)
	require.Equal(t, map[string]string{
		"acme acme/d/1/changed": `{"from":0,"to":1,"acl_revision":0,"deleted":false}`,
		"acme acme/d/1/acl":     `{"from":1,"to":1,"acl_revision":1,"deleted":false}`,
		"acme acme/d/2/deleted": `{"from":1,"to":2,"acl_revision":1,"deleted":true}`,
	}, pendingOf(t, s))

	acknowledge(t, s, tenant, []string{"acme/d/1/changed"}, nil)
	acknowledge(t, s, tenant, []string{"acme/d/1/changed"}, nil) // an absent event is no error
	acknowledge(t, s, other, []string{"acme/d/1/acl"}, nil)      // per tenant
	acknowledge(t, s, tenant, []string{"acme/d/2/deleted"}, nil)
	require.Equal(t, map[string]string{
		"acme acme/d/1/acl": `{"from":1,"to":1,"acl_revision":1,"deleted":false}`,
	}, pendingOf(t, s))

	// Deleting a deleted document leaves the registry as it is and still
	// records its deletion's event: it is published again.
	again, err := retryState(func() (provenance.SourceState, error) {
		return s.DeleteRecording(ctx, tenant, store.Announcement{DocID: "d"}, eventOf(tenant, "deleted"))
	})
	require.NoError(t, err)
	require.Equal(t, del, again)
	stored, _ = state(t, s, tenant, "d")
	require.Equal(t, del, stored)
	require.Contains(t, pendingOf(t, s), "acme acme/d/2/deleted")

	// Without a PendingFunc the Recording calls are the plain ones.
	plain, err := retryState(func() (provenance.SourceState, error) {
		return s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: "e", ACL: provenance.PublicACL()}, nil)
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, plain.Version)
	require.Len(t, pendingOf(t, s), 2)

	// Events that follow no registry change.
	require.NoError(t, s.RecordPending(ctx, []store.Pending{{Tenant: other, ID: "globex/x/1/extracted-2", Data: []byte("x")}}))
	require.Equal(t, "x", pendingOf(t, s)["globex globex/x/1/extracted-2"])
	require.ErrorIs(t, s.RecordPending(ctx, []store.Pending{{Tenant: "Bad Tenant", ID: "x"}}), store.ErrInvalid)
	require.ErrorIs(t, s.RecordPending(ctx, []store.Pending{{Tenant: tenant, ID: ""}}), store.ErrInvalid)
	require.Len(t, pendingOf(t, s), 3)
}

// testOutboxRefusedWriteRecordsNothing checks the other half: a
// transition the registry refuses, or one whose PendingFunc fails, writes
// neither the registry nor a record.
func testOutboxRefusedWriteRecordsNothing(t *testing.T, s store.Stores) {
	ctx := t.Context()
	before, err := retryState(func() (provenance.SourceState, error) {
		return s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: "d", Version: 5, ACL: provenance.PublicACL(), Title: "five"}, eventOf(tenant, "changed"))
	})
	require.NoError(t, err)
	acknowledge(t, s, tenant, []string{"acme/d/5/changed"}, nil)
	require.Empty(t, pendingOf(t, s))

	called := 0
	counting := func(cur *provenance.SourceState, next provenance.SourceState) ([]store.Pending, error) {
		called++
		return eventOf(tenant, "refused")(cur, next)
	}
	_, err = s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: "d", Version: 3, ACL: provenance.PublicACL()}, counting)
	require.ErrorIs(t, err, store.ErrStaleVersion)
	_, err = s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: "d", Version: provenance.MaxContentVersion + 1, ACL: provenance.PublicACL()}, counting)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: " padded", ACL: provenance.PublicACL()}, counting)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.SetACLRecording(ctx, tenant, "ghost", provenance.PublicACL(), counting)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.DeleteRecording(ctx, tenant, store.Announcement{DocID: "ghost"}, counting)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.DeleteRecording(ctx, tenant, store.Announcement{DocID: "d", Version: provenance.MaxContentVersion + 1}, counting)
	require.ErrorIs(t, err, store.ErrInvalid, "a deletion at a version the registry refuses")
	require.Zero(t, called, "a refused transition records nothing")

	// A PendingFunc that fails aborts the change.
	boom := errors.New("the event cannot be recorded")
	failing := func(*provenance.SourceState, provenance.SourceState) ([]store.Pending, error) { return nil, boom }
	_, err = s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: "d", ACL: provenance.ACL{Groups: []string{"sre"}}, Title: "six"}, failing)
	require.ErrorIs(t, err, boom)
	_, err = s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: "new", ACL: provenance.PublicACL()}, failing)
	require.ErrorIs(t, err, boom)
	_, err = s.SetACLRecording(ctx, tenant, "d", provenance.ACL{Groups: []string{"sre"}}, failing)
	require.ErrorIs(t, err, boom)
	_, err = s.DeleteRecording(ctx, tenant, store.Announcement{DocID: "d"}, failing)
	require.ErrorIs(t, err, boom)
	_, err = s.DeleteRecording(ctx, tenant, store.Announcement{DocID: "d", Version: 9}, failing)
	require.ErrorIs(t, err, boom, "nor is the later version written alone")
	_, err = s.DeleteRecording(ctx, tenant, store.Announcement{DocID: "new", Version: 9}, failing)
	require.ErrorIs(t, err, boom)
	// So does a record of another tenant (it could not be written with
	// this tenant's registry in one transaction) or without an id.
	_, err = s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: "d", Title: "six"}, eventOf(other, "changed"))
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.DeleteRecording(ctx, tenant, store.Announcement{DocID: "d"}, func(*provenance.SourceState, provenance.SourceState) ([]store.Pending, error) {
		return []store.Pending{{Tenant: tenant}}, nil
	})
	require.ErrorIs(t, err, store.ErrInvalid)

	after, _ := state(t, s, tenant, "d")
	require.Equal(t, before, after, "no refused or failed write moved the registry")
	_, found := state(t, s, tenant, "new")
	require.False(t, found)
	require.Empty(t, pendingOf(t, s))
}

// testOutboxConcurrent checks that concurrent changes of one document,
// each recording an event named by the version it got, all hold their
// event with what their own transaction saw (an optimistic adapter that
// retries records only its last attempt's).
func testOutboxConcurrent(t *testing.T, s store.Stores) {
	const n = 8
	var mu sync.Mutex
	got := map[int64]bool{}
	err := parallel(n, func(i int) error {
		st, err := retryState(func() (provenance.SourceState, error) {
			return s.AnnounceRecording(t.Context(), tenant, store.Announcement{DocID: "d", ACL: provenance.PublicACL()}, eventOf(tenant, "changed"))
		})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if got[st.Version] {
			return fmt.Errorf("version %d announced twice", st.Version)
		}
		got[st.Version] = true
		return nil
	})
	require.NoError(t, err)
	want := map[string]string{}
	for v := int64(1); v <= n; v++ {
		want[fmt.Sprintf("acme acme/d/%d/changed", v)] = fmt.Sprintf(`{"from":%d,"to":%d,"acl_revision":0,"deleted":false}`, v-1, v)
	}
	require.Equal(t, want, pendingOf(t, s))
}

// testOutboxInterrupted has another writer announce the same document
// while the PendingFunc of a change runs: an optimistic adapter's
// transaction then fails and runs again at the next version, one that
// serializes writers (bbolt) commits first and the other writer follows.
// Either way the outbox holds the record of the version the change took
// and nothing of an attempt that did not commit.
func testOutboxInterrupted(t *testing.T, s store.Stores) {
	ctx := t.Context()
	var intruder chan error
	pend := func(cur *provenance.SourceState, next provenance.SourceState) ([]store.Pending, error) {
		if intruder == nil {
			intruder = make(chan error, 1)
			go func() {
				_, err := retryState(func() (provenance.SourceState, error) {
					return s.Announce(ctx, tenant, store.Announcement{DocID: "d", ACL: provenance.PublicACL(), Title: "intruder"})
				})
				intruder <- err
			}()
			// Give the other writer the time to commit, if the adapter
			// lets it (one that serializes writers holds it until this
			// transaction ends).
			select {
			case err := <-intruder:
				intruder <- err
			case <-time.After(500 * time.Millisecond):
			}
		}
		return eventOf(tenant, "changed")(cur, next)
	}
	st, err := retryState(func() (provenance.SourceState, error) {
		return s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: "d", ACL: provenance.PublicACL()}, pend)
	})
	require.NoError(t, err)
	require.NoError(t, <-intruder)
	require.Equal(t, map[string]string{
		fmt.Sprintf("acme acme/d/%d/changed", st.Version): fmt.Sprintf(`{"from":%d,"to":%d,"acl_revision":0,"deleted":false}`, st.Version-1, st.Version),
	}, pendingOf(t, s))
	final, _ := state(t, s, tenant, "d")
	require.EqualValues(t, 2, final.Version, "both writers announced")
}

// testOutboxPaging checks the order (tenant, then id) and the paging of
// PendingEvents over ids as message ids hold them.
func testOutboxPaging(t *testing.T, s store.Stores) {
	ctx := t.Context()
	ids := []string{"acme/{x}:reg:y/1/changed", "acme/a/1/acl-1", "acme/a/1/changed", "acme/ünï/2/deleted", "acme/a b/3/changed"}
	var ps []store.Pending
	for _, id := range ids {
		ps = append(ps, store.Pending{Tenant: tenant, ID: id, Data: []byte("data of " + id)})
	}
	ps = append(ps, store.Pending{Tenant: other, ID: "globex/z/1/changed", Data: []byte("z")},
		store.Pending{Tenant: other, ID: "globex/a/1/changed", Data: []byte("a")})
	require.NoError(t, s.RecordPending(ctx, ps))
	all, err := s.PendingEvents(ctx, "", "", 0)
	require.NoError(t, err)
	var order []string
	for _, p := range all {
		order = append(order, p.Tenant+" "+p.ID)
	}
	require.Equal(t, []string{"acme acme/a b/3/changed", "acme acme/a/1/acl-1", "acme acme/a/1/changed",
		"acme acme/{x}:reg:y/1/changed", "acme acme/ünï/2/deleted", "globex globex/a/1/changed", "globex globex/z/1/changed"}, order)
	for _, p := range all {
		if p.Tenant == tenant {
			require.Equal(t, "data of "+p.ID, string(p.Data))
		}
	}
	for _, limit := range []int{1, 2, 3, 7, 8} {
		var paged []string
		afterT, afterID := "", ""
		for range 20 {
			page, err := s.PendingEvents(ctx, afterT, afterID, limit)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page), limit)
			if len(page) == 0 {
				break
			}
			for _, p := range page {
				paged = append(paged, p.Tenant+" "+p.ID)
			}
			afterT, afterID = page[len(page)-1].Tenant, page[len(page)-1].ID
		}
		require.Equal(t, order, paged, "pages of %d", limit)
	}
	n, err := s.PendingCount(ctx)
	require.NoError(t, err)
	require.Equal(t, 7, n)
}

// testOutboxDeletionAtALaterVersion checks a deletion that carries a later
// version (a webhook's update time): the version is announced and the
// document deleted in one transition, which records exactly one event,
// the deletion's; a version at or below the latest is ignored; an unknown
// document deleted at a version becomes known, deleted.
func testOutboxDeletionAtALaterVersion(t *testing.T, s store.Stores) {
	ctx := t.Context()
	v1, err := retryState(func() (provenance.SourceState, error) {
		return s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: "d", ACL: provenance.ACL{Groups: []string{"sre"}}, Title: "one", Source: "jira"}, nil)
	})
	require.NoError(t, err)
	calls := 0
	counting := func(cur *provenance.SourceState, next provenance.SourceState) ([]store.Pending, error) {
		calls++
		require.NotNil(t, cur)
		require.Equal(t, v1, *cur, "the PendingFunc sees the state before the whole transition")
		return eventOf(tenant, "deleted")(cur, next)
	}
	del, err := retryState(func() (provenance.SourceState, error) {
		calls = 0
		return s.DeleteRecording(ctx, tenant, store.Announcement{DocID: "d", Version: 5, ACL: v1.ACL, Title: "one", Source: "jira"}, counting)
	})
	require.NoError(t, err)
	require.Equal(t, 1, calls)
	require.EqualValues(t, 6, del.Version, "the later version is announced, the deletion follows it")
	require.True(t, del.Deleted)
	require.Equal(t, v1.ACL, del.ACL)
	require.Equal(t, "one", del.Title)
	stored, _ := state(t, s, tenant, "d")
	require.Equal(t, del, stored)
	require.Equal(t, map[string]string{
		"acme acme/d/6/deleted": `{"from":1,"to":6,"acl_revision":0,"deleted":true}`,
	}, pendingOf(t, s), "one event: no record of the announced version alone")

	// A version at or below the latest changes nothing more.
	again, err := retryState(func() (provenance.SourceState, error) {
		return s.DeleteRecording(ctx, tenant, store.Announcement{DocID: "d", Version: 6}, eventOf(tenant, "deleted"))
	})
	require.NoError(t, err)
	require.Equal(t, del, again)
	require.Len(t, pendingOf(t, s), 1)

	// A later version than a deletion's deletes again at a new version.
	later, err := retryState(func() (provenance.SourceState, error) {
		return s.DeleteRecording(ctx, tenant, store.Announcement{DocID: "d", Version: 10, ACL: v1.ACL}, eventOf(tenant, "deleted"))
	})
	require.NoError(t, err)
	require.EqualValues(t, 11, later.Version)
	require.True(t, later.Deleted)

	// An unknown document deleted at a version: known from then on, deleted.
	ghost, err := retryState(func() (provenance.SourceState, error) {
		return s.DeleteRecording(ctx, tenant, store.Announcement{DocID: "ghost", Version: 3, ACL: provenance.PublicACL()}, eventOf(tenant, "deleted"))
	})
	require.NoError(t, err)
	require.EqualValues(t, 4, ghost.Version)
	require.True(t, ghost.Deleted)
	require.Contains(t, pendingOf(t, s), "acme acme/ghost/4/deleted")
	require.Len(t, pendingOf(t, s), 3)
}

// acknowledge is Acknowledge retried while a concurrent writer wins.
func acknowledge(t *testing.T, s store.Stores, tn string, ids []string, content *store.ContentAck) {
	t.Helper()
	_, err := retry(func() (struct{}, error) { return struct{}{}, s.Acknowledge(t.Context(), tn, ids, content) })
	require.NoError(t, err, "acknowledging %v in %s", ids, tn)
}

// testAcknowledgeClears checks that Acknowledge removes exactly the named
// events of the tenant (absent ones are no error), with or without
// content, and that refused arguments remove nothing.
func testAcknowledgeClears(t *testing.T, s store.Stores) {
	ctx := t.Context()
	require.NoError(t, s.RecordPending(ctx, []store.Pending{
		{Tenant: tenant, ID: "acme/a/1/changed", Data: []byte("a")},
		{Tenant: tenant, ID: "acme/a/1/acl-1", Data: []byte("a acl")},
		{Tenant: tenant, ID: "acme/b/1/changed", Data: []byte("b")},
		{Tenant: tenant, ID: "acme/c/1/changed", Data: []byte("c")},
	}))
	require.NoError(t, s.Acknowledge(ctx, tenant, nil, nil), "nothing to acknowledge")
	require.Len(t, pendingOf(t, s), 4)

	for _, bad := range []struct {
		tn      string
		ids     []string
		content *store.ContentAck
	}{
		{"Bad Tenant", []string{"acme/a/1/changed"}, nil},
		{tenant, []string{"acme/a/1/changed", ""}, nil},
		{tenant, []string{"acme/a/1/changed", strings.Repeat("x", store.MaxPendingIDBytes+1)}, nil},
		{tenant, []string{"acme/a/1/changed"}, &store.ContentAck{DocID: " padded", Version: 1, Hash: "h"}},
	} {
		require.ErrorIs(t, s.Acknowledge(ctx, bad.tn, bad.ids, bad.content), store.ErrInvalid, "%+v", bad)
	}
	require.Len(t, pendingOf(t, s), 4, "a refused acknowledgement removes nothing")

	acknowledge(t, s, tenant, []string{"acme/a/1/changed", "acme/a/1/acl-1", "acme/absent/1/changed"}, nil)
	require.Equal(t, map[string]string{
		"acme acme/b/1/changed": "b",
		"acme acme/c/1/changed": "c",
	}, pendingOf(t, s))
	// With content of a document the registry does not know: the events
	// go all the same, and the document stays unknown.
	acknowledge(t, s, tenant, []string{"acme/b/1/changed"}, &store.ContentAck{DocID: "b", Version: 1, Hash: "h"})
	require.Equal(t, map[string]string{"acme acme/c/1/changed": "c"}, pendingOf(t, s))
	_, found := state(t, s, tenant, "b")
	require.False(t, found, "acknowledging content announces nothing")
	// Nor does it make a tenant known.
	acknowledge(t, s, "newco", []string{"newco/x/1/changed"}, &store.ContentAck{DocID: "x", Version: 1, Hash: "h"})
	tenants, err := s.Tenants(ctx)
	require.NoError(t, err)
	require.NotContains(t, tenants, "newco")
	require.Len(t, pendingOf(t, s), 1)
}

// testAcknowledgeContent checks that the content Acknowledge carries is
// recorded at the document's current version
// only, never on a deleted document, while the named events are removed
// in every case.
func testAcknowledgeContent(t *testing.T, s store.Stores) {
	ctx := t.Context()
	v1, err := retryState(func() (provenance.SourceState, error) {
		return s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: "d", ACL: provenance.PublicACL()}, eventOf(tenant, "changed"))
	})
	require.NoError(t, err)
	require.Empty(t, v1.ContentHash)
	acknowledge(t, s, tenant, []string{"acme/d/1/changed"}, &store.ContentAck{DocID: "d", Version: 1, Hash: "h1"})
	require.Empty(t, pendingOf(t, s))
	got, _ := state(t, s, tenant, "d")
	want := v1
	want.ContentHash = "h1"
	require.Equal(t, want, got, "the content is recorded and nothing else changes")

	// Content alone, with no event named.
	v2, err := retryState(func() (provenance.SourceState, error) {
		return s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: "d", ACL: provenance.PublicACL()}, eventOf(tenant, "changed"))
	})
	require.NoError(t, err)
	require.EqualValues(t, 2, v2.Version)
	require.Empty(t, v2.ContentHash, "a new version has no content recorded")
	acknowledge(t, s, tenant, nil, &store.ContentAck{DocID: "d", Version: 2, Hash: "h2"})
	got, _ = state(t, s, tenant, "d")
	require.Equal(t, "h2", got.ContentHash)
	require.Contains(t, pendingOf(t, s), "acme acme/d/2/changed", "no event named, none removed")

	// A version the document moved on from: the events go, the content
	// is not recorded.
	v3 := announce(t, s, tenant, store.Announcement{DocID: "d", ACL: provenance.PublicACL()})
	acknowledge(t, s, tenant, []string{"acme/d/2/changed"}, &store.ContentAck{DocID: "d", Version: 2, Hash: "late"})
	require.Empty(t, pendingOf(t, s))
	got, _ = state(t, s, tenant, "d")
	require.Equal(t, v3, got, "a hash for a version the document moved on from changes nothing")

	acknowledge(t, s, tenant, nil, &store.ContentAck{DocID: "d", Version: 3, Hash: "h3"})
	got, _ = state(t, s, tenant, "d")
	require.Equal(t, "h3", got.ContentHash, "at the current version it is")

	// A deleted document records no content.
	del, err := retry(func() (provenance.SourceState, error) { return s.MarkDeleted(ctx, tenant, "d") })
	require.NoError(t, err)
	require.NoError(t, s.RecordPending(ctx, []store.Pending{{Tenant: tenant, ID: "acme/d/4/deleted", Data: []byte("x")}}))
	acknowledge(t, s, tenant, []string{"acme/d/4/deleted"}, &store.ContentAck{DocID: "d", Version: del.Version, Hash: "h4"})
	got, _ = state(t, s, tenant, "d")
	require.Equal(t, del, got, "a deleted document records no content")
	require.Empty(t, pendingOf(t, s))

	// The content record counts as a registry write.
	if g, ok := s.(store.RegistryGenerations); ok {
		announce(t, s, tenant, store.Announcement{DocID: "e", ACL: provenance.PublicACL()})
		before, err := g.RegistryGeneration(ctx, tenant)
		require.NoError(t, err)
		acknowledge(t, s, tenant, nil, &store.ContentAck{DocID: "e", Version: 1, Hash: "h"})
		after, err := g.RegistryGeneration(ctx, tenant)
		require.NoError(t, err)
		require.Greater(t, after, before, "a content record raises the generation")
	}
}

// testAcknowledgeTenants checks that Acknowledge reaches one tenant: the
// same event ids and the same document of another tenant are left alone.
func testAcknowledgeTenants(t *testing.T, s store.Stores) {
	ctx := t.Context()
	for _, tn := range []string{tenant, other} {
		_, err := retryState(func() (provenance.SourceState, error) {
			return s.AnnounceRecording(ctx, tn, store.Announcement{DocID: "d", ACL: provenance.PublicACL()},
				func(*provenance.SourceState, provenance.SourceState) ([]store.Pending, error) {
					return []store.Pending{{Tenant: tn, ID: "shared/d/1/changed", Data: []byte(tn)}}, nil
				})
		})
		require.NoError(t, err)
	}
	acknowledge(t, s, tenant, []string{"shared/d/1/changed"}, &store.ContentAck{DocID: "d", Version: 1, Hash: "h"})
	require.Equal(t, map[string]string{"globex shared/d/1/changed": other}, pendingOf(t, s))
	mine, _ := state(t, s, tenant, "d")
	require.Equal(t, "h", mine.ContentHash)
	theirs, _ := state(t, s, other, "d")
	require.Empty(t, theirs.ContentHash, "another tenant's document of the same id is left alone")
}
