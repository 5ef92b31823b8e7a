package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
)

// Atomic multi-key reads.
//
// Every graph write is one MULTI/EXEC, so a read that is one Redis command
// or one script sees a state between two writes, never half of one. The
// reads below are scripts: a set's members and the values they name come
// from the same instant, with no generation check and no retry however
// busy the writers are (an optimistic read of a whole graph under a steady
// write load was retried until it gave up). A script blocks Redis while it
// runs: a Snapshot of the whole graph holds it for as long as reading the
// graph's keys takes. Every key a script touches carries the tenant's hash
// tag, so all of them are in the tenant's slot.

// readSetsScript: KEYS are sets, ARGV[i] the key prefix of the members of
// KEYS[i]. The reply holds, per set, its members and then the values of
// the keys they name (false where a key is absent), MGET by chunks of
// 1,000 keys (unpack is bounded).
var readSetsScript = goredis.NewScript(`
local out = {}
for i, set in ipairs(KEYS) do
  local ids = redis.call('SMEMBERS', set)
  local vals = {}
  for s = 1, #ids, 1000 do
    local chunk = {}
    for j = s, math.min(s + 999, #ids) do chunk[#chunk + 1] = ARGV[i] .. ids[j] end
    local got = redis.call('MGET', unpack(chunk))
    for j = 1, #got do vals[#vals + 1] = got[j] end
  end
  out[i] = {ids, vals}
end
return out
`)

// mgetScript is MGET of every key of KEYS in one atomic step, by chunks.
var mgetScript = goredis.NewScript(`
local out = {}
for s = 1, #KEYS, 1000 do
  local got = redis.call('MGET', unpack(KEYS, s, math.min(s + 999, #KEYS)))
  for j = 1, #got do out[#out + 1] = got[j] end
end
return out
`)

// setValues is one set of a readSets reply: its members and, for each, the
// raw value of the key it names (nil if absent).
type setValues struct {
	ids  []string
	vals []any
}

// readSets reads sets[i]'s members and the values of prefixes[i]+member,
// for every set, atomically.
func readSets(ctx context.Context, c goredis.Scripter, sets, prefixes []string) ([]setValues, error) {
	args := make([]any, len(prefixes))
	for i, p := range prefixes {
		args[i] = p
	}
	reply, err := readSetsScript.Run(ctx, c, sets, args...).Slice()
	if err != nil {
		return nil, err
	}
	if len(reply) != len(sets) {
		return nil, fmt.Errorf("reading %d sets: %d replies", len(sets), len(reply))
	}
	out := make([]setValues, len(sets))
	for i, r := range reply {
		pair, ok := r.([]any)
		if !ok || len(pair) != 2 {
			return nil, fmt.Errorf("reading set %q: unexpected reply %T", sets[i], r)
		}
		ids, _ := pair[0].([]any)
		vals, _ := pair[1].([]any)
		if len(ids) != len(vals) {
			return nil, fmt.Errorf("reading set %q: %d members, %d values", sets[i], len(ids), len(vals))
		}
		sv := setValues{ids: make([]string, len(ids)), vals: vals}
		for j, id := range ids {
			sv.ids[j], _ = id.(string)
		}
		out[i] = sv
	}
	return out, nil
}

// decodeSet decodes the values of one readSets set. A member naming no key
// is a broken index (no write leaves one behind; Audit reports it): an
// error naming the set.
func decodeSet[T any](set string, sv setValues) ([]T, error) {
	out := make([]T, 0, len(sv.ids))
	err := decodeJSON(sv.vals, func(i int) string { return fmt.Sprintf("the value of %q in %q", sv.ids[i], set) },
		func(_ int, v T) { out = append(out, v) })
	if err != nil {
		return nil, err
	}
	if missing := len(sv.ids) - len(out); missing > 0 {
		return nil, fmt.Errorf("index %q lists %d ids, %d of them without a value", set, len(sv.ids), missing)
	}
	return out, nil
}

// mgetAtomic reads keys in one atomic step and calls fn for each present
// value, decoded, with its index in keys.
func mgetAtomic[T any](ctx context.Context, c goredis.Scripter, keys []string, fn func(i int, v T)) error {
	if len(keys) == 0 {
		return nil
	}
	vals, err := mgetScript.Run(ctx, c, keys).Slice()
	if err != nil {
		return err
	}
	if len(vals) != len(keys) {
		return fmt.Errorf("reading %d keys: %d values", len(keys), len(vals))
	}
	return decodeJSON(vals, func(i int) string { return fmt.Sprintf("%q", keys[i]) }, fn)
}
