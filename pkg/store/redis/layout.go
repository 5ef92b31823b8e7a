package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/store"
)

// headField is the field of an entity's hash holding its head; every
// other field is a doc id (never empty) holding that document's fragment.
const headField = ""

// graphLayout is the value of the layout key (<p>:graph-layout) once every
// tenant graph is in the layout the package doc describes. Older layouts:
//
//   - no layout key: entities and edges may be whole (store.Entity,
//     store.Edge JSON) under g:ent:<id> and g:edge:<id>, as builds before
//     heads wrote them, the adjacency indexes are sets of edge ids, and a
//     set of every edge id, g:edges, lists the edges;
//   - "2": entities and edges are hashes of a head and per-document
//     fragments; the adjacency indexes are sets, and g:edges lists the
//     edges;
//   - "3": the adjacency indexes are hashes; g:edges lists the edges;
//   - "4": the name index (g:name:<key>) and the reports' by-source index
//     (rsrc:<doc>) are sets.
//
// The first graph or report-index operation of a Store converts what is
// older (migrate, then migrateAdjacency, then migrateEdgeSet, per
// tenant; then migrateIndexSets) and then sets the key. Every process
// writing a store must be of a build of this layout once one has
// converted it: an older one would add to an adjacency set or a name set
// that is now a hash, or to an edge set no reader reads.
const graphLayout = "5"

// The layout key's values of the older layouts that hold entities and
// edges as hashes (see graphLayout).
const (
	adjacencySetsLayout = "2"
	edgeSetLayout       = "3"
	indexSetsLayout     = "4"
)

// layoutNumber is graphLayout as a number.
func layoutNumber() int {
	n, _ := strconv.Atoi(graphLayout)
	return n
}

func (s *Store) layoutKey() string { return s.prefix + ":graph-layout" }

// ensureLayout converts the graphs of an older layout once per Store (see
// graphLayout). Concurrent callers wait for the conversion; a failed one
// is tried again by the next call. A store of a later layout than this
// build knows is refused rather than written.
func (s *Store) ensureLayout(ctx context.Context) error {
	if s.layoutDone.Load() {
		return nil
	}
	s.layoutMu.Lock()
	defer s.layoutMu.Unlock()
	if s.layoutDone.Load() {
		return nil
	}
	v, err := s.client.Get(ctx, s.layoutKey()).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("reading the graph layout: %w", err)
	}
	if n, err := strconv.Atoi(v); err == nil && n > layoutNumber() {
		return fmt.Errorf("the graphs are in layout %s, newer than this build's %s", v, graphLayout)
	}
	if v != graphLayout {
		tenants, err := s.client.SMembers(ctx, s.graphTenantsKey()).Result()
		if err != nil {
			return fmt.Errorf("listing graph tenants: %w", err)
		}
		for _, tenant := range tenants {
			if v == indexSetsLayout {
				break // the graphs themselves are converted
			}
			k := s.tenantKeys(tenant)
			var steps []func(context.Context, keys) error
			if v != adjacencySetsLayout && v != edgeSetLayout {
				steps = append(steps, s.migrate) // needs g:edges
			}
			if v != edgeSetLayout {
				steps = append(steps, s.migrateAdjacency)
			}
			steps = append(steps, s.migrateEdgeSet)
			for _, step := range steps {
				if err := step(ctx, k); err != nil {
					return fmt.Errorf("converting the graph of %q to layout %s: %w", tenant, graphLayout, err)
				}
			}
		}
		if len(tenants) > 0 { // else a new store: nothing to convert
			if err := s.migrateIndexSets(ctx); err != nil {
				return fmt.Errorf("converting the index sets to layout %s: %w", graphLayout, err)
			}
		}
		if err := s.client.Set(ctx, s.layoutKey(), graphLayout, 0).Err(); err != nil {
			return fmt.Errorf("recording the graph layout: %w", err)
		}
	}
	s.layoutDone.Store(true)
	return nil
}

