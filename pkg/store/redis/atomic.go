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

// readSetsScript: KEYS are sets of entity or edge ids or adjacency
// hashes, ARGV[i] says which KEYS[i] is ("e" or "x": a set of entity or
// edge ids, or a hash whose fields are (the name index); "h": a set of
// entity ids, of which only the heads are read;
// "o:<entity>" or "i:<entity>": the entity's out or in hash, whose fields
// name edges as adjacency.go says; "X": a set of entity ids, standing for
// the edges of their out hashes) and ARGV[#KEYS+1] is the graph keys'
// prefix. The reply holds, per key, the ids it lists and then, per id, an
// entity's hash (HGETALL: fields and values in turn, empty where absent),
// its head ("h": false where absent) or an edge's head (false where
// absent) and supports hash.
var readSetsScript = goredis.NewScript(`
local prefix = ARGV[#KEYS + 1]
-- appends to ids the edge ids of the fields of entity's out (out true) or
-- in hash key (adjacency.go's edgeOfField)
local function edges(ids, key, entity, out)
  for _, field in ipairs(redis.call('HKEYS', key)) do
    if string.sub(field, 1, 1) == '|' then ids[#ids + 1] = string.sub(field, 2)
    elseif out then ids[#ids + 1] = entity .. '|' .. field
    else ids[#ids + 1] = field .. '|' .. entity end
  end
end
local out = {}
for i, set in ipairs(KEYS) do
  local kind = string.sub(ARGV[i], 1, 1)
  local ids = {}
  if kind == 'o' or kind == 'i' then
    edges(ids, set, string.sub(ARGV[i], 3), kind == 'o')
  elseif kind == 'X' then
    for _, entity in ipairs(redis.call('SMEMBERS', set)) do
      edges(ids, prefix .. 'out:' .. entity, entity, true)
    end
  elseif redis.call('TYPE', set)['ok'] == 'hash' then
    ids = redis.call('HKEYS', set)
  else
    ids = redis.call('SMEMBERS', set)
  end
  local vals = {}
  for j = 1, #ids do
    if kind == 'e' then
      vals[j] = redis.call('HGETALL', prefix .. 'e:' .. ids[j])
    elseif kind == 'h' then
      vals[j] = redis.call('HGET', prefix .. 'e:' .. ids[j], '')
    else
      vals[j] = {redis.call('GET', prefix .. 'x:' .. ids[j]), redis.call('HGETALL', prefix .. 'xs:' .. ids[j])}
    end
  end
  out[i] = {ids, vals}
end
return out
`)

// hgetallScript is HGETALL of every key of KEYS in one atomic step.
var hgetallScript = goredis.NewScript(`
local out = {}
for i = 1, #KEYS do out[i] = redis.call('HGETALL', KEYS[i]) end
return out
`)

// setValues is one set of a readSets reply: its members and, for each,
// what readSetsScript read of it.
type setValues struct {
	ids  []string
	vals []any
}

// readSets reads sets[i]'s members and the entities (kinds[i] "e") or
// edges ("x", or an adjacency hash's "o:<entity>" and "i:<entity>", or
// "X" for the out hashes of an entity set's members) they name, for every
// set, atomically.
func readSets(ctx context.Context, c goredis.Scripter, graph string, sets, kinds []string) ([]setValues, error) {
	args := make([]any, 0, len(kinds)+1)
	for _, kind := range kinds {
		args = append(args, kind)
	}
	args = append(args, graph)
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

// decodeSet assembles the values of one readSets set. A member naming no
// key is a broken index (no write leaves one behind; Audit reports it):
// an error naming the set.
func decodeSet[T any](set string, sv setValues, assemble func(id string, read any) (T, bool, error)) ([]T, error) {
	out := make([]T, 0, len(sv.ids))
	for i, id := range sv.ids {
		v, found, err := assemble(id, sv.vals[i])
		if err != nil {
			return nil, fmt.Errorf("decoding the value of %q in %q: %w", id, set, err)
		}
		if found {
			out = append(out, v)
		}
	}
	if missing := len(sv.ids) - len(out); missing > 0 {
		return nil, fmt.Errorf("index %q lists %d ids, %d of them without a value", set, len(sv.ids), missing)
	}
	return out, nil
}

// hgetallAtomic reads the hashes keys[i] = prefix+ids[i] in one atomic
// step and calls fn with each assembled value found.
func hgetallAtomic[T any](ctx context.Context, c goredis.Scripter, prefix string, ids []string,
	assemble func(id string, read any) (T, bool, error), fn func(id string, v T)) error {
	if len(ids) == 0 {
		return nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = prefix + id
	}
	vals, err := hgetallScript.Run(ctx, c, keys).Slice()
	if err != nil {
		return err
	}
	if len(vals) != len(keys) {
		return fmt.Errorf("reading %d keys: %d values", len(keys), len(vals))
	}
	for i, id := range ids {
		v, found, err := assemble(id, vals[i])
		if err != nil {
			return fmt.Errorf("decoding %q: %w", keys[i], err)
		}
		if found {
			fn(id, v)
		}
	}
	return nil
}
