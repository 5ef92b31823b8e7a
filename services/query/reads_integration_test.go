//go:build integration

package query_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/query"
)

// countingStores counts the reads that list a whole tenant.
type countingStores struct {
	query.Stores
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingStores) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[name]++
}

func (c *countingStores) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

func (c *countingStores) EntitiesByType(ctx context.Context, tenant, typ string) ([]store.Entity, error) {
	c.add("EntitiesByType(" + typ + ")")
	return c.Stores.EntitiesByType(ctx, tenant, typ)
}

func (c *countingStores) Reports(ctx context.Context, tenant string) ([]store.Report, error) {
	c.add("Reports")
	return c.Stores.Reports(ctx, tenant)
}

func (c *countingStores) Communities(ctx context.Context, tenant string) ([]store.Community, error) {
	c.add("Communities")
	return c.Stores.Communities(ctx, tenant)
}

func (c *countingStores) Entities(ctx context.Context, tenant string, ids []string) (map[string]store.Entity, error) {
	c.add("Entities")
	return c.Stores.Entities(ctx, tenant, ids)
}

// EntityParts counts the reads of changed entities by their parts.
func (c *countingStores) EntityParts(ctx context.Context, tenant string, ids []string, textBytes int, docs map[string][]string) (map[string]store.EntityPart, error) {
	c.add("EntityParts")
	return entityParts(ctx, c.Stores, tenant, ids, textBytes, docs)
}

// EdgesAmong counts the patches of an entity's edge list.
func (c *countingStores) EdgesAmong(ctx context.Context, tenant, id string, dir store.Direction, others []string) ([]store.Edge, error) {
	c.add("EdgesAmong " + id)
	return edgesAmong(ctx, c.Stores, tenant, id, dir, others)
}

func (c *countingStores) Edges(ctx context.Context, tenant, id string, dir store.Direction) ([]store.Edge, error) {
	c.add("Edges " + id)
	return c.Stores.Edges(ctx, tenant, id, dir)
}

func (c *countingStores) EdgesByRelation(ctx context.Context, tenant, relation, sourceType string) ([]store.Edge, error) {
	c.add("EdgesByRelation")
	return c.Stores.EdgesByRelation(ctx, tenant, relation, sourceType)
}

func (c *countingStores) Snapshot(ctx context.Context, tenant string) (store.Graph, error) {
	c.add("Snapshot")
	return c.Stores.Snapshot(ctx, tenant)
}

func newCountingFixture(t *testing.T) (*fixture, *countingStores) {
	t.Helper()
	cs := &countingStores{Stores: openStore(t), calls: map[string]int{}}
	st := &failingStores{Stores: cs}
	loadSeed(t, st, tenantAcme)
	loadGlobex(t, st)
	cs.reset()
	return (&fixture{t: t, st: st}).withConfig(query.Config{}), cs
}

// TestAggregateListsNoEntities: an aggregate reads its relation's edges
// and the entities at their ends, never a listing of the tenant.
func TestAggregateListsNoEntities(t *testing.T) {
	f, cs := newCountingFixture(t)
	var a aggResp
	f.get("/v1/aggregate?type=incident&rel=failure", tokAlice, http.StatusOK, &a)
	require.NotEmpty(t, a.Groups)
	f.get("/v1/aggregate?type=service&rel=~affected", tokAlice, http.StatusOK, &a)
	require.NotEmpty(t, a.Groups)
	calls := cs.reset()
	// One registry generation per request checks the kept registry view
	// (no listing: the supports are few).
	require.Equal(t, map[string]int{"EdgesByRelation": 2, "Entities": 2, "RegistryGeneration": 2}, calls)
}

// TestLocalReadsOnlyTheSeedsReports: local search finds the reports of
// the mapped entities' communities through the member index, without
// listing every community or decoding every report.
func TestLocalReadsOnlyTheSeedsReports(t *testing.T) {
	f, cs := newCountingFixture(t)
	r := ask(t, f, tokAlice, map[string]any{"mode": "local", "question": "Which teams were affected by incidents involving cert-manager?"})
	var reports []string
	for _, it := range r.Context {
		if it.Kind == query.KindReport {
			reports = append(reports, it.ID)
		}
	}
	require.NotEmpty(t, reports)
	calls := cs.reset()
	require.Zero(t, calls["Reports"], "%v", calls)
	require.Zero(t, calls["Communities"], "%v", calls)
}

func (c *countingStores) ListSources(ctx context.Context, tenant string) ([]provenance.SourceState, error) {
	c.add("ListSources")
	return c.Stores.ListSources(ctx, tenant)
}

// RegistryGeneration passes the registry generation through, so the
// service keeps its registry views behind countingStores too.
func (c *countingStores) RegistryGeneration(ctx context.Context, tenant string) (uint64, error) {
	c.add("RegistryGeneration")
	return c.Stores.(store.RegistryGenerations).RegistryGeneration(ctx, tenant)
}

// SourcesChangedSince passes the registry's changes through, so the
// service brings its registry views up to date behind countingStores too.
func (c *countingStores) SourcesChangedSince(ctx context.Context, tenant string, since uint64) ([]provenance.SourceState, bool, error) {
	c.add("SourcesChangedSince")
	return c.Stores.(store.RegistryChanges).SourcesChangedSince(ctx, tenant, since)
}

func (c *countingStores) Source(ctx context.Context, tenant, docID string) (store.SourceRecord, error) {
	c.add("Source")
	return c.Stores.Source(ctx, tenant, docID)
}
