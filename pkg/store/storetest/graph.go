package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
)

// Entity ids used across the graph tests. "service:api" is a byte prefix of
// "service:api-gw" on purpose: index scans must not confuse them.
const (
	api   = "service:api"
	apiGW = "service:api-gw"
	db    = "service:db"
	cache = "service:cache"
	team  = "team:sre"
)

func testApply(t *testing.T, s store.Stores) {
	c := contrib(ents(ent(api, "API", 1, "u1"), ent(db, "DB", 2, "u2", "u1")),
		edge(api, "depends_on", db, 0.5, "u1"))
	res := apply(t, s, tenant, "doc-a", 1, c)
	require.Equal(t, store.ApplyResult{
		Outcome: store.Applied, Touched: []string{api, db},
		EntitiesAdded: 2, EdgesAdded: 1,
	}, res)

	require.Equal(t, store.Entity{ID: api, Type: "service", Name: "API", Sources: []store.Fragment{
		{DocID: "doc-a", Version: 1, TextUnits: []string{"u1"}, Description: "API described", Name: "API", NameRank: 1},
	}}, entity(t, s, tenant, api))
	require.Equal(t, []string{"u1", "u2"}, entity(t, s, tenant, db).Sources[0].TextUnits, "text units sorted")

	eid := store.EdgeID(api, "depends_on", db)
	es, err := s.Edges(t.Context(), tenant, api, store.Out)
	require.NoError(t, err)
	require.Equal(t, []store.Edge{{ID: eid, Source: api, Relation: "depends_on", Target: db, Supports: []store.Fragment{
		{DocID: "doc-a", Version: 1, TextUnits: []string{"u1"}, Description: api + " depends_on " + db, Weight: 0.5},
	}}}, es)

	rec := source(t, s, tenant, "doc-a")
	require.Equal(t, "doc-a", rec.DocID)
	require.EqualValues(t, 1, rec.Version)
	require.False(t, rec.Deleted)
	require.Equal(t, "a document", rec.Title)
	require.Equal(t, "wiki", rec.DocType)
	require.Equal(t, c.TextUnits, rec.TextUnits)
	require.Equal(t, []string{api, db}, rec.Entities)
	require.Equal(t, []string{eid}, rec.Edges)
	require.False(t, rec.AppliedAt.IsZero())
	require.True(t, c.ReceivedAt.Equal(rec.ReceivedAt))
	rep := requireClean(t, s, tenant)
	require.Equal(t, store.AuditReport{Sources: 1, Entities: 2, Edges: 1}, rep)
}

func testApplyDuplicate(t *testing.T, s store.Stores) {
	c := contrib(ents(ent(api, "API", 1, "u1"), ent(db, "DB", 1)), edge(api, "calls", db, 1))
	apply(t, s, tenant, "doc-a", 3, c)
	before, rec := snapshot(t, s, tenant), source(t, s, tenant, "doc-a")

	// Even different contributions under the same version change nothing:
	// the version is the identity of the content.
	res := apply(t, s, tenant, "doc-a", 3, contrib(ents(ent(cache, "Cache", 1))))
	require.Equal(t, store.ApplyResult{Outcome: store.Duplicate, Previous: 3}, res)
	require.Equal(t, before, snapshot(t, s, tenant))
	require.Equal(t, rec, source(t, s, tenant, "doc-a"))
	requireClean(t, s, tenant)
}

func testReResolution(t *testing.T, s store.Stores) {
	c := contrib(ents(ent(api, "API", 1, "u1"), ent(db, "DB", 1)), edge(api, "calls", db, 1))
	c.Raw = []byte(`{"mentions":["API","DB"]}`)
	apply(t, s, tenant, "doc-a", 3, c)
	rec := source(t, s, tenant, "doc-a")
	require.JSONEq(t, `{"mentions":["API","DB"]}`, string(rec.Raw), "the raw extraction is kept")
	require.Zero(t, rec.Resolution)

	// The same version resolved again (an unmerge split DB off): replaced.
	again := contrib(ents(ent(api, "API", 1, "u1"), ent(cache, "Cache", 1)), edge(api, "calls", cache, 1))
	again.Resolution, again.Raw = 1, c.Raw
	res := apply(t, s, tenant, "doc-a", 3, again)
	require.Equal(t, store.Applied, res.Outcome)
	require.EqualValues(t, 3, res.Previous)
	requireNoEntity(t, s, tenant, db)
	require.Equal(t, []string{store.EdgeID(api, "calls", cache)}, edges(t, s, tenant, api, store.Out))
	rec = source(t, s, tenant, "doc-a")
	require.EqualValues(t, 3, rec.Version)
	require.EqualValues(t, 1, rec.Resolution)

	// The same resolution again, or an older one, is a duplicate.
	for _, r := range []int64{1, 0} {
		c := contrib(ents(ent(db, "DB", 1)))
		c.Resolution = r
		require.Equal(t, store.Duplicate, apply(t, s, tenant, "doc-a", 3, c).Outcome)
	}
	requireClean(t, s, tenant)
}