// migrate converts one tenant's whole entities and edges into hashes of a
// head and per-document fragments (store.SplitEntity, store.SplitEdge),
// by chunks of the id sets; each chunk's new hashes are written and its
// old keys deleted in one transaction watching them, so a conversion cut
// short resumes where it stopped and two processes converting at once do
// not convert a key twice. Names and indexes are kept: the graph reads the same.
func (s *Store) migrate(ctx context.Context, k keys) error {
	split := func(set string, old func(string) string, write func(p goredis.Pipeliner, id string, data []byte) error) error {
		ids, err := s.client.SMembers(ctx, set).Result()
		if err != nil {
			return err
		}
		for start := 0; start < len(ids); start += mgetChunk {
			chunk := ids[start:min(start+mgetChunk, len(ids))]
			olds := k.prefixed(old, chunk)
			// Watched: another process converting the same graph, or
			// writing it once converted, makes this chunk start again.
			err := s.optimistic(ctx, func(tx *goredis.Tx) error {
				vals, err := tx.MGet(ctx, olds...).Result()
				if err != nil {
					return err
				}
				_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
					var converted []string
					for i, raw := range vals {
						str, ok := raw.(string)
						if !ok {
							continue // converted already, or never there
						}
						if err := write(p, chunk[i], []byte(str)); err != nil {
							return fmt.Errorf("converting %q: %w", olds[i], err)
						}
						p.Del(ctx, olds[i])
						converted = append(converted, chunk[i])
					}
					// Like every write of entity and edge keys, this
					// one changes their stripes (see stripes.go).
					bumpStripes(ctx, p, k.stripeKeys(converted))
					return nil
				})
				return err
			}, olds...)
			if err != nil {
				return err
			}
		}
		return nil
	}
	err := split(k.entities(), k.wholeEntity, func(p goredis.Pipeliner, id string, data []byte) error {
		var e store.Entity
		if err := store.DecodeValue(data, &e); err != nil {
			return err
		}
		h, frags := store.SplitEntity(e)
		head, err := store.EncodeEntityHead(h)
		if err != nil {
			return err
		}
		fields, err := hashFields(head, frags)
		if err != nil {
			return err
		}
		p.Del(ctx, k.entity(id))
		p.HSet(ctx, k.entity(id), fields...)
		return nil
	})
	if err != nil {
		return err
	}
	return split(k.edgeSet(), k.wholeEdge, func(p goredis.Pipeliner, id string, data []byte) error {
		var e store.Edge
		if err := store.DecodeValue(data, &e); err != nil {
			return err
		}
		h, supports := store.SplitEdge(e)
		head, err := store.EncodeEdgeHead(h)
		if err != nil {
			return err
		}
		p.Set(ctx, k.edge(id), head, 0)
		p.Del(ctx, k.edgeSupports(id))
		if len(supports) > 0 {
			fields, err := hashFields(nil, supports)
			if err != nil {
				return err
			}
			p.HSet(ctx, k.edgeSupports(id), fields...)
		}
		return nil
	})
}

// migrateAdjacency converts one tenant's adjacency sets (layout 2) into
// adjacency hashes (see adjacency.go), those of a chunk of entities at a
// time: each chunk's sets are read, deleted and written again as hashes
// in one transaction watching them, so a conversion cut short resumes
// where it stopped (a key already a hash is left alone) and two processes
// converting at once do not convert a key twice. Every edge has both
// endpoints among the entities (store.Plan removes an edge with either),
// so the entity set names every adjacency set.
func (s *Store) migrateAdjacency(ctx context.Context, k keys) error {
	ids, err := s.client.SMembers(ctx, k.entities()).Result()
	if err != nil {
		return err
	}
	const chunk = mgetChunk / 2 // two keys per entity
	for start := 0; start < len(ids); start += chunk {
		entities := ids[start:min(start+chunk, len(ids))]
		sets := append(k.prefixed(k.out, entities), k.prefixed(k.in, entities)...)
		err := s.convertSets(ctx, sets, func(i int, id string) string {
			return adjacencyField(id, entities[i%len(entities)], i < len(entities))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// migrateIndexSets converts every tenant's name index (g:name:<key>) and
// reports' by-source index (rsrc:<doc>) from sets into hashes of fields
// with empty values: Redis 7.0 keeps every set of strings in a hash table
// (a name set of one entity id takes about 225 bytes), a small hash in a
// listpack. The keys are found by SCAN (their names are not listed
// anywhere else), of every tenant at once; each batch is converted by
// convertSets, as migrateAdjacency's are, so a conversion cut short
// resumes and two processes converting at once do not convert a key
// twice.
func (s *Store) migrateIndexSets(ctx context.Context) error {
	for _, pattern := range []string{globEscape(s.prefix) + ":{*}:g:name:*", globEscape(s.prefix) + ":{*}:rsrc:*"} {
		iter := s.client.ScanType(ctx, 0, pattern, 1000, "set").Iterator()
		var batch []string
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			err := s.convertSets(ctx, batch, func(_ int, m string) string { return m })
			batch = batch[:0]
			return err
		}
		for iter.Next(ctx) {
			if batch = append(batch, iter.Val()); len(batch) == mgetChunk {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("scanning %s: %w", pattern, err)
		}
		if err := flush(); err != nil {
			return err
		}
	}
	return nil
}

// convertSets rewrites each of keys that is a set as a hash whose fields
// are field(i, member) of the members of keys[i], with empty values, in
// one transaction watching them; a key that is a hash already, or absent,
// is left alone.
func (s *Store) convertSets(ctx context.Context, keys []string, field func(i int, member string) string) error {
	return s.optimistic(ctx, func(tx *goredis.Tx) error {
		types := make([]*goredis.StatusCmd, len(keys))
		if _, err := tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, key := range keys {
				types[i] = p.Type(ctx, key)
			}
			return nil
		}); err != nil {
			return err
		}
		members := make([]*goredis.StringSliceCmd, len(keys))
		if _, err := tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, key := range keys {
				if types[i].Val() == "set" {
					members[i] = p.SMembers(ctx, key)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			for i, key := range keys {
				if members[i] == nil {
					continue // a hash already, or absent
				}
				p.Del(ctx, key)
				if ms := members[i].Val(); len(ms) > 0 {
					fields := make([]any, 0, 2*len(ms))
					for _, m := range ms {
						fields = append(fields, field(i, m), "")
					}
					p.HSet(ctx, key, fields...)
				}
			}
			return nil
		})
		return err
	}, keys...)
}

// migrateEdgeSet replaces one tenant's set of every edge id (layouts 1
// to 3) by the edge count, in one transaction watching both: the count is
// the set's size, and the set is deleted. A tenant whose count exists is
// converted already (by another process, or before a conversion was cut
// short), and is left alone.
func (s *Store) migrateEdgeSet(ctx context.Context, k keys) error {
	return s.optimistic(ctx, func(tx *goredis.Tx) error {
		var exists, size *goredis.IntCmd
		if _, err := tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
			exists, size = p.Exists(ctx, k.edgeCount()), p.SCard(ctx, k.edgeSet())
			return nil
		}); err != nil {
			return err
		}
		if exists.Val() > 0 {
			return nil
		}
		_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Set(ctx, k.edgeCount(), size.Val(), 0)
			p.Del(ctx, k.edgeSet())
			return nil
		})
		return err
	}, k.edgeCount(), k.edgeSet())
}

