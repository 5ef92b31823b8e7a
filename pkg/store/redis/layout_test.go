package redis_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
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

// TestConvertsLayout2: graphs of layout 2, whose adjacency indexes are
// sets of edge ids and which list every edge id in a set, are converted by
// a new Store before its first graph operation into adjacency hashes and
// an edge count; every reader returns what a store that never was
// converted returns, the audit is clean, no set is left, and applies
// after the conversion leave both alike. A conversion cut short (some
// adjacency keys already hashes, a tenant's edge count already there)
// resumes, and a store whose layout key is newer than the build's is
// refused, not written.
func TestConvertsLayout2(t *testing.T) {
	ctx := t.Context()
	old, c, prefix := freshStore(t)
	never, _, _ := freshStore(t)
	storetest.FillHubGraph(t, old)
	storetest.FillHubGraph(t, never)

	g, err := old.Snapshot(ctx, "acme")
	require.NoError(t, err)
	ge, err := old.Snapshot(ctx, "globex")
	require.NoError(t, err)
	converted := toLayout2(t, old, c, prefix, "acme", "globex")
	require.Greater(t, converted, 4, "adjacency keys turned into sets")
	// Half converted already: a conversion that stopped after a chunk.
	hub := prefix + ":{acme}:g:out:service:hub"
	require.NoError(t, c.Del(ctx, hub).Err())
	for _, e := range g.Edges {
		if e.Source == "service:hub" {
			require.NoError(t, c.HSet(ctx, hub, e.Relation+"|"+e.Target, "").Err())
		}
	}
	// globex's edge set replaced by its count already.
	require.NoError(t, c.Del(ctx, prefix+":{globex}:g:edges").Err())
	require.NoError(t, c.Set(ctx, prefix+":{globex}:g:edge-count", len(ge.Edges), 0).Err())

	s := redis.New(newClient(t), prefix)
	t.Cleanup(func() { _ = s.Close() })
	storetest.SameHubGraph(t, "converted", never, s)
	for _, tenant := range []string{"acme", "globex"} {
		rep, err := s.Audit(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, store.AuditReport{Sources: rep.Sources, Entities: rep.Entities, Edges: rep.Edges}, rep, tenant)
		require.NotZero(t, rep.Edges)
	}
	require.Zero(t, adjacencyKeysOfType(t, c, prefix, "set"), "adjacency sets are left")
	require.Greater(t, adjacencyKeysOfType(t, c, prefix, "hash"), 4)
	n, err := c.Exists(ctx, prefix+":{acme}:g:edges", prefix+":{globex}:g:edges").Result()
	require.NoError(t, err)
	require.Zero(t, n, "edge sets are left")
	layout, err := c.Get(ctx, prefix+":graph-layout").Result()
	require.NoError(t, err)
	require.Equal(t, "5", layout)

	storetest.EditHubGraph(t, s)
	storetest.EditHubGraph(t, never)
	storetest.SameHubGraph(t, "edited after the conversion", never, s)

	require.NoError(t, c.Set(ctx, prefix+":graph-layout", "6", 0).Err())
	newer := redis.New(newClient(t), prefix)
	t.Cleanup(func() { _ = newer.Close() })
	_, err = newer.Apply(ctx, "acme", "doc-x", 1, storetest.HubDoc(40, 1))
	require.ErrorContains(t, err, "newer")
	_, err = newer.Snapshot(ctx, "acme")
	require.ErrorContains(t, err, "newer")
}

