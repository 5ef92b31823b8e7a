package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/store"
)

// requireAccessPaths checks every access-path index of the tenant against
// what a snapshot says: edges by relation (and source type), edge counts
// in both directions, entities by name.
func requireAccessPaths(t *testing.T, s store.Stores, tn string) {
	t.Helper()
	ctx := t.Context()
	g := snapshot(t, s, tn)
	rels, types := map[string]bool{"none": true}, map[string]bool{"": true, "nosuch": true}
	var ids []string
	for _, e := range g.Entities {
		prefix, _, _ := strings.Cut(e.ID, ":")
		types[e.Type], types[prefix] = true, true
		ids = append(ids, e.ID)
	}
	for _, e := range g.Edges {
		rels[e.Relation] = true
	}
	for rel := range rels {
		for typ := range types {
			want := []string{}
			for _, e := range g.Edges {
				if prefix, _, _ := strings.Cut(e.Source, ":"); e.Relation == rel && (typ == "" || prefix == typ) {
					want = append(want, e.ID)
				}
			}
			got, err := s.EdgesByRelation(ctx, tn, rel, typ)
			require.NoError(t, err)
			require.Equal(t, want, edgeIDs(got), "relation %q, source type %q", rel, typ)
			for _, e := range got {
				require.Equal(t, g.Edges[slices.IndexFunc(g.Edges, func(x store.Edge) bool { return x.ID == e.ID })], e)
			}
		}
	}
	ids = append(ids, "service:absent")
	for _, dir := range []store.Direction{store.Out, store.In} {
		counts, err := s.EdgeCounts(ctx, tn, ids, dir)
		require.NoError(t, err)
		require.Len(t, counts, len(ids))
		for _, id := range ids {
			require.Len(t, edges(t, s, tn, id, dir), counts[id], "%s dir %d", id, dir)
		}
	}
	names := map[string][]string{"nobody here": nil}
	for _, e := range g.Entities {
		for _, k := range store.NameKeys(e) {
			names[k] = append(names[k], e.ID)
		}
	}
	for name, want := range names {
		got, err := s.EntitiesByName(ctx, tn, name)
		require.NoError(t, err)
		if want == nil {
			want = []string{}
		}
		require.Equal(t, want, entityIDs(got), "name %q", name)
	}
	requireHeads(t, s, tn, g, types)
	docs := []string{"no-such-doc"}
	for _, e := range g.Entities {
		for _, f := range e.Sources {
			docs = append(docs, f.DocID)
		}
	}
	requireSourceIndexes(t, s, tn, docs)
}

// requireSourceIndexes checks SourceIndexes, which every adapter
// implements, against Source for docs (repeated ids, absent ones and
// tombstones included).
func requireSourceIndexes(t *testing.T, s store.Stores, tn string, docs []string) {
	t.Helper()
	si, ok := s.(store.SourceIndexes)
	require.True(t, ok, "%T does not implement store.SourceIndexes", s)
	got, err := si.SourceIndexes(t.Context(), tn, docs)
	require.NoError(t, err)
	want := map[string]store.SourceIndex{}
	for _, d := range docs {
		rec, err := s.Source(t.Context(), tn, d)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		require.NoError(t, err)
		want[d] = store.SourceIndex{Version: rec.Version, Deleted: rec.Deleted, Entities: rec.Entities, Edges: rec.Edges}
	}
	require.Equal(t, want, got)
}

// testSourceIndexes: the contribution indexes of live documents,
// tombstones and edits, without the rest of their records.
func testSourceIndexes(t *testing.T, s store.Stores) {
	apply(t, s, tenant, "d1", 1, contrib(ents(ent(api, "API", 2, "u1"), ent(db, "DB", 2, "u1")), edge(api, "calls", db, 1, "u1")))
	apply(t, s, tenant, "d2", 1, contrib(ents(ent(api, "API", 2, "u2"))))
	apply(t, s, tenant, "d2", 2, contrib(ents(ent(cache, "Cache", 2, "u2"))))
	del(t, s, tenant, "d3", 4)
	apply(t, s, other, "d1", 1, contrib(ents(ent(db, "DB", 2, "u1"))))
	requireSourceIndexes(t, s, tenant, []string{"d1", "d2", "d3", "d4", "d1"})
	// Many ids at once (an adapter may read them in chunks).
	many := make([]string, 0, 2500)
	for i := range 2500 {
		many = append(many, fmt.Sprintf("absent-%d", i))
	}
	many = append(many[:1700], append([]string{"d2", "d1", "d3"}, many[1700:]...)...)
	requireSourceIndexes(t, s, tenant, many)
	got, err := s.(store.SourceIndexes).SourceIndexes(t.Context(), tenant, []string{"d1", "d2", "d3"})
	require.NoError(t, err)
	require.Equal(t, map[string]store.SourceIndex{
		"d1": {Version: 1, Entities: []string{api, db}, Edges: []string{api + "|calls|" + db}},
		"d2": {Version: 2, Entities: []string{cache}},
		"d3": {Version: 4, Deleted: true},
	}, got)
	got, err = s.(store.SourceIndexes).SourceIndexes(t.Context(), other, []string{"d1", "d2"})
	require.NoError(t, err)
	require.Equal(t, map[string]store.SourceIndex{"d1": {Version: 1, Entities: []string{db}}}, got, "tenants apart")
	got, err = s.(store.SourceIndexes).SourceIndexes(t.Context(), tenant, nil)
	require.NoError(t, err)
	require.Empty(t, got)
}

