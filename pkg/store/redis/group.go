package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/store"
)

// A batch applies in groups: consecutive changes of distinct documents,
// each group one optimistic transaction, so a batch of small documents
// costs three round trips per group instead of three per document (the
// records watched and read; the heads or their stripes watched and the
// heads and the documents' fields read; MULTI…EXEC). The changes of a
// group are planned one after the other, each on what the group's read
// returned as the changes before it in the group left it (groupState),
// and their writes queued in order in one MULTI, so the group writes what
// the changes applied one at a time would. A document changed twice in a
// batch starts a new group: its second change must read its own record as
// the first left it.
const (
	// groupMax bounds the changes of one group.
	groupMax = 64
	// groupReadsMax bounds the entities and edges one group's changes
	// contribute (and, for documents already applied, about as many
	// retract): a larger change is a group of its own.
	groupReadsMax = 4096
	// groupAttempts is how many times a group runs before its changes are
	// applied one transaction each (those retry up to maxAttempts): a
	// group watches more keys than one change, so a busy graph aborts it
	// more often.
	groupAttempts = 3
)

// errGroupConflict is a group aborted groupAttempts times.
var errGroupConflict = errors.New("group transaction aborted by concurrent writers")

// ApplyBatch applies changes in order, in groups of one optimistic
// transaction each (see above and store.GraphStore).
func (s *Store) ApplyBatch(ctx context.Context, tenant string, changes []store.Change) ([]store.ApplyResult, []error, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, nil, fmt.Errorf("applying a batch of %d changes: %w", len(changes), err)
	}
	results := make([]store.ApplyResult, len(changes))
	errs := make([]error, len(changes))
	wrap := func(ch store.Change, err error) error {
		return fmt.Errorf("applying source %q version %d in %q: %w", ch.DocID, ch.Version, tenant, err)
	}
	var group []int
	docs := map[string]bool{}
	reads := 0
	flush := func() error {
		defer func() { group, reads = group[:0], 0; clear(docs) }()
		if len(group) > 1 {
			chs := make([]store.Change, len(group))
			for j, i := range group {
				chs[j] = changes[i]
			}
			res, cerrs, err := s.applyGroup(ctx, tenant, chs)
			switch {
			case err == nil:
				for j, i := range group {
					results[i] = res[j]
					if cerrs[j] != nil {
						errs[i] = wrap(changes[i], cerrs[j])
					}
				}
				return nil
			case !errors.Is(err, errGroupConflict):
				return wrap(changes[group[0]], err)
			}
			// Nothing was written: one transaction each.
		}
		for _, i := range group {
			res, err := s.change(ctx, tenant, changes[i])
			switch {
			case errors.Is(err, store.ErrInvalid):
				errs[i] = wrap(changes[i], err)
			case err != nil:
				return wrap(changes[i], err)
			default:
				results[i] = res
			}
		}
		return nil
	}
	for i, ch := range changes {
		if err := ch.Validate(); err != nil {
			errs[i] = wrap(ch, err)
			continue
		}
		n := len(ch.Contributions.Entities) + len(ch.Contributions.Edges)
		if docs[ch.DocID] || len(group) == groupMax || (len(group) > 0 && reads+n > groupReadsMax) {
			if err := flush(); err != nil {
				return nil, nil, err
			}
		}
		group = append(group, i)
		docs[ch.DocID] = true
		reads += n
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	return results, errs, nil
}

// part names one document's fragment of an entity or support of an edge.
type part struct{ id, doc string }

