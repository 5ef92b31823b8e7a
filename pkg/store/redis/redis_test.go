package redis_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/redis"
	"github.com/kgstream/kgstream/pkg/store/storetest"
)

// options returns the client options of the test server: 127.0.0.1:6379,
// or KG_TEST_REDIS_URL (redis://...).
func options(t testing.TB) *goredis.Options {
	t.Helper()
	url := os.Getenv("KG_TEST_REDIS_URL")
	if url == "" {
		return &goredis.Options{Addr: "127.0.0.1:6379"}
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("parsing KG_TEST_REDIS_URL %q: %v", url, err)
	}
	return opts
}

// newClient connects to the test server. An unreachable server fails the
// test: the Redis adapter is never skipped.
func newClient(t testing.TB) *goredis.Client {
	t.Helper()
	opts := options(t)
	c := goredis.NewClient(opts)
	if err := c.Ping(t.Context()).Err(); err != nil {
		_ = c.Close()
		t.Fatalf("Redis at %s is unreachable (start it, or set KG_TEST_REDIS_URL): %v", opts.Addr, err)
	}
	return c
}

// deleteKeys removes every key under prefix. It runs in t.Cleanup, when
// t.Context is already done, so it has its own client and context.
func deleteKeys(t testing.TB, prefix string) {
	c := goredis.NewClient(options(t))
	defer c.Close()
	ctx := context.Background()
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("listing the keys of %q: %v", prefix, err)
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := c.Del(ctx, keys[:n]...).Err(); err != nil {
			t.Errorf("deleting the keys of %q: %v", prefix, err)
			return
		}
		keys = keys[n:]
	}
}

// freshStore is a store under a fresh prefix of the test server, with its
// client and prefix; its keys are deleted when the test ends.
func freshStore(t testing.TB, opts ...redis.Option) (*redis.Store, *goredis.Client, string) {
	c := newClient(t)
	prefix := "kgtest-" + rand.Text()[:12]
	return storeOn(t, c, prefix, opts...), c, prefix
}

