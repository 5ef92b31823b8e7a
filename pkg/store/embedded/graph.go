package embedded

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/store"
)

// Names of a tenant graph's sub-buckets and counters.
const (
	subSources    = "sources"
	subEntityRows = "entity_rows"
	subEdgeRows   = "edge_rows"
	subByType     = "by_type"
	subOut        = "out"
	subIn         = "in"
	subByRel      = "by_rel"
	subByName     = "by_name"
	subMeta       = "meta"

	// The buckets of whole entities and edges, before heads (see
	// migrateToHeads).
	subEntitiesWhole = "entities"
	subEdgesWhole    = "edges"

	countSources  = "sources"
	countEntities = "entities"
	countEdges    = "edges"
	// graphGeneration counts the applied changes (see
	// store.GraphGenerations).
	graphGeneration = "generation"
)

// sourceCompression is how an apply writes a document's record;
// compressionAt says how Compact rewrites it.
const sourceCompression = store.FastCompression

// graphBuckets are one tenant's graph buckets.
type graphBuckets struct {
	// entityRows and edgeRows hold, under <id|>, an entity's or edge's
	// head and under <id|doc> the doc's fragment or support: the head and
	// the fragments an apply writes are neighbours, mostly on one page.
	sources, entityRows, edgeRows        *bolt.Bucket
	byType, out, in, byRel, byName, meta *bolt.Bucket
}

// openGraph returns the tenant's graph buckets, nil if the tenant has none
// and create is false.
func openGraph(tx *bolt.Tx, tenant string, create bool) (*graphBuckets, error) {
	t, err := tenantBucket(tx, bucketGraph, tenant, create)
	if err != nil || t == nil {
		return nil, err
	}
	var g graphBuckets
	for _, sub := range []struct {
		name string
		b    **bolt.Bucket
	}{
		{subSources, &g.sources}, {subEntityRows, &g.entityRows}, {subEdgeRows, &g.edgeRows},
		{subByType, &g.byType}, {subOut, &g.out}, {subIn, &g.in}, {subByRel, &g.byRel}, {subByName, &g.byName},
		{subMeta, &g.meta},
	} {
		if create {
			if *sub.b, err = t.CreateBucketIfNotExists([]byte(sub.name)); err != nil {
				return nil, err
			}
		} else if *sub.b = t.Bucket([]byte(sub.name)); *sub.b == nil {
			return nil, fmt.Errorf("graph bucket %q of %q is missing", sub.name, tenant)
		}
	}
	return &g, nil
}

func (g *graphBuckets) record(docID string) (*store.SourceRecord, error) {
	var r store.SourceRecord
	found, err := getJSON(g.sources, docID, &r)
	if err != nil || !found {
		return nil, err
	}
	return &r, nil
}

func (g *graphBuckets) entityHead(id string) (store.EntityHead, bool, error) {
	v := g.entityRows.Get(headKey(id))
	if v == nil {
		return store.EntityHead{}, false, nil
	}
	h, err := store.DecodeEntityHead(id, v)
	if err != nil {
		return store.EntityHead{}, false, fmt.Errorf("decoding the head of entity %q: %w", id, err)
	}
	return h, true, nil
}

func (g *graphBuckets) edgeHead(id string) (store.EdgeHead, bool, error) {
	v := g.edgeRows.Get(headKey(id))
	if v == nil {
		return store.EdgeHead{}, false, nil
	}
	h, err := store.DecodeEdgeHead(id, v)
	if err != nil {
		return store.EdgeHead{}, false, fmt.Errorf("decoding the head of edge %q: %w", id, err)
	}
	return h, true, nil
}

// part returns the fragment of docID stored in b under <id|docID>.
func part(b *bolt.Bucket, id, docID string) (store.Fragment, bool, error) {
	v := b.Get(pair(id, docID))
	if v == nil {
		return store.Fragment{}, false, nil
	}
	f, err := store.DecodeFragment(docID, v)
	if err != nil {
		return store.Fragment{}, false, fmt.Errorf("decoding the fragment of %q by %q: %w", id, docID, err)
	}
	return f, true, nil
}

// headKey is the key of the head of id in a rows bucket: <id|>, before
// every <id|doc>.
func headKey(id string) []byte { return pairPrefix(id) }

