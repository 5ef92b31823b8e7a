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
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
)

func TestStatusCountsOnlyWhatTheCallerReads(t *testing.T) {
	ctx := t.Context()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	bus := streamtest.NewBus(t, streamtest.Options{})

	// A public runbook and an sre-only incident that brings an entity and an
	// edge of its own.
	docs := []struct {
		id  string
		acl provenance.ACL
		c   store.Contributions
	}{
		{"runbook-1", provenance.PublicACL(), store.Contributions{
			Entities: []store.EntityContribution{{ID: "service:cart", Type: "service", Name: "cart"},
				{ID: "service:cache", Type: "service", Name: "cache"}},
			Edges: []store.EdgeContribution{{Source: "service:cart", Relation: "uses", Target: "service:cache", Weight: 1}}}},
		{"incident-9", provenance.ACL{Groups: []string{"sre"}}, store.Contributions{
			Entities: []store.EntityContribution{{ID: "service:cart", Type: "service", Name: "cart"},
				{ID: "incident:incident-9", Type: "incident", Name: "incident-9"}},
			Edges: []store.EdgeContribution{{Source: "incident:incident-9", Relation: "affected", Target: "service:cart", Weight: 1}}}},
	}
	for _, d := range docs {
		_, err := st.Announce(ctx, "acme", store.Announcement{DocID: d.id, Version: 1, ACL: d.acl})
		require.NoError(t, err)
		_, err = st.Apply(ctx, "acme", d.id, 1, d.c)
		require.NoError(t, err)
	}

	c, err := status.NewCollector(st, bus, []string{"extractor"}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	a, err := auth.New([]auth.Token{
		{Token: "root", Tenant: "acme", Principal: "root", Admin: true},
		{Token: "sre", Tenant: "acme", Principal: "ann", Groups: []string{"sre"}},
		{Token: "guest", Tenant: "acme", Principal: "gus"},
	}, nil)
	require.NoError(t, err)
	srv := httptest.NewServer(c.Handler(a))
	t.Cleanup(srv.Close)
	get := func(token, query string) status.Report {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/status"+query, nil)
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
	type counts struct {
		Scope                               string
		Documents, Applied, Entities, Edges int
	}
	of := func(r status.Report) counts { return counts{r.Scope, r.Documents, r.Applied, r.Entities, r.Edges} }

	all := counts{status.ScopeTenant, 2, 2, 3, 2}
	require.Equal(t, all, of(get("root", "")), "an admin sees the tenant")
	require.Equal(t, all, of(get("sre", "")), "a caller who reads every document sees the tenant")
	guest := get("guest", "?audit=1")
	require.Equal(t, counts{status.ScopeReadable, 1, 1, 2, 1}, of(guest),
		"a caller sees only the public runbook and what it supports")
	require.Nil(t, guest.AuditFigures, "no audit figures, which count what the guest may not read")

	// Once the incident is public, the guest sees it too.
	_, err = st.SetACL(ctx, "acme", "incident-9", provenance.PublicACL())
	require.NoError(t, err)
	require.Equal(t, all, of(get("guest", "")))
}

// recordsOnly is a store without store.SourceIndexes: the readable counts
// then come from whole source records.
type recordsOnly struct{ status.Stores }

// TestReadableCountsFromSourceIndexes: the counts of what a reader may
// read are the same from the records' contribution indexes as from whole
// records, deleted and edited documents included.
func TestReadableCountsFromSourceIndexes(t *testing.T) {
	ctx := t.Context()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	bus := streamtest.NewBus(t, streamtest.Options{})
	ent := func(id string) store.EntityContribution {
		return store.EntityContribution{ID: id, Type: "service", Name: id[8:]}
	}
	edge := func(a, b string) store.EdgeContribution {
		return store.EdgeContribution{Source: a, Relation: "calls", Target: b, Weight: 1}
	}
	put := func(id string, v int64, acl provenance.ACL, c store.Contributions) {
		_, err := st.Announce(ctx, "acme", store.Announcement{DocID: id, Version: v, ACL: acl})
		require.NoError(t, err)
		_, err = st.Apply(ctx, "acme", id, v, c)
		require.NoError(t, err)
	}
	put("pub-1", 1, provenance.PublicACL(), store.Contributions{Entities: []store.EntityContribution{ent("service:a"), ent("service:b")},
		Edges: []store.EdgeContribution{edge("service:a", "service:b")}})
	put("pub-2", 1, provenance.PublicACL(), store.Contributions{Entities: []store.EntityContribution{ent("service:b"), ent("service:c")},
		Edges: []store.EdgeContribution{edge("service:b", "service:c")}})
	put("pub-2", 2, provenance.PublicACL(), store.Contributions{Entities: []store.EntityContribution{ent("service:a"), ent("service:b"), ent("service:d")},
		Edges: []store.EdgeContribution{edge("service:b", "service:d"), edge("service:a", "service:b")}})
	put("pub-3", 1, provenance.PublicACL(), store.Contributions{Entities: []store.EntityContribution{ent("service:e")}})
	_, err = st.MarkDeleted(ctx, "acme", "pub-3")
	require.NoError(t, err)
	_, err = st.Delete(ctx, "acme", "pub-3", 2)
	require.NoError(t, err)
	put("hidden-1", 1, provenance.ACL{Groups: []string{"sre"}}, store.Contributions{Entities: []store.EntityContribution{ent("service:f")}})
	// Deleted in the graph, not yet in the registry (the deletion's
	// announcement is on its way): counted as a document, not as applied.
	put("pub-4", 1, provenance.PublicACL(), store.Contributions{Entities: []store.EntityContribution{ent("service:g")}})
	_, err = st.Delete(ctx, "acme", "pub-4", 2)
	require.NoError(t, err)

	guest := provenance.Caller{Tenant: "acme", Principal: "gus"}
	count := func(s status.Stores) status.Report {
		c, err := status.NewCollector(s, bus, []string{"extractor"}, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		r, err := c.CollectFor(ctx, guest, false)
		require.NoError(t, err)
		return r
	}
	fromIndexes, fromRecords := count(st), count(recordsOnly{st})
	require.Equal(t, status.ScopeReadable, fromIndexes.Scope)
	require.Equal(t, []int{3, 2, 3, 2}, []int{fromIndexes.Documents, fromIndexes.Applied, fromIndexes.Entities, fromIndexes.Edges},
		"pub-1 and pub-2 (version 2): a, b, d; a→b, b→d; pub-4 deleted")
	require.Equal(t, fromRecords, fromIndexes)
}