// storeOn is a store of client c under prefix, closed and its keys
// deleted when the test ends.
func storeOn(t testing.TB, c *goredis.Client, prefix string, opts ...redis.Option) *redis.Store {
	s := redis.New(c, prefix, opts...)
	t.Cleanup(func() {
		_ = s.Close()
		deleteKeys(t, prefix)
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Stores {
		s, _, _ := freshStore(t)
		return s
	})
}

// TestAuditSeesStorage corrupts keys behind the adapter's back: the audit
// reads what is stored, not what the id sets claim.
func TestAuditSeesStorage(t *testing.T) {
	ctx := t.Context()
	c := newClient(t)
	prefix := "kgtest-" + rand.Text()[:12]
	s := redis.New(c, prefix)
	t.Cleanup(func() { deleteKeys(t, prefix) })
	contrib := store.Contributions{
		Entities: []store.EntityContribution{{ID: "t:a", Type: "t", Name: "a"}, {ID: "t:b", Type: "t", Name: "b"}},
		Edges:    []store.EdgeContribution{{Source: "t:a", Relation: "r", Target: "t:b"}},
	}
	if _, err := s.Apply(ctx, "acme", "d", 1, contrib); err != nil {
		t.Fatal(err)
	}
	base := prefix + ":{acme}:g:"
	if err := c.HDel(ctx, base+"out:t:a", "r|t:b").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, base+"e:t:b").Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Audit(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if rep.OrphanEdges != 1 || rep.IndexMismatches < 3 {
		t.Fatalf("got %+v, want 1 orphan edge (missing endpoint) and mismatches for the record, the out hash and the entity set", rep)
	}

	// A key no id set lists is found by the scan; a key of the wrong type
	// is a finding, not a failure of the audit.
	if err := c.HSet(ctx, base+"e:t:ghost", "", `{"t":"t","n":"ghost"}`).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.SAdd(ctx, base+"x:t:x|r|t:y", "not an edge").Err(); err != nil {
		t.Fatal(err)
	}
	again, err := s.Audit(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if again.OrphanEntities != rep.OrphanEntities+1 || again.IndexMismatches <= rep.IndexMismatches {
		t.Fatalf("got %+v after adding an unlisted entity and a wrong-typed edge key; before %+v", again, rep)
	}
	if !slices.ContainsFunc(again.Problems, func(p string) bool { return strings.Contains(p, "does not hold the type") }) &&
		len(again.Problems) < store.MaxAuditProblems {
		t.Fatalf("the wrong-typed key is not among the problems: %q", again.Problems)
	}

	// The edge count is checked against the edges stored.
	other := prefix + "-count"
	counted := redis.New(newClient(t), other)
	t.Cleanup(func() { _ = counted.Close(); deleteKeys(t, other) })
	if _, err := counted.Apply(ctx, "acme", "d", 1, contrib); err != nil {
		t.Fatal(err)
	}
	if rep, err := counted.Audit(ctx, "acme"); err != nil || rep.IndexMismatches != 0 {
		t.Fatalf("a sound graph: %+v, %v", rep, err)
	}
	if err := c.IncrBy(ctx, other+":{acme}:g:edge-count", 2).Err(); err != nil {
		t.Fatal(err)
	}
	rep, err = counted.Audit(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if rep.IndexMismatches != 1 || !slices.ContainsFunc(rep.Problems, func(p string) bool { return strings.Contains(p, "edge count") }) {
		t.Fatalf("got %+v with an edge count of 3 for 1 edge, want its mismatch", rep)
	}
}

// BenchmarkApply is issue 4's benchmark: Apply latency and throughput on a
// store already holding storetest.BenchDocs documents (about a million
// edges), and memory per edge. Everything lives under a fresh prefix,
// deleted afterwards, unless benchKeepEnv names the prefix to use: its
// keys are then kept, and a later run finding the preload there skips it
// (and the memory figures), so runs comparing builds take seconds
// instead of minutes.
func BenchmarkApply(b *testing.B) {
	const tenant = "bench"
	ctx := b.Context()
	corpus := storetest.NewBenchCorpus(b)
	c := newClient(b)
	prefix, keep := os.LookupEnv(benchKeepEnv)
	if !keep {
		prefix = "kgbench-" + rand.Text()[:12]
	}
	s := redis.New(c, prefix)
	b.Cleanup(func() {
		_ = s.Close()
		if !keep {
			deleteKeys(b, prefix)
		}
	})
	st, err := s.Stats(ctx, tenant)
	if err != nil {
		b.Fatal(err)
	}
	if keep && st.Sources >= corpus.Docs {
		// Preloaded by an earlier run: the memory figures were its own.
		b.Logf("%s=%s: %d sources, %d entities, %d edges kept from an earlier run; no preload, no memory figures",
			benchKeepEnv, prefix, st.Sources, st.Entities, st.Edges)
		storetest.BenchApply(b, s, tenant, corpus)
		storetest.BenchApplyBatch(b, s, tenant, corpus)
		return
	}
	if st.Sources > 0 {
		// A kept preload cut short: the preload completes it, and the
		// memory figures count only what it adds.
		b.Logf("%s=%s: %d sources kept from an earlier run; the memory figures below leave them out",
			benchKeepEnv, prefix, st.Sources)
	}
	before := usedMemory(b, c)
	// Redis runs commands one at a time; several writers keep it busy
	// while each waits for its round trips.
	took := storetest.Preload(b, s, tenant, corpus, 8)
	after := usedMemory(b, c)
	if st, err = s.Stats(ctx, tenant); err != nil {
		b.Fatal(err)
	}
	mem := edgeMemory(b, c, prefix+":{"+tenant+"}:g:", 1000)
	b.Logf("preloaded %d documents, %d entities, %d edges in %v (%.0f applies/s); used_memory grew by %d MiB",
		st.Sources, st.Entities, st.Edges, took.Round(time.Second), float64(corpus.Docs)/took.Seconds(), (after-before)>>20)
	b.Logf("per sampled edge: key %.0f B, out-hash entry %.0f B, in-hash entry %.0f B (no edge-id set)",
		mem.key, mem.out, mem.in)
	b.Run("memory", func(b *testing.B) {
		for b.Loop() {
		}
		b.ReportMetric(float64(st.Edges), "edges")
		b.ReportMetric(mem.key+mem.out+mem.in, "edge+index-B/edge")
		b.ReportMetric(mem.key, "edge-key-B/edge")
		b.ReportMetric(float64(after-before)/float64(st.Edges), "used-B/edge")
		b.ReportMetric(took.Seconds(), "preload-s")
	})
	storetest.BenchApply(b, s, tenant, corpus)
	storetest.BenchApplyBatch(b, s, tenant, corpus)
}

// benchKeepEnv names the key prefix BenchmarkApply keeps its preload
// under (see there); delete its keys by hand when done.
const benchKeepEnv = "KG_BENCH_REDIS_KEEP"

// usedMemory is INFO memory's used_memory.
func usedMemory(tb testing.TB, c *goredis.Client) int64 {
	info, err := c.Info(tb.Context(), "memory").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatal("INFO memory has no used_memory")
	return 0
}

// edgeCost is the average memory of one edge: its key, and its entries in
// the out and in adjacency hashes (there is no set of all edge ids).
type edgeCost struct{ key, out, in float64 }

// edgeMemory samples n edges (a random field of the out hash of each of
// up to n random entities) and averages MEMORY USAGE of their keys. A
// set entry costs the set's MEMORY USAGE divided by its members (so the
// set's own overhead is shared by its entries); the adjacency hashes are
// those of the sampled edges' endpoints, an entry costing the hash's
// MEMORY USAGE divided by its fields.
func edgeMemory(tb testing.TB, c *goredis.Client, graph string, n int) edgeCost {
	ctx := tb.Context()
	entities, err := c.SRandMemberN(ctx, graph+"ents", int64(n)).Result()
	if err != nil {
		tb.Fatal(err)
	}
	var ids []string
	for _, entity := range entities {
		fields, err := c.HRandField(ctx, graph+"out:"+entity, 1).Result()
		if err != nil {
			tb.Fatal(err)
		}
		for _, f := range fields {
			ids = append(ids, entity+"|"+f) // the benchmark's ids spell their endpoints
		}
	}
	perEntry := func(set string) float64 {
		size, err := c.MemoryUsage(ctx, set, 0).Result()
		if err != nil {
			tb.Fatalf("MEMORY USAGE %s: %v", set, err)
		}
		card, err := c.HLen(ctx, set).Result()
		if err != nil || card == 0 {
			tb.Fatalf("HLEN %s: %d, %v", set, card, err)
		}
		return float64(size) / float64(card)
	}
	var cost edgeCost
	for _, id := range ids {
		size, err := c.MemoryUsage(ctx, graph+"x:"+id, 0).Result()
		if err != nil {
			tb.Fatalf("MEMORY USAGE of edge %q: %v", id, err)
		}
		cost.key += float64(size)
		parts := strings.SplitN(id, "|", 3)
		if len(parts) != 3 {
			tb.Fatalf("edge id %q is not source|relation|target", id)
		}
		cost.out += perEntry(graph + "out:" + parts[0])
		cost.in += perEntry(graph + "in:" + parts[2])
	}
	k := float64(len(ids))
	cost.key, cost.out, cost.in = cost.key/k, cost.out/k, cost.in/k
	if len(ids) < n {
		tb.Logf("%s", fmt.Sprintf("sampled %d edges, fewer than %d", len(ids), n))
	}
	return cost
}

// TestNoWatchOutlivesAnApply: an apply that writes nothing (a duplicate)
// leaves no watch on its connection. With one pooled connection, a watch
// left on the duplicate's record would abort the next apply's EXEC once
// another writer changed that record, and the next apply would need a
// second attempt.
func TestNoWatchOutlivesAnApply(t *testing.T) {
	ctx := t.Context()
	s, other, attempts := onePooledConnection(t)
	contrib := func(id string) store.Contributions {
		return store.Contributions{Entities: []store.EntityContribution{{ID: "t:" + id, Type: "t", Name: id}}}
	}
	if _, err := s.Apply(ctx, "acme", "a", 1, contrib("a")); err != nil {
		t.Fatal(err)
	}
	res, err := s.Apply(ctx, "acme", "a", 1, contrib("a"))
	if err != nil || res.Outcome != store.Duplicate {
		t.Fatalf("applying a@1 again: %+v, %v; want a duplicate", res, err)
	}
	if _, err := other.Apply(ctx, "acme", "a", 2, contrib("a2")); err != nil {
		t.Fatal(err)
	}
	*attempts = nil
	if _, err := s.Apply(ctx, "acme", "b", 1, contrib("b")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*attempts, []int{1}) {
		t.Fatalf("applying b took the attempts %v, want [1]: a watch of the duplicate outlived it", *attempts)
	}
}

// onePooledConnection returns a store on a client of one pooled
// connection, recording the attempt of every apply that writes; and a
// store of the same prefix on another client, for another writer.
func onePooledConnection(t *testing.T) (s, other *redis.Store, attempts *[]int) {
	opts := options(t)
	opts.PoolSize = 1
	c := goredis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	prefix := "kgtest-" + rand.Text()[:12]
	t.Cleanup(func() { deleteKeys(t, prefix) })
	attempts = new([]int)
	s = redis.New(c, prefix, redis.WithBeforeWrite(func(attempt int) { *attempts = append(*attempts, attempt) }))
	return s, redis.New(newClient(t), prefix), attempts
}