func testNewerVersionRetracts(t *testing.T, s store.Stores) {
	apply(t, s, tenant, "doc-a", 1, contrib(ents(ent(api, "API", 1, "u1"), ent(db, "DB", 1, "u1")),
		edge(api, "calls", db, 1, "u1")))
	apply(t, s, tenant, "doc-b", 1, contrib(ents(ent(api, "Api", 2, "b1"))))
	requireClean(t, s, tenant)

	res := apply(t, s, tenant, "doc-a", 2, contrib(ents(ent(api, "API", 1, "u9"), ent(cache, "Cache", 1, "u9")),
		edge(api, "calls", cache, 1, "u9")))
	require.Equal(t, store.ApplyResult{
		Outcome: store.Applied, Previous: 1, Touched: []string{api, cache, db},
		EntitiesAdded: 1, EntitiesRemoved: 1, EdgesAdded: 1, EdgesRemoved: 1,
	}, res)
	requireNoEntity(t, s, tenant, db)
	a := entity(t, s, tenant, api)
	require.Equal(t, []string{"doc-a@2", "doc-b@1"}, docsOf(a.Sources))
	require.Equal(t, []string{"u9"}, a.Sources[0].TextUnits, "version 1's text units are retracted")
	require.Equal(t, []string{store.EdgeID(api, "calls", cache)}, edges(t, s, tenant, api, store.Out))
	require.Equal(t, []string{api, cache}, source(t, s, tenant, "doc-a").Entities)
	requireClean(t, s, tenant)

	// A newer version with nothing retracts everything but keeps the record.
	res = apply(t, s, tenant, "doc-a", 3, contrib(nil))
	require.Equal(t, 1, res.EntitiesRemoved)
	require.Equal(t, 1, res.EdgesRemoved)
	require.Equal(t, []string{"doc-b@1"}, docsOf(entity(t, s, tenant, api).Sources))
	rec := source(t, s, tenant, "doc-a")
	require.EqualValues(t, 3, rec.Version)
	require.Empty(t, rec.Entities)
	rep := requireClean(t, s, tenant)
	require.Equal(t, 2, rep.Sources, "a source with no contributions is still live")
}

func testOlderVersionStale(t *testing.T, s store.Stores) {
	apply(t, s, tenant, "doc-a", 5, contrib(ents(ent(api, "API", 1))))
	before := snapshot(t, s, tenant)
	for _, v := range []int64{1, 4} {
		res := apply(t, s, tenant, "doc-a", v, contrib(ents(ent(db, "DB", 1))))
		require.Equal(t, store.ApplyResult{Outcome: store.Stale, Previous: 5}, res)
	}
	require.Equal(t, before, snapshot(t, s, tenant))
	require.EqualValues(t, 5, source(t, s, tenant, "doc-a").Version)
	requireClean(t, s, tenant)
}

func testDeleteKeepsShared(t *testing.T, s store.Stores) {
	apply(t, s, tenant, "doc-a", 1, contrib(ents(ent(api, "API", 1), ent(db, "DB", 1), ent(cache, "Cache", 1)),
		edge(api, "calls", db, 1), edge(db, "uses", cache, 1)))
	apply(t, s, tenant, "doc-b", 1, contrib(ents(ent(api, "API", 1), ent(db, "DB", 1)),
		edge(api, "calls", db, 2)))
	requireClean(t, s, tenant)

	res := del(t, s, tenant, "doc-a", 2)
	require.Equal(t, store.ApplyResult{
		Outcome: store.Applied, Previous: 1, Touched: []string{cache, db},
		EntitiesRemoved: 1, EdgesRemoved: 1,
	}, res)
	requireNoEntity(t, s, tenant, cache)
	require.Equal(t, []string{"doc-b@1"}, docsOf(entity(t, s, tenant, api).Sources))
	require.Equal(t, []string{"doc-b@1"}, docsOf(entity(t, s, tenant, db).Sources))
	es, err := s.Edges(t.Context(), tenant, api, store.Out)
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, []string{"doc-b@1"}, docsOf(es[0].Supports))
	require.Empty(t, edges(t, s, tenant, db, store.Out))

	rec := source(t, s, tenant, "doc-a")
	require.True(t, rec.Deleted)
	require.EqualValues(t, 2, rec.Version)
	require.Empty(t, rec.Entities)
	require.Empty(t, rec.Edges)
	require.Empty(t, rec.TextUnits)
	rep := requireClean(t, s, tenant)
	require.Equal(t, store.AuditReport{Sources: 1, Entities: 2, Edges: 1}, rep)

	res = del(t, s, tenant, "doc-b", 2)
	require.Equal(t, 2, res.EntitiesRemoved)
	require.Equal(t, store.AuditReport{}, requireClean(t, s, tenant))
}

