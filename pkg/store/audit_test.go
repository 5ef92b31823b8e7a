package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/store"
)

// cleanGraph is one live source supporting a -r-> b.
func cleanGraph() (store.Graph, []store.SourceRecord) {
	frag := store.Fragment{DocID: "d", Version: 2}
	g := store.Graph{
		Entities: []store.Entity{
			{ID: "t:a", Type: "t", Name: "a", Sources: []store.Fragment{frag}},
			{ID: "t:b", Type: "t", Name: "b", Sources: []store.Fragment{frag}},
		},
		Edges: []store.Edge{{ID: store.EdgeID("t:a", "r", "t:b"), Source: "t:a", Relation: "r", Target: "t:b", Supports: []store.Fragment{frag}}},
	}
	recs := []store.SourceRecord{{DocID: "d", Version: 2, Entities: []string{"t:a", "t:b"}, Edges: []string{g.Edges[0].ID}}}
	return g, recs
}

func TestAuditClean(t *testing.T) {
	g, recs := cleanGraph()
	idx := &store.Indexes{
		ByType: map[string][]string{"t": {"t:b", "t:a"}},
		Out:    map[string][]string{"t:a": {g.Edges[0].ID}},
		In:     map[string][]string{"t:b": {g.Edges[0].ID}},
	}
	require.Equal(t, store.AuditReport{Sources: 1, Entities: 2, Edges: 1}, store.Audit(g, recs, idx))
}

func TestAuditFindsProblems(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(g *store.Graph, recs []store.SourceRecord, idx *store.Indexes)
		want    func(r store.AuditReport) int
	}{
		{"source deleted", func(g *store.Graph, recs []store.SourceRecord, _ *store.Indexes) {
			recs[0].Deleted, recs[0].Entities, recs[0].Edges = true, nil, nil
		}, func(r store.AuditReport) int { return r.OrphanEdges + r.OrphanEntities - 3 }},
		{"support of an old version", func(g *store.Graph, _ []store.SourceRecord, _ *store.Indexes) {
			g.Edges[0].Supports[0].Version = 1
		}, func(r store.AuditReport) int { return r.OrphanEdges - 1 }},
		{"entity without sources", func(g *store.Graph, recs []store.SourceRecord, _ *store.Indexes) {
			g.Entities = append(g.Entities, store.Entity{ID: "t:c", Type: "t"})
		}, func(r store.AuditReport) int { return r.OrphanEntities - 1 }},
		{"missing endpoint", func(g *store.Graph, recs []store.SourceRecord, _ *store.Indexes) {
			g.Entities = g.Entities[:1]
			recs[0].Entities = recs[0].Entities[:1]
		}, func(r store.AuditReport) int { return r.OrphanEdges - 1 }},
		{"record lists what is not there", func(_ *store.Graph, recs []store.SourceRecord, _ *store.Indexes) {
			recs[0].Entities = append(recs[0].Entities, "t:z")
		}, func(r store.AuditReport) int { return r.IndexMismatches - 1 }},
		{"record misses what is there", func(_ *store.Graph, recs []store.SourceRecord, _ *store.Indexes) {
			recs[0].Edges = nil
		}, func(r store.AuditReport) int { return r.IndexMismatches - 1 }},
		{"stale type index", func(_ *store.Graph, _ []store.SourceRecord, idx *store.Indexes) {
			idx.ByType["u"] = []string{"t:a"}
		}, func(r store.AuditReport) int { return r.IndexMismatches - 1 }},
		{"missing adjacency", func(_ *store.Graph, _ []store.SourceRecord, idx *store.Indexes) {
			delete(idx.Out, "t:a")
		}, func(r store.AuditReport) int { return r.IndexMismatches - 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, recs := cleanGraph()
			idx := &store.Indexes{
				ByType: map[string][]string{"t": {"t:a", "t:b"}},
				Out:    map[string][]string{"t:a": {g.Edges[0].ID}},
				In:     map[string][]string{"t:b": {g.Edges[0].ID}},
			}
			tc.corrupt(&g, recs, idx)
			rep := store.Audit(g, recs, idx)
			require.Zero(t, tc.want(rep), "%+v", rep)
			require.NotEmpty(t, rep.Problems)
		})
	}
}
