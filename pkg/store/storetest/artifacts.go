package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// testTenantIsolation writes everything to one tenant and checks that every
// read of another tenant sees none of it.
func testTenantIsolation(t *testing.T, s store.Stores) {
	ctx := t.Context()
	announce(t, s, tenant, store.Announcement{DocID: "doc", ACL: provenance.PublicACL()})
	apply(t, s, tenant, "doc", 1, contrib(ents(ent(api, "API", 1), ent(db, "DB", 1)), edge(api, "calls", db, 1)))
	require.NoError(t, s.ReplaceCommunities(ctx, tenant, 1, []store.Community{{ID: "c1", Members: []string{api, db}}}))
	require.NoError(t, s.PutReport(ctx, tenant, store.Report{ID: "r1", Community: "c1"}))

	m, err := s.Sources(ctx, other, []string{"doc"})
	require.NoError(t, err)
	require.Empty(t, m)
	list, err := s.ListSources(ctx, other)
	require.NoError(t, err)
	require.Empty(t, list)
	_, err = s.SetACL(ctx, other, "doc", provenance.PublicACL())
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.MarkDeleted(ctx, other, "doc")
	require.ErrorIs(t, err, store.ErrNotFound)

	_, err = s.Source(ctx, other, "doc")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.Entity(ctx, other, api)
	require.ErrorIs(t, err, store.ErrNotFound)
	es, err := s.Entities(ctx, other, []string{api, db})
	require.NoError(t, err)
	require.Empty(t, es)
	for _, typ := range []string{"", "service"} {
		byType, err := s.EntitiesByType(ctx, other, typ)
		require.NoError(t, err)
		require.Empty(t, byType)
	}
	require.Empty(t, edges(t, s, other, api, store.Out))
	require.Empty(t, edges(t, s, other, db, store.In))
	g := snapshot(t, s, other)
	require.Empty(t, g.Entities)
	require.Empty(t, g.Edges)
	st, err := s.Stats(ctx, other)
	require.NoError(t, err)
	require.Equal(t, store.Stats{}, st)
	rep, err := s.Audit(ctx, other)
	require.NoError(t, err)
	require.Equal(t, store.AuditReport{}, rep)
	cs, err := s.Communities(ctx, other)
	require.NoError(t, err)
	require.Empty(t, cs)
	run, err := s.LastRun(ctx, other)
	require.NoError(t, err)
	require.Zero(t, run)
	rs, err := s.Reports(ctx, other)
	require.NoError(t, err)
	require.Empty(t, rs)
	_, err = s.Report(ctx, other, "r1")
	require.ErrorIs(t, err, store.ErrNotFound)

	// The same ids in the other tenant are independent: an older version
	// there is not stale, and deleting there leaves the first alone.
	res := apply(t, s, other, "doc", 1, contrib(ents(ent(api, "Other API", 1))))
	require.Equal(t, store.Applied, res.Outcome)
	require.Equal(t, "Other API", entity(t, s, other, api).Name)
	require.Equal(t, "API", entity(t, s, tenant, api).Name)
	del(t, s, other, "doc", 2)
	require.Equal(t, "API", entity(t, s, tenant, api).Name)
	require.NoError(t, s.DeleteReport(ctx, other, "r1"))
	_, err = s.Report(ctx, tenant, "r1")
	require.NoError(t, err)
	requireClean(t, s, tenant)
	requireClean(t, s, other)
}