// parts returns every fragment stored in b under <id|doc>, sorted by doc
// id (the key order).
func parts(b *bolt.Bucket, id string) ([]store.Fragment, error) {
	_, frags, err := row(b, id)
	return frags, err
}

// row reads id's head (nil when absent) and fragments from b with one
// cursor: the head, <id|>, is the first key of the prefix.
func row(b *bolt.Bucket, id string) (head []byte, frags []store.Fragment, err error) {
	prefix := pairPrefix(id)
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		doc := string(k[len(prefix):])
		if doc == "" {
			head = v
			continue
		}
		f, err := store.DecodeFragment(doc, v)
		if err != nil {
			return nil, nil, fmt.Errorf("decoding the fragment of %q by %q: %w", id, doc, err)
		}
		frags = append(frags, f)
	}
	return head, frags, nil
}

func (g *graphBuckets) entity(id string) (store.Entity, bool, error) {
	v, frags, err := row(g.entityRows, id)
	if err != nil || v == nil {
		return store.Entity{}, false, err
	}
	h, err := store.DecodeEntityHead(id, v)
	if err != nil {
		return store.Entity{}, false, fmt.Errorf("decoding the head of entity %q: %w", id, err)
	}
	return store.AssembleEntity(h, frags), true, nil
}

func (g *graphBuckets) edge(id string) (store.Edge, bool, error) {
	v, frags, err := row(g.edgeRows, id)
	if err != nil || v == nil {
		return store.Edge{}, false, err
	}
	h, err := store.DecodeEdgeHead(id, v)
	if err != nil {
		return store.Edge{}, false, fmt.Errorf("decoding the head of edge %q: %w", id, err)
	}
	return store.AssembleEdge(h, frags), true, nil
}

// Apply retracts what docID contributed before and adds c, in one
// transaction (see store.GraphStore).
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
	// Replays are frequent (redelivery, reprocessing): settle Stale and
	// Duplicate in a read transaction, which costs no fsync. The write
	// transaction decides again, so a race only costs the shortcut.
	var res store.ApplyResult
	decided := false
	err := s.view(ctx, func(tx *bolt.Tx) error {
		g, err := openGraph(tx, tenant, false)
		if err != nil || g == nil {
			return err
		}
		old, err := g.record(ch.DocID)
		if err != nil {
			return err
		}
		if o := ch.Outcome(old); o != store.Applied {
			res, decided = store.ApplyResult{Outcome: o, Previous: old.Version}, true
		}
		return nil
	})
	if err != nil || decided {
		return res, err
	}
	ch.Now = s.now()
	err = s.update(ctx, func(tx *bolt.Tx) error {
		g, err := openGraph(tx, tenant, true)
		if err != nil {
			return err
		}
		res, err = g.apply(ch)
		return err
	})
	return res, err
}

// apply plans and writes one validated change inside a write transaction:
// it reads the heads of what the change touches and the document's own
// fragments, never the other documents' (but for a tie of spellings, see
// store.State.Fragments).
func (g *graphBuckets) apply(ch store.Change) (store.ApplyResult, error) {
	old, err := g.record(ch.DocID)
	if err != nil {
		return store.ApplyResult{}, err
	}
	entityIDs, edgeIDs := ch.Reads(old)
	st := store.State{
		Entities: make(map[string]store.EntityHead, len(entityIDs)), Edges: make(map[string]store.EdgeHead, len(edgeIDs)),
		EntityFragments: make(map[string]store.Fragment, len(entityIDs)), EdgeSupports: make(map[string]store.Fragment, len(edgeIDs)),
		Fragments: func(id string) ([]store.Fragment, error) { return parts(g.entityRows, id) },
	}
	for _, id := range entityIDs {
		h, found, err := g.entityHead(id)
		if err != nil {
			return store.ApplyResult{}, err
		}
		if found {
			st.Entities[id] = h
		}
		f, found, err := part(g.entityRows, id, ch.DocID)
		if err != nil {
			return store.ApplyResult{}, err
		}
		if found {
			st.EntityFragments[id] = f
		}
	}
	for _, id := range edgeIDs {
		h, found, err := g.edgeHead(id)
		if err != nil {
			return store.ApplyResult{}, err
		}
		if found {
			st.Edges[id] = h
		}
		f, found, err := part(g.edgeRows, id, ch.DocID)
		if err != nil {
			return store.ApplyResult{}, err
		}
		if found {
			st.EdgeSupports[id] = f
		}
	}
	w, err := store.Plan(ch, old, st)
	if err != nil {
		return store.ApplyResult{}, err
	}
	if w.Record == nil {
		return w.Result, nil
	}
	return w.Result, g.write(old, w, st.Entities, st.Edges)
}

