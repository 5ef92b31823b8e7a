package store

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
)

// PlanWhole and WholeWrites expose the reference planner to the external
// tests.
var PlanWhole = planWhole

type WholeWrites = wholeWrites

// wholeWrites is what an adapter persists, in one transaction, to carry out a
// planned change: first RemoveEntities and RemoveEdges (with their secondary
// index entries), then PutEntities and PutEdges, then Record. The order
// matters for an entity whose type changed: it is both removed under its old
// type and put under its new one.
type wholeWrites struct {
	Result ApplyResult
	// Record is the document's new record; nil when Result.Outcome is Stale
	// or Duplicate, in which case the adapter writes nothing at all.
	Record *SourceRecord
	// PutEntities are the new or changed entities, sorted by id.
	PutEntities []Entity
	// RemoveEntities are the entities to delete, as they were stored, so
	// adapters can drop their index entries. Sorted by id.
	RemoveEntities []Entity
	// PutEdges are the new or changed edges, sorted by id.
	PutEdges []Edge
	// RemoveEdges are the edges to delete, as they were stored. Sorted by id.
	RemoveEdges []Edge
}

// planWhole is the planner of the layout before heads, kept as the
// reference the head planner (Plan) must agree with: it computes the writes of ch given old, the document's current record
// (nil if none), and the current state of the entities and edges named by
// ch.Reads(old) (ids absent from the maps do not exist). It does not modify
// its arguments.
//
// Semantics, beyond the GraphStore doc comments:
//   - Several contributions of one entity or edge within one document merge
//     into one fragment: text units are unioned (sorted), the first non-empty
//     description wins, the entity name is the one of lowest NameRank (first
//     seen on a tie), and the edge weight is the MAXIMUM of the weights. Max,
//     not sum, because a document that states a relation twice (overlapping
//     chunks, an extractor repeating itself) is no stronger evidence than
//     its strongest statement, and re-chunking must not change weights.
//     Cross-document strength is the number and weights of supports.
//   - The display name is the name of the fragment with the lowest
//     NameRank. On a tie the entity keeps its current name (the first
//     spelling seen); when the fragment carrying the current name is gone,
//     the tied fragment of the lowest doc id wins, so the choice is
//     deterministic.
//   - An entity's type is fixed while any other document supports it; a
//     contribution with another type is an error. An entity supported only
//     by this document may change type: it is removed and re-added.
//   - Entity ids may contain EdgeID's separator, so two edges can have one
//     id. A contribution spelling a stored edge's id with other endpoints
//     or relation is an error while another document supports that edge;
//     when none does, the edge is removed and re-added, like a type change.
//   - A record lists an entity or edge the maps lack (an inconsistent
//     store): there is nothing to retract, and the new record repairs it.
func planWhole(ch Change, old *SourceRecord, entities map[string]Entity, edges map[string]Edge) (wholeWrites, error) {
	if err := ch.Validate(); err != nil {
		return wholeWrites{}, err
	}
	w := wholeWrites{Result: ApplyResult{Outcome: ch.Outcome(old)}}
	if old != nil {
		w.Result.Previous = old.Version
	}
	if w.Result.Outcome != Applied {
		return w, nil
	}

	// Working copies, with this document's previous fragments retracted.
	workEnt := map[string]*Entity{}
	workEdge := map[string]*Edge{}
	entityIDs, edgeIDs := ch.Reads(old)
	for _, id := range entityIDs {
		if e, ok := entities[id]; ok {
			e.Sources = withoutDoc(e.Sources, ch.DocID)
			workEnt[id] = &e
		}
	}
	for _, id := range edgeIDs {
		if e, ok := edges[id]; ok {
			e.Supports = withoutDoc(e.Supports, ch.DocID)
			workEdge[id] = &e
		}
	}

	rec := &SourceRecord{
		DocID:     ch.DocID,
		Version:   ch.Version,
		Deleted:   ch.Delete,
		AppliedAt: ch.Now.UTC().Round(0),
	}
	if !ch.Delete {
		c := ch.Contributions
		rec.Title, rec.DocType = c.Title, c.DocType
		rec.Resolution, rec.Raw = c.Resolution, slices.Clone(c.Raw)
		rec.TextUnits = nilIfEmpty(slices.Clone(c.TextUnits))
		if !c.ReceivedAt.IsZero() {
			rec.ReceivedAt = c.ReceivedAt.UTC().Round(0)
		}
		ents, order := mergeEntities(ch.DocID, ch.Version, c.Entities)
		for _, id := range order {
			m := ents[id]
			e := workEnt[id]
			if e == nil {
				e = &Entity{ID: id, Type: m.typ}
				workEnt[id] = e
			}
			if len(e.Sources) == 0 {
				e.Type = m.typ // nobody else holds it: the type may change
			} else if e.Type != m.typ {
				return wholeWrites{}, fmt.Errorf("%w: entity %q is of type %q, this document says %q",
					ErrInvalid, id, e.Type, m.typ)
			}
			e.Sources = append(e.Sources, m.frag)
		}
		rec.Entities = nilIfEmpty(order)
		eds, edgeOrder := mergeEdges(ch.DocID, ch.Version, c.Edges)
		for _, id := range edgeOrder {
			m := eds[id]
			e := workEdge[id]
			if e == nil {
				e = &Edge{ID: id, Source: m.source, Relation: m.relation, Target: m.target}
				workEdge[id] = e
			} else if len(e.Supports) > 0 && (e.Source != m.source || e.Relation != m.relation || e.Target != m.target) {
				// Entity ids may contain the separator, so two edges can
				// spell one id; merging would keep the other's endpoints.
				return wholeWrites{}, fmt.Errorf("%w: edge %q -%s-> %q has the id of the stored edge %q -%s-> %q",
					ErrInvalid, m.source, m.relation, m.target, e.Source, e.Relation, e.Target)
			} else {
				// Only this document held it, under another spelling:
				// the edge is removed and re-added (see below).
				e.Source, e.Relation, e.Target = m.source, m.relation, m.target
			}
			e.Supports = append(e.Supports, m.frag)
		}
		rec.Edges = nilIfEmpty(edgeOrder)
		slices.Sort(rec.Entities)
		slices.Sort(rec.Edges)
	}
	w.Record = rec

	touched := map[string]bool{}
	for _, id := range sortedKeys(workEnt) {
		e := workEnt[id]
		slices.SortFunc(e.Sources, byDocID)
		before, existed := entities[id]
		alive := len(e.Sources) > 0
		if alive {
			e.Name = displayName(e.Sources)
		}
		switch {
		case existed && !alive:
			w.RemoveEntities = append(w.RemoveEntities, before)
			w.Result.EntitiesRemoved++
			touched[id] = true
		case !existed && alive:
			w.PutEntities = append(w.PutEntities, *e)
			w.Result.EntitiesAdded++
			touched[id] = true
		case existed && alive && before.Type != e.Type:
			w.RemoveEntities = append(w.RemoveEntities, before)
			w.PutEntities = append(w.PutEntities, *e)
			w.Result.EntitiesRemoved++
			w.Result.EntitiesAdded++
			touched[id] = true
		case existed && alive && !reflect.DeepEqual(before, *e):
			w.PutEntities = append(w.PutEntities, *e)
		}
	}
	for _, id := range sortedKeys(workEdge) {
		e := workEdge[id]
		slices.SortFunc(e.Supports, byDocID)
		before, existed := edges[id]
		alive := len(e.Supports) > 0
		switch {
		case existed && !alive:
			w.RemoveEdges = append(w.RemoveEdges, before)
			w.Result.EdgesRemoved++
			touched[before.Source], touched[before.Target] = true, true
		case !existed && alive:
			w.PutEdges = append(w.PutEdges, *e)
			w.Result.EdgesAdded++
			touched[e.Source], touched[e.Target] = true, true
		case existed && alive && (before.Source != e.Source || before.Relation != e.Relation || before.Target != e.Target):
			w.RemoveEdges = append(w.RemoveEdges, before)
			w.PutEdges = append(w.PutEdges, *e)
			w.Result.EdgesRemoved++
			w.Result.EdgesAdded++
			touched[before.Source], touched[before.Target] = true, true
			touched[e.Source], touched[e.Target] = true, true
		case existed && alive && !reflect.DeepEqual(before, *e):
			w.PutEdges = append(w.PutEdges, *e)
		}
	}
	if len(touched) > 0 {
		w.Result.Touched = sortedKeys(touched)
	}
	return w, nil
}

// displayName picks an entity's name from its fragments (sorted by doc id,
// one per document): among the fragments of the lowest NameRank, the
// spelling most documents use wins; on a tie, the spelling of the lowest
// doc id.
func displayName(frags []Fragment) string {
	best := slices.MinFunc(frags, func(a, b Fragment) int { return cmp.Compare(a.NameRank, b.NameRank) }).NameRank
	count := map[string]int{}
	var order []string // spellings by their lowest doc id
	for _, f := range frags {
		if f.NameRank != best {
			continue
		}
		if count[f.Name] == 0 {
			order = append(order, f.Name)
		}
		count[f.Name]++
	}
	name := order[0]
	for _, n := range order[1:] {
		if count[n] > count[name] {
			name = n
		}
	}
	return name
}
