package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/store"
)

// Apply retracts what docID contributed before and adds c, in one
// optimistic transaction (see store.GraphStore and the package doc).
func (s *Store) Apply(ctx context.Context, tenant, docID string, version int64, c store.Contributions) (store.ApplyResult, error) {
	res, err := s.change(ctx, tenant, store.Change{DocID: docID, Version: version, Contributions: c})
	if err != nil {
		return store.ApplyResult{}, fmt.Errorf("applying source %q version %d in %q: %w", docID, version, tenant, err)
	}
	return res, nil
}

// Delete retracts what docID contributed and leaves a tombstone at version
// (see store.GraphStore).
func (s *Store) Delete(ctx context.Context, tenant, docID string, version int64) (store.ApplyResult, error) {
	res, err := s.change(ctx, tenant, store.Change{DocID: docID, Version: version, Delete: true})
	if err != nil {
		return store.ApplyResult{}, fmt.Errorf("deleting source %q version %d in %q: %w", docID, version, tenant, err)
	}
	return res, nil
}

func (s *Store) change(ctx context.Context, tenant string, ch store.Change) (store.ApplyResult, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return store.ApplyResult{}, err
	}
	if err := ch.Validate(); err != nil {
		return store.ApplyResult{}, err
	}
	k := s.tenantKeys(tenant)
	if err := s.ensureLayout(ctx); err != nil {
		return store.ApplyResult{}, err
	}
	// Before the transaction, never inside it (see registryUpdate): a
	// change that then writes nothing leaves a tenant listed with no graph,
	// which every reader of the list takes as an empty one.
	if err := s.noteGraphTenant(ctx, tenant); err != nil {
		return store.ApplyResult{}, err
	}
	var res store.ApplyResult
	attempt := 0
	err := s.optimistic(ctx, func(tx *goredis.Tx) (err error) {
		attempt++
		// The record is watched and read in one round trip. That WATCH is
		// a plain command, which go-redis does not know to release: a
		// return without EXEC (nothing to write, or an error) releases it
		// here, so that no watch stays on a pooled connection.
		executed := false
		defer func() { unwatch(ctx, tx, executed, &err) }()
		old, err := watchRecord(ctx, tx, k.src(ch.DocID))
		if err != nil {
			return err
		}
		if o := ch.Outcome(old); o != store.Applied {
			res = store.ApplyResult{Outcome: o, Previous: old.Version}
			return nil
		}
		entityIDs, edgeIDs := ch.Reads(old)
		entityKeys, edgeKeys := k.prefixed(k.entity, entityIDs), k.prefixed(k.edge, edgeIDs)
		// Watch before reading, so any change after our read aborts EXEC:
		// the heads, or for a large change's first attempt their stripes
		// or coarse stripes, which every writer of them bumps (see
		// stripes.go). readState sends the WATCH first in its first round
		// trip.
		watch := k.watchKeys(entityIDs, edgeIDs, s.watchStripes(len(entityIDs)+len(edgeIDs), attempt), s.watchCoarseMin)
		st := store.State{
			Entities: make(map[string]store.EntityHead, len(entityIDs)), Edges: make(map[string]store.EdgeHead, len(edgeIDs)),
			// Only the document's own fragments and spilled supports: most
			// ids have none.
			EntityFragments: map[string]store.Fragment{}, EdgeSupports: map[string]store.Fragment{},
			Fragments: func(id string) ([]store.Fragment, error) { return fragmentsOf(ctx, tx, k, id) },
		}
		doc := []string{ch.DocID}
		err = readState(ctx, tx, k, readSpec{watch: watch, entityIDs: entityIDs, entityKeys: entityKeys, edgeIDs: edgeIDs, edgeKeys: edgeKeys,
			entityDocs: repeated(doc, len(entityIDs)), edgeDocs: repeated(doc, len(edgeIDs))}, &st,
			func(id, _ string, f store.Fragment) { st.EntityFragments[id] = f },
			func(id, _ string, f store.Fragment) { st.EdgeSupports[id] = f })
		if err != nil {
			return err
		}
		ch.Now = s.now()
		w, err := store.Plan(ch, old, st)
		if err != nil {
			return err
		}
		res = w.Result
		if w.Record == nil {
			return nil
		}
		cmds, err := k.writes(w, st)
		if err != nil {
			return err
		}
		executed = true
		return s.exec(ctx, tx, attempt, cmds)
	})
	return res, err
}

// exec runs cmds in one MULTI/EXEC on tx, after the test hook
// beforeWrite. EXEC releases every watch, whether it commits or aborts.
func (s *Store) exec(ctx context.Context, tx *goredis.Tx, attempt int, cmds []writeCmd) error {
	if s.beforeWrite != nil {
		s.beforeWrite(attempt)
	}
	_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		for _, c := range cmds {
			c(ctx, p)
		}
		return nil
	})
	return err
}

// unwatch releases the watches of a transaction function that ends
// without EXEC (nothing to write, or an error; executed false): they are
// plain WATCH commands, which go-redis does not know to release, and none
// may stay on a pooled connection. An error releasing them becomes *err
// unless there is one already.
func unwatch(ctx context.Context, tx *goredis.Tx, executed bool, err *error) {
	if executed {
		return
	}
	if uerr := tx.Unwatch(context.WithoutCancel(ctx)).Err(); uerr != nil && *err == nil {
		*err = uerr
	}
}

// watchRecord watches the record at key and reads it, in one round trip
// (WATCH first: whatever changes it after the read aborts EXEC); nil if
// the key is absent.
func watchRecord(ctx context.Context, tx *goredis.Tx, key string) (*store.SourceRecord, error) {
	var watched *goredis.Cmd
	var get *goredis.StringCmd
	_, err := tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
		watched, get = p.Do(ctx, "WATCH", key), p.Get(ctx, key)
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, err
	}
	if err := watched.Err(); err != nil {
		return nil, fmt.Errorf("watching %q: %w", key, err)
	}
	return decodeGet[store.SourceRecord](get, key)
}

// readSpec is what readState reads: the heads of entityIDs (at
// entityKeys) and edgeIDs (at edgeKeys), and of each the fragments (of an
// entity) or supports stored apart (of an edge) of the documents
// entityDocs[i] or edgeDocs[i]; watch, when not empty, is watched first.
type readSpec struct {
	watch                 []string
	entityIDs, entityKeys []string
	edgeIDs, edgeKeys     []string
	entityDocs, edgeDocs  [][]string
}

