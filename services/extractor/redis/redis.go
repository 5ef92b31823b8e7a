// Package redis is the Redis adapter of the extractor's extraction cache,
// shared by every extractor replica.
package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/services/extractor/llmx"
)

// Cache is an llmx.Cache in Redis: one string key per entry, under a
// prefix, with an optional TTL.
type Cache struct {
	rdb    goredis.UniversalClient
	prefix string
	ttl    time.Duration
}

var _ llmx.Cache = (*Cache)(nil)

// New returns a cache over rdb; keys are prefix+key; ttl 0 keeps entries
// until Redis evicts them (configure maxmemory-policy allkeys-lru).
func New(rdb goredis.UniversalClient, prefix string, ttl time.Duration) (*Cache, error) {
	if rdb == nil {
		return nil, errors.New("redis cache: a client is required")
	}
	if ttl < 0 {
		return nil, fmt.Errorf("redis cache: ttl %s must be >= 0", ttl)
	}
	return &Cache{rdb: rdb, prefix: prefix, ttl: ttl}, nil
}

// Get implements llmx.Cache.
func (c *Cache) Get(ctx context.Context, key string) ([]byte, bool, error) {
	v, err := c.rdb.Get(ctx, c.prefix+key).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading cache entry: %w", err)
	}
	return v, true, nil
}

// Set implements llmx.Cache.
func (c *Cache) Set(ctx context.Context, key string, value []byte) error {
	if err := c.rdb.Set(ctx, c.prefix+key, value, c.ttl).Err(); err != nil {
		return fmt.Errorf("writing cache entry: %w", err)
	}
	return nil
}
