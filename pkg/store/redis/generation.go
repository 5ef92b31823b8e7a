package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

var _ store.RegistryGenerations = (*Store)(nil)

// regGen is the tenant's registry generation, raised by INCR inside every
// registry write's MULTI/EXEC (same hash slot as the registry keys).
func (k keys) regGen() string { return k.base + "reg-gen" }

// regLog is the tenant's registry log: a sorted set of the doc ids its
// registry writes were of, each scored with the generation of its last
// write; regLogLast the generation of the last write recorded, and
// regLogFrom the generation from which every write is recorded: a write
// finding regLogLast other than the generation before its own (absent in
// a store written before the log existed; older after a write of such a
// build, which raises the generation without recording) records from the
// generation before its own on. So the log names every write after
// regLogFrom exactly when regLogLast is the current generation.
func (k keys) regLog() string     { return k.base + "reg-log" }
func (k keys) regLogFrom() string { return k.base + "reg-log-from" }
func (k keys) regLogLast() string { return k.base + "reg-log-last" }

// bumpScript raises the registry generation and records the write's
// document at the new generation (KEYS: regGen, regLog, regLogFrom,
// regLogLast; ARGV: the doc id). One script, because the generation is
// known only once raised.
const bumpScript = `
local g = redis.call('INCR', KEYS[1])
if redis.call('GET', KEYS[4]) ~= tostring(g - 1) then
  redis.call('SET', KEYS[3], g - 1)
end
redis.call('SET', KEYS[4], g)
redis.call('ZADD', KEYS[2], g, ARGV[1])
return g
`

// bumpRegistryGeneration queues, on p, the registry write's transaction
// pipeline, the raise of the generation and the log's record of docID.
func bumpRegistryGeneration(ctx context.Context, p goredis.Pipeliner, k keys, docID string) {
	p.Eval(ctx, bumpScript, []string{k.regGen(), k.regLog(), k.regLogFrom(), k.regLogLast()}, docID)
}

var _ store.RegistryChanges = (*Store)(nil)

// SourcesChangedSince returns the states of the documents written after
// generation since (see store.RegistryChanges): the log's ids, read in one
// transaction with the generation and where the log starts, then their
// states.
func (s *Store) SourcesChangedSince(ctx context.Context, tenant string, since uint64) ([]provenance.SourceState, bool, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, false, fmt.Errorf("reading registry changes: %w", err)
	}
	k := s.tenantKeys(tenant)
	var from, last, gen *goredis.StringCmd
	var changed *goredis.StringSliceCmd
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		from = p.Get(ctx, k.regLogFrom())
		last = p.Get(ctx, k.regLogLast())
		gen = p.Get(ctx, k.regGen())
		changed = p.ZRangeByScore(ctx, k.regLog(), &goredis.ZRangeBy{Min: "(" + strconv.FormatUint(since, 10), Max: "+inf"})
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, false, fmt.Errorf("reading registry changes of %q: %w", tenant, err)
	}
	number := func(c *goredis.StringCmd) (uint64, bool, error) {
		n, err := c.Uint64()
		if errors.Is(err, goredis.Nil) {
			return 0, false, nil
		}
		return n, err == nil, err
	}
	g, _, err := number(gen)
	if err != nil {
		return nil, false, fmt.Errorf("reading the registry generation of %q: %w", tenant, err)
	}
	if g <= since {
		return nil, true, nil // nothing written since
	}
	l, hasLast, err := number(last)
	if err != nil {
		return nil, false, fmt.Errorf("reading the registry log of %q: %w", tenant, err)
	}
	f, hasFrom, err := number(from)
	if err != nil {
		return nil, false, fmt.Errorf("reading where the registry log of %q starts: %w", tenant, err)
	}
	if !hasLast || !hasFrom || l != g || f > since {
		return nil, false, nil // a write since was not recorded
	}
	ids, err := changed.Result()
	if err != nil {
		return nil, false, fmt.Errorf("reading registry changes of %q: %w", tenant, err)
	}
	if len(ids) == 0 {
		return nil, true, nil
	}
	slices.Sort(ids)
	out := make([]provenance.SourceState, 0, len(ids))
	err = mgetJSON(ctx, s.client, k.prefixed(k.reg, ids), func(_ int, st provenance.SourceState) {
		out = append(out, st)
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading changed sources of %q: %w", tenant, err)
	}
	return out, true, nil
}

// RegistryGeneration returns the tenant's registry generation (see
// store.RegistryGenerations).
func (s *Store) RegistryGeneration(ctx context.Context, tenant string) (uint64, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return 0, fmt.Errorf("reading the registry generation: %w", err)
	}
	n, err := s.client.Get(ctx, s.tenantKeys(tenant).regGen()).Uint64()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the registry generation of %q: %w", tenant, err)
	}
	return n, nil
}
