//go:build integration

package query_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
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
