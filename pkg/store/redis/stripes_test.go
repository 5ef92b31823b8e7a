package redis_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/redis"
	"github.com/kgstream/kgstream/pkg/store/storetest"
)

// TestConformanceStripes runs the suite with every apply watching
// stripes, however few heads it reads (by default only large ones do),
// then coarse stripes (by default only the largest do).
func TestConformanceStripes(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Stores {
		s, _, _ := freshStore(t, redis.WithStripesAlways())
		return s
	})
	t.Run("coarse", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Stores {
			s, _, _ := freshStore(t, redis.WithStripesAlways(), redis.WithCoarseStripesAlways())
			return s
		})
	})
}

// graphKeys reads what every entity and edge key of a tenant holds (its
// type and content, hash fields sorted), and the values of its stripes.
func graphKeys(t *testing.T, c *goredis.Client, prefix, tenant string) (graph, stripes map[string]string) {
	ctx := t.Context()
	base := prefix + ":{" + tenant + "}:"
	graph, stripes = map[string]string{}, map[string]string{}
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		rest, ok := strings.CutPrefix(key, base)
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(rest, "gv:"), strings.HasPrefix(rest, "gc:"):
			v, err := c.Get(ctx, key).Result()
			require.NoError(t, err)
			stripes[key] = v
		case strings.HasPrefix(rest, "g:e:"), strings.HasPrefix(rest, "g:x:"), strings.HasPrefix(rest, "g:xs:"):
			typ, content := dumpKey(t, c, key)
			graph[key] = typ + "\n" + strings.Join(content, "\n")
		}
	}
	require.NoError(t, iter.Err())
	return graph, stripes
}

// TestWritesBumpStripes: every write of an entity's hash or an edge's head
// or supports (applies, edits, a spill, deletions, the layout conversion)
// changes the stripe and the coarse stripe of that entity or edge, which
// is what an apply watching them relies on. A writer that forgot to bump would leave a
// changed key with an unchanged stripe here.
func TestWritesBumpStripes(t *testing.T) {
	ctx := t.Context()
	s, c, prefix := freshStore(t)
	const tenant = "acme"
	idOf := func(key string) string {
		rest := strings.TrimPrefix(key, prefix+":{"+tenant+"}:g:")
		_, id, _ := strings.Cut(rest, ":")
		return id
	}
	graph, stripes := graphKeys(t, c, prefix, tenant)
	step := func(name string, write func()) {
		t.Helper()
		write()
		g, st := graphKeys(t, c, prefix, tenant)
		changed := 0
		for key := range maps.Keys(g) {
			if g[key] == graph[key] {
				continue
			}
			changed++
			sk := redis.StripeKey(prefix, tenant, idOf(key))
			require.NotEqual(t, stripes[sk], st[sk], "%s: %s changed, its stripe %s did not", name, key, sk)
			ck := redis.CoarseKey(prefix, tenant, idOf(key))
			require.NotEqual(t, stripes[ck], st[ck], "%s: %s changed, its coarse stripe %s did not", name, key, ck)
		}
		for key := range maps.Keys(graph) {
			if _, ok := g[key]; !ok {
				changed++
				sk := redis.StripeKey(prefix, tenant, idOf(key))
				require.NotEqual(t, stripes[sk], st[sk], "%s: %s was deleted, its stripe %s did not change", name, key, sk)
				ck := redis.CoarseKey(prefix, tenant, idOf(key))
				require.NotEqual(t, stripes[ck], st[ck], "%s: %s was deleted, its coarse stripe %s did not change", name, key, ck)
			}
		}
		require.NotZero(t, changed, "%s wrote no entity or edge key", name)
		graph, stripes = g, st
	}
	apply := func(doc int, version int64) func() {
		return func() {
			_, err := s.Apply(ctx, tenant, fmt.Sprintf("doc-%03d", doc), version, storetest.HubDoc(doc, version))
			require.NoError(t, err)
		}
	}
	step("the first apply", apply(0, 1))
	for i := 1; i <= store.MaxInlineSupports; i++ {
		step(fmt.Sprintf("apply %d", i), apply(i, 1))
	}
	step("the apply spilling the hub edge's supports", apply(store.MaxInlineSupports+1, 1))
	step("an edit", apply(2, 2))
	step("a deletion", func() {
		_, err := s.Delete(ctx, tenant, "doc-003", 3)
		require.NoError(t, err)
	})
	step("an edit of the last document on an entity", func() {
		_, err := s.Apply(ctx, tenant, "doc-000", 2, store.Contributions{
			TextUnits: []events.TextUnit{{ID: "u", Text: "t"}},
			Entities:  []store.EntityContribution{{ID: "incident:new", Type: "incident", Name: "new", NameRank: 2, TextUnits: []string{"u"}}},
		})
		require.NoError(t, err)
	})

	// The layout conversion: rewrite the graph whole (behind the adapter's
	// back, so no stripe changes), then a new Store converts it.
	toWholeLayout(t, s, c, prefix, tenant)
	graph, stripes = graphKeys(t, c, prefix, tenant)
	step("the layout conversion", func() {
		converted := redis.New(newClient(t), prefix)
		defer converted.Close()
		_, err := converted.Stats(ctx, tenant)
		require.NoError(t, err)
	})
}