func testCommunities(t *testing.T, s store.Stores) {
	ctx := t.Context()
	run, err := s.LastRun(ctx, tenant)
	require.NoError(t, err)
	require.Zero(t, run)
	cs, err := s.Communities(ctx, tenant)
	require.NoError(t, err)
	require.Empty(t, cs)

	refs := []provenance.SourceRef{{DocID: "a", Version: 2}, {DocID: "b", Version: 1}}
	c2 := store.Community{ID: "c2", Level: 0, Parent: "p1", Members: []string{api, db}, MemberHash: "h2", Sources: refs, Run: 1}
	c1 := store.Community{ID: "c1", Level: 0, Parent: "p1", Members: []string{cache}, MemberHash: "h1", Sources: refs[:1], Run: 1}
	p1 := store.Community{ID: "p1", Level: 1, Children: []string{"c1", "c2"}, Members: []string{api, cache, db}, MemberHash: "hp", Sources: refs, Run: 1}
	a0 := store.Community{ID: "a0", Level: 2, Members: []string{api, cache, db}, MemberHash: "ha", Sources: refs, Run: 1}
	require.NoError(t, s.ReplaceCommunities(ctx, tenant, 1, []store.Community{a0, p1, c2, c1}))
	cs, err = s.Communities(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, []store.Community{c1, c2, p1, a0}, cs, "sorted by level, then id")
	run, err = s.LastRun(ctx, tenant)
	require.NoError(t, err)
	require.EqualValues(t, 1, run)

	c3 := store.Community{ID: "c3", Members: []string{api}, MemberHash: "h3", Sources: refs, Run: 2}
	require.NoError(t, s.ReplaceCommunities(ctx, tenant, 2, []store.Community{c3}))
	cs, err = s.Communities(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, []store.Community{c3}, cs, "a replacement drops the previous run's communities")
	run, err = s.LastRun(ctx, tenant)
	require.NoError(t, err)
	require.EqualValues(t, 2, run)

	require.NoError(t, s.ReplaceCommunities(ctx, tenant, 3, nil))
	cs, err = s.Communities(ctx, tenant)
	require.NoError(t, err)
	require.Empty(t, cs)
	run, err = s.LastRun(ctx, tenant)
	require.NoError(t, err)
	require.EqualValues(t, 3, run)

	require.ErrorIs(t, s.ReplaceCommunities(ctx, tenant, 0, []store.Community{c3}), store.ErrInvalid)
	require.ErrorIs(t, s.ReplaceCommunities(ctx, tenant, 4, []store.Community{c3, c3}), store.ErrInvalid)
	require.ErrorIs(t, s.ReplaceCommunities(ctx, tenant, 4, []store.Community{{ID: ""}}), store.ErrInvalid)
	require.ErrorIs(t, s.ReplaceCommunities(ctx, "No Such", 4, nil), store.ErrInvalid)
	run, err = s.LastRun(ctx, tenant)
	require.NoError(t, err)
	require.EqualValues(t, 3, run, "refused replacements change nothing")
}

func testReports(t *testing.T, s store.Stores) {
	ctx := t.Context()
	_, err := s.Report(ctx, tenant, "r1")
	require.ErrorIs(t, err, store.ErrNotFound)
	refs := []provenance.SourceRef{{DocID: "a", Version: 2, TextUnit: "u1"}}
	r1 := store.Report{
		ID: "r1", Community: "c1", Level: 0, Title: "Payments — «core»", Summary: "s",
		Findings: []store.Finding{{Summary: "f", Explanation: "e", Entities: []string{api},
			Edges: []string{store.EdgeID(api, "calls", db)}, Citations: refs}},
		Rating: 7.5, RatingExplanation: "why", Sources: []provenance.SourceRef{{DocID: "a", Version: 2}},
		MemberHash: "h1", Writer: "extractive", UpdatedAt: time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC),
	}
	r0 := store.Report{ID: "r0", Community: "c0", Findings: []store.Finding{}, Sources: refs,
		UpdatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	require.NoError(t, s.PutReport(ctx, tenant, r1))
	require.NoError(t, s.PutReport(ctx, tenant, r0))
	got, err := s.Report(ctx, tenant, "r1")
	require.NoError(t, err)
	require.Equal(t, r1, got)
	all, err := s.Reports(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, []store.Report{r0, r1}, all, "sorted by id")

	r1.Summary, r1.Rating = "rewritten", 3
	require.NoError(t, s.PutReport(ctx, tenant, r1))
	got, err = s.Report(ctx, tenant, "r1")
	require.NoError(t, err)
	require.Equal(t, r1, got, "a put replaces")

	require.NoError(t, s.DeleteReport(ctx, tenant, "r1"))
	_, err = s.Report(ctx, tenant, "r1")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, s.DeleteReport(ctx, tenant, "r1"), "deleting an absent report is a no-op")
	all, err = s.Reports(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, []store.Report{r0}, all)

	require.ErrorIs(t, s.PutReport(ctx, tenant, store.Report{}), store.ErrInvalid)
	require.ErrorIs(t, s.PutReport(ctx, "Bad Tenant", r0), store.ErrInvalid)
}