// ApplyBatch applies changes in order in one write transaction: one
// commit, one fsync for the batch (see store.GraphStore).
func (s *Store) ApplyBatch(ctx context.Context, tenant string, changes []store.Change) ([]store.ApplyResult, []error, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, nil, fmt.Errorf("applying a batch of %d changes: %w", len(changes), err)
	}
	results := make([]store.ApplyResult, len(changes))
	errs := make([]error, len(changes))
	now := s.now()
	err := s.update(ctx, func(tx *bolt.Tx) error {
		g, err := openGraph(tx, tenant, true)
		if err != nil {
			return err
		}
		for i, ch := range changes {
			if err := ch.Validate(); err != nil {
				errs[i] = fmt.Errorf("applying source %q version %d in %q: %w", ch.DocID, ch.Version, tenant, err)
				continue
			}
			ch.Now = now
			res, err := g.apply(ch)
			switch {
			case errors.Is(err, store.ErrInvalid):
				// Refused by Plan (an entity another document holds
				// retyped, say), which comes before any write.
				errs[i] = fmt.Errorf("applying source %q version %d in %q: %w", ch.DocID, ch.Version, tenant, err)
			case err != nil:
				return fmt.Errorf("applying source %q version %d: %w", ch.DocID, ch.Version, err)
			default:
				results[i] = res
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("applying a batch of %d changes in %q: %w", len(changes), tenant, err)
	}
	return results, errs, nil
}

// write persists planned writes in the order store.Writes prescribes;
// stored and storedEdges hold the heads as Plan read them. A put of a head
// that was stored writes only the index entries that change: most applies
// update heads that exist (a support more, a fragment more) under the same
// type, names and ends, and rewriting their unchanged entries would make
// every index page they sit on dirty, to be written again at commit.
func (g *graphBuckets) write(old *store.SourceRecord, w store.Writes, stored map[string]store.EntityHead, storedEdges map[string]store.EdgeHead) error {
	doc := w.Record.DocID
	for _, e := range w.RemoveEntities {
		if err := g.entityRows.Delete(headKey(e.ID)); err != nil {
			return err
		}
		if err := g.byType.Delete(pair(e.Type, e.ID)); err != nil {
			return err
		}
		if _, put := slices.BinarySearchFunc(w.PutEntities, e.ID, func(p store.EntityHead, id string) int { return cmp.Compare(p.ID, id) }); put {
			continue // retyped: reindexNames below moves its names from the head as read
		}
		if err := g.unindexNames(e); err != nil {
			return err
		}
	}
	for _, e := range w.RemoveEdges {
		if err := g.edgeRows.Delete(headKey(e.ID)); err != nil {
			return err
		}
		if err := g.out.Delete(pair(e.Source, e.ID)); err != nil {
			return err
		}
		if err := g.in.Delete(pair(e.Target, e.ID)); err != nil {
			return err
		}
		if err := g.byRel.Delete(pair(e.Relation, e.ID)); err != nil {
			return err
		}
	}
	for _, id := range w.DeleteFragments {
		if err := g.entityRows.Delete(pair(id, doc)); err != nil {
			return err
		}
	}
	for _, id := range w.DeleteSupports {
		if err := g.edgeRows.Delete(pair(id, doc)); err != nil {
			return err
		}
	}
	for _, e := range w.PutEntities {
		old, found := stored[e.ID]
		if err := g.reindexNames(old, found, e); err != nil {
			return err
		}
		data, err := store.EncodeEntityHead(e)
		if err != nil {
			return fmt.Errorf("encoding the head of entity %q: %w", e.ID, err)
		}
		if err := g.entityRows.Put(headKey(e.ID), data); err != nil {
			return err
		}
		if !found || old.Type != e.Type {
			if err := g.byType.Put(pair(e.Type, e.ID), nil); err != nil {
				return err
			}
		}
	}
	for _, e := range w.PutEdges {
		data, err := store.EncodeEdgeHead(e)
		if err != nil {
			return fmt.Errorf("encoding the head of edge %q: %w", e.ID, err)
		}
		if err := g.edgeRows.Put(headKey(e.ID), data); err != nil {
			return err
		}
		old, found := storedEdges[e.ID]
		for _, ix := range []struct {
			b        *bolt.Bucket
			was, now string
		}{{g.out, old.Source, e.Source}, {g.in, old.Target, e.Target}, {g.byRel, old.Relation, e.Relation}} {
			if found && ix.was == ix.now {
				continue
			}
			if err := ix.b.Put(pair(ix.now, e.ID), nil); err != nil {
				return err
			}
		}
	}
	for _, ps := range []struct {
		b     *bolt.Bucket
		parts []store.Part
	}{{g.entityRows, w.PutFragments}, {g.edgeRows, w.PutSupports}} {
		for _, p := range ps.parts {
			data, err := store.EncodeFragment(p.Fragment)
			if err != nil {
				return fmt.Errorf("encoding the fragment of %q by %q: %w", p.ID, p.Fragment.DocID, err)
			}
			if err := ps.b.Put(pair(p.ID, p.Fragment.DocID), data); err != nil {
				return err
			}
		}
	}
	// The record (the document's text twice over: its units and the
	// extraction) is written by every apply, inside the one write
	// transaction every writer waits for: S2, a fifth of zstd's time, and
	// Compact brings it down to zstd's size off that path.
	if err := putJSON(g.sources, w.Record.DocID, w.Record, sourceCompression); err != nil {
		return err
	}
	if err := putInt(g.meta, graphGeneration, getInt(g.meta, graphGeneration)+1); err != nil {
		return err
	}
	liveDelta := int64(0)
	if old != nil && !old.Deleted {
		liveDelta--
	}
	if !w.Record.Deleted {
		liveDelta++
	}
	for _, c := range []struct {
		key   string
		delta int64
	}{
		{countSources, liveDelta},
		{countEntities, int64(w.Result.EntitiesAdded - w.Result.EntitiesRemoved)},
		{countEdges, int64(w.Result.EdgesAdded - w.Result.EdgesRemoved)},
	} {
		if c.delta != 0 {
			if err := putInt(g.meta, c.key, getInt(g.meta, c.key)+c.delta); err != nil {
				return err
			}
		}
	}
	return nil
}

// Source returns a document's record (store.ErrNotFound if never applied).
func (s *Store) Source(ctx context.Context, tenant, docID string) (store.SourceRecord, error) {
	var rec *store.SourceRecord
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) (err error) {
		rec, err = g.record(docID)
		return err
	})
	if err == nil && rec == nil {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.SourceRecord{}, fmt.Errorf("getting source %q of %q: %w", docID, tenant, err)
	}
	return *rec, nil
}

