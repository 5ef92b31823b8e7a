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
	h := sha256.New()
	// Each field is appended to one buffer and written at once: the same
	// bytes as writing its parts one by one, without a conversion (and
	// an allocation) per part.
	var buf []byte
	field := func(h hash.Hash, parts ...string) {
		buf = buf[:0]
		for _, p := range parts {
			buf = strconv.AppendInt(buf, int64(len(p)), 10)
			buf = append(buf, ':')
			buf = append(buf, p...)
		}
		buf = append(buf, '\n')
		h.Write(buf)
	}
	entity := func(tag, id string) {
		e, ok := ix.ents[id]
		if !ok {
			field(h, tag, id, "absent")
			return
		}
		field(h, tag, e.ID, e.Name, e.Type)
		for _, f := range e.Sources {
			field(h, "f", f.DocID, f.Name, strconv.Itoa(f.NameRank), f.Description)
		}
	}
	field(h, "writer", w.writerName())
	in := make(map[string]bool, len(c.Members))
	for _, m := range c.Members {
		in[m] = true
		entity("m", m)
	}
	x := ix.context(c)
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

// restamp moves an unchanged report to the current versions: its sources
// are the context's, each finding's citations are recomputed from the
// supports of the edges it cites.
func (ix *index) restamp(old store.Report, c store.Community) store.Report {
	r := old
	r.Sources = ix.context(c).Sources()
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