// toLayout2 rewrites the indexes of the tenants' graphs of s behind the
// adapter's back as layout 2 held them: a set of edge ids per entity and
// direction, a set of every edge id and no edge count; and sets the
// layout key to "2", so the next Store converts them. It returns how many
// adjacency sets it wrote.
func toLayout2(t *testing.T, s *redis.Store, c *goredis.Client, prefix string, tenants ...string) int {
	t.Helper()
	ctx := t.Context()
	n := 0
	for _, tenant := range tenants {
		g, err := s.Snapshot(ctx, tenant)
		require.NoError(t, err)
		base := prefix + ":{" + tenant + "}:g:"
		sets := map[string][]any{}
		require.NoError(t, c.Del(ctx, base+"edge-count", base+"edges").Err())
		for _, e := range g.Edges {
			require.NoError(t, c.SAdd(ctx, base+"edges", e.ID).Err())
			sets[base+"out:"+e.Source] = append(sets[base+"out:"+e.Source], e.ID)
			sets[base+"in:"+e.Target] = append(sets[base+"in:"+e.Target], e.ID)
		}
		for key, ids := range sets {
			require.NoError(t, c.Del(ctx, key).Err())
			require.NoError(t, c.SAdd(ctx, key, ids...).Err())
			n++
		}
	}
	require.NoError(t, c.Set(ctx, prefix+":graph-layout", "2", 0).Err())
	return n
}

// adjacencyKeysOfType counts the adjacency keys under prefix of type typ.
func adjacencyKeysOfType(t *testing.T, c *goredis.Client, prefix, typ string) int {
	t.Helper()
	ctx := t.Context()
	n := 0
	for _, pattern := range []string{prefix + ":*:g:out:*", prefix + ":*:g:in:*"} {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			got, err := c.Type(ctx, iter.Val()).Result()
			require.NoError(t, err)
			if got == typ {
				n++
			}
		}
		require.NoError(t, iter.Err())
	}
	return n
}

