package status_test

import (
	"encoding/json"
	"net/http"
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

// gauge reads a tenant's value of a gauge from reg (-1 when absent).
func gauge(t *testing.T, reg prometheus.Gatherer, name, tenant string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tenant" && l.GetValue() == tenant {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// TestAuditComparesVectorACLsWithRegistry indexes two documents' items,
// then changes the registry's ACL of one without telling the vector index
// (a lost ACL event): the audit counts its items as ACL mismatches, in the
// report and the gauge, until the ACL is applied to the index. Items of a
// document the registry deleted or never knew are vector orphans.
func TestAuditComparesVectorACLsWithRegistry(t *testing.T) {
	ctx := t.Context()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	ix, err := vembedded.Open(filepath.Join(t.TempDir(), "vectors.db"), vembedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ix.Close() })

	sec := provenance.ACL{Groups: []string{"sec"}}
	acls := map[string]provenance.ACL{"runbook-1": provenance.PublicACL(), "hush-1": sec}
	for _, doc := range []string{"runbook-1", "hush-1"} {
		_, err := st.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: 1, ACL: acls[doc]})
		require.NoError(t, err)
		_, err = st.Apply(ctx, "acme", doc, 1, store.Contributions{
			Entities: []store.EntityContribution{{ID: "service:" + doc, Type: "service", Name: doc}}})
		require.NoError(t, err)
	}
	source := func(doc, unit string) vector.Source {
		return vector.Source{SourceRef: provenance.SourceRef{DocID: doc, Version: 1, TextUnit: unit}, ACL: acls[doc]}
	}
	item := func(id string, kind vector.Kind, v []float32, srcs ...vector.Source) vector.Item {
		return vector.Item{ID: id, Kind: kind, Vector: v, Text: id, Sources: srcs}
	}
	require.NoError(t, ix.Upsert(ctx, "acme", []vector.Item{
		item("runbook-1#0", vector.KindTextUnit, []float32{1, 0}, source("runbook-1", "0")),
		item("hush-1#0", vector.KindTextUnit, []float32{0, 1}, source("hush-1", "0")),
		item("hush-1#1", vector.KindTextUnit, []float32{1, 1}, source("hush-1", "1")),
		item("c-1", vector.KindReport, []float32{1, 0}, source("runbook-1", ""), source("hush-1", "")),
	}))

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
		require.NoError(t, c.Audit(ctx))
		require.EqualValues(t, r.ACLMismatches, gauge(t, reg, "kgstream_vector_acl_mismatches", "acme"))
		require.EqualValues(t, r.VectorOrphans, gauge(t, reg, "kgstream_vector_orphans", "acme"))
		return *r.AuditFigures
	}
	f := audit()
	require.Zero(t, f.ACLMismatches, "%v", f.Problems)
	require.Zero(t, f.VectorOrphans, "%v", f.Problems)

	// The registry narrows hush-1; the ACL event never reaches the index.
	narrowed := provenance.ACL{Principals: []string{"ann"}, Groups: []string{"sec", "sec"}}
	_, err = st.SetACL(ctx, "acme", "hush-1", narrowed)
	require.NoError(t, err)
	f = audit()
	require.Equal(t, 3, f.ACLMismatches, "hush-1's two units and the report built on it: %v", f.Problems)
	require.Zero(t, f.VectorOrphans)
	require.Contains(t, f.Problems, `vector text_unit "hush-1#0": holds an ACL of "hush-1" other than the registry's`)

	// The ACL event applied (the reporter copies the registry's ACL).
	cur, err := st.Sources(ctx, "acme", []string{"hush-1"})
	require.NoError(t, err)
	require.NoError(t, ix.UpdateACL(ctx, "acme", "hush-1", cur["hush-1"].ACL))
	f = audit()
	require.Zero(t, f.ACLMismatches, "%v", f.Problems)

	// Items of a deleted document and of one the registry never saw.
	_, err = st.MarkDeleted(ctx, "acme", "runbook-1")
	require.NoError(t, err)
	ghost := vector.Source{SourceRef: provenance.SourceRef{DocID: "ghost-1", Version: 1}, ACL: provenance.PublicACL()}
	require.NoError(t, ix.Upsert(ctx, "acme", []vector.Item{item("ghost-1#0", vector.KindTextUnit, []float32{1, 0}, ghost)}))
	f = audit()
	require.Equal(t, 3, f.VectorOrphans, "runbook-1#0, the report and ghost-1#0: %v", f.Problems)
	require.Zero(t, f.ACLMismatches)
}

// getReport is GET /v1/status as token.
func getReport(t *testing.T, base, token, query string) status.Report {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/v1/status"+query, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var r status.Report
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	return r
}
