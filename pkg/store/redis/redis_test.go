package redis_test

import (
	"context"
	"crypto/rand"
	"os"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/redis"
	"github.com/kgstream/kgstream/pkg/store/storetest"
)

// options returns the client options of the test server: 127.0.0.1:6379,
// or KG_TEST_REDIS_URL (redis://...).
func options(t *testing.T) *goredis.Options {
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
func newClient(t *testing.T) *goredis.Client {
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
func deleteKeys(t *testing.T, prefix string) {
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

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Stores {
		prefix := "kgtest-" + rand.Text()[:12]
		s := redis.New(newClient(t), prefix)
		t.Cleanup(func() {
			_ = s.Close()
			deleteKeys(t, prefix)
		})
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
	if err := c.SRem(ctx, base+"out:t:a", store.EdgeID("t:a", "r", "t:b")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, base+"ent:t:b").Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Audit(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if rep.OrphanEdges != 1 || rep.IndexMismatches < 3 {
		t.Fatalf("got %+v, want 1 orphan edge (missing endpoint) and mismatches for the record, the out set and the entity set", rep)
	}
}
