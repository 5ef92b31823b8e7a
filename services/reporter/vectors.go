package reporter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/vector"
)

// The vector index holds three kinds of items, written here:
//
//   - text units (id "<doc>#<unit>"), one source: the document at its
//     applied version, with the document's current ACL;
//   - entity descriptions (id = entity id), one source per document with a
//     fragment of the entity;
//   - reports (id = report id), one source per document the report was
//     built from.
//
// A graph change of document D rewrites D's items from the graph store:
// DeleteByDoc(D) (which removes every item with D among its sources, of
// every kind) and then upserts D's text units, the entities D contributes
// or touched, and the current reports built on D at its applied version.
// Reading the stores under vmu makes the outcome independent of the order
// in which graph, ACL and community events arrive: whichever handler runs
// last writes what the stores hold then. ACLs always come from the
// registry, never from the event, for the same reason.

// unitItemID is the vector item id of a document's text unit.
func unitItemID(docID, unit string) string { return docID + "#" + unit }

// vectorsOn reports whether vector indexing is configured.
func (w *Worker) vectorsOn() bool { return w.cfg.Vectors != nil }

// handleGraph re-indexes one document after the resolver applied (or
// deleted) it.
func (w *Worker) handleGraph(ctx context.Context, _ *stream.Message, ev *events.GraphChanged) error {
	w.vmu.Lock()
	defer w.vmu.Unlock()
	return w.reindex(ctx, ev.Tenant, []string{ev.DocID}, [][]string{ev.Touched, ev.Contributed})
}

// HandleVectors is the vector consumer's batch handler: the graph changes
// of a batch are re-indexed together, per tenant (see reindex), and each
// ACL change on its own. Graph changes are state-based (the stores are read,
// not the events), so re-indexing several documents at once, or a document
// named twice once, writes what handling them one by one would have
// written last; what it saves is the per-document repetition: an entity
// touched by every document of the batch (a hub) is read, and its item
// rebuilt and written, once per batch instead of once per document.
func (w *Worker) HandleVectors(ctx context.Context, ms []*stream.Message) []error {
	errs := make([]error, len(ms))
	type group struct {
		docs  []string
		extra [][]string
		at    []int
	}
	groups := map[string]*group{}
	var tenants []string
	for i, m := range ms {
		switch {
		case m.Kind == events.KindGraphChanged && w.vectorsOn():
			ev, err := stream.DecodeTyped[events.GraphChanged](m)
			if err != nil {
				errs[i] = err
				continue
			}
			g := groups[ev.Tenant]
			if g == nil {
				g = &group{}
				groups[ev.Tenant] = g
				tenants = append(tenants, ev.Tenant)
			}
			g.docs = append(g.docs, ev.DocID)
			g.extra = append(g.extra, ev.Touched, ev.Contributed)
			g.at = append(g.at, i)
		default:
			errs[i] = w.handle(ctx, m)
		}
	}
	for _, t := range tenants {
		g := groups[t]
		w.vmu.Lock()
		err := w.reindex(ctx, t, g.docs, g.extra)
		w.vmu.Unlock()
		for _, i := range g.at {
			errs[i] = err
		}
	}
	return errs
}