var _ store.SourceIndexes = (*Store)(nil)

// SourceIndexes returns the contribution indexes of the documents among
// ids that have a record, decoding nothing else of the records (see
// store.SourceIndexes).
func (s *Store) SourceIndexes(ctx context.Context, tenant string, ids []string) (map[string]store.SourceIndex, error) {
	out := make(map[string]store.SourceIndex, len(ids))
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) error {
		for _, id := range ids {
			var ix store.SourceIndex
			found, err := getJSON(g.sources, id, &ix)
			if err != nil {
				return err
			}
			if found {
				out[id] = ix
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the source indexes of %d documents of %q: %w", len(ids), tenant, err)
	}
	return out, nil
}

var _ store.SourceRecords = (*Store)(nil)

// SourceRecords returns the records of the documents among ids that have
// one, in one read transaction (see store.SourceRecords).
func (s *Store) SourceRecords(ctx context.Context, tenant string, ids []string) (map[string]store.SourceRecord, error) {
	out := make(map[string]store.SourceRecord, len(ids))
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) error {
		for _, id := range ids {
			if _, done := out[id]; done {
				continue
			}
			rec, err := g.record(id)
			if err != nil {
				return err
			}
			if rec != nil {
				out[id] = *rec
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the records of %d documents of %q: %w", len(ids), tenant, err)
	}
	return out, nil
}

// Entity returns one entity (store.ErrNotFound if absent).
func (s *Store) Entity(ctx context.Context, tenant, id string) (store.Entity, error) {
	var (
		e     store.Entity
		found bool
	)
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) (err error) {
		e, found, err = g.entity(id)
		return err
	})
	if err == nil && !found {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Entity{}, fmt.Errorf("getting entity %q of %q: %w", id, tenant, err)
	}
	return e, nil
}

