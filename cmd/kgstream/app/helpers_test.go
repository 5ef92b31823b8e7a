package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
	"github.com/kgstream/kgstream/pkg/vector/weaviate"
)

func llmConfig(r *llmtest.Replay) llm.Config {
	return llm.Config{BaseURL: r.URL(), Model: "replay", APIKey: "test", Timeout: 10 * time.Second}
}

// redisURL is the machine's Redis (KG_TEST_REDIS_URL overrides).
func redisURL() string {
	if u := os.Getenv("KG_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// natsURL is the machine's NATS JetStream (KG_TEST_NATS_URL overrides).
func natsURL() string {
	if u := os.Getenv("KG_TEST_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// quietLog logs warnings and errors only.
func quietLog() *slog.Logger {
	level := slog.LevelWarn
	// KG_TEST_LOG=info (or debug) shows more, to follow a benchmark's stages.
	if v := os.Getenv("KG_TEST_LOG"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			panic(fmt.Sprintf("KG_TEST_LOG=%q: %v", v, err))
		}
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// cleanRedis deletes every key under prefix.
func cleanRedis(t testing.TB, prefix string) {
	opts, err := goredis.ParseURL(redisURL())
	if err != nil {
		panic(err)
	}
	c := goredis.NewClient(opts)
	defer c.Close()
	ctx := context.Background()
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 500 {
			c.Del(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		c.Del(ctx, keys...)
	}
}

// weaviateTestIndex returns where the machine's Weaviate answers
// (KG_TEST_WEAVIATE_URL and KG_TEST_WEAVIATE_GRPC override; .ci/weaviate.sh
// starts it) with collection as the prefix, and drops those collections
// when the test ends. It fails, never skips, when Weaviate does not answer.
func weaviateTestIndex(t *testing.T, collection string) weaviate.Config {
	t.Helper()
	cfg := weaviate.Config{URL: os.Getenv("KG_TEST_WEAVIATE_URL"), GRPCAddr: os.Getenv("KG_TEST_WEAVIATE_GRPC"), Collection: collection,
		StartupTimeout: 10 * time.Second}
	if cfg.URL == "" {
		cfg.URL = "http://127.0.0.1:8090"
	}
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = "127.0.0.1:50051"
	}
	ix, err := weaviate.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Weaviate is not reachable at %s (%v); start it with .ci/weaviate.sh", cfg.URL, err)
	}
	t.Cleanup(func() {
		if err := ix.Drop(context.Background()); err != nil {
			t.Logf("dropping weaviate collections %s*: %v", collection, err)
		}
		_ = ix.Close()
	})
	return cfg
}