// reindex rewrites the vector items of docs (one tenant) from the graph
// store: DeleteByDoc of each document, then one upsert of their text units,
// the entities they contribute now, contributed before or touched (extra:
// the events' Touched and Contributed lists) and the current reports built
// on them at their applied versions. The caller holds vmu.
func (w *Worker) reindex(ctx context.Context, tenant string, docs []string, extra [][]string) error {
	docs = slices.Clone(docs)
	slices.Sort(docs)
	docs = slices.Compact(docs)
	recs := make([]store.SourceRecord, len(docs))
	var entityIDs []string
	for i, doc := range docs {
		rec, err := w.st.Source(ctx, tenant, doc)
		if errors.Is(err, store.ErrNotFound) {
			rec, err = store.SourceRecord{DocID: doc, Deleted: true}, nil
		}
		if err != nil {
			return fmt.Errorf("reading source %s: %w", doc, err)
		}
		recs[i] = rec
		// Entities D contributes now, those it contributed before (they
		// lost D's fragment but may live on through other documents:
		// DeleteByDoc below removes their items, so they are written
		// again) and those it touched.
		entityIDs = append(entityIDs, rec.Entities...)
	}
	for _, ids := range extra {
		entityIDs = append(entityIDs, ids...)
	}
	slices.Sort(entityIDs)
	entityIDs = slices.Compact(entityIDs)
	ents, err := w.st.Entities(ctx, tenant, entityIDs)
	if err != nil {
		return fmt.Errorf("reading entities of %d documents: %w", len(docs), err)
	}
	var reports []store.Report
	seenReport := map[string]bool{}
	for _, rec := range recs {
		if rec.Deleted {
			continue
		}
		all, err := w.st.ReportsBySource(ctx, tenant, rec.DocID)
		if err != nil {
			return fmt.Errorf("reading the reports citing %s: %w", rec.DocID, err)
		}
		for _, r := range all {
			if !seenReport[r.ID] && slices.Contains(r.Sources, provenance.SourceRef{DocID: rec.DocID, Version: rec.Version}) {
				seenReport[r.ID] = true
				reports = append(reports, r)
			}
		}
	}
	// Every document whose ACL the items carry, in one registry call.
	aclDocs := slices.Clone(docs)
	for _, e := range ents {
		for _, f := range e.Sources {
			aclDocs = append(aclDocs, f.DocID)
		}
	}
	for _, r := range reports {
		for _, s := range r.Sources {
			aclDocs = append(aclDocs, s.DocID)
		}
	}
	acls, err := w.acls(ctx, tenant, aclDocs)
	if err != nil {
		return err
	}

	var items []vector.Item
	for _, rec := range recs {
		if rec.Deleted {
			continue
		}
		for _, tu := range rec.TextUnits {
			if strings.TrimSpace(tu.Text) == "" {
				continue
			}
			items = append(items, vector.Item{ID: unitItemID(rec.DocID, tu.ID), Kind: vector.KindTextUnit, Text: tu.Text,
				Sources:  []vector.Source{{SourceRef: provenance.SourceRef{DocID: rec.DocID, Version: rec.Version, TextUnit: tu.ID}, ACL: acls[rec.DocID]}},
				Metadata: map[string]string{"doc_id": rec.DocID, "text_unit": tu.ID, "title": rec.Title}})
		}
	}
	for _, id := range entityIDs {
		if e, ok := ents[id]; ok {
			if it, ok := w.entityItem(e, acls); ok {
				items = append(items, it)
			}
		}
	}
	for _, r := range reports {
		if it, ok := reportItem(r, acls); ok {
			items = append(items, it)
		}
	}
	if err := w.embedItems(ctx, items); err != nil {
		return err
	}
	for _, doc := range docs {
		if err := w.cfg.Vectors.DeleteByDoc(ctx, tenant, doc); err != nil {
			return fmt.Errorf("removing the vector items of %s: %w", doc, err)
		}
		w.vectorOps.WithLabelValues("delete_doc").Inc()
	}
	if err := w.upsert(ctx, tenant, items); err != nil {
		return err
	}
	w.log.Debug("vector items rewritten", "tenant", tenant, "docs", len(docs), "items", len(items))
	return nil
}

// handleACL copies a document's current ACL (from the registry, whatever
// the event says: events may arrive out of order) into its vector items.
// The query side re-admits every hit, so this only keeps the pre-filter
// close to the registry.
func (w *Worker) handleACL(ctx context.Context, _ *stream.Message, ev *events.DocACL) error {
	w.vmu.Lock()
	defer w.vmu.Unlock()
	acls, err := w.acls(ctx, ev.Tenant, []string{ev.DocID})
	if err != nil {
		return err
	}
	if err := w.cfg.Vectors.UpdateACL(ctx, ev.Tenant, ev.DocID, acls[ev.DocID]); err != nil {
		return fmt.Errorf("updating the vector ACL of %s: %w", ev.DocID, err)
	}
	w.vectorOps.WithLabelValues("update_acl").Inc()
	return nil
}

// indexReports writes the report items of written reports and removes
// those of removed ones.
func (w *Worker) indexReports(ctx context.Context, tenant string, written []store.Report, removed []string) error {
	w.vmu.Lock()
	defer w.vmu.Unlock()
	var docs []string
	for _, r := range written {
		for _, s := range r.Sources {
			docs = append(docs, s.DocID)
		}
	}
	acls, err := w.acls(ctx, tenant, docs)
	if err != nil {
		return err
	}
	var items []vector.Item
	var drop []string
	for _, r := range written {
		if it, ok := reportItem(r, acls); ok {
			items = append(items, it)
		} else {
			drop = append(drop, r.ID)
		}
	}
	drop = append(drop, removed...)
	if err := w.embedItems(ctx, items); err != nil {
		return err
	}
	if err := w.upsert(ctx, tenant, items); err != nil {
		return err
	}
	if len(drop) > 0 {
		if err := w.cfg.Vectors.Delete(ctx, tenant, drop); err != nil {
			return fmt.Errorf("removing report vectors: %w", err)
		}
		w.vectorOps.WithLabelValues("delete").Add(float64(len(drop)))
	}
	return nil
}