// testReportsBatch checks PutReports and DeleteReports: a batch stores
// (removes) what PutReport (DeleteReport) would of each report, the
// by-source index and the citations following (a report already stored
// moves its entries), and a refused batch changes nothing.
func testReportsBatch(t *testing.T, s store.Stores) {
	ctx := t.Context()
	ref := func(doc string, v int64, unit string) provenance.SourceRef {
		return provenance.SourceRef{DocID: doc, Version: v, TextUnit: unit}
	}
	bySource := func(doc string) []string {
		t.Helper()
		rs, err := s.ReportsBySource(ctx, tenant, doc)
		require.NoError(t, err)
		ids := []string{}
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	state := func() ([]store.Report, map[string][]provenance.SourceRef) {
		t.Helper()
		all, err := s.Reports(ctx, tenant)
		require.NoError(t, err)
		cites, err := s.ReportCitations(ctx, tenant)
		require.NoError(t, err)
		return all, cites
	}
	require.NoError(t, s.PutReports(ctx, tenant, nil), "an empty batch stores nothing")
	all, _ := state()
	require.Empty(t, all)

	r0 := store.Report{ID: "r0", Community: "c0", Sources: []provenance.SourceRef{ref("a", 1, "u1")}, Findings: []store.Finding{},
		UpdatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	require.NoError(t, s.PutReport(ctx, tenant, r0))
	// r0 moves from a to b; r1 and r2 are new.
	r0.Sources, r0.Title = []provenance.SourceRef{ref("b", 2, "u2")}, "moved"
	r1 := store.Report{
		ID: "r1", Community: "c1", Level: 1, Title: "Payments — «core»", Summary: "s", Rating: 7.5,
		Findings: []store.Finding{{Summary: "f", Explanation: "e", Entities: []string{api},
			Citations: []provenance.SourceRef{ref("a", 2, "u1")}}},
		Sources:    []provenance.SourceRef{ref("b", 2, ""), ref("a", 2, "u1"), ref("a", 2, "u3")},
		MemberHash: "h1", InputHash: "i1", Writer: "extractive", UpdatedAt: time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC),
	}
	r2 := store.Report{ID: "r2", Community: "c2"}
	require.NoError(t, s.PutReports(ctx, tenant, []store.Report{r1, r0, r2}))
	all, cites := state()
	require.Equal(t, []store.Report{r0, r1, r2}, all)
	require.Equal(t, map[string][]provenance.SourceRef{
		"r0": {ref("b", 2, "")},
		"r1": {ref("a", 2, ""), ref("b", 2, "")},
		"r2": {},
	}, cites)
	require.Equal(t, []string{"r1"}, bySource("a"), "r0 left a")
	require.Equal(t, []string{"r0", "r1"}, bySource("b"))
	byID, err := s.ReportsByID(ctx, tenant, []string{"r0", "r1", "r2"})
	require.NoError(t, err)
	require.Equal(t, map[string]store.Report{"r0": r0, "r1": r1, "r2": r2}, byID)

	// Refused batches store nothing, not even their valid reports: an
	// invalid report, an id twice, an invalid tenant, a cancelled context.
	r3 := store.Report{ID: "r3", Community: "c3", Sources: []provenance.SourceRef{ref("c", 1, "")}}
	r1moved := r1
	r1moved.Sources = []provenance.SourceRef{ref("c", 1, "")}
	require.ErrorIs(t, s.PutReports(ctx, tenant, []store.Report{r3, r1moved, {}}), store.ErrInvalid)
	require.ErrorIs(t, s.PutReports(ctx, tenant, []store.Report{r3, r1moved, r3}), store.ErrInvalid)
	require.ErrorIs(t, s.PutReports(ctx, "Bad Tenant", []store.Report{r3}), store.ErrInvalid)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, s.PutReports(cancelled, tenant, []store.Report{r3, r1moved}))
	all2, cites2 := state()
	require.Equal(t, all, all2)
	require.Equal(t, cites, cites2)
	require.Equal(t, []string{}, bySource("c"))

	// A batch deletion removes the reports and their index entries; an
	// absent id and an id twice are no errors. A refused one removes
	// nothing.
	require.NoError(t, s.DeleteReports(ctx, tenant, nil))
	require.ErrorIs(t, s.DeleteReports(ctx, "Bad Tenant", []string{"r0"}), store.ErrInvalid)
	require.Error(t, s.DeleteReports(cancelled, tenant, []string{"r0", "r1"}))
	all2, cites2 = state()
	require.Equal(t, all, all2)
	require.Equal(t, cites, cites2)
	require.NoError(t, s.DeleteReports(ctx, tenant, []string{"r1", "absent", "r1", "r2"}))
	all, cites = state()
	require.Equal(t, []store.Report{r0}, all)
	require.Equal(t, map[string][]provenance.SourceRef{"r0": {ref("b", 2, "")}}, cites)
	require.Equal(t, []string{}, bySource("a"))
	require.Equal(t, []string{"r0"}, bySource("b"))
	require.NoError(t, s.DeleteReports(ctx, other, []string{"r0"}), "another tenant's are not these")
	_, err = s.Report(ctx, tenant, "r0")
	require.NoError(t, err)

	// The other tenant sees none of it.
	rs, err := s.Reports(ctx, other)
	require.NoError(t, err)
	require.Empty(t, rs)
}