// requireHeads checks EntityHeadsByType, which every adapter implements,
// against the snapshot g: for each type, the heads of its entities in id
// order, each with the entity's type and display name and the tally of
// its fragments' spellings. An empty type is refused.
func requireHeads(t *testing.T, s store.Stores, tn string, g store.Graph, types map[string]bool) {
	t.Helper()
	hs, ok := s.(store.EntityHeads)
	require.True(t, ok, "%T does not implement store.EntityHeads", s)
	for typ := range types {
		got, err := hs.EntityHeadsByType(t.Context(), tn, typ)
		if typ == "" {
			require.ErrorIs(t, err, store.ErrInvalid)
			continue
		}
		require.NoError(t, err)
		want := []store.Entity{}
		for _, e := range g.Entities {
			if e.Type == typ {
				want = append(want, e)
			}
		}
		require.Len(t, got, len(want), "type %q", typ)
		for i, h := range got {
			e := want[i]
			require.Equal(t, e.ID, h.ID, "type %q", typ)
			require.Equal(t, e.Type, h.Type, "entity %q", e.ID)
			require.Equal(t, e.Name, h.Name, "entity %q", e.ID)
			require.Empty(t, store.CheckEntityHead(h, e.Sources))
		}
	}
}

// testAccessPaths: the relation, adjacency-count and name indexes follow
// applies, edits that rename or retype, and deletions.
func testAccessPaths(t *testing.T, s store.Stores) {
	ctx := t.Context()
	inc, fm := "incident:inc-1", "failure_mode:disk full"
	apply(t, s, tenant, "d1", 1, contrib(ents(ent(api, "Payments API", 2), ent(db, "Ledger DB", 2), ent(inc, "INC-1", 1), ent(fm, "Disk Full", 2)),
		edge(api, "calls", db, 1), edge(inc, "failure", fm, 1), edge(inc, "mentions", api, 1)))
	apply(t, s, tenant, "d2", 1, contrib(ents(ent(api, "payments   api", 1), ent(cache, "Cache", 2)), edge(api, "calls", cache, 1)))
	requireAccessPaths(t, s, tenant)

	fails, err := s.EdgesByRelation(ctx, tenant, "failure", "incident")
	require.NoError(t, err)
	require.Equal(t, []string{store.EdgeID(inc, "failure", fm)}, edgeIDs(fails))
	calls, err := s.EdgesByRelation(ctx, tenant, "calls", "")
	require.NoError(t, err)
	require.Len(t, calls, 2)
	none, err := s.EdgesByRelation(ctx, tenant, "calls", "incident")
	require.NoError(t, err)
	require.Empty(t, none)
	counts, err := s.EdgeCounts(ctx, tenant, []string{api, db, "service:absent"}, store.Out)
	require.NoError(t, err)
	require.Equal(t, map[string]int{api: 2, db: 0, "service:absent": 0}, counts)
	counts, err = s.EdgeCounts(ctx, tenant, []string{api}, store.In)
	require.NoError(t, err)
	require.Equal(t, map[string]int{api: 1}, counts)
	byName, err := s.EntitiesByName(ctx, tenant, "  PAYMENTS api ")
	require.NoError(t, err)
	require.Equal(t, []string{api}, entityIDs(byName), "case and spacing do not matter")

	// d2 is edited (api renamed by the better-ranked spelling going away,
	// the cache edge gone), d1 deleted: every index follows.
	apply(t, s, tenant, "d2", 2, contrib(ents(ent(api, "Checkout API", 2), ent(db, "Ledger DB", 2)), edge(db, "replicates_to", api, 1)))
	requireAccessPaths(t, s, tenant)
	del(t, s, tenant, "d1", 2)
	requireAccessPaths(t, s, tenant)
	byName, err = s.EntitiesByName(ctx, tenant, "payments api")
	require.NoError(t, err)
	require.Empty(t, byName, "no fragment spells it so any more")
	byName, err = s.EntitiesByName(ctx, tenant, "checkout api")
	require.NoError(t, err)
	require.Equal(t, []string{api}, entityIDs(byName))
	fails, err = s.EdgesByRelation(ctx, tenant, "failure", "")
	require.NoError(t, err)
	require.Empty(t, fails)

	// An entity only its document holds changes type under the same name
	// (removed and put by one apply): found by its name and new type.
	retyped := ent(db, "Ledger DB", 2)
	retyped.Type = "legacy"
	apply(t, s, tenant, "d2", 3, contrib(ents(ent(api, "Checkout API", 2), retyped), edge(db, "replicates_to", api, 1)))
	requireAccessPaths(t, s, tenant)
	byName, err = s.EntitiesByName(ctx, tenant, "ledger db")
	require.NoError(t, err)
	require.Equal(t, []string{db}, entityIDs(byName))
	require.Equal(t, "legacy", byName[0].Type)

	// Other tenants and bad tenants.
	requireAccessPaths(t, s, other)
	_, err = s.EdgesByRelation(ctx, "Bad Tenant", "calls", "")
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.EntitiesByName(ctx, "Bad Tenant", "x")
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.EdgeCounts(ctx, "Bad Tenant", []string{api}, store.Out)
	require.ErrorIs(t, err, store.ErrInvalid)
	requireClean(t, s, tenant)
}

