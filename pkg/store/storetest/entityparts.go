package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
)

// testEntityParts: the parts of an entity many documents name are what
// store.PartOf makes of the whole entity, for every byte bound and set of
// documents: the head, the fragment count, the first fragments in doc-id
// order holding the bytes asked for, and the fragments of the documents
// asked for (absent when a document has none). An absent entity has none,
// and an id asked twice is answered once.
func testEntityParts(t *testing.T, s store.Stores) {
	ep, ok := s.(store.EntityParts)
	require.True(t, ok, "%T reads entity parts (store.EntityParts)", s)
	ctx := t.Context()
	const hub, db = "service:api", "service:db"
	for i := range 12 {
		doc := fmt.Sprintf("d%02d", i)
		desc := strings.Repeat("x", i%4*5) // "", 5, 10, 15 bytes, ...
		ents := []store.EntityContribution{{ID: hub, Type: "service", Name: "API", NameRank: i % 3, Description: desc, TextUnits: []string{"u"}}}
		if i%5 == 0 {
			ents = append(ents, store.EntityContribution{ID: db, Type: "service", Name: "DB", Description: "db", TextUnits: []string{"u"}})
		}
		apply(t, s, tenant, doc, 1, store.Contributions{TextUnits: []events.TextUnit{{ID: "u", Text: "t"}}, Entities: ents})
	}
	whole, err := s.Entities(ctx, tenant, []string{hub, db})
	require.NoError(t, err)
	require.Len(t, whole[hub].Sources, 12)
	docs := map[string][]string{hub: {"d00", "d07", "d11", "nope"}, db: {"d05", "d06"}}
	for _, bound := range []int{0, 1, 6, 17, 18, 40, 1000} {
		parts, err := ep.EntityParts(ctx, tenant, []string{hub, db, "service:none", hub}, bound, docs)
		require.NoError(t, err)
		require.Equal(t, map[string]store.EntityPart{
			hub: store.PartOf(whole[hub], bound, docs[hub]),
			db:  store.PartOf(whole[db], bound, docs[db]),
		}, parts, "bound %d", bound)
	}
	// d00 has no description, d01 5 bytes, d02 10: with their separators
	// they hold 17 bytes, so 17 take the first three fragments, 18 four.
	require.Len(t, store.PartOf(whole[hub], 17, nil).First, 3)
	require.Len(t, store.PartOf(whole[hub], 18, nil).First, 4)
	p := store.PartOf(whole[hub], 1000, docs[hub])
	require.Equal(t, 12, p.Fragments)
	require.Equal(t, whole[hub].Sources, p.First)
	of := make([]string, 0, len(p.Of))
	for doc := range p.Of {
		of = append(of, doc)
	}
	slices.Sort(of)
	require.Equal(t, []string{"d00", "d07", "d11"}, of)

	none, err := ep.EntityParts(ctx, other, []string{hub}, 10, nil)
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = ep.EntityParts(ctx, "Bad Tenant", []string{hub}, 10, nil)
	require.ErrorIs(t, err, store.ErrInvalid)
}

// testSourceRecords: the records read at once are those Source reads one
// by one, tombstones included; a document never applied, an id asked
// twice and another tenant's document are handled as Source would.
func testSourceRecords(t *testing.T, s store.Stores) {
	sr, ok := s.(store.SourceRecords)
	require.True(t, ok, "%T reads records at once (store.SourceRecords)", s)
	ctx := t.Context()
	apply(t, s, tenant, "d1", 1, contrib(ents(ent(api, "API", 1, "u1"), ent(db, "DB", 2, "u1")), edge(api, "calls", db, 1, "u1")))
	apply(t, s, tenant, "d2", 1, contrib(ents(ent(api, "API", 1, "u2"))))
	del(t, s, tenant, "d2", 2)
	apply(t, s, other, "d3", 1, contrib(ents(ent(cache, "Cache", 1, "u3"))))
	got, err := sr.SourceRecords(ctx, tenant, []string{"d2", "d1", "nope", "d1", "d3"})
	require.NoError(t, err)
	require.Equal(t, map[string]store.SourceRecord{"d1": source(t, s, tenant, "d1"), "d2": source(t, s, tenant, "d2")}, got)
	require.True(t, got["d2"].Deleted)
	require.NotEmpty(t, got["d1"].TextUnits)
	none, err := sr.SourceRecords(ctx, tenant, nil)
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = sr.SourceRecords(ctx, "Bad Tenant", []string{"d1"})
	require.ErrorIs(t, err, store.ErrInvalid)
}

// testEdgesAmong: the edges of an entity in either direction whose other
// end is among some entities are those of Edges with such an end, for
// random sets of entities, relations and ids holding '|' (an edge id is
// source|relation|target), an edge to itself, an entity with no edges
// and an absent one.
func testEdgesAmong(t *testing.T, s store.Stores) {
	ea, ok := s.(store.EdgesAmong)
	require.True(t, ok, "%T reads edges among entities (store.EdgesAmong)", s)
	ctx := t.Context()
	const hub = "service:api"
	pool := []string{"component:c0", "component:c1", "component:c|x", "component:c1|uses|service:api", "service:db", hub}
	rels := []string{"uses", "a|b", "uses|component:c1", "depends"}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 12 {
		doc := fmt.Sprintf("d%02d", i)
		ents := []store.EntityContribution{{ID: hub, Type: "service", Name: "API", TextUnits: []string{"u"}}}
		var edges []store.EdgeContribution
		for _, j := range rng.Perm(len(pool))[:3] {
			x := pool[j]
			if x != hub {
				typ, _, _ := strings.Cut(x, ":")
				ents = append(ents, store.EntityContribution{ID: x, Type: typ, Name: x, TextUnits: []string{"u"}})
			}
			e := store.EdgeContribution{Source: hub, Relation: rels[rng.IntN(len(rels))], Target: x, Weight: 1, TextUnits: []string{"u"}}
			if rng.IntN(2) == 0 {
				e.Source, e.Target = x, hub
			}
			edges = append(edges, e)
		}
		apply(t, s, tenant, doc, 1, store.Contributions{TextUnits: []events.TextUnit{{ID: "u", Text: "t"}}, Entities: ents, Edges: edges})
	}
	for _, id := range append(slices.Clone(pool), "service:none") {
		for _, dir := range []store.Direction{store.Out, store.In} {
			all, err := s.Edges(ctx, tenant, id, dir)
			require.NoError(t, err)
			for range 8 {
				var others []string
				for _, x := range pool {
					if rng.IntN(2) == 0 {
						others = append(others, x)
					}
				}
				slices.Sort(others)
				want := []store.Edge{}
				for _, e := range all {
					if slices.Contains(others, store.FarEnd(e, dir)) {
						want = append(want, e)
					}
				}
				got, err := ea.EdgesAmong(ctx, tenant, id, dir, others)
				require.NoError(t, err)
				require.Equal(t, want, got, "edges of %s (%v) among %v", id, dir, others)
			}
		}
	}
	all, err := s.Edges(ctx, tenant, hub, store.Out)
	require.NoError(t, err)
	require.NotEmpty(t, all)
	none, err := ea.EdgesAmong(ctx, tenant, hub, store.Out, nil)
	require.NoError(t, err)
	require.Empty(t, none, "among no entity: no edge")
}