func testTombstone(t *testing.T, s store.Stores) {
	c := contrib(ents(ent(api, "API", 1)))
	apply(t, s, tenant, "doc-a", 2, c)
	require.Equal(t, store.Applied, del(t, s, tenant, "doc-a", 3).Outcome)
	for _, v := range []int64{1, 2, 3} {
		require.Equal(t, store.ApplyResult{Outcome: store.Stale, Previous: 3}, apply(t, s, tenant, "doc-a", v, c),
			"version %d is not newer than the deletion", v)
	}
	require.Equal(t, store.ApplyResult{Outcome: store.Duplicate, Previous: 3}, del(t, s, tenant, "doc-a", 3))
	require.Equal(t, store.ApplyResult{Outcome: store.Stale, Previous: 3}, del(t, s, tenant, "doc-a", 1))
	requireNoEntity(t, s, tenant, api)
	requireClean(t, s, tenant)

	// A document comes back with a version above its deletion.
	res := apply(t, s, tenant, "doc-a", 4, c)
	require.Equal(t, store.ApplyResult{Outcome: store.Applied, Previous: 3, Touched: []string{api}, EntitiesAdded: 1}, res)
	require.False(t, source(t, s, tenant, "doc-a").Deleted)
	requireClean(t, s, tenant)

	// A deletion that overtakes the content it deletes still wins.
	res = del(t, s, tenant, "doc-b", 5)
	require.Equal(t, store.ApplyResult{Outcome: store.Applied}, res)
	rec := source(t, s, tenant, "doc-b")
	require.True(t, rec.Deleted)
	require.EqualValues(t, 5, rec.Version)
	for _, v := range []int64{4, 5} {
		require.Equal(t, store.Stale, apply(t, s, tenant, "doc-b", v, c).Outcome)
	}
	// A deletion at the applied content version deletes it (deletion wins
	// the tie, whichever arrives first).
	apply(t, s, tenant, "doc-c", 7, contrib(ents(ent(db, "DB", 1))))
	require.Equal(t, store.Applied, del(t, s, tenant, "doc-c", 7).Outcome)
	requireNoEntity(t, s, tenant, db)
	rep := requireClean(t, s, tenant)
	require.Equal(t, 1, rep.Sources, "only doc-a is live")
}

func testDisplayName(t *testing.T, s store.Stores) {
	const pg = "database:postgres"
	name := func() string { return entity(t, s, tenant, pg).Name }
	apply(t, s, tenant, "a", 1, contrib(ents(ent(pg, "pg", 2))))
	require.Equal(t, "pg", name())
	apply(t, s, tenant, "b", 1, contrib(ents(ent(pg, "PostgreSQL", 0))))
	require.Equal(t, "PostgreSQL", name(), "a lower rank wins")
	apply(t, s, tenant, "c", 1, contrib(ents(ent(pg, "Postgres", 0))))
	require.Equal(t, "PostgreSQL", name(), "a tie: the lowest doc id's spelling")
	apply(t, s, tenant, "0", 1, contrib(ents(ent(pg, "POSTGRES", 0))))
	require.Equal(t, "POSTGRES", name(), "a tie: the lowest doc id's spelling, whatever came first")
	apply(t, s, tenant, "e2", 1, contrib(ents(ent(pg, "Postgres", 0))))
	require.Equal(t, "Postgres", name(), "the spelling most documents use")
	apply(t, s, tenant, "d", 1, contrib(ents(ent(pg, "postgres db", 1))))
	require.Equal(t, "Postgres", name(), "a higher rank does not count")
	del(t, s, tenant, "e2", 2)
	require.Equal(t, "POSTGRES", name(), "back to a tie: the lowest doc id's spelling")
	del(t, s, tenant, "0", 2)
	require.Equal(t, "PostgreSQL", name())
	del(t, s, tenant, "b", 2)
	require.Equal(t, "Postgres", name(), "the name's source gone, the remaining tied spelling")
	del(t, s, tenant, "c", 2)
	require.Equal(t, "postgres db", name())
	apply(t, s, tenant, "d", 2, contrib(ents(ent(pg, "Postgres DB", 1))))
	require.Equal(t, "Postgres DB", name(), "a re-spelling of the only best fragment")
	del(t, s, tenant, "d", 3)
	require.Equal(t, "pg", name())

	// Within one document: the lowest rank wins, then the first seen.
	apply(t, s, tenant, "e", 1, contrib(ents(ent(api, "api", 2), ent(api, "API", 1), ent(api, "Api", 1))))
	a := entity(t, s, tenant, api)
	require.Equal(t, "API", a.Name)
	require.Equal(t, "API", a.Sources[0].Name)
	require.Equal(t, 1, a.Sources[0].NameRank)
	requireClean(t, s, tenant)
}