// testApplyBatchDependent: changes of one batch that build on each
// other give what they give one at a time: an edge taking more supports
// than its head holds inline (its supports moved apart), then edited,
// retracted and deleted by its other documents in the same batch; an
// entity retyped by the one document holding it, then contributed under
// its new type by another; a document changed twice.
func testApplyBatchDependent(t *testing.T, s store.Stores) {
	ctx := t.Context()
	for _, tn := range []string{tenant, other} {
		for i := 1; i <= store.MaxInlineSupports; i++ {
			u := fmt.Sprintf("u%d", i)
			apply(t, s, tn, fmt.Sprintf("d%d", i), 1, contrib(ents(ent(api, "API", 1, u), ent(db, "DB", 2, u)), edge(api, "calls", db, float64(i), u)))
		}
		apply(t, s, tn, "solo", 1, contrib(ents(ent(cache, "Cache", 2, "s1"), ent(db, "DB", 2, "s1")), edge(cache, "calls", db, 1, "s1")))
	}
	retyped := ent(cache, "Cache", 2, "s2")
	retyped.Type = "legacy"
	later := ent(cache, "cache", 1, "l1")
	later.Type = "legacy"
	spill := fmt.Sprintf("d%d", store.MaxInlineSupports+1)
	changes := []store.Change{
		{DocID: spill, Version: 1, Contributions: contrib(ents(ent(api, "Api", 2, "u5"), ent(db, "DB", 2, "u5")), edge(api, "calls", db, 9, "u5"))},
		{DocID: "d2", Version: 2, Contributions: contrib(ents(ent(api, "API", 1, "u2b"), ent(db, "DB", 2, "u2b")), edge(api, "calls", db, 7, "u2b"))},
		{DocID: "d3", Version: 2, Contributions: contrib(ents(ent(api, "API", 1, "u3b")))},
		{DocID: "d1", Version: 2, Delete: true},
		{DocID: "solo", Version: 2, Contributions: contrib(ents(retyped, ent(db, "DB", 2, "s2")), edge(cache, "calls", db, 1, "s2"))},
		{DocID: "late", Version: 1, Contributions: contrib(ents(later, ent(api, "API", 1, "l1")), edge(cache, "calls", api, 1, "l1"))},
		{DocID: spill, Version: 2, Contributions: contrib(ents(ent(db, "DB", 2, "u5b"), ent(api, "API", 1, "u5b")), edge(db, "calls", api, 1, "u5b"))},
		{DocID: "d4", Version: 2, Delete: true},
		{DocID: "solo", Version: 3, Delete: true},
	}
	results, errs, err := s.ApplyBatch(ctx, tenant, changes)
	require.NoError(t, err)
	for i, ch := range changes {
		require.NoError(t, errs[i], "change %d", i)
		var want store.ApplyResult
		if ch.Delete {
			want = del(t, s, other, ch.DocID, ch.Version)
		} else {
			want = apply(t, s, other, ch.DocID, ch.Version, ch.Contributions)
		}
		require.Equal(t, want, results[i], "change %d", i)
	}
	require.Equal(t, snapshot(t, s, other), snapshot(t, s, tenant))
	for _, doc := range []string{"d1", "d2", "d3", "d4", spill, "solo", "late"} {
		a, b := source(t, s, tenant, doc), source(t, s, other, doc)
		a.AppliedAt, b.AppliedAt = time.Time{}, time.Time{}
		require.Equal(t, b, a, doc)
	}
	e, err := s.Entity(ctx, tenant, cache)
	require.NoError(t, err)
	require.Equal(t, "legacy", e.Type)
	requireClean(t, s, tenant)
	requireAccessPaths(t, s, tenant)
}

