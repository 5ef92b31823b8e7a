//go:build integration

package query_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/query"
)

func TestSeedGraphSize(t *testing.T) {
	f := newFixture(t)
	st, err := f.st.Stats(t.Context(), tenantAcme)
	require.NoError(t, err)
	// EXPECTED.md: 36 nodes / 39 edges with normalisation-key resolution.
	require.Equal(t, 36, st.Entities)
	require.Equal(t, 39, st.Edges)
}

func TestPathsCertManagerTeams(t *testing.T) {
	f := newFixture(t)
	var p pathsResp
	f.get(certPaths, tokAlice, http.StatusOK, &p)
	require.Equal(t, "component:certmanager", p.Start.ID)
	require.Equal(t, "component", p.Start.Type)
	require.Equal(t, []string{"Discovery", "Identity", "Messaging", "Payments"}, p.terminalNames())
	require.False(t, p.Truncated)
	require.Len(t, p.Rows, 4)
	incidents := map[string]bool{}
	for _, r := range p.Rows {
		require.Len(t, r.Nodes, 4)
		require.Len(t, r.Edges, 3)
		incidents[r.Nodes[1].Name] = true
		for i, e := range r.Edges {
			require.NotEmpty(t, e.Citations, "edge %d of row %v", i, r.Nodes)
			for _, c := range e.Citations {
				require.EqualValues(t, 1, c.Version)
				if e.Relation == "owned_by" {
					// Catalog facts have no text units: a citation without one.
					require.Equal(t, provenance.SourceRef{DocID: catalogDoc, Version: 1}, c)
				} else {
					require.NotEmpty(t, c.TextUnit)
				}
			}
		}
		// ~involved is followed backwards: the edge still reads incident -> component.
		require.Equal(t, "involved", r.Edges[0].Relation)
		require.Equal(t, "component:certmanager", r.Edges[0].Target)
	}
	require.Equal(t, map[string]bool{"INC-101": true, "INC-112": true, "INC-121": true}, incidents)

	// Deterministic: the same query gives the same body.
	var again pathsResp
	f.get(certPaths, tokAlice, http.StatusOK, &again)
	require.Equal(t, p, again)

	// Any spelling resolves to the same node, with or without a type.
	for _, start := range []string{"component:Cert%20Manager", "component:certmanager", "Cert%20Manager", "certmanager"} {
		var q pathsResp
		f.get("/v1/paths?start="+start+"&rels=~involved,affected,owned_by", tokAlice, http.StatusOK, &q)
		require.Equal(t, p.terminalNames(), q.terminalNames(), start)
	}
}

func TestPathsTruncated(t *testing.T) {
	f := newFixture(t).withConfig(query.Config{MaxPathRows: 2})
	var p pathsResp
	f.get(certPaths, tokAlice, http.StatusOK, &p)
	require.True(t, p.Truncated)
	require.Len(t, p.Rows, 2)
	// Terminal counts still cover every path found.
	require.Equal(t, []string{"Discovery", "Identity", "Messaging", "Payments"}, p.terminalNames())
}

func TestAggregateFailureModes(t *testing.T) {
	f := newFixture(t)
	var a aggResp
	f.get("/v1/aggregate?type=incident&rel=failure", tokAlice, http.StatusOK, &a)
	require.Equal(t, []string{
		"expired certificate 3 [INC-101, INC-112, INC-121]",
		"unstaged config push 3 [INC-104, INC-115, INC-127]",
		"connection pool exhaustion 2 [INC-107, INC-124]",
		"disk full 1 [INC-130]",
		"dns misconfiguration 1 [INC-118]",
	}, a.summary())
	for _, g := range a.Groups {
		for _, m := range g.Members {
			require.NotEmpty(t, m.Citations)
			require.Equal(t, m.Name, m.Citations[0].DocID)
		}
	}

	// Backwards: services grouped by the incidents that affected them.
	var b aggResp
	f.get("/v1/aggregate?type=service&rel=~affected", tokAlice, http.StatusOK, &b)
	require.Equal(t, "INC-101 2 [auth-service, checkout-api]", b.summary()[0])
	require.Len(t, b.Groups, 10)
}