func testMergeWithinDocument(t *testing.T, s store.Stores) {
	first := ent(api, "API", 1, "u2", "u1")
	first.Description = ""
	second := ent(api, "API", 1, "u1", "u3")
	second.Description = "first description"
	third := ent(api, "API", 1)
	third.Description = "second description"
	e1, e2 := edge(api, "calls", db, 0.4, "u1"), edge(api, "calls", db, 0.9, "u3")
	e1.Description = ""
	res := apply(t, s, tenant, "doc", 1, contrib(ents(first, second, third, ent(db, "DB", 1)), e1, e2))
	require.Equal(t, 2, res.EntitiesAdded)
	require.Equal(t, 1, res.EdgesAdded)
	a := entity(t, s, tenant, api)
	require.Len(t, a.Sources, 1, "one fragment per document")
	require.Equal(t, []string{"u1", "u2", "u3"}, a.Sources[0].TextUnits, "text units unioned")
	require.Equal(t, "first description", a.Sources[0].Description, "first non-empty description")
	es, err := s.Edges(t.Context(), tenant, db, store.In)
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Len(t, es[0].Supports, 1)
	sup := es[0].Supports[0]
	require.Equal(t, 0.9, sup.Weight, "the maximum weight")
	require.Equal(t, []string{"u1", "u3"}, sup.TextUnits)
	require.Equal(t, e2.Description, sup.Description)
	require.Equal(t, []string{api, db}, source(t, s, tenant, "doc").Entities, "listed once")
	requireClean(t, s, tenant)
}

func testTouched(t *testing.T, s store.Stores) {
	c := func(es []store.EntityContribution, edges ...store.EdgeContribution) store.Contributions {
		return contrib(es, edges...)
	}
	base := ents(ent(api, "API", 1), ent(db, "DB", 1), ent(cache, "Cache", 1))
	require.Equal(t, []string{api, cache, db}, apply(t, s, tenant, "a", 1, c(base, edge(api, "calls", db, 1))).Touched)

	withTeam := append(base, ent(team, "SRE", 1))
	res := apply(t, s, tenant, "a", 2, c(withTeam, edge(api, "calls", db, 1)))
	require.Equal(t, []string{team}, res.Touched, "only the added entity")

	res = apply(t, s, tenant, "a", 3, c(withTeam, edge(api, "calls", db, 1), edge(team, "owns", cache, 1)))
	require.Equal(t, []string{cache, team}, res.Touched, "the endpoints of the added edge")

	changed := ents(ent(api, "API", 1, "u7"), ent(db, "DB", 1), ent(cache, "Cache", 1), ent(team, "SRE", 1))
	res = apply(t, s, tenant, "a", 4, c(changed, edge(api, "calls", db, 3, "u7"), edge(team, "owns", cache, 1)))
	require.Empty(t, res.Touched, "new descriptions, text units and weights re-link nothing")
	require.Equal(t, store.ApplyResult{Outcome: store.Applied, Previous: 3}, res)

	// Another source supporting an existing edge does not change the edge set.
	res = apply(t, s, tenant, "b", 1, c(ents(ent(api, "API", 1), ent(db, "DB", 1)), edge(api, "calls", db, 1)))
	require.Empty(t, res.Touched)
	require.Equal(t, 0, res.EntitiesAdded)

	res = apply(t, s, tenant, "a", 5, c(changed, edge(team, "owns", cache, 1)))
	require.Empty(t, res.Touched, "b still supports api->db")
	res = del(t, s, tenant, "b", 2)
	require.Equal(t, []string{api, db}, res.Touched)
	requireClean(t, s, tenant)
}

func testEdges(t *testing.T, s store.Stores) {
	apply(t, s, tenant, "doc", 1, contrib(ents(ent(api, "API", 1), ent(apiGW, "API GW", 1), ent(db, "DB", 1), ent(cache, "Cache", 1)),
		edge(api, "depends_on", db, 1), edge(api, "calls", cache, 1),
		edge(apiGW, "calls", api, 1), edge(db, "replicates_to", api, 1),
		edge(apiGW, "calls", db, 1), edge(cache, "calls", cache, 1)))
	require.Equal(t, []string{store.EdgeID(api, "calls", cache), store.EdgeID(api, "depends_on", db)},
		edges(t, s, tenant, api, store.Out))
	require.Equal(t, []string{store.EdgeID(apiGW, "calls", api), store.EdgeID(db, "replicates_to", api)},
		edges(t, s, tenant, api, store.In))
	require.Equal(t, []string{store.EdgeID(apiGW, "calls", api), store.EdgeID(apiGW, "calls", db)},
		edges(t, s, tenant, apiGW, store.Out), "an id that extends another is a different entity")
	require.Empty(t, edges(t, s, tenant, apiGW, store.In))
	require.Equal(t, []string{store.EdgeID(cache, "calls", cache)}, edges(t, s, tenant, cache, store.Out), "self loop")
	require.Equal(t, []string{store.EdgeID(api, "calls", cache), store.EdgeID(cache, "calls", cache)},
		edges(t, s, tenant, cache, store.In))
	require.Empty(t, edges(t, s, tenant, "service:unknown", store.Out))
	require.Empty(t, edges(t, s, tenant, "service:unknown", store.In))
	requireClean(t, s, tenant)
}

