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

// Reads returns the ids of the entities and edges whose heads, and whose
// fragment of ch.DocID, Plan needs: everything old recorded plus
// everything the change contributes, sorted. It returns nothing when
// Outcome already says nothing will change.
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

// State is what Plan reads of a store for a change: the heads of the
// entities and edges ch.Reads names and the changed document's own
// fragments of them (of an edge: the one stored apart, if any; an inline
// one is in its head). Ids absent from a map have no head (or no fragment of
// the document).
type State struct {
	Entities map[string]EntityHead
	Edges    map[string]EdgeHead
	// EntityFragments and EdgeSupports are the document's stored fragments.
	EntityFragments map[string]Fragment
	EdgeSupports    map[string]Fragment
	// Fragments returns every stored fragment of an entity. Plan calls it
	// only when a tie between spellings needs a lowest doc id the head no
	// longer knows (NameVote.First), so an apply does not read the other
	// documents' fragments otherwise. Nil means no such read is possible:
	// Plan then fails on such a tie.
	Fragments func(entityID string) ([]Fragment, error)
}

// Part is one document's fragment of an entity, or support of an edge.
type Part struct {
	ID       string // the entity or edge id
	Fragment Fragment
}

// Writes is what an adapter persists, in one transaction, to carry out a
// planned change, in this order: RemoveEntities and RemoveEdges (with
// their secondary index entries), the document's deleted fragments and
// supports, then PutEntities and PutEdges, the document's put fragments
// and supports, then Record. The order matters for an entity whose type
// changed: its head is both removed under its old type and put under its
// new one. A removed entity or edge has no fragment left but possibly the
// document's, which is then among the deleted ones.
type Writes struct {
	Result ApplyResult
	// Record is the document's new record; nil when Result.Outcome is Stale
	// or Duplicate, in which case the adapter writes nothing at all.
	Record *SourceRecord
	// PutEntities are the new or changed heads, sorted by id.
	PutEntities []EntityHead
	// RemoveEntities are the heads to delete, as they were stored, so
	// adapters can drop their index entries. Sorted by id.
	RemoveEntities []EntityHead
	// PutEdges are the new or changed edge heads, sorted by id.
	PutEdges []EdgeHead
	// RemoveEdges are the edge heads to delete, as they were stored. Sorted
	// by id.
	RemoveEdges []EdgeHead
	// PutFragments and PutSupports are the document's new or changed
	// fragments and supports, sorted by id, each under its id and its
	// Fragment.DocID (the supports of a head that spills are every
	// document's, see EdgeHead.Inline); DeleteFragments and DeleteSupports
	// the ids of the entities and edges whose stored fragment or support of
	// the document goes, sorted.
	PutFragments, PutSupports       []Part
	DeleteFragments, DeleteSupports []string
}