// acls returns the registry's current ACL of each document. A document the
// registry does not know, or has deleted, gets the empty ACL, which admits
// nobody: its items stay unreadable until they are removed.
func (w *Worker) acls(ctx context.Context, tenant string, docs []string) (map[string]provenance.ACL, error) {
	slices.Sort(docs)
	docs = slices.Compact(docs)
	states, err := w.st.Sources(ctx, tenant, docs)
	if err != nil {
		return nil, fmt.Errorf("reading source ACLs: %w", err)
	}
	out := make(map[string]provenance.ACL, len(docs))
	for _, d := range docs {
		if s, ok := states[d]; ok && !s.Deleted {
			out[d] = s.ACL
		} else {
			out[d] = provenance.ACL{}
		}
	}
	return out, nil
}

// entityItem is an entity's merged description: its name and type and
// each fragment's description, bounded by MaxEntityText bytes.
func (w *Worker) entityItem(e store.Entity, acls map[string]provenance.ACL) (vector.Item, bool) {
	if len(e.Sources) == 0 || len(e.Sources) > vector.MaxSources {
		return vector.Item{}, false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s).", e.Name, strings.ReplaceAll(e.Type, "_", " "))
	srcs := make([]vector.Source, 0, len(e.Sources))
	seen := map[string]bool{}
	for _, f := range e.Sources {
		if seen[f.DocID] {
			return vector.Item{}, false // one version per document, or nothing
		}
		seen[f.DocID] = true
		srcs = append(srcs, vector.Source{SourceRef: provenance.SourceRef{DocID: f.DocID, Version: f.Version}, ACL: acls[f.DocID]})
		if f.Description != "" && b.Len() < w.cfg.MaxEntityText {
			b.WriteString(" " + f.Description)
		}
	}
	text := b.String()
	if len(text) > w.cfg.MaxEntityText {
		text = strings.ToValidUTF8(text[:w.cfg.MaxEntityText], "")
	}
	return vector.Item{ID: e.ID, Kind: vector.KindEntity, Text: text, Sources: srcs,
		Metadata: map[string]string{"type": e.Type, "name": e.Name}}, true
}

// ReportText is what a report's vector embeds: title, summary and the
// findings' summaries.
func ReportText(r store.Report) string {
	text := r.Title + ": " + r.Summary
	for _, f := range r.Findings {
		text += " " + f.Summary
	}
	return text
}

// reportItem is a report's vector item; ok is false when the report names
// one document at two versions (it can never be admitted) or none.
func reportItem(r store.Report, acls map[string]provenance.ACL) (vector.Item, bool) {
	if len(r.Sources) == 0 || len(r.Sources) > vector.MaxSources {
		return vector.Item{}, false
	}
	srcs := make([]vector.Source, 0, len(r.Sources))
	seen := map[string]bool{}
	for _, s := range r.Sources {
		if seen[s.DocID] {
			return vector.Item{}, false
		}
		seen[s.DocID] = true
		srcs = append(srcs, vector.Source{SourceRef: provenance.SourceRef{DocID: s.DocID, Version: s.Version}, ACL: acls[s.DocID]})
	}
	return vector.Item{ID: r.ID, Kind: vector.KindReport, Text: ReportText(r), Sources: srcs,
		Metadata: map[string]string{"community": r.Community, "level": fmt.Sprint(r.Level), "writer": r.Writer}}, true
}

// embedItems fills in the items' vectors, EmbedBatch texts per call.
func (w *Worker) embedItems(ctx context.Context, items []vector.Item) error {
	for start := 0; start < len(items); start += w.cfg.EmbedBatch {
		end := min(start+w.cfg.EmbedBatch, len(items))
		texts := make([]string, end-start)
		for i := range texts {
			texts[i] = items[start+i].Text
		}
		vecs, err := w.cfg.Embedder.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("embedding %d texts: %w", len(texts), err)
		}
		if len(vecs) != len(texts) {
			return fmt.Errorf("embedding %d texts: the embedder returned %d vectors", len(texts), len(vecs))
		}
		for i, v := range vecs {
			items[start+i].Vector = v
		}
		w.embedded.Add(float64(len(texts)))
	}
	return nil
}

// upsert writes items, counting them by kind.
func (w *Worker) upsert(ctx context.Context, tenant string, items []vector.Item) error {
	if len(items) == 0 {
		return nil
	}
	if err := w.cfg.Vectors.Upsert(ctx, tenant, items); err != nil {
		return fmt.Errorf("writing %d vector items: %w", len(items), err)
	}
	for _, it := range items {
		w.vectorOps.WithLabelValues("upsert_" + string(it.Kind)).Inc()
	}
	return nil
}