// hashFields returns the HSET arguments of a head (if not nil) and
// fragments.
func hashFields(head []byte, frags []store.Fragment) ([]any, error) {
	var out []any
	if head != nil {
		out = append(out, headField, string(head))
	}
	for _, f := range frags {
		data, err := store.EncodeFragment(f)
		if err != nil {
			return nil, err
		}
		out = append(out, f.DocID, string(data))
	}
	return out, nil
}

// hashParts splits an HGETALL reply into the head and the fragments of
// each document.
func hashParts(hash []any) (head []byte, frags [][2]string) {
	for i := 0; i+1 < len(hash); i += 2 {
		field, _ := hash[i].(string)
		value, _ := hash[i+1].(string)
		if field == headField {
			head = []byte(value)
			continue
		}
		frags = append(frags, [2]string{field, value})
	}
	return head, frags
}

func decodeFragments(frags [][2]string) ([]store.Fragment, error) {
	out := make([]store.Fragment, 0, len(frags))
	for _, fv := range frags {
		f, err := store.DecodeFragment(fv[0], []byte(fv[1]))
		if err != nil {
			return nil, fmt.Errorf("decoding the fragment of %q: %w", fv[0], err)
		}
		out = append(out, f)
	}
	return out, nil
}

// assembleEntity assembles an entity from its hash (an HGETALL reply);
// found is false when the hash has no head.
func assembleEntity(id string, read any) (store.Entity, bool, error) {
	hash, _ := read.([]any)
	head, frags := hashParts(hash)
	if head == nil {
		return store.Entity{}, false, nil
	}
	h, err := store.DecodeEntityHead(id, head)
	if err != nil {
		return store.Entity{}, false, err
	}
	fs, err := decodeFragments(frags)
	if err != nil {
		return store.Entity{}, false, err
	}
	return store.AssembleEntity(h, fs), true, nil
}

// assembleEdge assembles an edge from its head and supports hash, as
// readSetsScript reads them ({GET, HGETALL}); found is false when there
// is no head.
func assembleEdge(id string, read any) (store.Edge, bool, error) {
	pair, _ := read.([]any)
	if len(pair) != 2 {
		return store.Edge{}, false, fmt.Errorf("edge %q: unexpected reply %T", id, read)
	}
	head, ok := pair[0].(string)
	if !ok {
		return store.Edge{}, false, nil
	}
	supports, _ := pair[1].([]any)
	return assembleEdgeParts(id, []byte(head), supports)
}

// assembleEdgeParts assembles an edge from its head and supports hash (an
// HGETALL reply).
func assembleEdgeParts(id string, head []byte, supports []any) (store.Edge, bool, error) {
	h, err := store.DecodeEdgeHead(id, head)
	if err != nil {
		return store.Edge{}, false, err
	}
	_, frags := hashParts(supports)
	fs, err := decodeFragments(frags)
	if err != nil {
		return store.Edge{}, false, err
	}
	return store.AssembleEdge(h, fs), true, nil
}
