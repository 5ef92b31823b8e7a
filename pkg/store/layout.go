package store

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Adapters store an entity as its head (EntityHead) and one fragment per
// source document, and an edge as its head (EdgeHead) and one support per
// source document, each under its own key: an apply reads and writes the
// heads of what it touches and its own document's fragments, never the
// other documents' (a hub named by thousands of documents costs what one
// of them contributes). Readers assemble Entity and Edge values from a head
// and its fragments (AssembleEntity, AssembleEdge).

// EntityHead is an entity without its fragments: what an apply needs to
// decide the entity's existence, type and display name.
type EntityHead struct {
	ID   string `json:"-"` // the key
	Type string `json:"t"`
	Name string `json:"n"`
	// Names tallies the fragments by (NameRank, Name), sorted by rank then
	// name: the display name (see Plan) follows from it, and the name
	// index holds its spellings.
	Names []NameVote `json:"v"`
}

// NameVote counts the fragments of one rank and spelling.
type NameVote struct {
	Rank  int    `json:"r,omitempty"`
	Name  string `json:"n"`
	Count int    `json:"c"`
	// First is the lowest doc id among those fragments, the tie-break
	// between spellings; "" when it is not known any more (the fragment
	// that was lowest is gone). Plan finds it again from the fragments
	// only when a tie needs it.
	First string `json:"f,omitempty"`
}

// Fragments returns how many fragments the entity has.
func (h EntityHead) Fragments() int {
	n := 0
	for _, v := range h.Names {
		n += v.Count
	}
	return n
}

// EdgeHead is an edge with its supports while they are few (Inline), or
// without them once they are many (Spilled).
type EdgeHead struct {
	ID       string // the key
	Source   string
	Relation string
	Target   string
	Supports int // how many, inline or not
	// Inline holds the supports, sorted by doc id, while the edge has at
	// most MaxInlineSupports of them: most edges have one, which then
	// costs no key of its own. An apply adding one more moves them all to
	// their (edge, document) keys and sets Spilled; they stay there until
	// the edge goes.
	Inline  []Fragment
	Spilled bool
}

// MaxInlineSupports is how many supports an edge head holds inline (see
// EdgeHead.Inline).
const MaxInlineSupports = 4

// storedEdgeHead is an EdgeHead as stored: short field names, the
// endpoints left out when the id spells them.
type storedEdgeHead struct {
	Source   string         `json:"s,omitempty"`
	Relation string         `json:"r,omitempty"`
	Target   string         `json:"t,omitempty"`
	Supports int            `json:"n"`
	Inline   []storedInline `json:"i,omitempty"`
	Spilled  bool           `json:"x,omitempty"`
}

// storedInline is a support stored inline in its edge's head, with its doc
// id.
type storedInline struct {
	DocID string `json:"k"`
	storedFragment
}

// storedFragment is a fragment as stored under its (entity or edge, doc)
// key: the doc id is in the key, and the field names are short because
// there is one per mention.
type storedFragment struct {
	Version     int64    `json:"v"`
	TextUnits   []string `json:"u,omitempty"`
	Description string   `json:"d,omitempty"`
	Weight      float64  `json:"w,omitempty"`
	Name        string   `json:"n,omitempty"`
	NameRank    int      `json:"r,omitempty"`
}

// EncodeFragment encodes a fragment for its (entity or edge, f.DocID) key.
func EncodeFragment(f Fragment) ([]byte, error) { return EncodeValue(toStored(f), FastCompression) }

// DecodeFragment decodes the fragment of docID that EncodeFragment stored.
func DecodeFragment(docID string, data []byte) (Fragment, error) {
	var s storedFragment
	if err := DecodeValue(data, &s); err != nil {
		return Fragment{}, err
	}
	return s.fragment(docID), nil
}

func toStored(f Fragment) storedFragment {
	return storedFragment{Version: f.Version, TextUnits: f.TextUnits, Description: f.Description,
		Weight: f.Weight, Name: f.Name, NameRank: f.NameRank}
}

func (s storedFragment) fragment(docID string) Fragment {
	return Fragment{DocID: docID, Version: s.Version, TextUnits: nilIfEmpty(s.TextUnits), Description: s.Description,
		Weight: s.Weight, Name: s.Name, NameRank: s.NameRank}
}

