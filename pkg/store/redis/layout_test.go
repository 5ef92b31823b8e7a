package redis_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"
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
	storetest.FillHubGraph(t, old)
	storetest.FillHubGraph(t, never)

	toWholeLayout(t, old, c, prefix, "acme", "globex")

	converted := redis.New(newClient(t), prefix)
	t.Cleanup(func() { _ = converted.Close() })
	storetest.SameHubGraph(t, "converted", never, converted)
	n, err := c.Exists(ctx, prefix+":{acme}:g:ent:service:hub", prefix+":{acme}:g:edge:service:hub|calls|service:hub2").Result()
	require.NoError(t, err)
	require.Zero(t, n, "whole values are left")
	layout, err := c.Get(ctx, prefix+":graph-layout").Result()
	require.NoError(t, err)
	require.NotEmpty(t, layout)

	storetest.EditHubGraph(t, converted)
	storetest.EditHubGraph(t, never)
	storetest.SameHubGraph(t, "edited after the conversion", never, converted)
}

// toWholeLayout rewrites the tenants' graphs of s behind the adapter's
// back (no stripe changes) in the layout before heads stored them: each
// entity and edge whole under g:ent:<id> and g:edge:<id>, and no layout
// key, so the next Store converts them.
func toWholeLayout(t *testing.T, s *redis.Store, c *goredis.Client, prefix string, tenants ...string) {
	t.Helper()
	ctx := t.Context()
	for _, tenant := range tenants {
		g, err := s.Snapshot(ctx, tenant)
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
}