// toWholeLayout rewrites the tenants' graphs of s behind the adapter's
// back (no stripe changes) in the layout before heads stored them: each
// entity and edge whole under g:ent:<id> and g:edge:<id>, adjacency sets
// (toLayout2), and no layout key, so the next Store converts them.
func toWholeLayout(t *testing.T, s *redis.Store, c *goredis.Client, prefix string, tenants ...string) {
	t.Helper()
	ctx := t.Context()
	graphs := map[string]store.Graph{}
	for _, tenant := range tenants {
		g, err := s.Snapshot(ctx, tenant)
		require.NoError(t, err)
		graphs[tenant] = g
	}
	toLayout2(t, s, c, prefix, tenants...) // layout 1 held its indexes so too
	for _, tenant := range tenants {
		g := graphs[tenant]
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

// TestConvertsIndexSets: a store of layout 4 holds the name index and the
// reports' by-source index as sets; the next Store converts them into
// hashes (one key converted already, as by a conversion cut short),
// answers as before, and keeps them hashes through later writes.
func TestConvertsIndexSets(t *testing.T) {
	ctx := t.Context()
	old, c, prefix := freshStore(t)
	storetest.FillHubGraph(t, old)
	g, err := old.Snapshot(ctx, "acme")
	require.NoError(t, err)
	reports := []store.Report{
		{ID: "r-1", Community: "c1", Title: "one", Sources: []provenance.SourceRef{{DocID: "doc-000", Version: 1}, {DocID: "doc-001", Version: 1}}},
		{ID: "r-2", Community: "c2", Title: "two", Sources: []provenance.SourceRef{{DocID: "doc-001", Version: 1}}},
	}
	require.NoError(t, old.PutReports(ctx, "acme", reports))
	require.NoError(t, old.PutReports(ctx, "globex", reports[:1])) // a tenant with reports and no graph
	byName := func(s *redis.Store) map[string][]string {
		out := map[string][]string{}
		for _, e := range g.Entities {
			named, err := s.EntitiesByName(ctx, "acme", e.Name)
			require.NoError(t, err)
			for _, n := range named {
				out[e.Name] = append(out[e.Name], n.ID)
			}
		}
		return out
	}
	citing := func(s *redis.Store, tenant string) map[string][]string {
		out := map[string][]string{}
		for _, doc := range []string{"doc-000", "doc-001", "doc-002"} {
			rs, err := s.ReportsBySource(ctx, tenant, doc)
			require.NoError(t, err)
			for _, r := range rs {
				out[doc] = append(out[doc], r.ID)
			}
		}
		return out
	}
	names, cites, globexCites := byName(old), citing(old, "acme"), citing(old, "globex")
	require.Len(t, names, len(g.Entities))
	require.Equal(t, map[string][]string{"doc-000": {"r-1"}, "doc-001": {"r-1", "r-2"}}, cites)

	converted := toIndexSets(t, c, prefix)
	require.Greater(t, converted, len(g.Entities))
	// One converted already.
	first := prefix + ":{acme}:g:name:" + store.NameKey(g.Entities[0].Name)
	ids, err := c.SMembers(ctx, first).Result()
	require.NoError(t, err)
	require.NoError(t, c.Del(ctx, first).Err())
	for _, id := range ids {
		require.NoError(t, c.HSet(ctx, first, id, "").Err())
	}

	s := redis.New(newClient(t), prefix)
	t.Cleanup(func() { _ = s.Close() })
	require.Equal(t, cites, citing(s, "acme"))
	require.Equal(t, globexCites, citing(s, "globex"))
	require.Equal(t, names, byName(s))
	require.Zero(t, indexKeysOfType(t, c, prefix, "set"), "index sets are left")
	require.Equal(t, converted, indexKeysOfType(t, c, prefix, "hash"))
	layout, err := c.Get(ctx, prefix+":graph-layout").Result()
	require.NoError(t, err)
	require.Equal(t, "5", layout)
	citations, err := s.ReportCitationsOf(ctx, "acme", []string{"doc-001"})
	require.NoError(t, err)
	require.Len(t, citations, 2)

	// Later writes keep them hashes: a respelling, a report moved.
	_, err = s.Apply(ctx, "acme", "doc-000", 2, storetest.HubDoc(0, 2))
	require.NoError(t, err)
	reports[1].Sources = []provenance.SourceRef{{DocID: "doc-002", Version: 1}}
	require.NoError(t, s.PutReports(ctx, "acme", reports[1:]))
	require.Equal(t, map[string][]string{"doc-000": {"r-1"}, "doc-001": {"r-1"}, "doc-002": {"r-2"}}, citing(s, "acme"))
	require.Zero(t, indexKeysOfType(t, c, prefix, "set"), "a write made an index set")
	rep, err := s.Audit(ctx, "acme")
	require.NoError(t, err)
	require.Zero(t, rep.IndexMismatches, "%q", rep.Problems)
}

// toIndexSets rewrites every name and by-source index hash under prefix as
// the set layout 4 held, and sets the layout key to "4". It returns how
// many keys it rewrote.
func toIndexSets(t *testing.T, c *goredis.Client, prefix string) int {
	ctx := t.Context()
	n := 0
	for _, pattern := range []string{prefix + ":{*}:g:name:*", prefix + ":{*}:rsrc:*"} {
		iter := c.ScanType(ctx, 0, pattern, 1000, "hash").Iterator()
		for iter.Next(ctx) {
			fields, err := c.HKeys(ctx, iter.Val()).Result()
			require.NoError(t, err)
			require.NoError(t, c.Del(ctx, iter.Val()).Err())
			require.NoError(t, c.SAdd(ctx, iter.Val(), fields).Err())
			n++
		}
		require.NoError(t, iter.Err())
	}
	require.NoError(t, c.Set(ctx, prefix+":graph-layout", "4", 0).Err())
	return n
}

// indexKeysOfType counts the name and by-source index keys under prefix
// of type typ.
func indexKeysOfType(t *testing.T, c *goredis.Client, prefix, typ string) int {
	ctx := t.Context()
	n := 0
	for _, pattern := range []string{prefix + ":{*}:g:name:*", prefix + ":{*}:rsrc:*"} {
		iter := c.ScanType(ctx, 0, pattern, 1000, typ).Iterator()
		for iter.Next(ctx) {
			n++
		}
		require.NoError(t, iter.Err())
	}
	return n
}