func TestEditMakesDerivedStaleButNotDirect(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	// INC-112 is edited: the registry has v2, the graph still holds v1.
	_, err := f.st.Announce(ctx, tenantAcme, store.Announcement{DocID: "INC-112", Version: 2, ACL: incidentACL()})
	require.NoError(t, err)

	// Reports built on INC-112 v1 are no longer admitted, for anyone.
	for _, tok := range []string{tokAlice, tokBob} {
		status, code := f.errorCode(http.MethodGet, "/v1/reports/r-c-0-cert", tok, nil)
		require.Equal(t, http.StatusNotFound, status)
		require.Equal(t, "not_found", code)
	}
	var cs communitiesResp
	f.get("/v1/communities", tokAlice, http.StatusOK, &cs)
	require.Equal(t, []string{"c-0-dns"}, cs.ids())
	require.Empty(t, cs.Communities[0].Parent, "a parent the caller may not see is not named")
	f.get("/v1/reports/r-c-0-dns", tokAlice, http.StatusOK, nil)

	// Direct contributions of v1 stay readable until v2 is applied.
	var p pathsResp
	f.get(certPaths, tokAlice, http.StatusOK, &p)
	require.Contains(t, p.terminalNames(), "Discovery")
}

func TestRevocation(t *testing.T) {
	f := newFixture(t)
	// alice reads INC-101 through oncall; revoke it, keep sre (bob).
	_, err := f.st.SetACL(t.Context(), tenantAcme, "INC-101", provenance.ACL{Groups: []string{"sre"}})
	require.NoError(t, err)

	t.Run("paths", func(t *testing.T) {
		var p pathsResp
		f.get(certPaths, tokAlice, http.StatusOK, &p)
		require.Equal(t, []string{"Discovery", "Messaging"}, p.terminalNames())
		require.NotContains(t, p.docs(), "INC-101")
		var b pathsResp
		f.get(certPaths, tokBob, http.StatusOK, &b)
		require.Equal(t, []string{"Discovery", "Identity", "Messaging", "Payments"}, b.terminalNames())
		require.Contains(t, b.docs(), "INC-101")
		// INC-101 itself is unknown to alice, as if absent.
		status, code := f.errorCode(http.MethodGet, "/v1/paths?start=incident:INC-101&rels=affected", tokAlice, nil)
		require.Equal(t, http.StatusNotFound, status)
		require.Equal(t, "unknown_entity", code)
	})
	t.Run("aggregate", func(t *testing.T) {
		var a aggResp
		f.get("/v1/aggregate?type=incident&rel=failure", tokAlice, http.StatusOK, &a)
		require.Contains(t, a.summary(), "expired certificate 2 [INC-112, INC-121]")
		var b aggResp
		f.get("/v1/aggregate?type=incident&rel=failure", tokBob, http.StatusOK, &b)
		require.Equal(t, "expired certificate 3 [INC-101, INC-112, INC-121]", b.summary()[0])
	})
	t.Run("entities", func(t *testing.T) {
		status, _ := f.errorCode(http.MethodGet, "/v1/entities/incident/INC-101", tokAlice, nil)
		require.Equal(t, http.StatusNotFound, status)
		f.get("/v1/entities/incident/INC-101", tokBob, http.StatusOK, nil)
		var l struct {
			Entities []entity `json:"entities"`
			Total    int      `json:"total"`
		}
		f.get("/v1/entities?type=incident", tokAlice, http.StatusOK, &l)
		require.Equal(t, 9, l.Total)
		f.get("/v1/entities?type=incident", tokBob, http.StatusOK, &l)
		require.Equal(t, 10, l.Total)

		var d struct {
			In           []edge `json:"in"`
			Descriptions []struct {
				Text      string                 `json:"text"`
				Citations []provenance.SourceRef `json:"citations"`
			} `json:"descriptions"`
		}
		f.get("/v1/entities/component/cert-manager", tokAlice, http.StatusOK, &d)
		for _, e := range d.In {
			require.NotEqual(t, "incident:inc101", e.Source)
		}
		require.Len(t, d.In, 2)
		for _, ds := range d.Descriptions {
			require.NotContains(t, ds.Text, "INC-101")
		}
	})
	t.Run("query", func(t *testing.T) {
		body := map[string]any{"mode": "local", "question": "Which teams were affected by incidents involving cert-manager?"}
		var q queryResp
		require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokAlice, body, &q))
		require.NotContains(t, q.Answer, "INC-101")
		for _, c := range q.Citations {
			require.NotEqual(t, "INC-101", c.DocID)
		}
		for _, it := range q.Context {
			require.NotContains(t, it.Text, "INC-101", it.ID)
			require.NotEqual(t, query.KindReport, it.Kind, "every report here is built on INC-101")
		}
		var b queryResp
		require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokBob, body, &b))
		require.Contains(t, b.Answer, "INC-101 involved cert-manager")
	})
	t.Run("reports", func(t *testing.T) {
		for _, id := range []string{"r-c-0-cert", "r-c-1-all"} {
			status, code := f.errorCode(http.MethodGet, "/v1/reports/"+id, tokAlice, nil)
			require.Equal(t, http.StatusNotFound, status)
			require.Equal(t, "not_found", code)
			f.get("/v1/reports/"+id, tokBob, http.StatusOK, nil)
		}
		// Absent and not admitted answer the same body.
		var absent, hidden map[string]any
		require.Equal(t, http.StatusNotFound, f.do(http.MethodGet, "/v1/reports/r-nope", tokAlice, nil, &absent))
		require.Equal(t, http.StatusNotFound, f.do(http.MethodGet, "/v1/reports/r-c-0-cert", tokAlice, nil, &hidden))
		require.Equal(t, absent, hidden)
		var cs communitiesResp
		f.get("/v1/communities", tokAlice, http.StatusOK, &cs)
		require.Equal(t, []string{"c-0-dns"}, cs.ids())
		f.get("/v1/communities", tokBob, http.StatusOK, &cs)
		require.Equal(t, []string{"c-0-cert", "c-0-dns", "c-1-all"}, cs.ids())
	})
}

