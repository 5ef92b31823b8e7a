package reporter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"time"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// loadIndex reads what the reports of cs are written from: their members,
// the edges leaving them and the far ends of those edges. When the members
// are more than half the graph, one snapshot is cheaper.
func (w *Worker) loadIndex(ctx context.Context, tenant string, cs []store.Community) (*index, error) {
	members := map[string]bool{}
	for _, c := range cs {
		for _, m := range c.Members {
			members[m] = true
		}
	}
	if len(members) == 0 {
		return newIndex(store.Graph{}), nil
	}
	stats, err := w.st.Stats(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("reading graph counts: %w", err)
	}
	if 2*len(members) > stats.Entities {
		g, err := w.st.Snapshot(ctx, tenant)
		if err != nil {
			return nil, fmt.Errorf("reading graph: %w", err)
		}
		return newIndex(g), nil
	}
	ids := make([]string, 0, len(members))
	for m := range members {
		ids = append(ids, m)
	}
	slices.Sort(ids)
	ents, err := w.st.Entities(ctx, tenant, ids)
	if err != nil {
		return nil, fmt.Errorf("reading %d members: %w", len(ids), err)
	}
	ix := &index{ents: ents, adj: map[string][]store.Edge{}, edges: map[string]store.Edge{}}
	var far []string
	for _, id := range ids {
		es, err := w.st.Edges(ctx, tenant, id, store.Out)
		if err != nil {
			return nil, fmt.Errorf("reading the edges of %s: %w", id, err)
		}
		for _, e := range es {
			ix.edges[e.ID] = e
			ix.adj[e.Source] = append(ix.adj[e.Source], e)
			if e.Target != e.Source {
				ix.adj[e.Target] = append(ix.adj[e.Target], e)
			}
			if !members[e.Target] {
				far = append(far, e.Target)
			}
		}
	}
	slices.Sort(far)
	far = slices.Compact(far)
	fe, err := w.st.Entities(ctx, tenant, far)
	if err != nil {
		return nil, fmt.Errorf("reading %d edge targets: %w", len(far), err)
	}
	for id, e := range fe {
		ix.ents[id] = e
	}
	return ix, nil
}

// writerName names the configured writer, part of every input hash: a
// report written by another writer is written again.
func (w *Worker) writerName() string {
	if w.cfg.LLM != nil {
		return w.cfg.LLM.Name()
	}
	return "extractive"
}

// inputHash fingerprints what a report of c is written from: the writer,
// the members (names, types, each document's name and description), the
// edges leaving them (each document's description and weight) and the
// names their far ends get from each document. Versions and text units are
// left out: an edit that changes neither statement nor name keeps the hash.
func (w *Worker) inputHash(ix *index, c store.Community) string {
	return w.inputHashOf(ix, c, ix.context(c))
}

// inputHashOf is inputHash of c, whose context in ix is x.
func (w *Worker) inputHashOf(ix *index, c store.Community, x *Context) string {
	h := sha256.New()
	// Each field is appended to one buffer and written at once: the same
	// bytes as writing its parts one by one, without a conversion (and
	// an allocation) per part.
	var buf []byte
	field := func(h hash.Hash, parts ...string) {
		buf = appendField(buf[:0], parts...)
		h.Write(buf)
	}
	// An entity's fields are the same bytes in every community naming it
	// with that tag (a hub is the far end of most communities' edges, and
	// its fields are a fragment per document): they are made once per
	// index, then written at once.
	entity := func(tag, id string) {
		h.Write(ix.entityFields(tag, id))
	}
	field(h, "writer", w.writerName())
	in := make(map[string]bool, len(c.Members))
	for _, m := range c.Members {
		in[m] = true
		entity("m", m)
	}
	var far []string
	for _, e := range x.Edges {
		field(h, "e", e.ID)
		for _, s := range e.Supports {
			field(h, "s", s.DocID, s.Description, strconv.FormatFloat(s.Weight, 'g', -1, 64))
		}
		if !in[e.Target] {
			far = append(far, e.Target)
		}
	}
	slices.Sort(far)
	for _, id := range slices.Compact(far) {
		entity("t", id)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// appendField appends one field of an input hash: each part as its
// length, a colon and the part, then a newline.
func appendField(buf []byte, parts ...string) []byte {
	for _, p := range parts {
		buf = strconv.AppendInt(buf, int64(len(p)), 10)
		buf = append(buf, ':')
		buf = append(buf, p...)
	}
	return append(buf, '\n')
}

// entityFields returns the fields an input hash holds of the entity id
// under tag: its id, name and type, then each fragment's document, name,
// name rank and description; or the id marked absent. They are made once
// per index and tag (see inputHash).
func (ix *index) entityFields(tag, id string) []byte {
	k := entityFieldsKey{tag, id}
	ix.mu.Lock()
	b, ok := ix.fields[k]
	ix.mu.Unlock()
	if ok {
		return b
	}
	if e, ok := ix.ents[id]; !ok {
		b = appendField(b, tag, id, "absent")
	} else {
		b = appendField(b, tag, e.ID, e.Name, e.Type)
		for _, f := range e.Sources {
			b = appendField(b, "f", f.DocID, f.Name, strconv.Itoa(f.NameRank), f.Description)
		}
	}
	ix.mu.Lock()
	if ix.fields == nil {
		ix.fields = map[entityFieldsKey][]byte{}
	}
	ix.fields[k] = b
	ix.mu.Unlock()
	return b
}

// entityFieldsKey names an entity's fields in index.fields.
type entityFieldsKey struct{ tag, id string }

// restamp moves an unchanged report to the current versions: its sources
// are the context's, each finding's citations are recomputed from the
// supports of the edges it cites.
func (ix *index) restamp(old store.Report, x *Context) store.Report {
	r := old
	r.Sources = x.Sources()
	r.Findings = make([]store.Finding, len(old.Findings))
	for i, f := range old.Findings {
		var cites []provenance.SourceRef
		for _, id := range f.Edges {
			if e, ok := ix.edges[id]; ok {
				cites = append(cites, citations(e.Supports)...)
			}
		}
		f.Citations = dedupRefs(cites)
		r.Findings[i] = f
	}
	r.UpdatedAt = time.Now().UTC()
	return r
}

// sameCitations reports whether two finding lists cite the same.
func sameCitations(a, b []store.Finding) bool {
	return slices.EqualFunc(a, b, func(x, y store.Finding) bool { return slices.Equal(x.Citations, y.Citations) })
}