// testCommunityMembers checks the member index behind CommunitiesOf and
// in-place updates of some communities of the last run.
func testCommunityMembers(t *testing.T, s store.Stores) {
	ctx := t.Context()
	of := func(ids ...string) []string {
		t.Helper()
		cs, err := s.CommunitiesOf(ctx, tenant, ids)
		require.NoError(t, err)
		out := []string{}
		held := map[string]bool{}
		for _, c := range cs {
			out = append(out, c.ID)
			for _, m := range c.Members {
				held[m] = true
			}
		}
		// Clustered answers, from the index alone, what the communities say.
		want := map[string]bool{}
		for _, id := range ids {
			if held[id] {
				want[id] = true
			}
		}
		got, err := s.Clustered(ctx, tenant, ids)
		require.NoError(t, err)
		require.Equal(t, want, got, "Clustered(%v)", ids)
		return out
	}
	require.Equal(t, []string{}, of(api), "nothing stored yet")
	c1 := store.Community{ID: "c1", Level: 0, Parent: "p", Members: []string{api, db}, MemberHash: "h1", Run: 1}
	c2 := store.Community{ID: "c2", Level: 0, Parent: "p", Members: []string{cache}, MemberHash: "h2", Run: 1}
	p := store.Community{ID: "p", Level: 1, Children: []string{"c1", "c2"}, Members: []string{api, cache, db}, MemberHash: "hp", Run: 1}
	require.NoError(t, s.ReplaceCommunities(ctx, tenant, 1, []store.Community{p, c2, c1}))
	require.Equal(t, []string{"c1", "p"}, of(api), "sorted by level, then id")
	require.Equal(t, []string{"c1", "c2", "p"}, of(cache, db, api, "service:none"))
	require.Equal(t, []string{}, of("service:none"))
	cs, err := s.CommunitiesOf(ctx, tenant, []string{cache})
	require.NoError(t, err)
	require.Equal(t, []store.Community{c2, p}, cs, "whole communities")

	// An update grows c2 and shrinks c1 in place; the others stay.
	c2.Members, c2.Sources = []string{cache, db}, []provenance.SourceRef{{DocID: "a", Version: 1}}
	c1.Members = []string{api}
	require.NoError(t, s.UpdateCommunities(ctx, tenant, 1, []store.Community{c2, c1}))
	require.Equal(t, []string{"c2", "p"}, of(db))
	require.Equal(t, []string{"c1", "p"}, of(api))
	all, err := s.Communities(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, []store.Community{c1, c2, p}, all)
	run, err := s.LastRun(ctx, tenant)
	require.NoError(t, err)
	require.EqualValues(t, 1, run, "an update keeps the run")

	// Refused updates change nothing: another run was stored since, an
	// unknown id, an invalid argument.
	c3 := store.Community{ID: "c3", Members: []string{db}, MemberHash: "h3", Run: 2}
	require.NoError(t, s.ReplaceCommunities(ctx, tenant, 2, []store.Community{c3}))
	require.Equal(t, []string{}, of(api), "a replacement drops the old member index")
	require.Equal(t, []string{"c3"}, of(db))
	c3grown := c3
	c3grown.Members = []string{api, db}
	require.ErrorIs(t, s.UpdateCommunities(ctx, tenant, 1, []store.Community{c3grown}), store.ErrConflict)
	require.ErrorIs(t, s.UpdateCommunities(ctx, tenant, 2, []store.Community{c3grown, c1}), store.ErrNotFound)
	require.ErrorIs(t, s.UpdateCommunities(ctx, tenant, 2, []store.Community{{ID: ""}}), store.ErrInvalid)
	require.ErrorIs(t, s.UpdateCommunities(ctx, other, 2, []store.Community{c3grown}), store.ErrConflict)
	require.Equal(t, []string{}, of(api))
	all, err = s.Communities(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, []store.Community{c3}, all)
	require.NoError(t, s.UpdateCommunities(ctx, tenant, 2, []store.Community{c3grown}))
	require.Equal(t, []string{"c3"}, of(api))
	oc, err := s.CommunitiesOf(ctx, other, []string{api})
	require.NoError(t, err)
	require.Empty(t, oc)
	cl, err := s.Clustered(ctx, other, []string{api})
	require.NoError(t, err)
	require.Empty(t, cl)
	_, err = s.Clustered(ctx, "Bad Tenant", []string{api})
	require.ErrorIs(t, err, store.ErrInvalid)
}