// EncodeEntityHead encodes an entity head for its key (the id).
func EncodeEntityHead(h EntityHead) ([]byte, error) { return EncodeValue(h, FastCompression) }

// DecodeEntityHead decodes the head stored under id.
func DecodeEntityHead(id string, data []byte) (EntityHead, error) {
	var h EntityHead
	if err := DecodeValue(data, &h); err != nil {
		return EntityHead{}, err
	}
	h.ID = id
	return h, nil
}

// edgeHeadScratch holds the values edge heads are decoded into, whose
// inline supports are then copied out at their length: the JSON decoder
// gives a slice it fills a capacity of 10 elements (of about 100 bytes),
// where most heads hold one support, and a large apply decodes thousands
// of heads.
var edgeHeadScratch = sync.Pool{New: func() any { return new(storedEdgeHead) }}

// scratchLen is the capacity a scratch slice starts with: one more than
// an edge head holds inline, so the decoder needs no other array.
const scratchLen = MaxInlineSupports + 1

// maxPooledScratch is the largest scratch capacity put back in
// edgeHeadScratch: a value holding many more inline supports than a head
// may (a corrupt or foreign one) grows it, and the pool would keep that
// array alive (as bufPool's maxPooled bounds the buffers it keeps).
const maxPooledScratch = 2 * scratchLen

// EncodeEdgeHead encodes an edge head for its key (the id). The endpoints
// and relation are left out when the id spells them unambiguously (exactly
// two separators), which is nearly always.
func EncodeEdgeHead(h EdgeHead) ([]byte, error) {
	st := storedEdgeHead{Source: h.Source, Relation: h.Relation, Target: h.Target, Supports: h.Supports, Spilled: h.Spilled}
	if s, r, t, ok := splitEdgeID(h.ID); ok && s == h.Source && r == h.Relation && t == h.Target {
		st.Source, st.Relation, st.Target = "", "", ""
	}
	if len(h.Inline) > 0 {
		st.Inline = make([]storedInline, 0, len(h.Inline))
	}
	for _, f := range h.Inline {
		st.Inline = append(st.Inline, storedInline{DocID: f.DocID, storedFragment: toStored(f)})
	}
	return EncodeValue(st, FastCompression)
}

// DecodeEdgeHead decodes the head stored under id.
func DecodeEdgeHead(id string, data []byte) (EdgeHead, error) {
	st := edgeHeadScratch.Get().(*storedEdgeHead)
	defer func() {
		if cap(st.Inline) > maxPooledScratch {
			return // a head with more inline supports than it may hold: not kept alive
		}
		// The inline supports' own slices (text units) were copied out
		// by reference: zeroed, no later decode writes into them.
		clear(st.Inline[:cap(st.Inline)])
		edgeHeadScratch.Put(st)
	}()
	// A field the value lacks must not keep what the previous head had:
	// start from a zero head but for the inline supports' array.
	*st = storedEdgeHead{Inline: st.Inline[:0]}
	if st.Inline == nil {
		st.Inline = make([]storedInline, 0, scratchLen)
	}
	if err := DecodeValue(data, st); err != nil {
		return EdgeHead{}, err
	}
	h := EdgeHead{ID: id, Source: st.Source, Relation: st.Relation, Target: st.Target, Supports: st.Supports, Spilled: st.Spilled}
	if len(st.Inline) > 0 {
		h.Inline = make([]Fragment, 0, len(st.Inline))
	}
	for _, f := range st.Inline {
		h.Inline = append(h.Inline, f.fragment(f.DocID))
	}
	if h.Source == "" && h.Relation == "" && h.Target == "" {
		s, r, t, ok := splitEdgeID(id)
		if !ok {
			return EdgeHead{}, fmt.Errorf("edge head %q has no endpoints and its id does not spell them", id)
		}
		h.Source, h.Relation, h.Target = s, r, t
	}
	return h, nil
}

// splitEdgeID returns the parts of an edge id holding exactly two
// separators; ok is false for any other.
func splitEdgeID(id string) (source, relation, target string, ok bool) {
	source, rest, ok1 := strings.Cut(id, "|")
	relation, target, ok2 := strings.Cut(rest, "|")
	if !ok1 || !ok2 || strings.Contains(target, "|") {
		return "", "", "", false
	}
	return source, relation, target, true
}

