//go:build integration

package query_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/query"
)

func TestAggregateIndexMatchesScanOnSeed(t *testing.T) {
	st := openStore(t)
	loadSeed(t, st, tenantAcme)
	loadGlobex(t, st)
	callers := []provenance.Caller{
		{Tenant: tenantAcme, Principal: "alice", Groups: []string{"oncall"}},
		{Tenant: tenantAcme, Principal: "eve"}, // reads the public catalog only
		{Tenant: tenantGlobex, Principal: "carol", Groups: []string{"oncall"}},
	}
	require.Positive(t, requireSameAggregates(t, st, tenantAcme, callers))
	// A revoked postmortem and a deleted one change both the same way.
	_, err := st.Announce(t.Context(), tenantAcme, store.Announcement{DocID: "INC-101", Version: 2, ACL: provenance.ACL{Groups: []string{"nobody"}}})
	require.NoError(t, err)
	_, err = st.Delete(t.Context(), tenantAcme, "INC-112", 2)
	require.NoError(t, err)
	require.Positive(t, requireSameAggregates(t, st, tenantAcme, callers))
}

func TestNameIndexMapsAsTheScanOnSeed(t *testing.T) {
	st := openStore(t)
	loadSeed(t, st, tenantAcme)
	callers := []provenance.Caller{
		{Tenant: tenantAcme, Principal: "alice", Groups: []string{"oncall"}},
		{Tenant: tenantAcme, Principal: "eve"},
	}
	questions := []string{
		"Which teams were affected by incidents involving cert-manager?",
		"What happened to the certmanager and the DNS resolver?",
		"Why did checkout-api fail in INC-101?",
		"Tell me about connection pool exhaustion and disk full",
		"What did the identity team own?",
	}
	require.Positive(t, requireSameMappings(t, st, callers, questions))
}

// TestKeptCommunitiesOfAnswersAsTheStore: local search reads the
// communities of its seeds from the kept derived set when there is one;
// for every entity of the seed, and for sets of them, that gives what the
// store's member index gives, in the same order.
func TestKeptCommunitiesOfAnswersAsTheStore(t *testing.T) {
	st := openStore(t)
	loadSeed(t, st, tenantAcme)
	ctx := t.Context()
	cs, err := st.Communities(ctx, tenantAcme)
	require.NoError(t, err)
	require.NotEmpty(t, cs)
	es, err := st.EntitiesByType(ctx, tenantAcme, "")
	require.NoError(t, err)
	var ids []string
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	sets := [][]string{nil, {"component:absent"}, ids}
	for i, id := range ids {
		sets = append(sets, []string{id}, []string{id, ids[(i*7+3)%len(ids)]})
	}
	for _, set := range sets {
		want, err := st.CommunitiesOf(ctx, tenantAcme, set)
		require.NoError(t, err)
		got := query.CommunitiesOfKept(cs, set)
		wantIDs, gotIDs := []string{}, []string{}
		for _, c := range want {
			wantIDs = append(wantIDs, c.ID)
		}
		for _, c := range got {
			gotIDs = append(gotIDs, c.ID)
		}
		require.Equal(t, wantIDs, gotIDs, "%v", set)
	}
}