// testReportIndex checks the by-source index: it follows puts that change
// a report's sources and deletions, and ReportsByID, ReportsBySource and
// ReportCitations agree with Reports.
func testReportIndex(t *testing.T, s store.Stores) {
	ctx := t.Context()
	bySource := func(doc string) []string {
		t.Helper()
		rs, err := s.ReportsBySource(ctx, tenant, doc)
		require.NoError(t, err)
		ids := []string{}
		for _, r := range rs {
			full, err := s.Report(ctx, tenant, r.ID)
			require.NoError(t, err)
			require.Equal(t, full, r, "ReportsBySource returns whole reports")
			ids = append(ids, r.ID)
		}
		return ids
	}
	for _, doc := range []string{"a", "b"} {
		require.Equal(t, []string{}, bySource(doc), "no reports yet")
	}
	ref := func(doc string, v int64, unit string) provenance.SourceRef {
		return provenance.SourceRef{DocID: doc, Version: v, TextUnit: unit}
	}
	r1 := store.Report{ID: "r1", Community: "c1", Sources: []provenance.SourceRef{ref("b", 1, "u2"), ref("a", 2, "u1"), ref("a", 2, "u3")}}
	r2 := store.Report{ID: "r2", Community: "c2", Sources: []provenance.SourceRef{ref("a", 1, "")}}
	r3 := store.Report{ID: "r3", Community: "c3", Sources: []provenance.SourceRef{ref("c", 4, "")}}
	for _, r := range []store.Report{r3, r1, r2} {
		require.NoError(t, s.PutReport(ctx, tenant, r))
	}
	require.Equal(t, []string{"r1", "r2"}, bySource("a"), "any version, sorted by id")
	require.Equal(t, []string{"r1"}, bySource("b"))
	require.Equal(t, []string{"r3"}, bySource("c"))
	require.Equal(t, []string{}, bySource("d"))
	cites, err := s.ReportCitations(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, map[string][]provenance.SourceRef{
		"r1": {ref("a", 2, ""), ref("b", 1, "")},
		"r2": {ref("a", 1, "")},
		"r3": {ref("c", 4, "")},
	}, cites, "text units dropped, one pair per (doc, version), sorted")

	// A put that moves a report's sources moves its index entries.
	r1.Sources = []provenance.SourceRef{ref("c", 4, "")}
	require.NoError(t, s.PutReport(ctx, tenant, r1))
	require.Equal(t, []string{"r2"}, bySource("a"))
	require.Equal(t, []string{}, bySource("b"))
	require.Equal(t, []string{"r1", "r3"}, bySource("c"))

	// A put that keeps some documents, adds and drops others, moves
	// only those.
	r1.Sources = []provenance.SourceRef{ref("c", 5, ""), ref("b", 2, "u1"), ref("b", 2, "u2")}
	require.NoError(t, s.PutReport(ctx, tenant, r1))
	require.Equal(t, []string{"r1"}, bySource("b"))
	require.Equal(t, []string{"r1", "r3"}, bySource("c"))
	r1.Sources = []provenance.SourceRef{ref("b", 2, "u1")}
	require.NoError(t, s.PutReport(ctx, tenant, r1))
	require.Equal(t, []string{"r1"}, bySource("b"))
	require.Equal(t, []string{"r3"}, bySource("c"))
	r1.Sources = []provenance.SourceRef{ref("c", 4, "")}
	require.NoError(t, s.PutReport(ctx, tenant, r1))
	require.Equal(t, []string{}, bySource("b"))

	require.NoError(t, s.DeleteReport(ctx, tenant, "r3"))
	require.NoError(t, s.DeleteReport(ctx, tenant, "r3"))
	require.Equal(t, []string{"r1"}, bySource("c"), "a deletion leaves the index")
	cites, err = s.ReportCitations(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, map[string][]provenance.SourceRef{"r1": {ref("c", 4, "")}, "r2": {ref("a", 1, "")}}, cites)

	// Every stored report is listed, one that cites nothing too: a report
	// absent from ReportCitations is absent from the store.
	require.NoError(t, s.PutReport(ctx, tenant, store.Report{ID: "r4", Community: "c4"}))
	cites, err = s.ReportCitations(ctx, tenant)
	require.NoError(t, err)
	require.Contains(t, cites, "r4", "a report without sources is listed")
	require.Empty(t, cites["r4"])
	require.NoError(t, s.DeleteReport(ctx, tenant, "r4"))
	cites, err = s.ReportCitations(ctx, tenant)
	require.NoError(t, err)
	require.NotContains(t, cites, "r4")

	byID, err := s.ReportsByID(ctx, tenant, []string{"r2", "r3", "r1", "nope"})
	require.NoError(t, err)
	require.Equal(t, map[string]store.Report{"r1": r1, "r2": r2}, byID, "absent ids are left out")

	// Other tenants see none of it; a refused put changes nothing.
	rs, err := s.ReportsBySource(ctx, other, "a")
	require.NoError(t, err)
	require.Empty(t, rs)
	oc, err := s.ReportCitations(ctx, other)
	require.NoError(t, err)
	require.Empty(t, oc)
	require.ErrorIs(t, s.PutReport(ctx, tenant, store.Report{Sources: []provenance.SourceRef{ref("a", 9, "")}}), store.ErrInvalid)
	require.Equal(t, []string{"r2"}, bySource("a"))
	_, err = s.ReportsBySource(ctx, "Bad Tenant", "a")
	require.ErrorIs(t, err, store.ErrInvalid)
}