// readState watches the keys of spec.watch and reads, in one pipeline (the
// WATCH first: Redis runs a connection's commands in order, so whatever
// changes after the reads aborts EXEC), the heads of the entities and edges
// and the documents' own fields of them (HMGET of an entity's head and the
// documents' fields, MGET of the edge heads) into heads (Entities and
// Edges), then, in a second, the documents' supports stored apart of the
// edge heads that spilled them. fragment and support receive each
// fragment and support found. Every fragment of an entity is read
// (HGETALL) only when Plan asks for it (fragmentsOf).
func readState(ctx context.Context, tx *goredis.Tx, k keys, spec readSpec, heads *store.State, fragment, support func(id, doc string, f store.Fragment)) error {
	watch := spec.watch
	if len(watch) > 0 && len(spec.entityKeys) == 0 && len(spec.edgeKeys) == 0 {
		return tx.Watch(ctx, watch...).Err()
	}
	entityIDs, entityKeys, edgeIDs, edgeKeys := spec.entityIDs, spec.entityKeys, spec.edgeIDs, spec.edgeKeys
	// Each round trip reads up to mgetChunk entities, one HMGET each, and
	// up to mgetChunk edge heads in one MGET.
	for start := 0; start < max(len(entityKeys), len(edgeKeys)); start += mgetChunk {
		ents := entityKeys[min(start, len(entityKeys)):min(start+mgetChunk, len(entityKeys))]
		eds := edgeKeys[min(start, len(edgeKeys)):min(start+mgetChunk, len(edgeKeys))]
		cmds := make([]*goredis.SliceCmd, len(ents))
		var got *goredis.SliceCmd
		var watched *goredis.Cmd
		_, err := tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
			if len(watch) > 0 {
				args := make([]any, 0, len(watch)+1)
				args = append(args, "WATCH")
				for _, key := range watch {
					args = append(args, key)
				}
				watched = p.Do(ctx, args...)
				watch = nil // once, in the first round trip
			}
			for i, key := range ents {
				docs := spec.entityDocs[start+i]
				args := make([]string, 0, 1+len(docs))
				cmds[i] = p.HMGet(ctx, key, append(append(args, headField), docs...)...)
			}
			if len(eds) > 0 {
				got = p.MGet(ctx, eds...)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if watched != nil && watched.Err() != nil {
			return fmt.Errorf("watching: %w", watched.Err())
		}
		for n, c := range cmds {
			id := entityIDs[start+n]
			vals := c.Val()
			if head, ok := vals[0].(string); ok {
				h, err := store.DecodeEntityHead(id, []byte(head))
				if err != nil {
					return fmt.Errorf("decoding the head of entity %q: %w", id, err)
				}
				heads.Entities[id] = h
			}
			for d, doc := range spec.entityDocs[start+n] {
				frag, ok := vals[1+d].(string)
				if !ok {
					continue
				}
				f, err := store.DecodeFragment(doc, []byte(frag))
				if err != nil {
					return fmt.Errorf("decoding the fragment of %q by %q: %w", id, doc, err)
				}
				fragment(id, doc, f)
			}
		}
		if got == nil {
			continue
		}
		for n, v := range got.Val() {
			head, ok := v.(string)
			if !ok {
				continue // absent
			}
			id := edgeIDs[start+n]
			h, err := store.DecodeEdgeHead(id, []byte(head))
			if err != nil {
				return fmt.Errorf("decoding the head of edge %q: %w", id, err)
			}
			heads.Edges[id] = h
		}
	}
	// The documents' supports stored apart, of the heads that spilled them
	// (the others hold them inline: nothing more to read).
	var spilled []int
	for i, id := range edgeIDs {
		if heads.Edges[id].Spilled {
			spilled = append(spilled, i)
		}
	}
	for start := 0; start < len(spilled); start += mgetChunk {
		chunk := spilled[start:min(start+mgetChunk, len(spilled))]
		cmds := make([]*goredis.SliceCmd, len(chunk))
		_, err := tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, e := range chunk {
				cmds[i] = p.HMGet(ctx, k.edgeSupports(edgeIDs[e]), spec.edgeDocs[e]...)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i, e := range chunk {
			id := edgeIDs[e]
			for d, v := range cmds[i].Val() {
				data, ok := v.(string)
				if !ok {
					continue
				}
				doc := spec.edgeDocs[e][d]
				f, err := store.DecodeFragment(doc, []byte(data))
				if err != nil {
					return fmt.Errorf("decoding the support of %q by %q: %w", id, doc, err)
				}
				support(id, doc, f)
			}
		}
	}
	return nil
}

// fragmentsOf reads every stored fragment of an entity (store.State.Fragments).
func fragmentsOf(ctx context.Context, tx *goredis.Tx, k keys, id string) ([]store.Fragment, error) {
	hash, err := tx.HGetAll(ctx, k.entity(id)).Result()
	if err != nil {
		return nil, err
	}
	out := make([]store.Fragment, 0, len(hash))
	for field, v := range hash {
		if field == headField {
			continue
		}
		f, err := store.DecodeFragment(field, []byte(v))
		if err != nil {
			return nil, fmt.Errorf("decoding the fragment of %q by %q: %w", id, field, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// writeCmd queues commands of a transaction.
type writeCmd func(ctx context.Context, p goredis.Pipeliner)

// writes turns planned writes into commands: the write of the stripe of
// every entity and edge written (see stripes.go), the keys of removed
// entities and edges deleted and the document's dropped fields, then every set
// removal, then one HSET per hash written (an entity's head and the
// document's field together), the edge heads in one MSET, then every set
// addition, each set's members in one
// command, and the change of the edge count; then the record. Encoding happens here, before the transaction,
// so a failure cannot leave half a MULTI queued. st holds the heads as they
// were read: the index sets change by the difference between the sets a
// head belongs to as read and as written (indexOps), so an edit that
// changes a head's tally but not its type, spellings or endpoints, the
// usual case, writes no index entry for it.
func (k keys) writes(w store.Writes, st store.State) ([]writeCmd, error) {
	doc := w.Record.DocID
	docField := any(doc) // boxed once for its fields and HDELs
	var (
		del       = make([]string, 0, len(w.RemoveEntities)+len(w.RemoveEdges))
		hdel      = make([]string, 0, len(w.DeleteFragments)+len(w.DeleteSupports))
		ix        = newIndexOps(k, w, st)
		hset      = make(map[string][]any, len(w.PutEntities)+len(w.PutFragments)+len(w.PutSupports))
		hsetOrder = make([]string, 0, len(w.PutEntities)+len(w.PutFragments)+len(w.PutSupports))
		heads     = make([]any, 0, 2*len(w.PutEdges)) // edge heads: key, value, key, value...
		edgeDelta int64                               // edges created less edges removed
	)
	field := func(key string, name any, value []byte) {
		fields, ok := hset[key]
		if !ok {
			hsetOrder = append(hsetOrder, key)
			fields = make([]any, 0, 4) // an entity's head and the document's fragment
		}
		hset[key] = append(fields, name, value)
	}
	// An entity or edge both removed and put (a type change, another
	// spelling of an edge id) changes its index entries once, from the
	// head as read to the head put. Both lists are sorted by id.
	putEntity := func(id string) bool {
		_, ok := slices.BinarySearchFunc(w.PutEntities, id, func(e store.EntityHead, id string) int { return cmp.Compare(e.ID, id) })
		return ok
	}
	putEdge := func(id string) bool {
		_, ok := slices.BinarySearchFunc(w.PutEdges, id, func(e store.EdgeHead, id string) int { return cmp.Compare(e.ID, id) })
		return ok
	}
	for _, e := range w.RemoveEntities {
		del = append(del, k.entity(e.ID))
		if !putEntity(e.ID) {
			ix.entity(e.ID, &e, nil)
		}
	}
	for _, e := range w.RemoveEdges {
		del = append(del, k.edge(e.ID))
		if e.Spilled { // else its supports are inline: no key of their own
			del = append(del, k.edgeSupports(e.ID))
		}
		if !putEdge(e.ID) {
			ix.edge(e.ID, &e, nil)
			edgeDelta--
		}
	}
	for _, id := range w.DeleteFragments {
		hdel = append(hdel, k.entity(id))
	}
	for _, id := range w.DeleteSupports {
		hdel = append(hdel, k.edgeSupports(id))
	}
	for _, e := range w.PutEntities {
		data, err := store.EncodeEntityHead(e)
		if err != nil {
			return nil, fmt.Errorf("encoding the head of entity %q: %w", e.ID, err)
		}
		field(k.entity(e.ID), headField, data)
		var before *store.EntityHead
		if o, ok := st.Entities[e.ID]; ok {
			before = &o
		}
		ix.entity(e.ID, before, &e)
	}
	for _, e := range w.PutEdges {
		data, err := store.EncodeEdgeHead(e)
		if err != nil {
			return nil, fmt.Errorf("encoding the head of edge %q: %w", e.ID, err)
		}
		heads = append(heads, k.edge(e.ID), data)
		var before *store.EdgeHead
		if o, ok := st.Edges[e.ID]; ok {
			before = &o
		} else {
			edgeDelta++
		}
		ix.edge(e.ID, before, &e)
	}
	for _, ps := range []struct {
		key   func(string) string
		parts []store.Part
	}{{k.entity, w.PutFragments}, {k.edgeSupports, w.PutSupports}} {
		for _, pt := range ps.parts {
			data, err := store.EncodeFragment(pt.Fragment)
			if err != nil {
				return nil, fmt.Errorf("encoding the fragment of %q by %q: %w", pt.ID, pt.Fragment.DocID, err)
			}
			name := docField
			if pt.Fragment.DocID != doc { // another document's support, moved by a spill
				name = pt.Fragment.DocID
			}
			field(ps.key(pt.ID), name, data)
		}
	}
	rec, err := marshal(w.Record, store.SmallCompression)
	if err != nil {
		return nil, err
	}
	deleted := w.Record.Deleted
	bumped := k.writtenStripes(w)
	return []writeCmd{func(ctx context.Context, p goredis.Pipeliner) {
		bumpStripes(ctx, p, bumped)
		if len(del) > 0 {
			p.Del(ctx, del...)
		}
		for _, key := range hdel {
			p.HDel(ctx, key, doc)
		}
		ix.rem.each(func(set string, kind setKind, members []any) {
			if kind.hash() {
				p.HDel(ctx, set, fieldNames(members)...)
			} else {
				p.SRem(ctx, set, members...)
			}
		})
		for _, key := range hsetOrder {
			p.HSet(ctx, key, hset[key]...)
		}
		if len(heads) > 0 {
			p.MSet(ctx, heads...)
		}
		ix.add.each(func(set string, kind setKind, members []any) {
			if kind.hash() {
				p.HSet(ctx, set, emptyValued(members)...)
			} else {
				p.SAdd(ctx, set, members...)
			}
		})
		if edgeDelta != 0 {
			p.IncrBy(ctx, k.edgeCount(), edgeDelta)
		}
		p.Incr(ctx, k.graphGen())
		p.Set(ctx, k.src(doc), rec, 0)
		p.SAdd(ctx, k.srcs(), doc)
		if deleted {
			p.SRem(ctx, k.live(), doc)
		} else {
			p.SAdd(ctx, k.live(), doc)
		}
	}}, nil
}

// indexOps gathers the index set entries a write removes and adds.
type indexOps struct {
	rem, add *setOps
}

// newIndexOps returns the indexOps of w, with room for the index entries
// of the entities and edges it removes and creates (each edge is in three
// indexes, an entity in three or more); those whose sets only may change
// grow it as they need.
func newIndexOps(k keys, w store.Writes, st store.State) indexOps {
	created := 0
	for _, e := range w.PutEdges {
		if _, ok := st.Edges[e.ID]; !ok {
			created += 3
		}
	}
	for _, e := range w.PutEntities {
		if _, ok := st.Entities[e.ID]; !ok {
			created += 3
		}
	}
	removed := 3*len(w.RemoveEdges) + 3*len(w.RemoveEntities)
	return indexOps{rem: newSetOps(k, removed), add: newSetOps(k, created)}
}

// entity records the index changes of entity id going from head before
// to head after (nil: absent): the sets before belongs to and after does
// not lose id, those after belongs to and before did not gain it; the
// sets both belong to are left alone, as they already list it.
func (ix indexOps) entity(id string, before, after *store.EntityHead) {
	if before == nil && after == nil {
		return
	}
	sameNames := before != nil && after != nil && sameSpellings(*before, *after)
	if sameNames && before.Type == after.Type {
		return // the same sets: the usual edit boxes nothing
	}
	member := any(id) // boxed once for all its sets
	switch {
	case before == nil:
		ix.add.add(setRef{kind: setEntities}, member)
		ix.add.add(setRef{kind: setType, of: after.Type}, member)
	case after == nil:
		ix.rem.add(setRef{kind: setEntities}, member)
		ix.rem.add(setRef{kind: setType, of: before.Type}, member)
	case before.Type != after.Type:
		ix.rem.add(setRef{kind: setType, of: before.Type}, member)
		ix.add.add(setRef{kind: setType, of: after.Type}, member)
	}
	if sameNames {
		return // the same name keys
	}
	var was, is []string
	if before != nil {
		was = store.HeadNameKeys(*before)
	}
	if after != nil {
		is = store.HeadNameKeys(*after)
	}
	for _, nk := range was {
		if !slices.Contains(is, nk) {
			ix.rem.add(setRef{kind: setName, of: nk}, member)
		}
	}
	for _, nk := range is {
		if !slices.Contains(was, nk) {
			ix.add.add(setRef{kind: setName, of: nk}, member)
		}
	}
}

// sameSpellings says whether two heads have the same display name and
// tally the same spellings (whatever their counts), so the same name
// keys (store.HeadNameKeys).
func sameSpellings(a, b store.EntityHead) bool {
	return a.Name == b.Name && slices.EqualFunc(a.Names, b.Names, func(x, y store.NameVote) bool { return x.Name == y.Name })
}

// edge is entity's counterpart for edge id: its adjacency hashes and its
// relation's set.
func (ix indexOps) edge(id string, before, after *store.EdgeHead) {
	switch {
	case before == nil && after == nil:
	case before == nil:
		ix.add.add(setRef{setRel, after.Relation}, id)
		ix.add.add(setRef{setOut, after.Source}, adjacencyField(id, after.Source, true))
		ix.add.add(setRef{setIn, after.Target}, adjacencyField(id, after.Target, false))
	case after == nil:
		ix.rem.add(setRef{setRel, before.Relation}, id)
		ix.rem.add(setRef{setOut, before.Source}, adjacencyField(id, before.Source, true))
		ix.rem.add(setRef{setIn, before.Target}, adjacencyField(id, before.Target, false))
	default:
		// An endpoint or the relation changed (another spelling of a
		// stored id): the entry moves from the old set to the new.
		if before.Relation != after.Relation {
			ix.rem.add(setRef{setRel, before.Relation}, id)
			ix.add.add(setRef{setRel, after.Relation}, id)
		}
		if before.Source != after.Source {
			ix.rem.add(setRef{setOut, before.Source}, adjacencyField(id, before.Source, true))
			ix.add.add(setRef{setOut, after.Source}, adjacencyField(id, after.Source, true))
		}
		if before.Target != after.Target {
			ix.rem.add(setRef{setIn, before.Target}, adjacencyField(id, before.Target, false))
			ix.add.add(setRef{setIn, after.Target}, adjacencyField(id, after.Target, false))
		}
	}
}

// writtenStripes returns the keys of the stripes of the entities and
// edges whose keys w writes (bumped, see stripes.go).
func (k keys) writtenStripes(w store.Writes) []string {
	var set stripeSet
	for _, e := range w.RemoveEntities {
		set.add(e.ID)
	}
	for _, e := range w.RemoveEdges {
		set.add(e.ID)
	}
	for _, e := range w.PutEntities {
		set.add(e.ID)
	}
	for _, e := range w.PutEdges {
		set.add(e.ID)
	}
	for _, parts := range [...][]store.Part{w.PutFragments, w.PutSupports} {
		for _, pt := range parts {
			set.add(pt.ID)
		}
	}
	for _, ids := range [...][]string{w.DeleteFragments, w.DeleteSupports} {
		for _, id := range ids {
			set.add(id)
		}
	}
	return k.stripeSetKeys(&set)
}

// setKind is which index a set belongs to.
type setKind uint8

// hash says whether the index is a hash of fields with empty values (the
// adjacency hashes, see adjacency.go, and the name index) rather than a
// set.
func (k setKind) hash() bool { return k == setOut || k == setIn || k == setName }

const (
	setEntities setKind = iota // k.entities()
	setType                    // k.byType(of)
	setName                    // k.byName(of), a hash
	setOut                     // k.out(of), a hash (adjacency.go)
	setIn                      // k.in(of), a hash (adjacency.go)
	setRel                     // k.byRel(of)
	setKinds                   // how many kinds there are
)

// setRef names an index set without building its key: its kind and what
// it is of (a type, a name key, an entity or a relation; nothing for the
// entity id set). An apply adds or removes many members of one
// set (the edge set, a relation's, a hub's adjacency sets): its key is
// built once, when the set is first met.
type setRef struct {
	kind setKind
	of   string
}

// setKey is the key of the set r names.
func (k keys) setKey(r setRef) string {
	switch r.kind {
	case setEntities:
		return k.entities()
	case setType:
		return k.byType(r.of)
	case setName:
		return k.byName(r.of)
	case setOut:
		return k.out(r.of)
	case setIn:
		return k.in(r.of)
	default:
		return k.byRel(r.of)
	}
}

// setOps gathers the members added to (or removed from) each set, so each
// set gets one command: sets in the order first met, each one's members
// in the order added. The members are kept in one slice, each with the
// number of its set, and laid out set by set only when the commands are
// queued (each), so gathering costs no slice per set.
type setOps struct {
	k keys
	// index numbers the sets met, by kind then by what they are of.
	index   [setKinds]map[string]int32
	sets    []string  // keys, by set number
	kinds   []setKind // kinds, by set number
	counts  []int32   // members, by set number
	entries []setEntry
}

// setEntry is one member of set number set.
type setEntry struct {
	set    int32
	member any
}

// newSetOps returns an empty setOps with room for about members entries.
func newSetOps(k keys, members int) *setOps {
	return &setOps{k: k, entries: make([]setEntry, 0, members)}
}

// add records member for set r.
func (o *setOps) add(r setRef, member any) {
	index := o.index[r.kind]
	if index == nil {
		index = map[string]int32{}
		o.index[r.kind] = index
	}
	n, ok := index[r.of]
	if !ok {
		n = int32(len(o.sets))
		index[r.of] = n
		o.sets = append(o.sets, o.k.setKey(r))
		o.kinds = append(o.kinds, r.kind)
		o.counts = append(o.counts, 0)
	}
	o.counts[n]++
	if len(o.entries) == cap(o.entries) {
		// Double: append grows large slices by a quarter, copying a
		// large apply's thousands of entries a dozen times.
		o.entries = slices.Grow(o.entries, max(len(o.entries), 64))
	}
	o.entries = append(o.entries, setEntry{set: n, member: member})
}

// each calls fn with every set, its kind and its members (the fields of
// an adjacency hash), in the order the sets were first met.
func (o *setOps) each(fn func(set string, kind setKind, members []any)) {
	if len(o.entries) == 0 {
		return
	}
	// Each set's members go to its own range of one slice: next[n] is
	// where set n's next member goes.
	next := make([]int32, len(o.sets))
	at := int32(0)
	for n, c := range o.counts {
		next[n] = at
		at += c
	}
	all := make([]any, len(o.entries))
	for _, e := range o.entries {
		all[next[e.set]] = e.member
		next[e.set]++
	}
	start := 0
	for n, set := range o.sets {
		end := start + int(o.counts[n])
		fn(set, o.kinds[n], all[start:end:end])
		start = end
	}
}

// Source returns a document's record (store.ErrNotFound if never applied).
func (s *Store) Source(ctx context.Context, tenant, docID string) (store.SourceRecord, error) {
	rec, err := getOne[store.SourceRecord](ctx, s, tenant, func(k keys) string { return k.src(docID) })
	if err != nil {
		return store.SourceRecord{}, fmt.Errorf("getting source %q of %q: %w", docID, tenant, err)
	}
	return rec, nil
}

var _ store.SourceIndexes = (*Store)(nil)

var _ store.SourceRecords = (*Store)(nil)

// SourceRecords returns the records of the documents among ids that have
// one (see store.SourceRecords), read as records (below).
func (s *Store) SourceRecords(ctx context.Context, tenant string, ids []string) (map[string]store.SourceRecord, error) {
	out, err := records[store.SourceRecord](ctx, s, tenant, slices.Compact(slices.Sorted(slices.Values(ids))))
	if err != nil {
		return nil, fmt.Errorf("reading the records of %d documents of %q: %w", len(ids), tenant, err)
	}
	return out, nil
}

// SourceIndexes returns the contribution indexes of the documents among
// ids that have a record, decoding nothing else of the records (see
// store.SourceIndexes), read as records (below).
func (s *Store) SourceIndexes(ctx context.Context, tenant string, ids []string) (map[string]store.SourceIndex, error) {
	out, err := records[store.SourceIndex](ctx, s, tenant, ids)
	if err != nil {
		return nil, fmt.Errorf("reading the source indexes of %d documents of %q: %w", len(ids), tenant, err)
	}
	return out, nil
}

// records decodes as T the records of the documents among ids that have
// one, read with one MGET per mgetChunk ids, all in one MULTI: one instant
// of the graph.
func records[T any](ctx context.Context, s *Store, tenant string, ids []string) (map[string]T, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, err
	}
	if err := s.ensureLayout(ctx); err != nil {
		return nil, err
	}
	out := make(map[string]T, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	k := s.tenantKeys(tenant)
	keys := k.prefixed(k.src, ids)
	var cmds []*goredis.SliceCmd
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		for start := 0; start < len(keys); start += mgetChunk {
			cmds = append(cmds, p.MGet(ctx, keys[start:min(start+mgetChunk, len(keys))]...))
		}
		return nil
	})
	for c := 0; err == nil && c < len(cmds); c++ {
		first := c * mgetChunk
		err = decodeJSON(cmds[c].Val(), func(i int) string { return fmt.Sprintf("the record of %q", ids[first+i]) },
			func(i int, v T) { out[ids[first+i]] = v })
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Entity returns one entity (store.ErrNotFound if absent).
func (s *Store) Entity(ctx context.Context, tenant, id string) (store.Entity, error) {
	e, err := s.entity(ctx, tenant, id)
	if err != nil {
		return store.Entity{}, fmt.Errorf("getting entity %q of %q: %w", id, tenant, err)
	}
	return e, nil
}

func (s *Store) entity(ctx context.Context, tenant, id string) (store.Entity, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return store.Entity{}, err
	}
	if err := s.ensureLayout(ctx); err != nil {
		return store.Entity{}, err
	}
	hash, err := s.client.HGetAll(ctx, s.tenantKeys(tenant).entity(id)).Result()
	if err != nil {
		return store.Entity{}, err
	}
	flat := make([]any, 0, 2*len(hash))
	for field, v := range hash {
		flat = append(flat, field, v)
	}
	e, found, err := assembleEntity(id, flat)
	if err == nil && !found {
		err = store.ErrNotFound
	}
	return e, err
}

func getOne[T any](ctx context.Context, s *Store, tenant string, key func(keys) string) (T, error) {
	var zero T
	if err := store.ValidateTenant(tenant); err != nil {
		return zero, err
	}
	v, err := getJSON[T](ctx, s.client, key(s.tenantKeys(tenant)))
	if err != nil {
		return zero, err
	}
	if v == nil {
		return zero, store.ErrNotFound
	}
	return *v, nil
}

// Entities returns the entities among ids that exist, read atomically.
func (s *Store) Entities(ctx context.Context, tenant string, ids []string) (map[string]store.Entity, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("getting entities: %w", err)
	}
	k := s.tenantKeys(tenant)
	if err := s.ensureLayout(ctx); err != nil {
		return nil, err
	}
	ids = slices.Compact(slices.Sorted(slices.Values(ids))) // each asked once: decoded once
	out := make(map[string]store.Entity, len(ids))
	err := hgetallAtomic(ctx, s.client, k.entity(""), ids, assembleEntity, func(id string, e store.Entity) { out[id] = e })
	if err != nil {
		return nil, fmt.Errorf("getting entities of %q: %w", tenant, err)
	}
	return out, nil
}

// EntitiesByType returns every entity of a type, sorted by id; "" means
// all. It reads the type set, not every entity.
func (s *Store) EntitiesByType(ctx context.Context, tenant, typ string) ([]store.Entity, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("listing entities of type %q: %w", typ, err)
	}
	k := s.tenantKeys(tenant)
	if err := s.ensureLayout(ctx); err != nil {
		return nil, err
	}
	set := k.byType(typ)
	if typ == "" {
		set = k.entities()
	}
	out, err := readSet(ctx, s.client, k, set, "e", assembleEntity)
	if err != nil {
		return nil, fmt.Errorf("listing entities of type %q in %q: %w", typ, tenant, err)
	}
	slices.SortFunc(out, func(a, b store.Entity) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

var _ store.EntityHeads = (*Store)(nil)

// EntityHeadsByType returns the heads of the entities of typ, sorted by
// id, read with the type set in one atomic step: one hash field per
// entity, no fragment (see store.EntityHeads).
func (s *Store) EntityHeadsByType(ctx context.Context, tenant, typ string) ([]store.EntityHead, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("listing entity heads of type %q: %w", typ, err)
	}
	if typ == "" {
		return nil, fmt.Errorf("listing entity heads in %q: %w: no type", tenant, store.ErrInvalid)
	}
	if err := s.ensureLayout(ctx); err != nil {
		return nil, err
	}
	k := s.tenantKeys(tenant)
	out, err := readSet(ctx, s.client, k, k.byType(typ), "h", func(id string, read any) (store.EntityHead, bool, error) {
		head, ok := read.(string)
		if !ok {
			return store.EntityHead{}, false, nil
		}
		h, err := store.DecodeEntityHead(id, []byte(head))
		return h, err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing entity heads of type %q in %q: %w", typ, tenant, err)
	}
	slices.SortFunc(out, func(a, b store.EntityHead) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Edges returns the edges leaving (Out) or entering (In) an entity, sorted
// by id, from the adjacency hashes.
func (s *Store) Edges(ctx context.Context, tenant, entityID string, dir store.Direction) ([]store.Edge, error) {
	return s.adjacent(ctx, tenant, entityID, dir, nil)
}

// adjacent returns the edges of entityID in dir, sorted by id, read in
// one script (the adjacency hash and every edge it names): every one
// when others is nil, else those whose other end is among others
// (sorted), decoding only those that may be (store.MayEndAmong).
func (s *Store) adjacent(ctx context.Context, tenant, entityID string, dir store.Direction, others []string) ([]store.Edge, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("listing edges of %q: %w", entityID, err)
	}
	k := s.tenantKeys(tenant)
	if err := s.ensureLayout(ctx); err != nil {
		return nil, err
	}
	set, kind := k.out(entityID), "o:"+entityID
	if dir == store.In {
		set, kind = k.in(entityID), "i:"+entityID
	}
	svs, err := readSets(ctx, s.client, k.graph(), []string{set}, []string{kind})
	if err != nil {
		return nil, fmt.Errorf("listing edges of %q in %q: %w", entityID, tenant, err)
	}
	sv := svs[0]
	if others != nil {
		kept := setValues{}
		for i, id := range sv.ids {
			if store.MayEndAmong(id, entityID, dir, others) {
				kept.ids = append(kept.ids, id)
				kept.vals = append(kept.vals, sv.vals[i])
			}
		}
		sv = kept
	}
	out, err := decodeSet(set, sv, assembleEdge)
	if err != nil {
		return nil, fmt.Errorf("listing edges of %q in %q: %w", entityID, tenant, err)
	}
	if others != nil {
		out = slices.DeleteFunc(out, func(e store.Edge) bool {
			_, among := slices.BinarySearch(others, store.FarEnd(e, dir))
			return !among
		})
	}
	slices.SortFunc(out, func(a, b store.Edge) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// EdgesByRelation returns the edges of a relation (leaving entities of
// sourceType, if not ""), sorted by id, from the relation set.
func (s *Store) EdgesByRelation(ctx context.Context, tenant, relation, sourceType string) ([]store.Edge, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("listing %q edges: %w", relation, err)
	}
	k := s.tenantKeys(tenant)
	if err := s.ensureLayout(ctx); err != nil {
		return nil, err
	}
	out, err := readSet(ctx, s.client, k, k.byRel(relation), "x", assembleEdge)
	if err != nil {
		return nil, fmt.Errorf("listing %q edges in %q: %w", relation, tenant, err)
	}
	if sourceType != "" {
		out = slices.DeleteFunc(out, func(e store.Edge) bool { return !strings.HasPrefix(e.Source, sourceType+":") })
	}
	slices.SortFunc(out, func(a, b store.Edge) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// EdgeCounts returns the sizes of the adjacency hashes, in one pipeline.
func (s *Store) EdgeCounts(ctx context.Context, tenant string, ids []string, dir store.Direction) (map[string]int, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("counting the edges of %d entities: %w", len(ids), err)
	}
	k := s.tenantKeys(tenant)
	if err := s.ensureLayout(ctx); err != nil {
		return nil, err
	}
	set := k.out
	if dir == store.In {
		set = k.in
	}
	cmds := make([]*goredis.IntCmd, len(ids))
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HLen(ctx, set(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("counting the edges of %d entities in %q: %w", len(ids), tenant, err)
	}
	out := make(map[string]int, len(ids))
	for i, id := range ids {
		out[id] = int(cmds[i].Val())
	}
	return out, nil
}

// EntitiesByName returns the entities indexed under store.NameKey(name).
func (s *Store) EntitiesByName(ctx context.Context, tenant, name string) ([]store.Entity, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("finding entities named %q: %w", name, err)
	}
	key := store.NameKey(name)
	if key == "" {
		return []store.Entity{}, nil
	}
	k := s.tenantKeys(tenant)
	if err := s.ensureLayout(ctx); err != nil {
		return nil, err
	}
	out, err := readSet(ctx, s.client, k, k.byName(key), "e", assembleEntity)
	if err != nil {
		return nil, fmt.Errorf("finding entities named %q in %q: %w", name, tenant, err)
	}
	slices.SortFunc(out, func(a, b store.Entity) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// readSet reads the entities (kind "e") or edges ("x") named by a set's
// members, or the edges named by an adjacency hash's fields ("o:<entity>"
// for its out hash, "i:<entity>" for its in hash), in one atomic step (see
// atomic.go).
func readSet[T any](ctx context.Context, c goredis.Scripter, k keys, set, kind string,
	assemble func(id string, read any) (T, bool, error)) ([]T, error) {
	svs, err := readSets(ctx, c, k.graph(), []string{set}, []string{kind})
	if err != nil {
		return nil, err
	}
	return decodeSet(set, svs[0], assemble)
}

// Snapshot returns the whole tenant graph, read in one atomic step.
func (s *Store) Snapshot(ctx context.Context, tenant string) (store.Graph, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return store.Graph{}, fmt.Errorf("taking a snapshot: %w", err)
	}
	if err := s.ensureLayout(ctx); err != nil {
		return store.Graph{}, fmt.Errorf("taking a snapshot of %q: %w", tenant, err)
	}
	g, err := s.snapshot(ctx, s.tenantKeys(tenant))
	if err != nil {
		return store.Graph{}, fmt.Errorf("taking a snapshot of %q: %w", tenant, err)
	}
	return g, nil
}

// snapshot reads the entities and edges and their values in one atomic
// step: the entity set, and the edges through its members' out hashes.
func (s *Store) snapshot(ctx context.Context, k keys) (store.Graph, error) {
	svs, err := readSets(ctx, s.client, k.graph(), []string{k.entities(), k.entities()}, []string{"e", "X"})
	if err != nil {
		return store.Graph{}, err
	}
	entities, err := decodeSet(k.entities(), svs[0], assembleEntity)
	if err != nil {
		return store.Graph{}, err
	}
	edges, err := decodeSet(k.out("*"), svs[1], assembleEdge)
	if err != nil {
		return store.Graph{}, err
	}
	slices.SortFunc(entities, func(a, b store.Entity) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(edges, func(a, b store.Edge) int { return cmp.Compare(a.ID, b.ID) })
	return store.Graph{Entities: entities, Edges: edges}, nil
}

// Stats returns counts, read in one MULTI.
func (s *Store) Stats(ctx context.Context, tenant string) (store.Stats, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return store.Stats{}, fmt.Errorf("counting the graph: %w", err)
	}
	k := s.tenantKeys(tenant)
	if err := s.ensureLayout(ctx); err != nil {
		return store.Stats{}, err
	}
	var live, ents *goredis.IntCmd
	var edges *goredis.StringCmd
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		live, ents, edges = p.SCard(ctx, k.live()), p.SCard(ctx, k.entities()), p.Get(ctx, k.edgeCount())
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return store.Stats{}, fmt.Errorf("counting the graph of %q: %w", tenant, err)
	}
	n, err := edgeCountOf(edges)
	if err != nil {
		return store.Stats{}, fmt.Errorf("counting the graph of %q: %w", tenant, err)
	}
	return store.Stats{Sources: int(live.Val()), Entities: int(ents.Val()), Edges: n}, nil
}

// Audit scans every graph key of the tenant (not just what the id sets
// list) and checks the id sets too. The key names are found with SCAN,
// which does not block Redis (it walks the whole keyspace, every
// tenant's); what they hold is then read in one atomic step
// (auditScript), together with the id sets and every key they list. So
// the only writes an audit can see half of are those creating keys
// between the scan and the read: a report with findings is audited again
// (auditPasses in all) and the last pass's findings are returned, which a
// real inconsistency survives.
func (s *Store) Audit(ctx context.Context, tenant string) (store.AuditReport, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return store.AuditReport{}, fmt.Errorf("auditing the graph: %w", err)
	}
	k := s.tenantKeys(tenant)
	if err := s.ensureLayout(ctx); err != nil {
		return store.AuditReport{}, err
	}
	var rep store.AuditReport
	for pass := 0; pass < auditPasses; pass++ {
		var err error
		if rep, err = s.audit(ctx, k); err != nil {
			return store.AuditReport{}, fmt.Errorf("auditing the graph of %q: %w", tenant, err)
		}
		if rep.OrphanEdges == 0 && rep.OrphanEntities == 0 && rep.IndexMismatches == 0 {
			break
		}
	}
	return rep, nil
}

// auditPasses bounds how many times Audit reads a tenant with findings.
const auditPasses = 3

// auditScript: KEYS are the id sets (sources, live sources, entities),
// the edge count, then the keys a scan found; ARGV[1] is the graph keys'
// prefix. The reply is the id sets' members, then the names of the keys
// read (those found, and those the id sets name: each source's and
// entity's key, each entity's adjacency hashes and the keys of the edges
// its out hash names), each once, each one's type ("none" when absent)
// and what it holds (a string's value, a set's members, a hash's fields
// and values, else false), then the edge count (false when absent).
var auditScript = goredis.NewScript(`
local prefix = ARGV[1]
local sets = {}
for i = 1, 3 do sets[i] = redis.call('SMEMBERS', KEYS[i]) end
local names, seen = {}, {}
local function want(key)
  if not seen[key] then seen[key] = true; names[#names + 1] = key end
end
for i = 5, #KEYS do want(KEYS[i]) end
for _, id in ipairs(sets[1]) do want(prefix .. 'src:' .. id) end
for _, id in ipairs(sets[3]) do
  want(prefix .. 'e:' .. id); want(prefix .. 'in:' .. id)
  local out = prefix .. 'out:' .. id
  want(out)
  if redis.call('TYPE', out)['ok'] == 'hash' then
    for _, field in ipairs(redis.call('HKEYS', out)) do
      local edge = id .. '|' .. field
      if string.sub(field, 1, 1) == '|' then edge = string.sub(field, 2) end
      want(prefix .. 'x:' .. edge); want(prefix .. 'xs:' .. edge)
    end
  end
end
local types, held = {}, {}
for i, key in ipairs(names) do
  local t = redis.call('TYPE', key)['ok']
  types[i] = t
  if t == 'string' then held[i] = redis.call('GET', key)
  elseif t == 'set' then held[i] = redis.call('SMEMBERS', key)
  elseif t == 'hash' then held[i] = redis.call('HGETALL', key)
  else held[i] = false end
end
return {sets, names, types, held, redis.call('GET', KEYS[4])}
`)

func (s *Store) audit(ctx context.Context, k keys) (store.AuditReport, error) {
	sets := []string{k.srcs(), k.live(), k.entities()}
	scanned := append(slices.Clone(sets), k.edgeCount())
	iter := s.client.Scan(ctx, 0, globEscape(k.graph())+"*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		rest := strings.TrimPrefix(key, k.graph())
		for _, kind := range []string{"src:", "e:", "x:", "xs:", "type:", "out:", "in:"} {
			if strings.HasPrefix(rest, kind) {
				scanned = append(scanned, key)
				break
			}
		}
	}
	if err := iter.Err(); err != nil {
		return store.AuditReport{}, err
	}
	reply, err := auditScript.Run(ctx, s.client, scanned, k.graph()).Slice()
	if err != nil {
		return store.AuditReport{}, err
	}
	if len(reply) != 5 {
		return store.AuditReport{}, fmt.Errorf("audit: unexpected reply of %d parts", len(reply))
	}
	setReplies, _ := reply[0].([]any)
	names, _ := reply[1].([]any)
	types, _ := reply[2].([]any)
	held, _ := reply[3].([]any)
	if len(setReplies) != len(sets) || len(names) != len(types) || len(names) != len(held) {
		return store.AuditReport{}, errors.New("audit: unexpected reply shape")
	}
	strs := func(v any) []string {
		vs, _ := v.([]any)
		out := make([]string, 0, len(vs))
		for _, x := range vs {
			if str, ok := x.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	var g store.Graph
	var recs []store.SourceRecord
	var wrongType, layout []string
	edgeHeads, edgeSupports := map[string][]byte{}, map[string][]any{}
	idx := store.Indexes{ByType: map[string][]string{}, Out: map[string][]string{}, In: map[string][]string{}}
	for i, raw := range names {
		key, _ := raw.(string)
		rest := strings.TrimPrefix(key, k.graph())
		typ, _ := types[i].(string)
		if typ == "none" {
			continue // absent: deleted since the scan, or an empty adjacency hash
		}
		value, _ := held[i].(string)
		isString, isSet, isHash := typ == "string", typ == "set", typ == "hash"
		var err error
		switch kind := strings.SplitAfterN(rest, ":", 2)[0]; kind {
		case "src:":
			if !isString {
				wrongType = append(wrongType, key)
				continue
			}
			var r store.SourceRecord
			err = store.DecodeValue([]byte(value), &r)
			recs = append(recs, r)
		case "e:":
			if !isHash {
				wrongType = append(wrongType, key)
				continue
			}
			id := strings.TrimPrefix(rest, kind)
			hash, _ := held[i].([]any)
			var (
				e     store.Entity
				found bool
			)
			if e, found, err = assembleEntity(id, hash); found {
				g.Entities = append(g.Entities, e)
				head, _ := hashParts(hash)
				if h, herr := store.DecodeEntityHead(id, head); herr == nil {
					if p := store.CheckEntityHead(h, e.Sources); p != "" {
						layout = append(layout, p)
					}
				}
			} else if err == nil {
				layout = append(layout, fmt.Sprintf("key %q: %d fields without a head", key, len(hash)/2))
			}
		case "x:":
			if !isString {
				wrongType = append(wrongType, key)
				continue
			}
			edgeHeads[strings.TrimPrefix(rest, kind)] = []byte(value)
		case "xs:":
			if !isHash {
				wrongType = append(wrongType, key)
				continue
			}
			edgeSupports[strings.TrimPrefix(rest, kind)], _ = held[i].([]any)
		case "type:":
			if !isSet {
				wrongType = append(wrongType, key)
				continue
			}
			idx.ByType[strings.TrimPrefix(rest, kind)] = strs(held[i])
		case "out:", "in:":
			if !isHash {
				wrongType = append(wrongType, key)
				continue
			}
			entity, out := strings.TrimPrefix(rest, kind), kind == "out:"
			hash := strs(held[i])
			ids := make([]string, 0, len(hash)/2)
			for j := 0; j+1 < len(hash); j += 2 {
				ids = append(ids, edgeOfField(hash[j], entity, out))
			}
			m := idx.In
			if out {
				m = idx.Out
			}
			m[entity] = ids
		}
		if err != nil {
			return store.AuditReport{}, fmt.Errorf("decoding %q: %w", key, err)
		}
	}
	for id, head := range edgeHeads {
		e, _, err := assembleEdgeParts(id, head, edgeSupports[id])
		if err != nil {
			return store.AuditReport{}, fmt.Errorf("decoding edge %q: %w", id, err)
		}
		g.Edges = append(g.Edges, e)
		h, _ := store.DecodeEdgeHead(id, head)
		_, apart := hashParts(edgeSupports[id])
		fs, _ := decodeFragments(apart)
		if p := store.CheckEdgeHead(h, fs); p != "" {
			layout = append(layout, p)
		}
	}
	for id, hash := range edgeSupports {
		if _, ok := edgeHeads[id]; !ok {
			layout = append(layout, fmt.Sprintf("edge %q: %d supports without a head", id, len(hash)/2))
		}
	}
	slices.Sort(layout)
	slices.SortFunc(g.Entities, func(a, b store.Entity) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(g.Edges, func(a, b store.Edge) int { return cmp.Compare(a.ID, b.ID) })
	rep := store.Audit(g, recs, &idx)
	for _, key := range wrongType {
		rep.AddIndexMismatch("key %q does not hold the type its name says", key)
	}
	for _, p := range layout {
		rep.AddIndexMismatch("%s", p)
	}

	// The id sets must list exactly the keys that exist.
	var want = map[string][]string{k.srcs(): {}, k.live(): {}, k.entities(): {}}
	for _, r := range recs {
		want[k.srcs()] = append(want[k.srcs()], r.DocID)
		if !r.Deleted {
			want[k.live()] = append(want[k.live()], r.DocID)
		}
	}
	for _, e := range g.Entities {
		want[k.entities()] = append(want[k.entities()], e.ID)
	}
	for i, key := range sets {
		w, got := slices.Sorted(slices.Values(want[key])), slices.Sorted(slices.Values(strs(setReplies[i])))
		if !slices.Equal(w, got) {
			rep.AddIndexMismatch("set %q has %d ids, %d keys exist", key, len(got), len(w))
		}
	}
	// And the edge count must count them.
	count := 0
	if str, ok := reply[4].(string); ok {
		if count, err = strconv.Atoi(str); err != nil {
			rep.AddIndexMismatch("edge count %q holds %q, not a number", k.edgeCount(), str)
		}
	}
	if err == nil && count != len(g.Edges) {
		rep.AddIndexMismatch("edge count %q is %d, %d edges exist", k.edgeCount(), count, len(g.Edges))
	}
	return rep, nil
}

var _ store.GraphGenerations = (*Store)(nil)

// GraphGeneration returns the tenant's graph generation (see
// store.GraphGenerations): g:gen, which every applied change raises
// (INCR) in its transaction.
func (s *Store) GraphGeneration(ctx context.Context, tenant string) (uint64, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return 0, fmt.Errorf("reading the graph generation: %w", err)
	}
	n, err := s.client.Get(ctx, s.tenantKeys(tenant).graphGen()).Uint64()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return 0, fmt.Errorf("reading the graph generation of %q: %w", tenant, err)
	}
	return n, nil
}

// GraphTenants lists the tenants with graph data, sorted.
func (s *Store) GraphTenants(ctx context.Context) ([]string, error) {
	ts, err := s.client.SMembers(ctx, s.graphTenantsKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("listing graph tenants: %w", err)
	}
	slices.Sort(ts)
	return ts, nil
}

// globEscape quotes the glob metacharacters of a key prefix for SCAN MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// noteGraphTenant adds tenant to the global set of tenants with graph
// data, before the apply's transaction (see registryUpdate), once per
// Store and tenant: the set only ever grows, so a tenant this Store added
// is still there and the SADD would be a round trip per apply for nothing.
// The cache relies on that: if Redis is flushed or restored
// from an older snapshot while the process runs, a tenant it already
// noted is left out of graph-tenants until the process restarts (or
// another process writes the tenant).
func (s *Store) noteGraphTenant(ctx context.Context, tenant string) error {
	return s.noteTenant(ctx, s.graphTenantsKey(), &s.graphTenants, tenant)
}

// edgeCountOf reads the edge count of a GET reply: 0 when absent (no edge
// was ever written).
func edgeCountOf(get *goredis.StringCmd) (int, error) {
	n, err := get.Int()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	return n, err
}

// repeated returns n times s.
func repeated(s []string, n int) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
