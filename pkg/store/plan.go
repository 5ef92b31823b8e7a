package store

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/provenance"
)

// Limits on the identifiers a contribution may carry. They keep every key an
// adapter derives from them well inside what its backend accepts (bbolt keys
// are at most 32 KiB; an edge id holds two entity ids and a relation).
const (
	MaxEntityIDLen = 1024
	MaxTypeLen     = 256
)

// Change is one Apply or Delete of a document, as both adapters hand it to
// Plan. Planning is a pure function of the change and the current state, so
// every adapter gets the same semantics by construction.
type Change struct {
	DocID   string
	Version int64
	// Delete retracts everything the document contributed and leaves a
	// tombstone at Version; Contributions is then ignored.
	Delete        bool
	Contributions Contributions
	// Now is recorded as the new SourceRecord's AppliedAt.
	Now time.Time
}

// Validate checks the change without looking at any state. Every failure
// wraps ErrInvalid.
func (ch Change) Validate() error {
	if err := ValidateDocID(ch.DocID); err != nil {
		return err
	}
	if ch.Version < 1 {
		return fmt.Errorf("%w: version %d must be >= 1", ErrInvalid, ch.Version)
	}
	if ch.Delete {
		return nil
	}
	return ch.Contributions.Validate()
}

// Outcome decides, from the stored record alone, whether the change applies.
// A deletion wins a tie with the content version it deletes, so an edit and
// a deletion carrying the same version converge to the deletion in either
// order.
func (ch Change) Outcome(old *SourceRecord) Outcome {
	switch {
	case old == nil:
		return Applied
	case ch.Version < old.Version:
		return Stale
	case ch.Version > old.Version:
		return Applied
	case old.Deleted && ch.Delete:
		return Duplicate
	case old.Deleted: // content at the version of its own deletion
		return Stale
	case ch.Delete:
		return Applied
	case ch.Contributions.Resolution > old.Resolution:
		return Applied // the same version, resolved again
	default:
		return Duplicate
	}
}

// Reads returns the ids of the entities and edges whose current state Plan
// needs: everything old recorded plus everything the change contributes,
// sorted. It returns nothing when Outcome already says nothing will change.
func (ch Change) Reads(old *SourceRecord) (entityIDs, edgeIDs []string) {
	if ch.Outcome(old) != Applied {
		return nil, nil
	}
	if old != nil {
		entityIDs = append(entityIDs, old.Entities...)
		edgeIDs = append(edgeIDs, old.Edges...)
	}
	if !ch.Delete {
		for _, e := range ch.Contributions.Entities {
			entityIDs = append(entityIDs, e.ID)
		}
		for _, e := range ch.Contributions.Edges {
			edgeIDs = append(edgeIDs, e.ID())
		}
	}
	slices.Sort(entityIDs)
	slices.Sort(edgeIDs)
	return slices.Compact(entityIDs), slices.Compact(edgeIDs)
}