func testPingClose(t *testing.T, s store.Stores) {
	require.NoError(t, s.Ping(t.Context()))
	require.NoError(t, s.Close())
	require.Error(t, s.Ping(t.Context()), "a closed store does not answer")
}

// testCommunitiesByID: CommunitiesByID returns the stored communities
// among the ids, whole, and leaves out the others: ids of a replaced run,
// unknown ids, another tenant's; an update is read back as updated.
func testCommunitiesByID(t *testing.T, s store.Stores) {
	ctx := t.Context()
	byID := func(tn string, ids ...string) map[string]store.Community {
		t.Helper()
		got, err := s.CommunitiesByID(ctx, tn, ids)
		require.NoError(t, err)
		return got
	}
	require.Empty(t, byID(tenant, "c1"), "nothing stored yet")
	require.Empty(t, byID(tenant), "no ids")
	refs := []provenance.SourceRef{{DocID: "a", Version: 2}}
	c1 := store.Community{ID: "c1", Parent: "p1", Members: []string{cache}, MemberHash: "h1", Sources: refs, Run: 1}
	c2 := store.Community{ID: "c2", Parent: "p1", Members: []string{api, db}, MemberHash: "h2", Sources: refs, Run: 1}
	p1 := store.Community{ID: "p1", Level: 1, Children: []string{"c1", "c2"}, Members: []string{api, cache, db}, MemberHash: "hp", Run: 1}
	require.NoError(t, s.ReplaceCommunities(ctx, tenant, 1, []store.Community{c1, c2, p1}))
	require.Equal(t, map[string]store.Community{"c2": c2, "p1": p1}, byID(tenant, "p1", "nope", "c2", "c2"),
		"the stored ones among the ids, whole")

	c2grown := c2
	c2grown.Members = []string{api, cache, db}
	require.NoError(t, s.UpdateCommunities(ctx, tenant, 1, []store.Community{c2grown}))
	require.Equal(t, map[string]store.Community{"c1": c1, "c2": c2grown}, byID(tenant, "c1", "c2"), "read as updated")

	c3 := store.Community{ID: "c3", Members: []string{api}, MemberHash: "h3", Run: 2}
	require.NoError(t, s.ReplaceCommunities(ctx, tenant, 2, []store.Community{c3}))
	require.Equal(t, map[string]store.Community{"c3": c3}, byID(tenant, "c1", "c2", "p1", "c3"), "a replaced run's ids are gone")
	require.Empty(t, byID(other, "c3"), "other tenants see none")
	_, err := s.CommunitiesByID(ctx, "Bad Tenant", []string{"c3"})
	require.ErrorIs(t, err, store.ErrInvalid)
}