func testEntitiesByType(t *testing.T, s store.Stores) {
	ctx := t.Context()
	serv := ent("serv:x", "X", 1) // "serv" is a byte prefix of "service"
	apply(t, s, tenant, "a", 1, contrib(ents(ent(db, "DB", 1), ent(team, "SRE", 1), ent(api, "API", 1))))
	apply(t, s, tenant, "b", 1, contrib(ents(serv, ent(apiGW, "GW", 1))))
	byType := func(typ string) []string {
		es, err := s.EntitiesByType(ctx, tenant, typ)
		require.NoError(t, err)
		return entityIDs(es)
	}
	require.Equal(t, []string{api, apiGW, db}, byType("service"))
	require.Equal(t, []string{team}, byType("team"))
	require.Equal(t, []string{"serv:x"}, byType("serv"))
	require.Equal(t, []string{"serv:x", api, apiGW, db, team}, byType(""))
	require.Empty(t, byType("nothing"))
	del(t, s, tenant, "a", 2)
	require.Equal(t, []string{apiGW}, byType("service"))
	require.Empty(t, byType("team"))
	es, err := s.EntitiesByType(ctx, tenant, "service")
	require.NoError(t, err)
	require.Equal(t, entity(t, s, tenant, apiGW), es[0], "full entities")
	requireClean(t, s, tenant)
}

func testSnapshotStats(t *testing.T, s store.Stores) {
	ctx := t.Context()
	ts, err := s.GraphTenants(ctx)
	require.NoError(t, err)
	require.Empty(t, ts)
	st, err := s.Stats(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, store.Stats{}, st)
	g := snapshot(t, s, tenant)
	require.Empty(t, g.Entities)
	require.Empty(t, g.Edges)

	apply(t, s, tenant, "a", 1, contrib(ents(ent(db, "DB", 1), ent(api, "API", 1)), edge(db, "x", api, 1), edge(api, "x", db, 1)))
	apply(t, s, tenant, "b", 1, contrib(ents(ent(cache, "C", 1))))
	apply(t, s, other, "a", 1, contrib(ents(ent(team, "SRE", 1))))
	del(t, s, tenant, "c", 1)
	g = snapshot(t, s, tenant)
	require.Equal(t, []string{api, cache, db}, entityIDs(g.Entities), "sorted by id")
	require.Equal(t, []string{store.EdgeID(api, "x", db), store.EdgeID(db, "x", api)}, edgeIDs(g.Edges))
	require.Equal(t, entity(t, s, tenant, api), g.Entities[0])
	st, err = s.Stats(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, store.Stats{Sources: 2, Entities: 3, Edges: 2}, st, "the tombstone is not a live source")
	m, err := s.Entities(ctx, tenant, []string{api, "service:none", cache})
	require.NoError(t, err)
	require.Len(t, m, 2)
	require.Equal(t, g.Entities[1], m[cache])
	again, err := s.Entities(ctx, tenant, []string{cache, api, "service:none", cache, api, "service:none"})
	require.NoError(t, err)
	require.Equal(t, m, again, "an id asked twice is answered as once")
	ts, err = s.GraphTenants(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{tenant, other}, ts)
	requireClean(t, s, tenant)
	requireClean(t, s, other)
}

func testTypeChange(t *testing.T, s store.Stores) {
	const id = "thing:x"
	asType := func(typ string) store.EntityContribution {
		e := ent(id, "X", 1)
		e.Type = typ
		return e
	}
	apply(t, s, tenant, "a", 1, contrib(ents(asType("service"))))
	res := apply(t, s, tenant, "a", 2, contrib(ents(asType("team"))))
	require.Equal(t, store.ApplyResult{Outcome: store.Applied, Previous: 1, Touched: []string{id},
		EntitiesAdded: 1, EntitiesRemoved: 1}, res, "its only source may re-type an entity")
	require.Equal(t, "team", entity(t, s, tenant, id).Type)
	es, err := s.EntitiesByType(t.Context(), tenant, "service")
	require.NoError(t, err)
	require.Empty(t, es)
	requireClean(t, s, tenant)

	_, err = s.Apply(t.Context(), tenant, "b", 1, contrib(ents(asType("service"))))
	require.ErrorIs(t, err, store.ErrInvalid, "another source may not contradict the type")
	requireClean(t, s, tenant)
}