// Plan computes the writes of ch given old, the document's current record
// (nil if none), and st, what the store holds of the entities and edges
// named by ch.Reads(old). It does not modify its arguments.
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
//   - The display name: among the fragments of the lowest NameRank, the
//     spelling most documents use; on a tie, the spelling of the lowest doc
//     id. It depends on the fragments only, never on the name the entity had
//     before, so the graph does not depend on ingest order. The head's
//     tally (EntityHead.Names) holds what this needs.
//   - An entity's type is fixed while any other document supports it; a
//     contribution with another type is an error. An entity supported only
//     by this document may change type: it is removed and re-added.
//   - Entity ids may contain EdgeID's separator, so two edges can have one
//     id. A contribution spelling a stored edge's id with other endpoints
//     or relation is an error while another document supports that edge;
//     when none does, the edge is removed and re-added, like a type change.
//   - A record lists an entity or edge the state lacks (an inconsistent
//     store): there is nothing to retract, and the new record repairs it.
func Plan(ch Change, old *SourceRecord, st State) (Writes, error) {
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

	rec := &SourceRecord{
		DocID:     ch.DocID,
		Version:   ch.Version,
		Deleted:   ch.Delete,
		AppliedAt: ch.Now.UTC().Round(0),
	}
	var (
		ents map[string]*mergedEntity
		eds  map[string]*mergedEdge
	)
	if !ch.Delete {
		c := ch.Contributions
		rec.Title, rec.DocType = c.Title, c.DocType
		rec.Resolution, rec.Raw = c.Resolution, slices.Clone(c.Raw)
		rec.TextUnits = nilIfEmpty(slices.Clone(c.TextUnits))
		if !c.ReceivedAt.IsZero() {
			rec.ReceivedAt = c.ReceivedAt.UTC().Round(0)
		}
		var order, edgeOrder []string
		ents, order = mergeEntities(ch.DocID, ch.Version, c.Entities)
		eds, edgeOrder = mergeEdges(ch.DocID, ch.Version, c.Edges)
		// Conflicts with what other documents hold, in contribution order.
		for _, id := range order {
			h, ok := st.Entities[id]
			if ok && h.Fragments()-own(st.EntityFragments, id) > 0 && h.Type != ents[id].typ {
				return Writes{}, fmt.Errorf("%w: entity %q is of type %q, this document says %q",
					ErrInvalid, id, h.Type, ents[id].typ)
			}
		}
		for _, id := range edgeOrder {
			h, ok := st.Edges[id]
			m := eds[id]
			_, hadOwn := ownSupport(st, id, ch.DocID)
			if ok && h.Supports-b2i(hadOwn) > 0 && (h.Source != m.source || h.Relation != m.relation || h.Target != m.target) {
				// Entity ids may contain the separator, so two edges can
				// spell one id; merging would keep the other's endpoints.
				return Writes{}, fmt.Errorf("%w: edge %q -%s-> %q has the id of the stored edge %q -%s-> %q",
					ErrInvalid, m.source, m.relation, m.target, h.Source, h.Relation, h.Target)
			}
		}
		rec.Entities = nilIfEmpty(order)
		rec.Edges = nilIfEmpty(edgeOrder)
		slices.Sort(rec.Entities)
		slices.Sort(rec.Edges)
	}
	w.Record = rec

	entityIDs, edgeIDs := ch.Reads(old)
	touched := map[string]bool{}
	for _, id := range entityIDs {
		before, existed := st.Entities[id]
		stored, hadOwn := st.EntityFragments[id]
		m := ents[id]
		h, others := EntityHead{ID: id}, 0
		if existed {
			h = before
			h.Names = slices.Clone(before.Names)
			others = max(h.Fragments()-own(st.EntityFragments, id), 0)
		}
		if m != nil && others == 0 {
			h.Type = m.typ // nobody else holds it: the type may change
		}
		// The same rank and spelling again (an edit's usual case) leaves
		// the tally as it is: retracting it first would forget its First.
		if !existed || !hadOwn || m == nil || stored.NameRank != m.frag.NameRank || stored.Name != m.frag.Name {
			if existed && hadOwn {
				h.Names = unvote(h.Names, stored, ch.DocID)
			}
			if m != nil {
				h.Names = vote(h.Names, m.frag)
			}
		}
		alive := h.Fragments() > 0
		if alive {
			var newFrag *Fragment
			if m != nil {
				newFrag = &m.frag
			}
			name, err := pickName(&h, ch.DocID, newFrag, st.Fragments)
			if err != nil {
				return Writes{}, err
			}
			h.Name = name
		}
		switch {
		case m != nil && (!hadOwn || !reflect.DeepEqual(stored, m.frag)):
			w.PutFragments = append(w.PutFragments, Part{ID: id, Fragment: m.frag})
		case m == nil && hadOwn:
			w.DeleteFragments = append(w.DeleteFragments, id)
		}
		switch {
		case existed && !alive:
			w.RemoveEntities = append(w.RemoveEntities, before)
			w.Result.EntitiesRemoved++
			touched[id] = true
		case !existed && alive:
			w.PutEntities = append(w.PutEntities, h)
			w.Result.EntitiesAdded++
			touched[id] = true
		case existed && alive && before.Type != h.Type:
			w.RemoveEntities = append(w.RemoveEntities, before)
			w.PutEntities = append(w.PutEntities, h)
			w.Result.EntitiesRemoved++
			w.Result.EntitiesAdded++
			touched[id] = true
		case existed && alive && !reflect.DeepEqual(before, h):
			w.PutEntities = append(w.PutEntities, h)
		}
	}
	for _, id := range edgeIDs {
		before, existed := st.Edges[id]
		stored, hadOwn := ownSupport(st, id, ch.DocID)
		m := eds[id]
		h := EdgeHead{ID: id}
		if existed {
			h = before
			h.Inline = nil
			h.Supports = max(h.Supports-b2i(hadOwn), 0)
		}
		if m != nil {
			if h.Supports == 0 {
				// Only this document held it, maybe under another
				// spelling: the edge is removed and re-added (see below).
				h.Source, h.Relation, h.Target = m.source, m.relation, m.target
			}
			h.Supports++
		}
		alive := h.Supports > 0
		switch {
		case !h.Spilled:
			inline := withoutDoc(before.Inline, ch.DocID)
			if m != nil {
				inline = append(inline, m.frag)
				slices.SortFunc(inline, byDocID)
			}
			if len(inline) <= MaxInlineSupports {
				h.Inline = nilIfEmpty(inline)
				break
			}
			h.Spilled = true // every support to its own key
			for _, f := range inline {
				w.PutSupports = append(w.PutSupports, Part{ID: id, Fragment: f})
			}
		case m != nil && (!hadOwn || !reflect.DeepEqual(stored, m.frag)):
			w.PutSupports = append(w.PutSupports, Part{ID: id, Fragment: m.frag})
		case m == nil && hadOwn:
			w.DeleteSupports = append(w.DeleteSupports, id)
		}
		switch {
		case existed && !alive:
			w.RemoveEdges = append(w.RemoveEdges, before)
			w.Result.EdgesRemoved++
			touched[before.Source], touched[before.Target] = true, true
		case !existed && alive:
			w.PutEdges = append(w.PutEdges, h)
			w.Result.EdgesAdded++
			touched[h.Source], touched[h.Target] = true, true
		case existed && alive && (before.Source != h.Source || before.Relation != h.Relation || before.Target != h.Target):
			w.RemoveEdges = append(w.RemoveEdges, before)
			w.PutEdges = append(w.PutEdges, h)
			w.Result.EdgesRemoved++
			w.Result.EdgesAdded++
			touched[before.Source], touched[before.Target] = true, true
			touched[h.Source], touched[h.Target] = true, true
		case existed && alive && !reflect.DeepEqual(before, h):
			w.PutEdges = append(w.PutEdges, h)
		}
	}
	if len(touched) > 0 {
		w.Result.Touched = sortedKeys(touched)
	}
	return w, nil
}

