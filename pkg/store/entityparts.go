package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// EntityPart is what a reader of an entity's first fragments needs (a
// vector item's text: its name, type and first descriptions) without the
// fragments of every other document.
type EntityPart struct {
	ID   string
	Type string
	Name string
	// Fragments counts the entity's fragments, one per document.
	Fragments int
	// First holds the entity's first fragments in doc-id order: the
	// fewest whose non-empty descriptions, each counted one byte more (a
	// separator), hold at least the bytes asked for; all of them when
	// they hold fewer.
	First []Fragment
	// Of holds, of the documents asked for, the fragments the entity has.
	Of map[string]Fragment
}

// EntityParts is implemented by graph stores that can read part of an
// entity without decoding each of its fragments (an entity thousands of
// documents name is read whole by Entities). EntityParts returns, for the
// entities among ids that exist, their parts: the first fragments holding
// textBytes bytes of description and the fragments of the documents
// docs[id], all read in one read transaction (one state of the graph).
type EntityParts interface {
	EntityParts(ctx context.Context, tenant string, ids []string, textBytes int, docs map[string][]string) (map[string]EntityPart, error)
}

// PartOf is the part of a whole entity that EntityParts returns.
func PartOf(e Entity, textBytes int, docs []string) EntityPart {
	p := EntityPart{ID: e.ID, Type: e.Type, Name: e.Name, Fragments: len(e.Sources), Of: make(map[string]Fragment, len(docs))}
	held := 0
	for _, f := range e.Sources {
		if held >= textBytes {
			break
		}
		p.First = append(p.First, f)
		if f.Description != "" {
			held += len(f.Description) + 1
		}
	}
	want := make(map[string]bool, len(docs))
	for _, d := range docs {
		want[d] = true
	}
	for _, f := range e.Sources {
		if want[f.DocID] {
			p.Of[f.DocID] = f
		}
	}
	return p
}

// EntityHeads is implemented by graph stores that can list the entities
// of a type by their heads alone: type, display name and the tally of
// their fragments' spellings by name rank (EntityHead.Names), without
// reading any fragment. A reader that needs only names (which spellings a
// catalog gave an entity, say) then costs one value per entity, however
// many documents name it. EntityHeadsByType returns the heads of the
// entities of typ (not empty: ErrInvalid), sorted by id, read in one read
// transaction.
type EntityHeads interface {
	EntityHeadsByType(ctx context.Context, tenant, typ string) ([]EntityHead, error)
}

// SourceIndex is the part of a SourceRecord that says what the document
// contributes: its version, whether it is deleted, and the ids of the
// entities and edges it supports.
type SourceIndex struct {
	Version  int64    `json:"version"`
	Deleted  bool     `json:"deleted,omitempty"`
	Entities []string `json:"entities,omitempty"` // sorted
	Edges    []string `json:"edges,omitempty"`    // sorted
}

// SourceIndexes is implemented by graph stores that can read the
// contribution indexes of many documents' records at once without
// decoding the rest of them (the text units, the stored extraction): a
// reader counting what a set of documents supports costs what their ids
// lists cost. SourceIndexes returns the indexes of the documents among
// ids that have a record (tombstones too), read in one read transaction.
type SourceIndexes interface {
	SourceIndexes(ctx context.Context, tenant string, ids []string) (map[string]SourceIndex, error)
}

// SourceRecords is implemented by graph stores that can read the records
// of many documents at once: one read transaction (one state of the
// graph) and, over a network, a round trip per many documents instead of
// one per document. SourceRecords returns the records of the documents
// among ids that have one (tombstones too).
type SourceRecords interface {
	SourceRecords(ctx context.Context, tenant string, ids []string) (map[string]SourceRecord, error)
}

// HeadsByType returns the heads of the entities of typ in gs, sorted by
// id: through EntityHeads when gs implements it, else from its entities
// read whole (EntitiesByType) and tallied (SplitEntity).
func HeadsByType(ctx context.Context, gs GraphStore, tenant, typ string) ([]EntityHead, error) {
	if hs, ok := gs.(EntityHeads); ok {
		return hs.EntityHeadsByType(ctx, tenant, typ)
	}
	if typ == "" {
		return nil, fmt.Errorf("listing entity heads in %q: %w: no type", tenant, ErrInvalid)
	}
	es, err := gs.EntitiesByType(ctx, tenant, typ)
	if err != nil {
		return nil, err
	}
	out := make([]EntityHead, len(es))
	for i, e := range es {
		out[i], _ = SplitEntity(e)
	}
	return out, nil
}

// IndexesOf returns the contribution indexes of the documents among ids
// that have a record in gs: through SourceIndexes when gs implements it,
// else from their records read one by one (Source).
func IndexesOf(ctx context.Context, gs GraphStore, tenant string, ids []string) (map[string]SourceIndex, error) {
	if si, ok := gs.(SourceIndexes); ok {
		return si.SourceIndexes(ctx, tenant, ids)
	}
	out := make(map[string]SourceIndex, len(ids))
	for _, id := range ids {
		rec, err := gs.Source(ctx, tenant, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[id] = SourceIndex{Version: rec.Version, Deleted: rec.Deleted, Entities: rec.Entities, Edges: rec.Edges}
	}
	return out, nil
}

// EdgesAmong is implemented by graph stores that can read, of an
// entity's edges in one direction, those whose other end is one of some
// entities, without decoding the others (an entity thousands of
// documents name has thousands of edges, which Edges decodes every one
// of). EdgesAmong returns the edges of entityID in dir whose other end
// (the target of an out edge, the source of an in edge) is among others
// (sorted), sorted by id, read in one read transaction: what Edges
// returns of them.
type EdgesAmong interface {
	EdgesAmong(ctx context.Context, tenant, entityID string, dir Direction, others []string) ([]Edge, error)
}

// FarEnd is the other end of e seen from an entity's edges in dir: the
// target of an out edge, the source of an in edge.
func FarEnd(e Edge, dir Direction) string {
	if dir == In {
		return e.Source
	}
	return e.Target
}

// MayEndAmong reports whether the edge with id, one of entityID's edges
// in dir, may have its other end among others (sorted): false only when
// it cannot, whatever its relation and the ends' spellings (an edge id is
// source|relation|target, and ids and relations may hold '|'). A reader
// of an adjacency index by edge id decodes only the edges it keeps and
// then checks their ends (FarEnd).
func MayEndAmong(id, entityID string, dir Direction, others []string) bool {
	var rest string
	var ok bool
	if dir == In {
		rest, ok = strings.CutSuffix(id, "|"+entityID)
	} else {
		rest, ok = strings.CutPrefix(id, entityID+"|")
	}
	if !ok {
		return true // not as an adjacency index names it: decode and check
	}
	// Out: rest is relation|target, the target after one of its '|';
	// In: rest is source|relation, the source before one of them.
	for i := range len(rest) {
		if rest[i] != '|' {
			continue
		}
		far := rest[i+1:]
		if dir == In {
			far = rest[:i]
		}
		if _, found := slices.BinarySearch(others, far); found {
			return true
		}
	}
	return false
}