func testInvalidContributions(t *testing.T, s store.Stores) {
	ctx := t.Context()
	good := ents(ent(api, "API", 1, "u1"), ent(db, "DB", 1))
	with := func(f func(c *store.Contributions)) store.Contributions {
		c := contrib(slices.Clone(good), edge(api, "calls", db, 1, "u1"))
		f(&c)
		return c
	}
	cases := map[string]store.Contributions{
		"empty entity id":  with(func(c *store.Contributions) { c.Entities = append(c.Entities, ent("", "x", 1)) }),
		"empty type":       with(func(c *store.Contributions) { c.Entities[0].Type = "" }),
		"empty name":       with(func(c *store.Contributions) { c.Entities[1].Name = " " }),
		"missing endpoint": with(func(c *store.Contributions) { c.Edges = append(c.Edges, edge(api, "calls", cache, 1)) }),
		"empty relation":   with(func(c *store.Contributions) { c.Edges[0].Relation = "" }),
		"unknown unit":     with(func(c *store.Contributions) { c.Edges[0].TextUnits = []string{"u404"} }),
		"duplicate unit":   with(func(c *store.Contributions) { c.TextUnits = append(c.TextUnits, c.TextUnits[0]) }),
		"empty unit id":    with(func(c *store.Contributions) { c.TextUnits = append(c.TextUnits, events.TextUnit{}) }),
		"NaN weight":       with(func(c *store.Contributions) { c.Edges[0].Weight = math.NaN() }),
		"infinite weight":  with(func(c *store.Contributions) { c.Edges[0].Weight = math.Inf(1) }),
		"two types": with(func(c *store.Contributions) {
			c.Entities = append(c.Entities, store.EntityContribution{ID: api, Type: "team", Name: "x"})
		}),
		"invalid UTF-8": with(func(c *store.Contributions) { c.Entities[0].ID = "service:\xff" }),
	}
	for name, c := range cases {
		_, err := s.Apply(ctx, tenant, "doc", 1, c)
		require.ErrorIs(t, err, store.ErrInvalid, name)
	}
	valid := contrib(good)
	for name, call := range map[string]func() error{
		"version 0":        func() error { _, err := s.Apply(ctx, tenant, "doc", 0, valid); return err },
		"empty doc id":     func() error { _, err := s.Apply(ctx, tenant, "", 1, valid); return err },
		"spaced doc id":    func() error { _, err := s.Apply(ctx, tenant, " a", 1, valid); return err },
		"bad tenant":       func() error { _, err := s.Apply(ctx, "Acme Corp", "doc", 1, valid); return err },
		"delete version 0": func() error { _, err := s.Delete(ctx, tenant, "doc", 0); return err },
		"delete bad id":    func() error { _, err := s.Delete(ctx, tenant, "", 1); return err },
	} {
		require.ErrorIs(t, call(), store.ErrInvalid, name)
	}
	_, err := s.Source(ctx, tenant, "doc")
	require.ErrorIs(t, err, store.ErrNotFound, "a refused apply leaves no record")
	require.Equal(t, store.AuditReport{}, requireClean(t, s, tenant))
	_, err = s.Entity(ctx, "Bad", api)
	require.ErrorIs(t, err, store.ErrInvalid)
}

// testAmbiguousEdgeID: entity ids may contain "|", so two different edges
// can spell one edge id ("t:a|b" -r-> "t:c" and "t:a" -b-> "r|t:c"). The second
// must be refused, not merged into the first's endpoints, where it would
// outlive them as an orphan.
func testAmbiguousEdgeID(t *testing.T, s store.Stores) {
	ctx := t.Context()
	first := contrib(ents(ent("t:a|b", "ab", 1), ent("t:c", "c", 1)), edge("t:a|b", "r", "t:c", 1))
	second := contrib(ents(ent("t:a", "a", 1), ent("r|t:c", "rc", 1)), edge("t:a", "b", "r|t:c", 1))
	second.Entities[1].Type = "r"
	require.Equal(t, first.Edges[0].ID(), second.Edges[0].ID(), "the test needs colliding ids")

	_, err := s.Apply(ctx, tenant, "both", 1, contrib(slices.Concat(first.Entities, second.Entities), first.Edges[0], second.Edges[0]))
	require.ErrorIs(t, err, store.ErrInvalid, "one document with both spellings")

	apply(t, s, tenant, "first", 1, first)
	_, err = s.Apply(ctx, tenant, "second", 1, second)
	require.ErrorIs(t, err, store.ErrInvalid, "a document whose edge id is another edge's")
	_, err = s.Source(ctx, tenant, "second")
	require.ErrorIs(t, err, store.ErrNotFound, "a refused apply leaves no record")
	requireClean(t, s, tenant)

	// A document may respell its own edge: it moves to the new endpoints.
	res := apply(t, s, tenant, "first", 2, second)
	require.Equal(t, store.ApplyResult{Outcome: store.Applied, Previous: 1, Touched: []string{"r|t:c", "t:a", "t:a|b", "t:c"},
		EntitiesAdded: 2, EntitiesRemoved: 2, EdgesAdded: 1, EdgesRemoved: 1}, res)
	require.Equal(t, []string{second.Edges[0].ID()}, edges(t, s, tenant, "t:a", store.Out))
	require.Empty(t, edges(t, s, tenant, "t:c", store.In))
	require.Equal(t, store.AuditReport{Sources: 1, Entities: 2, Edges: 1}, requireClean(t, s, tenant))

	// Once nobody holds the edge, the other spelling is free again.
	del(t, s, tenant, "first", 3)
	apply(t, s, tenant, "second", 1, first)
	es, err := s.Edges(ctx, tenant, "t:a|b", store.Out)
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, "r", es[0].Relation)
	require.Equal(t, store.AuditReport{Sources: 1, Entities: 2, Edges: 1}, requireClean(t, s, tenant))
}