// Entities returns the entities among ids that exist.
func (s *Store) Entities(ctx context.Context, tenant string, ids []string) (map[string]store.Entity, error) {
	out := make(map[string]store.Entity, len(ids))
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) error {
		for _, id := range ids {
			if _, done := out[id]; done {
				continue // asked again: decoded once
			}
			e, found, err := g.entity(id)
			if err != nil {
				return err
			}
			if found {
				out[id] = e
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("getting entities of %q: %w", tenant, err)
	}
	return out, nil
}

// EntitiesByType returns every entity of a type, sorted by id; "" means all.
// It reads the type index, not every entity.
func (s *Store) EntitiesByType(ctx context.Context, tenant, typ string) ([]store.Entity, error) {
	out := []store.Entity{}
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) error {
		if typ == "" {
			// The entity rows only: the edges (several times as many,
			// each with its supports) are not decoded to be dropped.
			all, err := g.allEntities(nil)
			out = all
			return err
		}
		return scanPrefix(g.byType, typ, func(id string) error {
			e, found, err := g.entity(id)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("type index lists missing entity %q", id)
			}
			out = append(out, e)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing entities of type %q in %q: %w", typ, tenant, err)
	}
	return out, nil
}

var _ store.EntityHeads = (*Store)(nil)

// EntityHeadsByType returns the heads of the entities of typ, sorted by
// id, through the type index: one head row per entity, no fragment read
// (see store.EntityHeads).
func (s *Store) EntityHeadsByType(ctx context.Context, tenant, typ string) ([]store.EntityHead, error) {
	if typ == "" {
		return nil, fmt.Errorf("listing entity heads in %q: %w: no type", tenant, store.ErrInvalid)
	}
	out := []store.EntityHead{}
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) error {
		return scanPrefix(g.byType, typ, func(id string) error {
			h, found, err := g.entityHead(id)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("type index lists missing entity %q", id)
			}
			out = append(out, h)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing entity heads of type %q in %q: %w", typ, tenant, err)
	}
	return out, nil // the type index's keys, <type|id>, are in id order
}

// Edges returns the edges leaving (Out) or entering (In) an entity, sorted
// by id, from the adjacency index.
func (s *Store) Edges(ctx context.Context, tenant, entityID string, dir store.Direction) ([]store.Edge, error) {
	out, err := s.adjacent(ctx, tenant, entityID, dir, nil)
	if err != nil {
		return nil, fmt.Errorf("listing edges of %q in %q: %w", entityID, tenant, err)
	}
	return out, nil
}

// adjacent returns the edges of entityID in dir, sorted by id, from the
// adjacency index: every one when others is nil, else those whose other
// end is among others (sorted), decoding only those that may be.
func (s *Store) adjacent(ctx context.Context, tenant, entityID string, dir store.Direction, others []string) ([]store.Edge, error) {
	out := []store.Edge{}
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) error {
		idx := g.out
		if dir == store.In {
			idx = g.in
		}
		return scanPrefix(idx, entityID, func(id string) error {
			if others != nil && !store.MayEndAmong(id, entityID, dir, others) {
				return nil
			}
			e, found, err := g.edge(id)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("adjacency index lists missing edge %q", id)
			}
			if others != nil {
				if _, among := slices.BinarySearch(others, store.FarEnd(e, dir)); !among {
					return nil
				}
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}

// unindexNames removes an entity's name index entries.
func (g *graphBuckets) unindexNames(e store.EntityHead) error {
	for _, k := range store.HeadNameKeys(e) {
		if err := g.byName.Delete(pair(k, e.ID)); err != nil {
			return err
		}
	}
	return nil
}

// reindexNames replaces the name index entries of old, the entity's
// stored head (when found), by those of e: the keys both have stay as they
// are.
func (g *graphBuckets) reindexNames(old store.EntityHead, found bool, e store.EntityHead) error {
	var was []string
	if found {
		was = store.HeadNameKeys(old)
	}
	now := store.HeadNameKeys(e)
	// Both are sorted and distinct: walk them together.
	for i, j := 0, 0; i < len(was) || j < len(now); {
		switch {
		case j == len(now) || (i < len(was) && was[i] < now[j]):
			if err := g.byName.Delete(pair(was[i], e.ID)); err != nil {
				return err
			}
			i++
		case i == len(was) || now[j] < was[i]:
			if err := g.byName.Put(pair(now[j], e.ID), nil); err != nil {
				return err
			}
			j++
		default: // in both
			i++
			j++
		}
	}
	return nil
}

// EdgesByRelation returns the edges of a relation (leaving entities of
// sourceType, if not ""), sorted by id, from the relation index.
func (s *Store) EdgesByRelation(ctx context.Context, tenant, relation, sourceType string) ([]store.Edge, error) {
	out := []store.Edge{}
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) error {
		prefix := pairPrefix(relation)
		if sourceType != "" {
			prefix = append(prefix, sourceType+":"...)
		}
		c := g.byRel.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			_, id, err := splitPair(k)
			if err != nil {
				return err
			}
			e, found, err := g.edge(id)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("relation index lists missing edge %q", id)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %q edges in %q: %w", relation, tenant, err)
	}
	return out, nil
}

// EdgeCounts counts the adjacency index entries of each id.
func (s *Store) EdgeCounts(ctx context.Context, tenant string, ids []string, dir store.Direction) (map[string]int, error) {
	out := make(map[string]int, len(ids))
	for _, id := range ids {
		out[id] = 0
	}
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) error {
		idx := g.out
		if dir == store.In {
			idx = g.in
		}
		for _, id := range ids {
			n := 0
			if err := scanPrefix(idx, id, func(string) error { n++; return nil }); err != nil {
				return err
			}
			out[id] = n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("counting the edges of %d entities in %q: %w", len(ids), tenant, err)
	}
	return out, nil
}

// EntitiesByName returns the entities indexed under NameKey(name).
func (s *Store) EntitiesByName(ctx context.Context, tenant, name string) ([]store.Entity, error) {
	out := []store.Entity{}
	key := store.NameKey(name)
	if key == "" {
		return out, store.ValidateTenant(tenant)
	}
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) error {
		return scanPrefix(g.byName, key, func(id string) error {
			e, found, err := g.entity(id)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("name index lists missing entity %q", id)
			}
			out = append(out, e)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("finding entities named %q in %q: %w", name, tenant, err)
	}
	return out, nil
}

// buildGraphIndexes creates the relation and name indexes of every tenant
// graph that has none (a file from before them), from the heads.
func buildGraphIndexes(tx *bolt.Tx) error {
	for _, tenant := range tenantNames(tx, bucketGraph) {
		t, err := tenantBucket(tx, bucketGraph, tenant, false)
		if err != nil {
			return err
		}
		if t.Bucket([]byte(subByRel)) != nil && t.Bucket([]byte(subByName)) != nil {
			continue
		}
		g, err := openGraph(tx, tenant, true)
		if err != nil {
			return err
		}
		err = forEachHead(g.edgeRows, func(id string, v []byte) error {
			h, err := store.DecodeEdgeHead(id, v)
			if err != nil {
				return fmt.Errorf("decoding the head of edge %q: %w", id, err)
			}
			return g.byRel.Put(pair(h.Relation, h.ID), nil)
		})
		if err != nil {
			return fmt.Errorf("indexing the relations of %q: %w", tenant, err)
		}
		err = forEachHead(g.entityRows, func(id string, v []byte) error {
			h, err := store.DecodeEntityHead(id, v)
			if err != nil {
				return fmt.Errorf("decoding the head of entity %q: %w", id, err)
			}
			for _, nk := range store.HeadNameKeys(h) {
				if err := g.byName.Put(pair(nk, h.ID), nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("indexing the names of %q: %w", tenant, err)
		}
	}
	return nil
}

// Snapshot returns the whole tenant graph, from one read transaction.
func (s *Store) Snapshot(ctx context.Context, tenant string) (store.Graph, error) {
	gr := store.Graph{Entities: []store.Entity{}, Edges: []store.Edge{}}
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) (err error) {
		gr, err = g.snapshot(nil)
		return err
	})
	if err != nil {
		return store.Graph{}, fmt.Errorf("taking a snapshot of %q: %w", tenant, err)
	}
	return gr, nil
}

// snapshot assembles every entity and edge from the rows buckets, each
// read once in key order. When mismatch is not nil, it is told of every
// head that disagrees with its fragments and of every fragment without a
// head (what Audit checks of the layout).
func (g *graphBuckets) snapshot(mismatch func(format string, args ...any)) (store.Graph, error) {
	if mismatch == nil {
		mismatch = func(string, ...any) {}
	}
	ents, err := g.allEntities(mismatch)
	if err != nil {
		return store.Graph{}, err
	}
	gr := store.Graph{Entities: ents, Edges: []store.Edge{}}
	err = forEachRow(g.edgeRows, mismatch, func(id string, head []byte, frags []store.Fragment) error {
		h, err := store.DecodeEdgeHead(id, head)
		if err != nil {
			return fmt.Errorf("decoding the head of edge %q: %w", id, err)
		}
		if p := store.CheckEdgeHead(h, frags); p != "" {
			mismatch("%s", p)
		}
		gr.Edges = append(gr.Edges, store.AssembleEdge(h, frags))
		return nil
	})
	if err != nil {
		return store.Graph{}, err
	}
	// Rows are in key order, the id's length first: readers return ids in order.
	slices.SortFunc(gr.Edges, func(a, b store.Edge) int { return cmp.Compare(a.ID, b.ID) })
	return gr, nil
}

// allEntities assembles every entity from the entity rows, sorted by id,
// told to mismatch as snapshot tells it (nil: not told).
func (g *graphBuckets) allEntities(mismatch func(format string, args ...any)) ([]store.Entity, error) {
	if mismatch == nil {
		mismatch = func(string, ...any) {}
	}
	out := []store.Entity{}
	err := forEachRow(g.entityRows, mismatch, func(id string, head []byte, frags []store.Fragment) error {
		h, err := store.DecodeEntityHead(id, head)
		if err != nil {
			return fmt.Errorf("decoding the head of entity %q: %w", id, err)
		}
		if p := store.CheckEntityHead(h, frags); p != "" {
			mismatch("%s", p)
		}
		out = append(out, store.AssembleEntity(h, frags))
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Rows are in key order, the id's length first: readers return ids in order.
	slices.SortFunc(out, func(a, b store.Entity) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// forEachRow calls fn with each head of a rows bucket and its fragments,
// in key order; fragments without a head are told to mismatch.
func forEachRow(b *bolt.Bucket, mismatch func(format string, args ...any), fn func(id string, head []byte, frags []store.Fragment) error) error {
	var (
		cur   string
		head  []byte
		frags []store.Fragment
		open  bool
	)
	flush := func() error {
		if !open {
			return nil
		}
		open = false
		return fn(cur, head, frags)
	}
	err := b.ForEach(func(k, v []byte) error {
		id, doc, err := splitPair(k)
		if err != nil {
			return err
		}
		if doc == "" {
			if err := flush(); err != nil {
				return err
			}
			cur, head, frags, open = id, v, nil, true
			return nil
		}
		if !open || id != cur {
			mismatch("%q: the fragment of %q has no head", id, doc)
			return nil
		}
		f, err := store.DecodeFragment(doc, v)
		if err != nil {
			return fmt.Errorf("decoding the fragment of %q by %q: %w", id, doc, err)
		}
		frags = append(frags, f)
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// forEachHead calls fn with each head of a rows bucket.
func forEachHead(b *bolt.Bucket, fn func(id string, head []byte) error) error {
	return b.ForEach(func(k, v []byte) error {
		id, doc, err := splitPair(k)
		if err != nil || doc != "" {
			return err
		}
		return fn(id, v)
	})
}

// Stats returns the counts kept up to date by every write.
func (s *Store) Stats(ctx context.Context, tenant string) (store.Stats, error) {
	var st store.Stats
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) error {
		st = store.Stats{
			Sources:  int(getInt(g.meta, countSources)),
			Entities: int(getInt(g.meta, countEntities)),
			Edges:    int(getInt(g.meta, countEdges)),
		}
		return nil
	})
	if err != nil {
		return store.Stats{}, fmt.Errorf("counting the graph of %q: %w", tenant, err)
	}
	return st, nil
}

var _ store.GraphGenerations = (*Store)(nil)

// GraphGeneration returns the tenant's graph generation (see
// store.GraphGenerations), raised by every applied change in its write
// transaction.
func (s *Store) GraphGeneration(ctx context.Context, tenant string) (uint64, error) {
	var n int64
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) error {
		n = getInt(g.meta, graphGeneration)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reading the graph generation of %q: %w", tenant, err)
	}
	return uint64(n), nil
}

// Audit scans the whole tenant graph, its records, indexes and counters in
// one read transaction.
func (s *Store) Audit(ctx context.Context, tenant string) (store.AuditReport, error) {
	var rep store.AuditReport
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) error {
		var layout []string
		gr, err := g.snapshot(func(format string, args ...any) { layout = append(layout, fmt.Sprintf(format, args...)) })
		if err != nil {
			return err
		}
		var recs []store.SourceRecord
		err = g.sources.ForEach(func(k, v []byte) error {
			var r store.SourceRecord
			if err := unmarshal(k, v, &r); err != nil {
				return err
			}
			recs = append(recs, r)
			return nil
		})
		if err != nil {
			return err
		}
		idx := store.Indexes{ByType: map[string][]string{}, Out: map[string][]string{}, In: map[string][]string{}}
		for _, ix := range []struct {
			b *bolt.Bucket
			m map[string][]string
		}{{g.byType, idx.ByType}, {g.out, idx.Out}, {g.in, idx.In}} {
			err := ix.b.ForEach(func(k, _ []byte) error {
				a, b, err := splitPair(k)
				if err != nil {
					return err
				}
				ix.m[a] = append(ix.m[a], b)
				return nil
			})
			if err != nil {
				return err
			}
		}
		rep = store.Audit(gr, recs, &idx)
		for _, p := range layout {
			rep.AddIndexMismatch("%s", p)
		}
		for _, c := range []struct {
			key  string
			want int
		}{{countSources, rep.Sources}, {countEntities, rep.Entities}, {countEdges, rep.Edges}} {
			if got := getInt(g.meta, c.key); got != int64(c.want) {
				rep.AddIndexMismatch("counter %q is %d, the graph has %d", c.key, got, c.want)
			}
		}
		return nil
	})
	if err != nil {
		return store.AuditReport{}, fmt.Errorf("auditing the graph of %q: %w", tenant, err)
	}
	return rep, nil
}

// GraphTenants lists the tenants with graph data, sorted.
func (s *Store) GraphTenants(ctx context.Context) ([]string, error) {
	var out []string
	err := s.view(ctx, func(tx *bolt.Tx) error {
		out = tenantNames(tx, bucketGraph)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing graph tenants: %w", err)
	}
	return out, nil
}

// readGraph runs fn on the tenant's graph in a read transaction; a tenant
// without a graph reads as empty (fn is not called).
func (s *Store) readGraph(ctx context.Context, tenant string, fn func(*graphBuckets) error) error {
	if err := store.ValidateTenant(tenant); err != nil {
		return err
	}
	return s.view(ctx, func(tx *bolt.Tx) error {
		g, err := openGraph(tx, tenant, false)
		if err != nil || g == nil {
			return err
		}
		return fn(g)
	})
}

func unmarshal(k, v []byte, dst any) error {
	if err := store.DecodeValue(v, dst); err != nil {
		return fmt.Errorf("decoding %q: %w", k, err)
	}
	return nil
}