// Writes is what an adapter persists, in one transaction, to carry out a
// planned change: first RemoveEntities and RemoveEdges (with their secondary
// index entries), then PutEntities and PutEdges, then Record. The order
// matters for an entity whose type changed: it is both removed under its old
// type and put under its new one.
type Writes struct {
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

// Plan computes the writes of ch given old, the document's current record
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
func Plan(ch Change, old *SourceRecord, entities map[string]Entity, edges map[string]Edge) (Writes, error) {
	if err := ch.Validate(); err != nil {
		return Writes{}, err
	}
	w := Writes{Result: ApplyResult{Outcome: ch.Outcome(old)}}
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
				return Writes{}, fmt.Errorf("%w: entity %q is of type %q, this document says %q",
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
				return Writes{}, fmt.Errorf("%w: edge %q -%s-> %q has the id of the stored edge %q -%s-> %q",
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

// Validate checks contributions without looking at any state: ids, types,
// names and relations are present and valid UTF-8 within the length limits,
// text unit ids are unique, every text unit a contribution cites is one of
// TextUnits (as events.Extracted requires upstream), every edge endpoint is
// among Entities, and weights are finite. Every failure wraps ErrInvalid.
func (c Contributions) Validate() error {
	units := make(map[string]bool, len(c.TextUnits))
	for i, u := range c.TextUnits {
		if err := checkID(u.ID, MaxEntityIDLen); err != nil {
			return fmt.Errorf("%w: text_units[%d]: id %w", ErrInvalid, i, err)
		}
		if units[u.ID] {
			return fmt.Errorf("%w: text_units[%d]: duplicate id %q", ErrInvalid, i, u.ID)
		}
		units[u.ID] = true
	}
	checkUnits := func(where string, i int, refs []string) error {
		for _, u := range refs {
			if !units[u] {
				return fmt.Errorf("%w: %s[%d]: unknown text unit %q", ErrInvalid, where, i, u)
			}
		}
		return nil
	}
	types := make(map[string]string, len(c.Entities)) // entity id -> type
	for i, e := range c.Entities {
		if err := checkID(e.ID, MaxEntityIDLen); err != nil {
			return fmt.Errorf("%w: entities[%d]: id %w", ErrInvalid, i, err)
		}
		if err := checkID(e.Type, MaxTypeLen); err != nil {
			return fmt.Errorf("%w: entities[%d] %q: type %w", ErrInvalid, i, e.ID, err)
		}
		if strings.TrimSpace(e.Name) == "" {
			return fmt.Errorf("%w: entities[%d] %q: name is empty", ErrInvalid, i, e.ID)
		}
		if t, ok := types[e.ID]; ok && t != e.Type {
			return fmt.Errorf("%w: entities[%d] %q: type %q, an earlier contribution says %q",
				ErrInvalid, i, e.ID, e.Type, t)
		}
		if err := checkUnits("entities", i, e.TextUnits); err != nil {
			return err
		}
		types[e.ID] = e.Type
	}
	// Entity ids may contain EdgeID's separator, so two different edges
	// can spell one id: refuse that rather than merge them.
	spelt := make(map[string]int, len(c.Edges)) // edge id -> first index
	for i, e := range c.Edges {
		if err := checkID(e.Relation, MaxTypeLen); err != nil {
			return fmt.Errorf("%w: edges[%d]: relation %w", ErrInvalid, i, err)
		}
		if j, ok := spelt[e.ID()]; !ok {
			spelt[e.ID()] = i
		} else if f := c.Edges[j]; f.Source != e.Source || f.Relation != e.Relation || f.Target != e.Target {
			return fmt.Errorf("%w: edges[%d] %q -%s-> %q has the id of edges[%d] %q -%s-> %q",
				ErrInvalid, i, e.Source, e.Relation, e.Target, j, f.Source, f.Relation, f.Target)
		}
		for _, end := range []string{e.Source, e.Target} {
			if _, ok := types[end]; !ok {
				return fmt.Errorf("%w: edges[%d] %q: endpoint %q is not among the document's entities",
					ErrInvalid, i, e.ID(), end)
			}
		}
		if math.IsNaN(e.Weight) || math.IsInf(e.Weight, 0) {
			return fmt.Errorf("%w: edges[%d] %q: weight %v is not finite", ErrInvalid, i, e.ID(), e.Weight)
		}
		if err := checkUnits("edges", i, e.TextUnits); err != nil {
			return err
		}
	}
	return nil
}

// ValidateDocID is provenance.ValidateDocID plus valid UTF-8 (ids become
// JSON, which would silently rewrite invalid bytes), wrapped in ErrInvalid.
func ValidateDocID(id string) error {
	if err := provenance.ValidateDocID(id); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: %w: %q is not valid UTF-8", ErrInvalid, provenance.ErrInvalidDocID, id)
	}
	return nil
}

// ValidateTenant is provenance.ValidateTenant wrapped in ErrInvalid, so
// adapters report a bad tenant like any other bad argument.
func ValidateTenant(tenant string) error {
	if err := provenance.ValidateTenant(tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func checkID(s string, maxLen int) error {
	switch {
	case strings.TrimSpace(s) == "":
		return errors.New("is empty")
	case len(s) > maxLen:
		return fmt.Errorf("is %d bytes, more than %d", len(s), maxLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%q is not valid UTF-8", s)
	}
	return nil
}

type mergedEntity struct {
	typ  string
	frag Fragment
}

// mergeEntities folds a document's entity contributions into one fragment
// per id; order is the ids in first-seen order.
func mergeEntities(docID string, version int64, cs []EntityContribution) (map[string]*mergedEntity, []string) {
	out := make(map[string]*mergedEntity, len(cs))
	var order []string
	for _, c := range cs {
		m, ok := out[c.ID]
		if !ok {
			m = &mergedEntity{typ: c.Type, frag: Fragment{DocID: docID, Version: version, Name: c.Name, NameRank: c.NameRank}}
			out[c.ID] = m
			order = append(order, c.ID)
		} else if c.NameRank < m.frag.NameRank {
			m.frag.Name, m.frag.NameRank = c.Name, c.NameRank
		}
		if m.frag.Description == "" {
			m.frag.Description = c.Description
		}
		m.frag.TextUnits = append(m.frag.TextUnits, c.TextUnits...)
	}
	for _, m := range out {
		slices.Sort(m.frag.TextUnits)
		m.frag.TextUnits = nilIfEmpty(slices.Compact(m.frag.TextUnits))
	}
	return out, order
}

type mergedEdge struct {
	source, relation, target string
	frag                     Fragment
}

// mergeEdges folds a document's edge contributions into one fragment per
// edge id (max weight, see Plan); order is the ids in first-seen order.
func mergeEdges(docID string, version int64, cs []EdgeContribution) (map[string]*mergedEdge, []string) {
	out := make(map[string]*mergedEdge, len(cs))
	var order []string
	for _, c := range cs {
		id := c.ID()
		m, ok := out[id]
		if !ok {
			m = &mergedEdge{source: c.Source, relation: c.Relation, target: c.Target,
				frag: Fragment{DocID: docID, Version: version, Weight: c.Weight}}
			out[id] = m
			order = append(order, id)
		}
		m.frag.Weight = max(m.frag.Weight, c.Weight)
		if m.frag.Description == "" {
			m.frag.Description = c.Description
		}
		m.frag.TextUnits = append(m.frag.TextUnits, c.TextUnits...)
	}
	for _, m := range out {
		slices.Sort(m.frag.TextUnits)
		m.frag.TextUnits = nilIfEmpty(slices.Compact(m.frag.TextUnits))
	}
	return out, order
}

// displayName picks an entity's name from its fragments (sorted by doc id,
// one per document): among the fragments of the lowest NameRank, the
// spelling most documents use wins; on a tie, the spelling of the lowest
// doc id. The name depends on the fragments only, never on the name the
// entity had before, so the graph does not depend on ingest order.
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

func withoutDoc(frags []Fragment, docID string) []Fragment {
	out := make([]Fragment, 0, len(frags))
	for _, f := range frags {
		if f.DocID != docID {
			out = append(out, f)
		}
	}
	return out
}

func byDocID(a, b Fragment) int { return cmp.Compare(a.DocID, b.DocID) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// nilIfEmpty keeps planned values identical to their JSON round trip
// (omitempty drops empty slices), so adapters and tests compare equal.
func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}