func TestDeletionHidesEverything(t *testing.T) {
	f := newFixture(t)
	_, err := f.st.MarkDeleted(t.Context(), tenantAcme, "INC-101")
	require.NoError(t, err)
	var p pathsResp
	f.get(certPaths, tokBob, http.StatusOK, &p)
	require.Equal(t, []string{"Discovery", "Messaging"}, p.terminalNames())
}

func TestOtherTenantIsolation(t *testing.T) {
	f := newFixture(t)
	var p pathsResp
	f.get("/v1/paths?start=component:cert-manager&rels=~involved,affected", tokCarol, http.StatusOK, &p)
	require.Equal(t, []string{"billing"}, p.terminalNames())
	require.Equal(t, []string{"G-1"}, p.docs())

	var a aggResp
	f.get("/v1/aggregate?type=incident&rel=failure", tokCarol, http.StatusOK, &a)
	require.Empty(t, a.Groups)
	var l struct {
		Total int `json:"total"`
	}
	f.get("/v1/entities", tokCarol, http.StatusOK, &l)
	require.Equal(t, 3, l.Total)
	status, _ := f.errorCode(http.MethodGet, "/v1/reports/r-c-0-cert", tokCarol, nil)
	require.Equal(t, http.StatusNotFound, status)
	var cs communitiesResp
	f.get("/v1/communities", tokCarol, http.StatusOK, &cs)
	require.Empty(t, cs.Communities)
	status, _ = f.errorCode(http.MethodGet, "/v1/entities/team/payments", tokCarol, nil)
	require.Equal(t, http.StatusNotFound, status)

	// And acme callers never see globex's G-1.
	f.get("/v1/paths?start=component:cert-manager&rels=~involved", tokAlice, http.StatusOK, &p)
	require.NotContains(t, p.docs(), "G-1")
}