// testReportCitationsOf: ReportCitationsOf lists the reports citing any of
// the documents (at any version) with all their citations, as
// ReportCitations does, and follows puts and deletions.
func testReportCitationsOf(t *testing.T, s store.Stores) {
	ctx := t.Context()
	of := func(tn string, docs ...string) map[string][]provenance.SourceRef {
		t.Helper()
		got, err := s.ReportCitationsOf(ctx, tn, docs)
		require.NoError(t, err)
		return got
	}
	ref := func(doc string, v int64, unit string) provenance.SourceRef {
		return provenance.SourceRef{DocID: doc, Version: v, TextUnit: unit}
	}
	require.Empty(t, of(tenant, "a"), "no reports yet")
	r1 := store.Report{ID: "r1", Community: "c1", Sources: []provenance.SourceRef{ref("b", 1, "u2"), ref("a", 2, "u1"), ref("a", 2, "u3")}}
	r2 := store.Report{ID: "r2", Community: "c2", Sources: []provenance.SourceRef{ref("a", 1, "")}}
	r3 := store.Report{ID: "r3", Community: "c3", Sources: []provenance.SourceRef{ref("c", 4, "")}}
	require.NoError(t, s.PutReports(ctx, tenant, []store.Report{r1, r2, r3}))
	r1c := []provenance.SourceRef{ref("a", 2, ""), ref("b", 1, "")}
	r2c := []provenance.SourceRef{ref("a", 1, "")}
	r3c := []provenance.SourceRef{ref("c", 4, "")}
	require.Equal(t, map[string][]provenance.SourceRef{"r1": r1c, "r2": r2c}, of(tenant, "a"),
		"any version, every citation of the reports, text units dropped")
	require.Equal(t, map[string][]provenance.SourceRef{"r1": r1c}, of(tenant, "b"))
	require.Equal(t, map[string][]provenance.SourceRef{"r1": r1c, "r3": r3c}, of(tenant, "b", "c", "nope", "b"))
	require.Empty(t, of(tenant, "nope"))
	require.Empty(t, of(tenant))
	all, err := s.ReportCitations(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, all, of(tenant, "a", "b", "c"), "as ReportCitations lists them")

	// A put that moves a report's sources moves it; a deletion removes it.
	r1.Sources = []provenance.SourceRef{ref("c", 5, "u1")}
	require.NoError(t, s.PutReport(ctx, tenant, r1))
	require.Equal(t, map[string][]provenance.SourceRef{"r2": r2c}, of(tenant, "a", "b"))
	require.Equal(t, map[string][]provenance.SourceRef{"r1": {ref("c", 5, "")}, "r3": r3c}, of(tenant, "c"))
	require.NoError(t, s.DeleteReports(ctx, tenant, []string{"r3"}))
	require.Equal(t, map[string][]provenance.SourceRef{"r1": {ref("c", 5, "")}}, of(tenant, "c"))

	require.Empty(t, of(other, "a", "c"), "other tenants see none")
	_, err = s.ReportCitationsOf(ctx, "Bad Tenant", []string{"a"})
	require.ErrorIs(t, err, store.ErrInvalid)
}