// testConcurrentSources applies several sources that share entities and an
// edge, each through several versions, concurrently.
func testConcurrentSources(t *testing.T, s store.Stores) {
	const sources, versions = 4, 4
	version := func(i int, v int64) store.Contributions {
		own := fmt.Sprintf("team:t%d", i)
		unit := fmt.Sprintf("u%d", v)
		return contrib(ents(ent(api, "API", int(v)%3, unit), ent(db, "DB", 1, unit), ent(own, own, 1, unit)),
			edge(api, "calls", db, float64(v), unit), edge(own, "owns", api, 1, unit))
	}
	err := parallel(sources, func(i int) error {
		for v := int64(1); v <= versions; v++ {
			if _, err := retry(func() (store.ApplyResult, error) {
				return s.Apply(t.Context(), tenant, fmt.Sprintf("doc-%d", i), v, version(i, v))
			}); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	rep := requireClean(t, s, tenant)
	require.Equal(t, store.AuditReport{Sources: sources, Entities: 2 + sources, Edges: 1 + sources}, rep)
	for i := range sources {
		require.EqualValues(t, versions, source(t, s, tenant, fmt.Sprintf("doc-%d", i)).Version)
	}
	a := entity(t, s, tenant, api)
	require.Equal(t, []string{"doc-0@4", "doc-1@4", "doc-2@4", "doc-3@4"}, docsOf(a.Sources))
	es, err := s.Edges(t.Context(), tenant, api, store.In)
	require.NoError(t, err)
	require.Len(t, es, sources)

	// And concurrent deletions of all of them leave nothing behind.
	err = parallel(sources, func(i int) error {
		_, err := retry(func() (store.ApplyResult, error) {
			return s.Delete(t.Context(), tenant, fmt.Sprintf("doc-%d", i), versions+1)
		})
		return err
	})
	require.NoError(t, err)
	require.Equal(t, store.AuditReport{}, requireClean(t, s, tenant))
}

// testConcurrentVersions races versions of one source; the highest must win
// whatever the order.
func testConcurrentVersions(t *testing.T, s store.Stores) {
	const writers, each = 4, 3
	const top = writers * each
	version := func(v int64) store.Contributions {
		own := fmt.Sprintf("thing:v%d", v)
		return contrib(ents(ent("thing:common", "Common", 1), ent(own, own, 1)), edge("thing:common", "has", own, 1))
	}
	err := parallel(writers, func(i int) error {
		for j := range each {
			v := int64(j*writers + i + 1)
			res, err := retry(func() (store.ApplyResult, error) { return s.Apply(t.Context(), tenant, "doc", v, version(v)) })
			if err != nil {
				return err
			}
			if res.Outcome == store.Duplicate {
				return fmt.Errorf("version %d: duplicate of a version never applied before", v)
			}
		}
		return nil
	})
	require.NoError(t, err)
	rec := source(t, s, tenant, "doc")
	require.EqualValues(t, top, rec.Version)
	want := fmt.Sprintf("thing:v%d", top)
	require.Equal(t, []string{"thing:common", want}, rec.Entities)
	require.Equal(t, []string{"thing:common", want}, entityIDs(snapshot(t, s, tenant).Entities))
	require.Equal(t, store.AuditReport{Sources: 1, Entities: 2, Edges: 1}, requireClean(t, s, tenant))
}

// testLargeSource applies one source of 10,000 contributions, then a
// version with half of them, then deletes it.
func testLargeSource(t *testing.T, s store.Stores) {
	const entities, edgeCount = 7000, 3000
	build := func(n, m int) store.Contributions {
		es := make([]store.EntityContribution, n)
		for i := range es {
			es[i] = ent(fmt.Sprintf("item:%05d", i), fmt.Sprintf("Item %d", i), 2, fmt.Sprintf("u%d", i%50))
		}
		var eds []store.EdgeContribution
		for i := range m {
			// Targets stay within the first half, so version 2's edges
			// are exactly version 1's first half.
			eds = append(eds, edge(es[i].ID, "links", es[(i*7+1)%(entities/2)].ID, 1, fmt.Sprintf("u%d", i%50)))
		}
		return contrib(es, eds...)
	}
	res := apply(t, s, tenant, "big", 1, build(entities, edgeCount))
	require.Equal(t, entities, res.EntitiesAdded)
	require.Equal(t, edgeCount, res.EdgesAdded)
	require.Len(t, res.Touched, entities)
	require.Equal(t, store.AuditReport{Sources: 1, Entities: entities, Edges: edgeCount}, requireClean(t, s, tenant))

	res = apply(t, s, tenant, "big", 2, build(entities/2, edgeCount/2))
	require.Equal(t, entities/2, res.EntitiesRemoved)
	require.Equal(t, edgeCount-edgeCount/2, res.EdgesRemoved)
	require.Equal(t, 0, res.EntitiesAdded)
	require.Equal(t, store.AuditReport{Sources: 1, Entities: entities / 2, Edges: edgeCount / 2}, requireClean(t, s, tenant))

	res = del(t, s, tenant, "big", 3)
	require.Equal(t, entities/2, res.EntitiesRemoved)
	require.Equal(t, store.AuditReport{}, requireClean(t, s, tenant))
}

func testUnicode(t *testing.T, s store.Stores) {
	const zurich, tokyo, rocket = "城市:zürich", "城市:東京", "symbol:🚀"
	z := ent(zurich, "Zürich", 1, "ü-1")
	z.Type = "城市"
	tk := ent(tokyo, "東京都", 0, "ü-1")
	tk.Type = "城市"
	tk.Description = "首都 — «capital» ✓"
	c := contrib(ents(z, tk, ent(rocket, "🚀 Launch", 2)), edge(zurich, "flies_to→", tokyo, 0.25, "ü-1"), edge(rocket, "near", zurich, 1))
	apply(t, s, tenant, "dök-ünï", 1, c)

	got := entity(t, s, tenant, tokyo)
	require.Equal(t, "東京都", got.Name)
	require.Equal(t, "首都 — «capital» ✓", got.Sources[0].Description)
	require.Equal(t, "dök-ünï", got.Sources[0].DocID)
	es, err := s.EntitiesByType(t.Context(), tenant, "城市")
	require.NoError(t, err)
	require.Equal(t, []string{zurich, tokyo}, entityIDs(es))
	require.Equal(t, []string{store.EdgeID(zurich, "flies_to→", tokyo)}, edges(t, s, tenant, zurich, store.Out))
	require.Equal(t, []string{store.EdgeID(rocket, "near", zurich)}, edges(t, s, tenant, zurich, store.In))
	rec := source(t, s, tenant, "dök-ünï")
	require.Equal(t, c.TextUnits, rec.TextUnits)
	requireClean(t, s, tenant)
	del(t, s, tenant, "dök-ünï", 2)
	require.Equal(t, store.AuditReport{}, requireClean(t, s, tenant))
}

// testReadsDuringWrites reads the graph while writers apply and delete
// sources: every read shows it between two writes. A snapshot never holds
// an edge without both endpoints; an entity's out edges all leave it; a
// type listing holds only that type. The audit at the end is clean.
func testReadsDuringWrites(t *testing.T, s store.Stores) {
	const writers, rounds = 3, 12
	version := func(i, v int) store.Contributions {
		own := fmt.Sprintf("team:t%d-%d", i, v)
		return contrib(ents(ent(api, "API", 1, "u"), ent(db, "DB", 1, "u"), ent(own, own, 1, "u")),
			edge(api, "calls", db, float64(v), "u"), edge(own, "owns", api, 1, "u"), edge(own, "owns", db, 1, "u"))
	}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan struct{})
	var readErr error
	reads := 0
	go func() {
		defer close(done)
		for ; ctx.Err() == nil; reads++ {
			g, err := s.Snapshot(ctx, tenant)
			if err != nil {
				readErr = err
				return
			}
			ids := map[string]bool{}
			for _, e := range g.Entities {
				ids[e.ID] = true
			}
			for _, e := range g.Edges {
				if !ids[e.Source] || !ids[e.Target] {
					readErr = fmt.Errorf("a snapshot holds edge %s without an endpoint", e.ID)
					return
				}
			}
			es, err := s.Edges(ctx, tenant, api, store.Out)
			if err != nil {
				readErr = err
				return
			}
			for _, e := range es {
				if e.Source != api {
					readErr = fmt.Errorf("an out edge of %s leaves %s", api, e.Source)
					return
				}
			}
			teams, err := s.EntitiesByType(ctx, tenant, "team")
			if err != nil {
				readErr = err
				return
			}
			for _, e := range teams {
				if e.Type != "team" {
					readErr = fmt.Errorf("listing teams returned a %s", e.Type)
					return
				}
			}
		}
	}()
	err := parallel(writers, func(i int) error {
		for v := 1; v <= rounds; v++ {
			doc := fmt.Sprintf("doc-%d", i)
			if _, err := retry(func() (store.ApplyResult, error) {
				return s.Apply(t.Context(), tenant, doc, int64(v), version(i, v))
			}); err != nil {
				return err
			}
		}
		_, err := retry(func() (store.ApplyResult, error) {
			return s.Delete(t.Context(), tenant, fmt.Sprintf("doc-%d", i), rounds+1)
		})
		return err
	})
	require.NoError(t, err)
	// Stop the reader: a read cut by the cancellation ends the loop, it is
	// not a failure.
	stop()
	<-done
	if ctx.Err() != nil && errors.Is(readErr, context.Canceled) {
		readErr = nil
	}
	require.NoError(t, readErr)
	require.Positive(t, reads)
	require.Equal(t, store.AuditReport{}, requireClean(t, s, tenant))
}
