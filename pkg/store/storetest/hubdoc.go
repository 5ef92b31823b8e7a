package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
)

// HubDoc is document i's contribution at version: its incident, naming a
// hub and a second hub (their edge gathers a support per document), in a
// name of the hub that changes with the version. The adapters' layout
// conversion tests build their graphs of it.
func HubDoc(i int, version int64) store.Contributions {
	inc := fmt.Sprintf("incident:%03d", i)
	u := []string{"u"}
	return store.Contributions{
		TextUnits: []events.TextUnit{{ID: "u", Text: "t"}},
		Entities: []store.EntityContribution{
			{ID: inc, Type: "incident", Name: inc, NameRank: 2, TextUnits: u},
			{ID: "service:hub", Type: "service", Name: fmt.Sprintf("Hub v%d", version), NameRank: 2 + i%3, TextUnits: u,
				Description: fmt.Sprintf("seen by %d at %d", i, version)},
			{ID: "service:hub2", Type: "service", Name: "Hub two", NameRank: 2, TextUnits: u},
		},
		Edges: []store.EdgeContribution{
			{Source: inc, Relation: "affected", Target: "service:hub", Weight: 1, TextUnits: u},
			{Source: "service:hub", Relation: "calls", Target: "service:hub2", Weight: float64(version), TextUnits: u},
		},
	}
}

// FillHubGraph writes the graphs the layout conversion tests convert: 30
// HubDoc documents in tenant "acme" and 30 in "globex" (another name rank
// per tenant), then deletes acme's doc-004.
func FillHubGraph(t testing.TB, g store.GraphStore) {
	t.Helper()
	ctx := context.Background()
	for i := range 30 {
		_, err := g.Apply(ctx, "acme", fmt.Sprintf("doc-%03d", i), 1, HubDoc(i, 1))
		require.NoError(t, err)
		_, err = g.Apply(ctx, "globex", fmt.Sprintf("doc-%03d", i), 1, HubDoc(i, 2))
		require.NoError(t, err)
	}
	_, err := g.Delete(ctx, "acme", "doc-004", 2)
	require.NoError(t, err)
}

// EditHubGraph edits a FillHubGraph graph: ten documents at a new version
// (the hub's name and edge weight change) and one more deletion.
func EditHubGraph(t testing.TB, g store.GraphStore) {
	t.Helper()
	ctx := context.Background()
	for i := range 10 {
		_, err := g.Apply(ctx, "acme", fmt.Sprintf("doc-%03d", i), 3, HubDoc(i, 3))
		require.NoError(t, err)
	}
	_, err := g.Delete(ctx, "acme", "doc-020", 3)
	require.NoError(t, err)
}

// SameHubGraph checks that every graph reader of got answers as want's
// does on both tenants of a FillHubGraph graph, and that got's audit is
// clean: a converted store against one that was never converted.
func SameHubGraph(t testing.TB, step string, want, got store.GraphStore) {
	t.Helper()
	ctx := context.Background()
	for _, tenant := range []string{"acme", "globex"} {
		for _, read := range []func(s store.GraphStore) (any, error){
			func(s store.GraphStore) (any, error) { return s.Snapshot(ctx, tenant) },
			func(s store.GraphStore) (any, error) { return s.Entity(ctx, tenant, "service:hub") },
			func(s store.GraphStore) (any, error) {
				return s.Entities(ctx, tenant, []string{"service:hub", "incident:007"})
			},
			func(s store.GraphStore) (any, error) { return s.EntitiesByType(ctx, tenant, "service") },
			func(s store.GraphStore) (any, error) { return s.EntitiesByType(ctx, tenant, "") },
			func(s store.GraphStore) (any, error) { return s.Edges(ctx, tenant, "service:hub", store.In) },
			func(s store.GraphStore) (any, error) { return s.EdgesByRelation(ctx, tenant, "calls", "") },
			func(s store.GraphStore) (any, error) { return s.EntitiesByName(ctx, tenant, "hub two") },
			func(s store.GraphStore) (any, error) { return s.Stats(ctx, tenant) },
		} {
			w, err := read(want)
			require.NoError(t, err)
			g, err := read(got)
			require.NoError(t, err)
			require.Equal(t, w, g, "%s: %s", step, tenant)
		}
		snap, err := got.Snapshot(ctx, tenant)
		require.NoError(t, err)
		require.Len(t, snap.Entities, map[string]int{"acme": 31, "globex": 32}[tenant], "%s: entities of %s", step, tenant)
		rep, err := got.Audit(ctx, tenant)
		require.NoError(t, err)
		require.Empty(t, rep.Problems, "%s: audit of %s", step, tenant)
	}
}