// applyGroup applies chs, valid changes of distinct documents, in one
// optimistic transaction, as s.change would one after the other. errs
// holds the changes Plan refused (store.ErrInvalid), which write nothing;
// errGroupConflict means nothing was written.
func (s *Store) applyGroup(ctx context.Context, tenant string, chs []store.Change) (results []store.ApplyResult, errs []error, err error) {
	k := s.tenantKeys(tenant)
	if err := s.ensureLayout(ctx); err != nil {
		return nil, nil, err
	}
	if err := s.noteGraphTenant(ctx, tenant); err != nil {
		return nil, nil, err
	}
	attempt := 0
	run := func(tx *goredis.Tx) (err error) {
		attempt++
		results, errs = make([]store.ApplyResult, len(chs)), make([]error, len(chs))
		executed := false
		defer func() { unwatch(ctx, tx, executed, &err) }()
		olds, err := watchRecords(ctx, tx, k, chs)
		if err != nil {
			return err
		}
		// What each change reads, and the union: each id with the
		// documents whose fragment or support of it to read.
		reads := make([][2][]string, len(chs))
		var spec readSpec
		entities, edges := readers{at: map[string]int{}}, readers{at: map[string]int{}}
		for i, ch := range chs {
			if ch.Outcome(olds[i]) != store.Applied {
				continue
			}
			entityIDs, edgeIDs := ch.Reads(olds[i])
			reads[i] = [2][]string{entityIDs, edgeIDs}
			entities.add(entityIDs, ch.DocID)
			edges.add(edgeIDs, ch.DocID)
		}
		spec.entityIDs, spec.entityDocs, spec.edgeIDs, spec.edgeDocs = entities.ids, entities.docs, edges.ids, edges.docs
		spec.entityKeys, spec.edgeKeys = k.prefixed(k.entity, spec.entityIDs), k.prefixed(k.edge, spec.edgeIDs)
		spec.watch = k.watchKeys(spec.entityIDs, spec.edgeIDs, s.watchStripes(len(spec.entityIDs)+len(spec.edgeIDs), attempt), s.watchCoarseMin)
		g := groupState{
			read:      store.State{Entities: make(map[string]store.EntityHead, len(spec.entityIDs)), Edges: make(map[string]store.EdgeHead, len(spec.edgeIDs))},
			fragments: map[part]store.Fragment{}, supports: map[part]store.Fragment{},
			entities: map[string]*written[store.EntityHead]{}, edges: map[string]*written[store.EdgeHead]{},
			stored: func(id string) ([]store.Fragment, error) { return fragmentsOf(ctx, tx, k, id) },
		}
		if len(spec.entityIDs)+len(spec.edgeIDs) > 0 {
			err = readState(ctx, tx, k, spec, &g.read,
				func(id, doc string, f store.Fragment) { g.fragments[part{id, doc}] = f },
				func(id, doc string, f store.Fragment) { g.supports[part{id, doc}] = f })
			if err != nil {
				return err
			}
		}
		var cmds []writeCmd
		for i, ch := range chs {
			old := olds[i]
			if o := ch.Outcome(old); o != store.Applied {
				results[i] = store.ApplyResult{Outcome: o, Previous: old.Version}
				continue
			}
			st := g.state(ch.DocID, reads[i][0], reads[i][1])
			ch.Now = s.now()
			w, err := store.Plan(ch, old, st)
			if errors.Is(err, store.ErrInvalid) {
				errs[i] = err
				continue
			}
			if err != nil {
				return err
			}
			results[i] = w.Result
			if w.Record == nil {
				continue
			}
			c, err := k.writes(w, st)
			if err != nil {
				return err
			}
			cmds = append(cmds, c...)
			g.apply(ch.DocID, w)
		}
		if len(cmds) == 0 {
			return nil
		}
		executed = true
		return s.exec(ctx, tx, attempt, cmds)
	}
	for try := 0; ; try++ {
		err := s.client.Watch(ctx, run)
		if !errors.Is(err, goredis.TxFailedErr) {
			return results, errs, err
		}
		if try+1 >= groupAttempts {
			return nil, nil, errGroupConflict
		}
		if err := s.pause(ctx, try); err != nil {
			return nil, nil, err
		}
	}
}

// readers gathers the ids a group's changes read, each once, with the
// documents reading it (docs[i] those of ids[i]).
type readers struct {
	at   map[string]int
	ids  []string
	docs [][]string
}

// add notes that doc reads ids.
func (r *readers) add(ids []string, doc string) {
	for _, id := range ids {
		at, ok := r.at[id]
		if !ok {
			at = len(r.ids)
			r.at[id] = at
			r.ids, r.docs = append(r.ids, id), append(r.docs, nil)
		}
		r.docs[at] = append(r.docs[at], doc)
	}
}