func TestEntities(t *testing.T) {
	f := newFixture(t)
	var l struct {
		Entities []entity `json:"entities"`
		Total    int      `json:"total"`
	}
	f.get("/v1/entities?q=Cert%20Man", tokAlice, http.StatusOK, &l)
	require.Equal(t, 1, l.Total)
	require.Equal(t, "component:certmanager", l.Entities[0].ID)

	f.get("/v1/entities?type=team", tokAlice, http.StatusOK, &l)
	require.Equal(t, 6, l.Total)
	f.get("/v1/entities?type=team&limit=2&offset=1", tokAlice, http.StatusOK, &l)
	require.Equal(t, 6, l.Total)
	require.Len(t, l.Entities, 2)
	require.Equal(t, []string{"team:discovery", "team:identity"}, []string{l.Entities[0].ID, l.Entities[1].ID})
	f.get("/v1/entities?limit=1000", tokAlice, http.StatusOK, &l)
	require.Equal(t, 36, l.Total)

	var d struct {
		entity
		In          []edge   `json:"in"`
		Out         []edge   `json:"out"`
		Communities []string `json:"communities"`
	}
	f.get("/v1/entities/team/payments", tokAlice, http.StatusOK, &d)
	require.Equal(t, "Payments", d.Name)
	require.Len(t, d.In, 1)
	require.Equal(t, "service:checkoutapi", d.In[0].Source)
	require.Equal(t, []provenance.SourceRef{{DocID: catalogDoc, Version: 1}}, d.In[0].Citations)
	require.Empty(t, d.Out)

	f.get("/v1/entities/component/"+url.PathEscape("Cert Manager"), tokAlice, http.StatusOK, &d)
	require.Equal(t, []string{"c-0-cert", "c-1-all"}, d.Communities)
	require.Len(t, d.In, 3)
}

func TestCommunitiesAndReports(t *testing.T) {
	f := newFixture(t)
	var cs communitiesResp
	f.get("/v1/communities?level=0", tokAlice, http.StatusOK, &cs)
	require.Equal(t, []string{"c-0-cert", "c-0-dns"}, cs.ids())
	require.Equal(t, "c-1-all", cs.Communities[0].Parent)
	require.Equal(t, "r-c-0-cert", cs.Communities[0].ReportID)
	require.Equal(t, 5, cs.Communities[0].Size)
	f.get("/v1/communities?level=1", tokAlice, http.StatusOK, &cs)
	require.Equal(t, []string{"c-1-all"}, cs.ids())
	require.Equal(t, []string{"c-0-cert", "c-0-dns"}, cs.Communities[0].Children)

	var r struct {
		ID        string                 `json:"id"`
		Community string                 `json:"community"`
		Sources   []provenance.SourceRef `json:"sources"`
		Findings  []struct {
			Citations []provenance.SourceRef `json:"citations"`
		} `json:"findings"`
	}
	f.get("/v1/reports/r-c-0-cert", tokAlice, http.StatusOK, &r)
	require.Equal(t, "c-0-cert", r.Community)
	require.Len(t, r.Sources, 4)
	require.Len(t, r.Findings[0].Citations, 4)

	status, _ := f.errorCode(http.MethodGet, "/v1/communities?level=x", tokAlice, nil)
	require.Equal(t, http.StatusBadRequest, status)
}