// own is 1 when the document has a stored fragment of id, else 0.
func own(frags map[string]Fragment, id string) int {
	_, ok := frags[id]
	return b2i(ok)
}

// ownSupport returns the document's stored support of edge id: inline in
// its head, or stored apart once the head has spilled.
func ownSupport(st State, id, docID string) (Fragment, bool) {
	h, ok := st.Edges[id]
	if !ok || h.Spilled {
		f, ok := st.EdgeSupports[id]
		return f, ok
	}
	i := slices.IndexFunc(h.Inline, func(f Fragment) bool { return f.DocID == docID })
	if i < 0 {
		return Fragment{}, false
	}
	return h.Inline[i], true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func voteIndex(votes []NameVote, rank int, name string) (int, bool) {
	return slices.BinarySearchFunc(votes, NameVote{Rank: rank, Name: name}, func(a, b NameVote) int {
		return cmp.Or(cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.Name, b.Name))
	})
}

// vote adds f to a tally (which it may modify).
func vote(votes []NameVote, f Fragment) []NameVote {
	i, found := voteIndex(votes, f.NameRank, f.Name)
	if !found {
		return slices.Insert(votes, i, NameVote{Rank: f.NameRank, Name: f.Name, Count: 1, First: f.DocID})
	}
	votes[i].Count++
	if votes[i].First != "" {
		votes[i].First = min(votes[i].First, f.DocID)
	}
	return votes
}

// unvote removes docID's fragment f from a tally (which it may modify).
// When f's doc was the lowest of its spelling, the next lowest is not
// known from the tally: First becomes "".
func unvote(votes []NameVote, f Fragment, docID string) []NameVote {
	i, found := voteIndex(votes, f.NameRank, f.Name)
	if !found {
		return votes // an inconsistent head: nothing to retract
	}
	votes[i].Count--
	switch {
	case votes[i].Count <= 0:
		return slices.Delete(votes, i, i+1)
	case votes[i].First == docID:
		votes[i].First = ""
	}
	return votes
}

// pickName returns the display name of a head's tally (see Plan): among
// the votes of the lowest rank, the one with the most fragments, and on a
// tie the one of the lowest doc id. When a tied vote's First is unknown,
// every First of h is recomputed from the stored fragments (docID's
// replaced by newFrag, the document's fragment after the change).
func pickName(h *EntityHead, docID string, newFrag *Fragment, fragments func(string) ([]Fragment, error)) (string, error) {
	var tied []int
	for i, v := range h.Names {
		switch {
		case v.Rank != h.Names[0].Rank: // sorted by rank: the lowest come first
		case len(tied) == 0 || v.Count > h.Names[tied[0]].Count:
			tied = append(tied[:0], i)
		case v.Count == h.Names[tied[0]].Count:
			tied = append(tied, i)
		}
	}
	if len(tied) == 1 {
		return h.Names[tied[0]].Name, nil
	}
	if slices.ContainsFunc(tied, func(i int) bool { return h.Names[i].First == "" }) {
		if fragments == nil {
			return "", fmt.Errorf("entity %q: choosing its name needs its fragments, which cannot be read", h.ID)
		}
		frags, err := fragments(h.ID)
		if err != nil {
			return "", fmt.Errorf("reading the fragments of entity %q: %w", h.ID, err)
		}
		frags = withoutDoc(frags, docID)
		if newFrag != nil {
			frags = append(frags, *newFrag)
		}
		firsts := tally(frags)
		for i := range h.Names {
			if j, ok := voteIndex(firsts, h.Names[i].Rank, h.Names[i].Name); ok {
				h.Names[i].First = firsts[j].First
			}
		}
	}
	best := tied[0]
	for _, i := range tied[1:] {
		if h.Names[i].First < h.Names[best].First {
			best = i
		}
	}
	return h.Names[best].Name, nil
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