// watchRecords watches the records of the documents of chs and reads
// them, in one round trip (see watchRecord); nil for an absent one.
func watchRecords(ctx context.Context, tx *goredis.Tx, k keys, chs []store.Change) ([]*store.SourceRecord, error) {
	args := make([]any, 0, len(chs)+1)
	args = append(args, "WATCH")
	srcs := make([]string, len(chs))
	for i, ch := range chs {
		srcs[i] = k.src(ch.DocID)
		args = append(args, srcs[i])
	}
	var watched *goredis.Cmd
	var got *goredis.SliceCmd
	_, err := tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
		watched, got = p.Do(ctx, args...), p.MGet(ctx, srcs...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := watched.Err(); err != nil {
		return nil, fmt.Errorf("watching the records: %w", err)
	}
	out := make([]*store.SourceRecord, len(chs))
	err = decodeJSON(got.Val(), func(i int) string { return fmt.Sprintf("%q", srcs[i]) },
		func(i int, rec store.SourceRecord) { out[i] = &rec })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// groupState is what a group's changes planned so far have left of what
// the group read: read holds the heads as read, fragments and supports
// the documents' fields as read; entities and edges what the changes
// planned so far wrote over them.
type groupState struct {
	read                store.State
	fragments, supports map[part]store.Fragment
	entities            map[string]*written[store.EntityHead]
	edges               map[string]*written[store.EdgeHead]
	// stored reads every stored fragment of an entity.
	stored func(id string) ([]store.Fragment, error)
}

// written is what the group's changes planned so far wrote of one entity
// or edge (H its head type): its head (when put is set; nil: removed),
// whether its key was deleted (every stored field with it: reset), and
// the fragments or supports written since, by document (nil: deleted).
type written[H any] struct {
	put   bool
	head  *H
	reset bool
	parts map[string]*store.Fragment
}

// part returns the document's fragment or support as written, and
// whether this says it: a write of it, or the key deleted since.
func (w *written[H]) part(doc string) (*store.Fragment, bool) {
	if w == nil {
		return nil, false
	}
	if f, ok := w.parts[doc]; ok {
		return f, true
	}
	return nil, w.reset
}

func (w *written[H]) setPart(doc string, f *store.Fragment) {
	if w.parts == nil {
		w.parts = map[string]*store.Fragment{}
	}
	w.parts[doc] = f
}

func writtenOf[H any](m map[string]*written[H], id string) *written[H] {
	w, ok := m[id]
	if !ok {
		w = &written[H]{}
		m[id] = w
	}
	return w
}

// state is the store.State of a change of doc reading entityIDs and
// edgeIDs, as the changes planned before it left them.
func (g *groupState) state(doc string, entityIDs, edgeIDs []string) store.State {
	st := store.State{
		Entities: make(map[string]store.EntityHead, len(entityIDs)), Edges: make(map[string]store.EdgeHead, len(edgeIDs)),
		EntityFragments: map[string]store.Fragment{}, EdgeSupports: map[string]store.Fragment{},
		Fragments: g.fragmentsOf,
	}
	overlay(doc, entityIDs, g.entities, g.read.Entities, g.fragments, st.Entities, st.EntityFragments)
	overlay(doc, edgeIDs, g.edges, g.read.Edges, g.supports, st.Edges, st.EdgeSupports)
	return st
}

// overlay fills heads and parts with the heads of ids and doc's fragments
// or supports of them: as written (w) where the group's earlier changes
// wrote them, else as read.
func overlay[H any](doc string, ids []string, w map[string]*written[H], read map[string]H, readParts map[part]store.Fragment,
	heads map[string]H, parts map[string]store.Fragment) {
	for _, id := range ids {
		x := w[id]
		if x != nil && x.put {
			if x.head != nil {
				heads[id] = *x.head
			}
		} else if h, ok := read[id]; ok {
			heads[id] = h
		}
		if f, ok := x.part(doc); ok {
			if f != nil {
				parts[id] = *f
			}
		} else if f, ok := readParts[part{id, doc}]; ok {
			parts[id] = f
		}
	}
}

// fragmentsOf is every fragment of entity id, as the changes planned so
// far left them.
func (g *groupState) fragmentsOf(id string) ([]store.Fragment, error) {
	w := g.entities[id]
	var out []store.Fragment
	if w == nil || !w.reset {
		stored, err := g.stored(id)
		if err != nil {
			return nil, err
		}
		for _, f := range stored {
			if _, ok := w.part(f.DocID); !ok {
				out = append(out, f)
			}
		}
	}
	if w != nil {
		for _, f := range w.parts {
			if f != nil {
				out = append(out, *f)
			}
		}
	}
	return out, nil
}

// apply records the writes of doc's planned change, in the order an
// adapter carries them out (see store.Writes).
func (g *groupState) apply(doc string, w store.Writes) {
	for _, e := range w.RemoveEntities {
		*writtenOf(g.entities, e.ID) = written[store.EntityHead]{put: true, reset: true}
	}
	for _, e := range w.RemoveEdges {
		*writtenOf(g.edges, e.ID) = written[store.EdgeHead]{put: true, reset: true}
	}
	for _, id := range w.DeleteFragments {
		writtenOf(g.entities, id).setPart(doc, nil)
	}
	for _, id := range w.DeleteSupports {
		writtenOf(g.edges, id).setPart(doc, nil)
	}
	for i := range w.PutEntities {
		x := writtenOf(g.entities, w.PutEntities[i].ID)
		x.put, x.head = true, &w.PutEntities[i]
	}
	for i := range w.PutEdges {
		x := writtenOf(g.edges, w.PutEdges[i].ID)
		x.put, x.head = true, &w.PutEdges[i]
	}
	for _, pt := range w.PutFragments {
		f := pt.Fragment
		writtenOf(g.entities, pt.ID).setPart(f.DocID, &f)
	}
	for _, pt := range w.PutSupports {
		f := pt.Fragment
		writtenOf(g.edges, pt.ID).setPart(f.DocID, &f)
	}
}
