package status_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
)

// listingStore counts the registry listings status makes (one per
// computation of a caller's counts) and, while gate is set, holds each
// until gate is closed, telling entered first.
type listingStore struct {
	*embedded.Store
	listings atomic.Int64
	entered  chan struct{}
	gate     chan struct{}
}

func (s *listingStore) ListSources(ctx context.Context, tenant string) ([]provenance.SourceState, error) {
	s.listings.Add(1)
	if s.gate != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-s.gate
	}
	return s.Store.ListSources(ctx, tenant)
}

// TestReadableCountsKeptUntilTheTenantChanges: the counts of a caller who
// may not read every document are computed once and served again while
// nothing changes; an applied change of the graph alone, a registry write
// alone (an ACL revocation) each make them computed afresh and exact;
// another caller has its own; the audit is never served kept; eight
// callers asking at once cost one computation.
func TestReadableCountsKeptUntilTheTenantChanges(t *testing.T) {
	ctx := t.Context()
	es, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { es.Close() })
	st := &listingStore{Store: es}
	runbook := store.Contributions{
		Entities: []store.EntityContribution{{ID: "service:cart", Type: "service", Name: "cart"},
			{ID: "service:cache", Type: "service", Name: "cache"}},
		Edges: []store.EdgeContribution{{Source: "service:cart", Relation: "uses", Target: "service:cache", Weight: 1}}}
	hush := store.Contributions{Entities: []store.EntityContribution{{ID: "service:vault", Type: "service", Name: "vault"}}}
	for _, d := range []struct {
		id  string
		acl provenance.ACL
		c   store.Contributions
	}{{"runbook-1", provenance.PublicACL(), runbook}, {"hush-1", provenance.ACL{Groups: []string{"sec"}}, hush}} {
		_, err := st.Announce(ctx, "acme", store.Announcement{DocID: d.id, Version: 1, ACL: d.acl})
		require.NoError(t, err)
		_, err = st.Apply(ctx, "acme", d.id, 1, d.c)
		require.NoError(t, err)
	}
	c, err := status.NewCollector(st, nil, nil, nil, nil)
	require.NoError(t, err)
	rita := provenance.Caller{Tenant: "acme", Principal: "rita", Groups: []string{"ops", "dev"}}
	type counts struct{ Documents, Applied, Entities, Edges int }
	collect := func(who provenance.Caller, audit bool) counts {
		t.Helper()
		r, err := c.CollectFor(ctx, who, audit)
		require.NoError(t, err)
		require.Equal(t, status.ScopeReadable, r.Scope)
		return counts{r.Documents, r.Applied, r.Entities, r.Edges}
	}
	computed := func(want int64, what string) {
		t.Helper()
		require.Equal(t, want, st.listings.Load(), "computations after %s", what)
	}

	require.Equal(t, counts{1, 1, 2, 1}, collect(rita, false))
	computed(1, "the first request")
	require.Equal(t, counts{1, 1, 2, 1}, collect(rita, false))
	require.Equal(t, counts{1, 1, 2, 1}, collect(provenance.Caller{Tenant: "acme", Principal: "rita", Groups: []string{"dev", "ops", "dev"}}, false))
	computed(1, "the same caller again, its groups in another order")

	require.Equal(t, counts{1, 1, 2, 1}, collect(provenance.Caller{Tenant: "acme", Principal: "ravi"}, false))
	computed(2, "another caller")

	// The graph alone changes: the runbook's next version applied without
	// a registry write (as the resolver applies what the gateway
	// announced before).
	more := runbook
	more.Entities = append(append([]store.EntityContribution(nil), runbook.Entities...), store.EntityContribution{ID: "service:queue", Type: "service", Name: "queue"})
	_, err = st.Apply(ctx, "acme", "runbook-1", 2, more)
	require.NoError(t, err)
	require.Equal(t, counts{1, 1, 3, 1}, collect(rita, false), "the applied change counts at once")
	computed(3, "an applied change")

	// The registry alone changes: the runbook is revoked from everyone
	// but group sec.
	_, err = st.SetACL(ctx, "acme", "runbook-1", provenance.ACL{Groups: []string{"sec"}})
	require.NoError(t, err)
	require.Equal(t, counts{0, 0, 0, 0}, collect(rita, false), "the revocation counts at once")
	computed(4, "a revocation")

	require.Equal(t, counts{0, 0, 0, 0}, collect(rita, true))
	require.Equal(t, counts{0, 0, 0, 0}, collect(rita, true))
	computed(6, "two audits")

	// Eight at once, the generations unchanged since a revocation: one
	// computation, which the others wait for or find kept.
	_, err = st.SetACL(ctx, "acme", "runbook-1", provenance.PublicACL())
	require.NoError(t, err)
	st.entered, st.gate = make(chan struct{}, 1), make(chan struct{})
	var wg sync.WaitGroup
	got, errs := make([]status.Report, 8), make([]error, 8)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = c.CollectFor(ctx, rita, false) })
	}
	<-st.entered
	close(st.gate)
	wg.Wait()
	for i, r := range got {
		require.NoError(t, errs[i])
		require.Equal(t, counts{1, 1, 3, 1}, counts{r.Documents, r.Applied, r.Entities, r.Edges})
	}
	computed(7, "eight callers at once")
}