// testApplyBatch: a batch gives the results, errors and graph that the
// same applies and deletes one at a time give, on a graph that already
// holds a document whose entities and edge the batch changes and removes;
// an invalid change changes nothing and the others still apply.
func testApplyBatch(t *testing.T, s store.Stores) {
	ctx := t.Context()
	c0 := contrib(ents(ent(api, "API", 1, "u0"), ent(db, "DB", 2, "u0")), edge(api, "calls", db, 1, "u0"))
	for _, tn := range []string{tenant, other} {
		_, err := s.Apply(ctx, tn, "d0", 1, c0)
		require.NoError(t, err)
	}
	c1 := contrib(ents(ent(api, "API", 1, "u1"), ent(db, "DB", 2, "u1")), edge(api, "calls", db, 1, "u1"))
	c2 := contrib(ents(ent(api, "api", 2, "u2"), ent(cache, "Cache", 2, "u2")), edge(api, "calls", cache, 1, "u2"))
	c1b := contrib(ents(ent(db, "DB", 2, "u3"), ent(cache, "Cache", 1, "u3")), edge(db, "calls", cache, 2, "u3"))
	changes := []store.Change{
		{DocID: "d1", Version: 1, Contributions: c1},
		{DocID: "d2", Version: 1, Contributions: c2},
		{DocID: "d3", Version: 0, Contributions: c2},                                      // invalid version
		{DocID: "d4", Version: 1, Contributions: contrib(nil, edge(api, "calls", db, 1))}, // edge without its endpoints
		{DocID: "d1", Version: 2, Contributions: c1b},
		{DocID: "d2", Version: 2, Delete: true},
		{DocID: "d1", Version: 1, Contributions: c1},  // stale
		{DocID: "d1", Version: 2, Contributions: c1b}, // duplicate
		{DocID: "d0", Version: 2, Delete: true},       // api, api -calls-> db: gone
	}
	results, errs, err := s.ApplyBatch(ctx, tenant, changes)
	require.NoError(t, err)
	require.Len(t, results, len(changes))
	require.Len(t, errs, len(changes))
	for i, ch := range changes {
		var want store.ApplyResult
		var wantErr error
		if ch.Delete {
			want, wantErr = s.Delete(ctx, other, ch.DocID, ch.Version)
		} else {
			want, wantErr = s.Apply(ctx, other, ch.DocID, ch.Version, ch.Contributions)
		}
		if wantErr != nil {
			require.ErrorIs(t, wantErr, store.ErrInvalid)
			require.ErrorIs(t, errs[i], store.ErrInvalid, "change %d", i)
			continue
		}
		require.NoError(t, errs[i], "change %d", i)
		require.Equal(t, want, results[i], "change %d", i)
	}
	require.Equal(t, []store.Outcome{store.Applied, store.Applied, "", "", store.Applied, store.Applied, store.Stale, store.Duplicate, store.Applied},
		[]store.Outcome{results[0].Outcome, results[1].Outcome, results[2].Outcome, results[3].Outcome, results[4].Outcome,
			results[5].Outcome, results[6].Outcome, results[7].Outcome, results[8].Outcome})
	require.Equal(t, snapshot(t, s, other), snapshot(t, s, tenant))
	_, err = s.Entity(ctx, tenant, api)
	require.ErrorIs(t, err, store.ErrNotFound, "the entity the batch removed is gone")
	for _, doc := range []string{"d0", "d1", "d2"} {
		a, b := source(t, s, tenant, doc), source(t, s, other, doc)
		a.AppliedAt, b.AppliedAt = time.Time{}, time.Time{}
		require.Equal(t, b, a)
	}
	_, err = s.Source(ctx, tenant, "d3")
	require.ErrorIs(t, err, store.ErrNotFound, "the invalid change wrote nothing")
	requireClean(t, s, tenant)
	requireAccessPaths(t, s, tenant)
	_, _, err = s.ApplyBatch(ctx, "Bad Tenant", changes)
	require.ErrorIs(t, err, store.ErrInvalid)
}
