package status_test

import (
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/vector"
	vembedded "github.com/kgstream/kgstream/pkg/vector/embedded"
)

// TestAuditCountsStaleVectorItems indexes a document's text unit and a
// report built on it at version 1, then announces version 2 in the
// registry without re-indexing (a re-index still to come, or lost): both
// items are stale_vectors, in the report and the gauge, until the index
// holds version 2. The ACL is unchanged, so they are no ACL mismatches;
// an item of a deleted document is an orphan, not stale.
func TestAuditCountsStaleVectorItems(t *testing.T) {
	ctx := t.Context()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	ix, err := vembedded.Open(filepath.Join(t.TempDir(), "vectors.db"), vembedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ix.Close() })
	for _, doc := range []string{"runbook-1", "old-1"} {
		_, err := st.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: 1, ACL: provenance.PublicACL()})
		require.NoError(t, err)
		_, err = st.Apply(ctx, "acme", doc, 1, store.Contributions{
			Entities: []store.EntityContribution{{ID: "service:" + doc, Type: "service", Name: doc}}})
		require.NoError(t, err)
	}
	source := func(doc string, version int64) vector.Source {
		return vector.Source{SourceRef: provenance.SourceRef{DocID: doc, Version: version}, ACL: provenance.PublicACL()}
	}
	index := func(version int64) {
		t.Helper()
		require.NoError(t, ix.Upsert(ctx, "acme", []vector.Item{
			{ID: "runbook-1#0", Kind: vector.KindTextUnit, Vector: []float32{1, 0}, Text: "u", Sources: []vector.Source{source("runbook-1", version)}},
			{ID: "c-1", Kind: vector.KindReport, Vector: []float32{0, 1}, Text: "r", Sources: []vector.Source{source("runbook-1", version), source("old-1", 1)}},
			{ID: "old-1#0", Kind: vector.KindTextUnit, Vector: []float32{1, 1}, Text: "o", Sources: []vector.Source{source("old-1", 1)}},
		}))
	}
	index(1)

	reg := prometheus.NewRegistry()
	c, err := status.NewCollector(st, nil, nil, nil, reg)
	require.NoError(t, err)
	c.WithVectors(ix)
	a, err := auth.New([]auth.Token{{Token: "root", Tenant: "acme", Principal: "root", Admin: true}}, nil)
	require.NoError(t, err)
	srv := httptest.NewServer(c.Handler(a))
	t.Cleanup(srv.Close)
	audit := func() status.AuditFigures {
		t.Helper()
		r := getReport(t, srv.URL, "root", "?audit=1")
		require.True(t, r.Audited)
		require.NotNil(t, r.AuditFigures)
		require.EqualValues(t, r.StaleVectors, gauge(t, reg, "kgstream_vector_stale", "acme"))
		return *r.AuditFigures
	}
	f := audit()
	require.Zero(t, f.StaleVectors, "%v", f.Problems)

	_, err = st.Announce(ctx, "acme", store.Announcement{DocID: "runbook-1", Version: 2, ACL: provenance.PublicACL()})
	require.NoError(t, err)
	f = audit()
	require.Equal(t, 2, f.StaleVectors, "runbook-1#0 and c-1: %v", f.Problems)
	require.Zero(t, f.ACLMismatches)
	require.Zero(t, f.VectorOrphans)
	require.Contains(t, f.Problems, `vector text_unit "runbook-1#0": built from version 1 of "runbook-1", the registry's is 2`)
	require.NoError(t, c.Audit(ctx))
	require.EqualValues(t, 2, gauge(t, reg, "kgstream_vector_stale", "acme"), "the periodic audit sets the gauge too")

	index(2)
	_, err = st.MarkDeleted(ctx, "acme", "old-1")
	require.NoError(t, err)
	f = audit()
	require.Zero(t, f.StaleVectors, "%v", f.Problems)
	require.Equal(t, 2, f.VectorOrphans, "c-1 and old-1#0 are orphans, not stale: %v", f.Problems)
}