// AssembleEntity returns the entity of a head and its fragments, sorted by
// doc id (frags is sorted in place).
func AssembleEntity(h EntityHead, frags []Fragment) Entity {
	slices.SortFunc(frags, byDocID)
	return Entity{ID: h.ID, Type: h.Type, Name: h.Name, Sources: nilIfEmpty(frags)}
}

// AssembleEdge returns the edge of a head and its supports stored apart
// (frags, sorted in place), with the inline ones, sorted by doc id.
func AssembleEdge(h EdgeHead, frags []Fragment) Edge {
	if len(h.Inline) > 0 {
		frags = append(slices.Clone(h.Inline), frags...)
	}
	slices.SortFunc(frags, byDocID)
	return Edge{ID: h.ID, Source: h.Source, Relation: h.Relation, Target: h.Target, Supports: nilIfEmpty(frags)}
}

// SplitEntity returns the head and fragments of a whole entity, as the
// layout before heads stored it; the name is kept as stored.
func SplitEntity(e Entity) (EntityHead, []Fragment) {
	return EntityHead{ID: e.ID, Type: e.Type, Name: e.Name, Names: tally(e.Sources)}, e.Sources
}

// SplitEdge returns the head and the supports stored apart of a whole
// edge: inline while they are few (see EdgeHead.Inline).
func SplitEdge(e Edge) (EdgeHead, []Fragment) {
	h := EdgeHead{ID: e.ID, Source: e.Source, Relation: e.Relation, Target: e.Target, Supports: len(e.Supports)}
	if len(e.Supports) <= MaxInlineSupports {
		h.Inline = nilIfEmpty(slices.Clone(e.Supports))
		return h, nil
	}
	h.Spilled = true
	return h, e.Supports
}

// tally counts fragments by rank and spelling, with each one's lowest doc
// id.
func tally(frags []Fragment) []NameVote {
	var out []NameVote
	for _, f := range frags {
		i, found := slices.BinarySearchFunc(out, f, func(v NameVote, f Fragment) int {
			return cmp.Or(cmp.Compare(v.Rank, f.NameRank), cmp.Compare(v.Name, f.Name))
		})
		if !found {
			out = slices.Insert(out, i, NameVote{Rank: f.NameRank, Name: f.Name, First: f.DocID})
		}
		out[i].Count++
		out[i].First = min(out[i].First, f.DocID)
	}
	return out
}

// HeadNameKeys returns the distinct name keys an entity is indexed under
// (NameKeys of the assembled entity): its display name and every
// fragment's spelling, sorted.
func HeadNameKeys(h EntityHead) []string {
	return nameKeys(h.Name, len(h.Names), func(i int) string { return h.Names[i].Name })
}

// CheckEntityHead compares a stored head with the fragments stored for it
// and describes the first difference ("" when they agree): Audit's check
// of what Plan keeps in heads. A First the head no longer knows is not a
// difference.
func CheckEntityHead(h EntityHead, frags []Fragment) string {
	want := tally(frags)
	if len(want) != len(h.Names) {
		return fmt.Sprintf("entity %q: head tallies %d spellings, its fragments have %d", h.ID, len(h.Names), len(want))
	}
	for i, v := range h.Names {
		w := want[i]
		if v.Rank != w.Rank || v.Name != w.Name || v.Count != w.Count || (v.First != "" && v.First != w.First) {
			return fmt.Sprintf("entity %q: head tallies %+v, its fragments %+v", h.ID, v, w)
		}
	}
	return ""
}

// CheckEdgeHead is CheckEntityHead for an edge and its supports stored
// apart.
func CheckEdgeHead(h EdgeHead, supports []Fragment) string {
	switch {
	case h.Supports != len(h.Inline)+len(supports):
		return fmt.Sprintf("edge %q: head counts %d supports, %d are stored", h.ID, h.Supports, len(h.Inline)+len(supports))
	case !h.Spilled && len(supports) > 0:
		return fmt.Sprintf("edge %q: %d supports stored apart from a head holding them inline", h.ID, len(supports))
	case h.Spilled && len(h.Inline) > 0:
		return fmt.Sprintf("edge %q: %d supports inline in a spilled head", h.ID, len(h.Inline))
	case len(h.Inline) > MaxInlineSupports:
		return fmt.Sprintf("edge %q: %d supports inline, more than %d", h.ID, len(h.Inline), MaxInlineSupports)
	}
	return ""
}
