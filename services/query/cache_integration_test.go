//go:build integration

package query_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/query"
)

// newCachingFixture serves the seed with Config.Events set and Run
// following the bus.
func newCachingFixture(t *testing.T) (*fixture, *countingStores, *stream.Bus) {
	t.Helper()
	bus := streamtest.NewBus(t, streamtest.Options{})
	cs := &countingStores{Stores: openStore(t), calls: map[string]int{}}
	st := &failingStores{Stores: cs}
	loadSeed(t, st, tenantAcme)
	loadGlobex(t, st)
	a, err := newAuth()
	require.NoError(t, err)
	svc, err := query.New(query.Config{Events: bus}, st, a, nil, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	cs.reset()
	return &fixture{t: t, st: st, srv: srv}, cs, bus
}

// waitDerivedKept waits until the service keeps the tenant's communities
// and reports, which it does once its consumer runs: two global questions
// then list the reports once.
func waitDerivedKept(t *testing.T, f *fixture, cs *countingStores) {
	t.Helper()
	globalQ := map[string]any{"mode": "global", "question": "What are the recurring root causes of our incidents?"}
	streamtest.Eventually(t, 10*time.Second, func() error {
		cs.reset()
		ask(t, f, tokAlice, globalQ)
		ask(t, f, tokAlice, globalQ)
		if n := cs.reset()["Reports"]; n > 1 {
			return fmt.Errorf("%d report listings for two questions", n)
		}
		return nil
	})
}

func reportTitles(r query.QueryResponse) []string {
	var out []string
	for _, it := range r.Context {
		if it.Kind == query.KindReport {
			out = append(out, it.Text)
		}
	}
	return out
}

// TestCachesFollowEvents: with Events set, global answers read the
// reports and communities once per tenant until kg.reports.changed or
// kg.communities.changed names the tenant, and aggregates read a
// relation's edges once (and, once local search built the name index,
// no entity) until kg.graph.changed does; admission stays per
// request, so a revocation counts at once, with no event.
func TestCachesFollowEvents(t *testing.T) {
	f, cs, bus := newCachingFixture(t)
	ctx := t.Context()
	globalQ := map[string]any{"mode": "global", "question": "What are the recurring root causes of our incidents?"}

	waitDerivedKept(t, f, cs)
	require.NotEmpty(t, reportTitles(ask(t, f, tokAlice, globalQ)))
	require.Zero(t, cs.reset()["Reports"])

	// A rewritten report shows once kg.reports.changed names the tenant.
	rep, err := f.st.Report(ctx, tenantAcme, "r-c-0-cert")
	require.NoError(t, err)
	rep.Title = "Certificates that expire unnoticed"
	require.NoError(t, f.st.PutReport(ctx, tenantAcme, rep))
	_, err = bus.Publish(ctx, events.KindReportsChanged, tenantAcme, "reports-1",
		&events.ReportsChanged{Header: events.Header{Tenant: tenantAcme}, Reports: []string{rep.ID}})
	require.NoError(t, err)
	streamtest.Eventually(t, 10*time.Second, func() error {
		titles := reportTitles(ask(t, f, tokAlice, globalQ))
		if !slices.ContainsFunc(titles, func(s string) bool { return len(s) > 0 && s[:len(rep.Title)] == rep.Title }) {
			return fmt.Errorf("titles %v", titles)
		}
		return nil
	})
	// kg.communities.changed drops the same cache.
	cs.reset()
	ask(t, f, tokAlice, globalQ)
	require.Zero(t, cs.reset()["Reports"])
	_, err = bus.Publish(ctx, events.KindCommunitiesChanged, tenantAcme, "communities-1",
		&events.CommunitiesChanged{Header: events.Header{Tenant: tenantAcme}, Run: 2})
	require.NoError(t, err)
	streamtest.Eventually(t, 10*time.Second, func() error {
		ask(t, f, tokAlice, globalQ)
		if cs.reset()["Reports"] == 0 {
			return fmt.Errorf("reports still cached")
		}
		return nil
	})

	// Aggregates: one edge read per relation until kg.graph.changed.
	agg := func() []string {
		var a aggResp
		f.get("/v1/aggregate?type=incident&rel=failure", tokAlice, http.StatusOK, &a)
		return a.summary()
	}
	before := agg()
	// A local question builds the name index; aggregates then take their
	// entities from it too.
	ask(t, f, tokAlice, map[string]any{"mode": "local", "question": "What happened to cert-manager?"})
	cs.reset()
	require.Equal(t, before, agg())
	calls := cs.reset()
	require.Zero(t, calls["EdgesByRelation"], "%v", calls)
	require.Zero(t, calls["Entities"], "%v", calls)
	// A revocation without any event: admission is per request.
	_, err = f.st.Announce(ctx, tenantAcme, store.Announcement{DocID: "INC-130", Version: 2, ACL: provenance.ACL{Groups: []string{"nobody"}}})
	require.NoError(t, err)
	require.Equal(t, slices.DeleteFunc(slices.Clone(before), func(s string) bool { return s == "disk full 1 [INC-130]" }), agg())
	// A new incident shows once kg.graph.changed names the tenant.
	announceApply(t, f.st, tenantAcme, "INC-131", 1, incidentACL(), store.Contributions{Title: "INC-131", DocType: "postmortem",
		Entities: []store.EntityContribution{
			{ID: "incident:inc131", Type: "incident", Name: "INC-131", NameRank: 2},
			{ID: "failure_mode:diskfull", Type: "failure_mode", Name: "disk full", NameRank: 2},
		},
		Edges: []store.EdgeContribution{{Source: "incident:inc131", Relation: "failure", Target: "failure_mode:diskfull", Weight: 1}}})
	_, err = bus.Publish(ctx, events.KindGraphChanged, tenantAcme, "graph-1",
		&events.GraphChanged{Header: events.Header{Tenant: tenantAcme}, DocID: "INC-131", Version: 1})
	require.NoError(t, err)
	streamtest.Eventually(t, 10*time.Second, func() error {
		if got := agg(); !slices.Contains(got, "disk full 1 [INC-131]") {
			return fmt.Errorf("groups %v", got)
		}
		return nil
	})
}

// TestKeptTraversalFollowsChanges: a traversal is kept per caller and
// registry generation while the graph reads are: asked again, whole or by
// pages, it answers the same; a revocation (a new registry generation,
// no event) and a new document (kg.graph.changed) show on the next
// request.
func TestKeptTraversalFollowsChanges(t *testing.T) {
	f, _, bus := newCachingFixture(t)
	ctx := t.Context()
	var first, again pathsResp
	f.get(certPaths, tokAlice, http.StatusOK, &first)
	require.NotEmpty(t, first.Rows)
	require.Contains(t, first.docs(), "INC-101")
	f.get(certPaths, tokAlice, http.StatusOK, &again)
	require.Equal(t, first, again)
	// Pages of the kept traversal concatenate to it.
	var terminals []string
	for off := 0; off < len(first.Terminals); off++ {
		var p pathsResp
		f.get(certPaths+fmt.Sprintf("&limit=1&offset=%d", off), tokAlice, http.StatusOK, &p)
		terminals = append(terminals, p.terminalNames()...)
	}
	require.Equal(t, first.terminalNames(), terminals)

	// A revocation, without any event.
	_, err := f.st.SetACL(ctx, tenantAcme, "INC-101", provenance.ACL{Groups: []string{"nobody"}})
	require.NoError(t, err)
	var revoked pathsResp
	f.get(certPaths, tokAlice, http.StatusOK, &revoked)
	require.NotContains(t, revoked.docs(), "INC-101")
	f.get(certPaths+"&limit=50", tokAlice, http.StatusOK, &revoked)
	require.NotContains(t, revoked.docs(), "INC-101")

	// A new incident involving cert-manager shows once kg.graph.changed
	// names the tenant.
	const affected = "/v1/paths?start=component:cert-manager&rels=~involved,affected"
	var kept pathsResp
	f.get(affected, tokAlice, http.StatusOK, &kept)
	require.NotContains(t, kept.terminalNames(), "ledger")
	announceApply(t, f.st, tenantAcme, "INC-140", 1, incidentACL(), store.Contributions{Title: "INC-140", DocType: "postmortem",
		Entities: []store.EntityContribution{
			{ID: "incident:inc140", Type: "incident", Name: "INC-140", NameRank: 2},
			{ID: "component:certmanager", Type: "component", Name: "cert-manager", NameRank: 2},
			{ID: "service:ledger", Type: "service", Name: "ledger", NameRank: 2},
		},
		Edges: []store.EdgeContribution{
			{Source: "incident:inc140", Relation: "involved", Target: "component:certmanager", Weight: 1},
			{Source: "incident:inc140", Relation: "affected", Target: "service:ledger", Weight: 1},
		}})
	_, err = bus.Publish(ctx, events.KindGraphChanged, tenantAcme, "graph-140",
		&events.GraphChanged{Header: events.Header{Tenant: tenantAcme}, DocID: "INC-140", Version: 1})
	require.NoError(t, err)
	streamtest.Eventually(t, 10*time.Second, func() error {
		var p pathsResp
		f.get(affected, tokAlice, http.StatusOK, &p)
		if !slices.Contains(p.terminalNames(), "ledger") {
			return fmt.Errorf("terminals %v", p.terminalNames())
		}
		return nil
	})
}

// TestKeptGlobalPlanFollowsChanges: a global question's plan (its reports,
// exact themes and citations) is kept per caller and registry generation
// with the graph reads, so the same question answers the same, a
// revocation without any event drops the document from the next answer,
// and a new incident counts once kg.graph.changed names the tenant.
func TestKeptGlobalPlanFollowsChanges(t *testing.T) {
	f, cs, bus := newCachingFixture(t)
	ctx := t.Context()
	q := map[string]any{"mode": "global", "question": "What are the recurring root causes of our incidents?"}
	waitDerivedKept(t, f, cs)
	first := ask(t, f, tokAlice, q)
	require.NotEmpty(t, first.Global.Themes)
	again := ask(t, f, tokAlice, q)
	require.Equal(t, first.Answer, again.Answer)
	require.Equal(t, first.Global.Themes, again.Global.Themes)
	require.Equal(t, first.Citations, again.Citations)
	total := func(r query.QueryResponse) int {
		n := 0
		for _, th := range r.Global.Themes {
			n += th.Count
		}
		return n
	}

	// A revocation, without any event: the document's member is neither
	// counted nor cited by the next answer.
	th := first.Global.Themes[0]
	require.NotEmpty(t, first.Citations)
	doc := first.Citations[0].DocID
	_, err := f.st.SetACL(ctx, tenantAcme, doc, provenance.ACL{Groups: []string{"nobody"}})
	require.NoError(t, err)
	revoked := ask(t, f, tokAlice, q)
	for _, c := range revoked.Citations {
		require.NotEqual(t, doc, c.DocID)
	}
	require.Less(t, total(revoked), total(first))
	require.NotContains(t, revoked.Answer, doc+"]")

	// A new incident with the first theme counts once kg.graph.changed
	// names the tenant.
	count := func(r query.QueryResponse) int {
		for _, t2 := range r.Global.Themes {
			if t2.Target.ID == th.Target.ID {
				return t2.Count
			}
		}
		return 0
	}
	before := count(ask(t, f, tokAlice, q))
	announceApply(t, f.st, tenantAcme, "INC-150", 1, incidentACL(), store.Contributions{Title: "INC-150", DocType: "postmortem",
		Entities: []store.EntityContribution{
			{ID: "incident:inc150", Type: "incident", Name: "INC-150", NameRank: 2},
			{ID: th.Target.ID, Type: th.Target.Type, Name: th.Target.Name, NameRank: 2},
		},
		Edges: []store.EdgeContribution{{Source: "incident:inc150", Relation: th.Relation, Target: th.Target.ID, Weight: 1}}})
	require.Equal(t, before, count(ask(t, f, tokAlice, q)), "kept until the graph changes")
	_, err = bus.Publish(ctx, events.KindGraphChanged, tenantAcme, "graph-150",
		&events.GraphChanged{Header: events.Header{Tenant: tenantAcme}, DocID: "INC-150", Version: 1})
	require.NoError(t, err)
	streamtest.Eventually(t, 10*time.Second, func() error {
		r := ask(t, f, tokAlice, q)
		if n := count(r); n != before+1 {
			return fmt.Errorf("theme %s counts %d, want %d", th.Target.ID, n, before+1)
		}
		if !slices.ContainsFunc(r.Citations, func(c provenance.SourceRef) bool { return c.DocID == "INC-150" }) {
			return fmt.Errorf("INC-150 not cited")
		}
		return nil
	})
}

// TestKeptReportAdmissionsArePerCallerAndGeneration: local search keeps
// whether each community and report it met is admitted, per caller and
// registry generation; one caller's answers are never another's, and a
// revocation (a new generation, no event) counts on the next request.
func TestKeptReportAdmissionsArePerCallerAndGeneration(t *testing.T) {
	f, cs, _ := newCachingFixture(t)
	ctx := t.Context()
	// Every report of the seed is built on INC-101: readable by bob's
	// group only from now on.
	_, err := f.st.SetACL(ctx, tenantAcme, "INC-101", provenance.ACL{Groups: []string{"sre"}})
	require.NoError(t, err)
	local := map[string]any{"mode": "local", "question": "Which teams were affected by incidents involving cert-manager?"}
	waitDerivedKept(t, f, cs)
	for range 2 { // the second time from what the first kept
		require.NotEmpty(t, reportTitles(ask(t, f, tokBob, local)), "bob reads INC-101")
		require.Empty(t, reportTitles(ask(t, f, tokAlice, local)), "alice does not")
	}
	_, err = f.st.SetACL(ctx, tenantAcme, "INC-101", provenance.ACL{Groups: []string{"nobody"}})
	require.NoError(t, err)
	require.Empty(t, reportTitles(ask(t, f, tokBob, local)), "revoked, without any event")
	_, err = f.st.SetACL(ctx, tenantAcme, "INC-101", provenance.ACL{Groups: []string{"oncall"}})
	require.NoError(t, err)
	require.NotEmpty(t, reportTitles(ask(t, f, tokAlice, local)), "granted, without any event")
}
