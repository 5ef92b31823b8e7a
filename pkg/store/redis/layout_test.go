package redis_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/redis"
	"github.com/kgstream/kgstream/pkg/store/storetest"
)

// TestConvertsWholeLayout: graphs whose entities and edges are stored
// whole (g:ent:<id>, g:edge:<id>, as builds before heads wrote them, and
// no layout key) are converted by a new Store before its first graph
// operation; every reader returns what a store that never was converted
// returns, the audit is clean, and applies after the conversion leave both
// alike.
func TestConvertsWholeLayout(t *testing.T) {
	ctx := t.Context()
	old, c, prefix := freshStore(t)
	never, _, _ := freshStore(t)
	fill := func(s *redis.Store) {
		for i := range 30 {
			_, err := s.Apply(ctx, "acme", fmt.Sprintf("doc-%03d", i), 1, storetest.HubDoc(i, 1))
			require.NoError(t, err)
			_, err = s.Apply(ctx, "globex", fmt.Sprintf("doc-%03d", i), 1, storetest.HubDoc(i, 2))
			require.NoError(t, err)
		}
		_, err := s.Delete(ctx, "acme", "doc-004", 2)
		require.NoError(t, err)
	}
	fill(old)
	fill(never)

	// Rewrite old's graphs as the layout before heads stored them.
	for _, tenant := range []string{"acme", "globex"} {
		g, err := old.Snapshot(ctx, tenant)
		require.NoError(t, err)
		base := prefix + ":{" + tenant + "}:g:"
		for _, e := range g.Entities {
			data, err := store.EncodeValue(e, store.FastCompression)
			require.NoError(t, err)
			require.NoError(t, c.Del(ctx, base+"e:"+e.ID).Err())
			require.NoError(t, c.Set(ctx, base+"ent:"+e.ID, data, 0).Err())
		}
		for _, e := range g.Edges {
			data, err := store.EncodeValue(e, store.FastCompression)
			require.NoError(t, err)
			require.NoError(t, c.Del(ctx, base+"x:"+e.ID, base+"xs:"+e.ID).Err())
			require.NoError(t, c.Set(ctx, base+"edge:"+e.ID, data, 0).Err())
		}
	}
	require.NoError(t, c.Del(ctx, prefix+":graph-layout").Err())

	converted := redis.New(newClient(t), prefix)
	t.Cleanup(func() { _ = converted.Close() })
	same := func(step string) {
		for _, tenant := range []string{"acme", "globex"} {
			for _, read := range []func(s *redis.Store) (any, error){
				func(s *redis.Store) (any, error) { return s.Snapshot(ctx, tenant) },
				func(s *redis.Store) (any, error) { return s.Entity(ctx, tenant, "service:hub") },
				func(s *redis.Store) (any, error) {
					return s.Entities(ctx, tenant, []string{"service:hub", "incident:007"})
				},
				func(s *redis.Store) (any, error) { return s.EntitiesByType(ctx, tenant, "service") },
				func(s *redis.Store) (any, error) { return s.Edges(ctx, tenant, "service:hub", store.In) },
				func(s *redis.Store) (any, error) { return s.EdgesByRelation(ctx, tenant, "calls", "") },
				func(s *redis.Store) (any, error) { return s.EntitiesByName(ctx, tenant, "hub two") },
				func(s *redis.Store) (any, error) { return s.Stats(ctx, tenant) },
			} {
				want, err := read(never)
				require.NoError(t, err)
				got, err := read(converted)
				require.NoError(t, err)
				require.Equal(t, want, got, "%s: %s", step, tenant)
			}
			rep, err := converted.Audit(ctx, tenant)
			require.NoError(t, err)
			require.Empty(t, rep.Problems, "%s: audit of %s", step, tenant)
		}
	}
	same("converted")
	n, err := c.Exists(ctx, prefix+":{acme}:g:ent:service:hub", prefix+":{acme}:g:edge:service:hub|calls|service:hub2").Result()
	require.NoError(t, err)
	require.Zero(t, n, "whole values are left")
	layout, err := c.Get(ctx, prefix+":graph-layout").Result()
	require.NoError(t, err)
	require.NotEmpty(t, layout)

	for _, s := range []*redis.Store{converted, never} {
		for i := range 10 {
			_, err := s.Apply(ctx, "acme", fmt.Sprintf("doc-%03d", i), 3, storetest.HubDoc(i, 3))
			require.NoError(t, err)
		}
		_, err := s.Delete(ctx, "acme", "doc-020", 3)
		require.NoError(t, err)
	}
	same("edited after the conversion")
}