func TestLocalQuery(t *testing.T) {
	f := newFixture(t)
	body := map[string]any{"mode": "local", "question": "Which teams were affected by incidents involving cert-manager?"}
	var q queryResp
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokAlice, body, &q))
	require.Equal(t, "local", q.Mode)
	require.Equal(t, entity{ID: "component:certmanager", Type: "component", Name: q.Entities[0].Name}, q.Entities[0])
	require.Equal(t, query.MappedEntity{ID: "component:certmanager", How: query.MappedName}, q.Mapping[0], "the name the question gives comes first")
	for _, want := range []string{"INC-101 involved", "INC-112 involved", "INC-121 involved", "[INC-101 v1]"} {
		require.Contains(t, q.Answer, want)
	}
	kinds := map[string]bool{}
	for _, it := range q.Context {
		kinds[it.Kind] = true
		require.NotEmpty(t, it.Citations, "%s %s", it.Kind, it.ID)
	}
	for _, k := range []string{query.KindEntity, query.KindRelationship, query.KindTextUnit, query.KindReport} {
		require.True(t, kinds[k], "context has no %s", k)
	}
	require.Contains(t, q.Citations, provenance.SourceRef{DocID: "INC-101", Version: 1, TextUnit: "u1"})
	require.LessOrEqual(t, q.Used, q.Budget)
	require.Contains(t, q.Timings, "total_ms")

	// Citations are deduplicated.
	seen := map[provenance.SourceRef]bool{}
	for _, c := range q.Citations {
		require.False(t, seen[c], "duplicate citation %v", c)
		seen[c] = true
	}

	// A small budget cuts the context.
	body["budget_tokens"] = 20
	var small queryResp
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokAlice, body, &small))
	require.LessOrEqual(t, small.Used, 20)
	require.Less(t, len(small.Context), len(q.Context))

	// auto routes to local.
	body["mode"] = "auto"
	delete(body, "budget_tokens")
	var auto queryResp
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokAlice, body, &auto))
	require.Equal(t, "local", auto.Mode)

	// Nothing matched: 200, says so, cites nothing.
	var none queryResp
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokAlice, map[string]any{"mode": "local", "question": "How is the weather?"}, &none))
	require.Contains(t, none.Answer, "Nothing")
	require.Empty(t, none.Citations)
	require.Empty(t, none.Context)
}

func TestExcludedFromPaths(t *testing.T) {
	f := newFixture(t).withConfig(query.Config{ExcludedPathEntities: []string{"service:checkoutapi"}})
	var p pathsResp
	f.get(certPaths, tokAlice, http.StatusOK, &p)
	require.Equal(t, []string{"Discovery", "Identity", "Messaging"}, p.terminalNames())
}

func TestStartResolvedThroughAliases(t *testing.T) {
	p := filepath.Join(t.TempDir(), "aliases.yaml")
	require.NoError(t, os.WriteFile(p, []byte("aliases:\n  - {type: component, canonical: cert-manager, mentions: [certificate manager]}\n"), 0o644))
	aw, err := resolve.NewAliasWatcher(p, nil)
	require.NoError(t, err)
	f := newFixture(t).withConfig(query.Config{Aliases: aw})
	var paths pathsResp
	f.get("/v1/paths?start=component:certificate%20manager&rels=~involved,affected,owned_by", tokAlice, http.StatusOK, &paths)
	require.Equal(t, "component:certmanager", paths.Start.ID)
	require.Equal(t, []string{"Discovery", "Identity", "Messaging", "Payments"}, paths.terminalNames())
	f.get("/v1/entities/component/Certificate%20Manager", tokAlice, http.StatusOK, nil)
	// Without the alias table the same reference is unknown.
	g := newFixture(t)
	g.get("/v1/entities/component/Certificate%20Manager", tokAlice, http.StatusNotFound, nil)
}

func TestAutoRoutesByQuestionShape(t *testing.T) {
	f := newFixture(t)
	for q, want := range map[string]string{
		"What are the recurring root causes of our incidents?": query.ModeGlobal,
		"What happened to cert-manager?":                       query.ModeLocal,
	} {
		var resp query.QueryResponse
		f.do(http.MethodPost, "/v1/query", tokAlice, map[string]any{"mode": "auto", "question": q}, &resp)
		require.Equal(t, want, resp.RoutedTo, q)
		require.Equal(t, want, resp.Mode, q)
	}
}