// TestConcurrentHubStripes races writers of documents that all name the
// same hub entities and share one edge: the graph must be the one
// applying the same final versions one after the other gives, and clean.
// Once with every apply watching stripes, where it fails if a write of the
// hub leaves its stripe alone (then concurrent applies overwrite each
// other's heads); once with the default store and documents large enough
// that each apply's first attempt watches stripes and its retries heads.
func TestConcurrentHubStripes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []redis.Option
		pad  int
	}{
		{"stripes always", []redis.Option{redis.WithStripesAlways()}, 0},
		{"coarse stripes always", []redis.Option{redis.WithStripesAlways(), redis.WithCoarseStripesAlways()}, 0},
		{"large documents", nil, 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s, _, _ := freshStore(t, append(tc.opts, redis.WithMaxAttempts(1000))...)
			const writers, versions = 12, 4
			doc := func(i int) string { return fmt.Sprintf("doc-%03d", i) }
			contrib := func(i int, v int64) store.Contributions {
				c := storetest.HubDoc(i, v)
				for j := range tc.pad {
					c.Entities = append(c.Entities, store.EntityContribution{ID: fmt.Sprintf("part:%03d-%04d", i, (j+int(v)*7)%(2*tc.pad)),
						Type: "part", Name: fmt.Sprintf("part %d", j), NameRank: 2, TextUnits: []string{"u"}})
				}
				return c
			}
			// Writers i%3 == 0 delete their document at the last version.
			write := func(tenant string, i int, v int64) error {
				var err error
				if v == versions && i%3 == 0 {
					_, err = s.Delete(ctx, tenant, doc(i), v)
				} else {
					_, err = s.Apply(ctx, tenant, doc(i), v, contrib(i, v))
				}
				return err
			}
			var wg sync.WaitGroup
			errs := make([]error, writers)
			for i := range writers {
				wg.Go(func() {
					for v := int64(1); v <= versions && errs[i] == nil; v++ {
						errs[i] = write("race", i, v)
					}
				})
			}
			wg.Wait()
			require.NoError(t, errors.Join(errs...))
			for i := range writers {
				require.NoError(t, write("sequential", i, versions))
			}
			want, err := s.Snapshot(ctx, "sequential")
			require.NoError(t, err)
			got, err := s.Snapshot(ctx, "race")
			require.NoError(t, err)
			require.Equal(t, want, got)
			for _, tenant := range []string{"race", "sequential"} {
				rep, err := s.Audit(ctx, tenant)
				require.NoError(t, err)
				require.Empty(t, rep.Problems, "audit of %s", tenant)
			}
		})
	}
}
