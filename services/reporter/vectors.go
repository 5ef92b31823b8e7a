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
	tenant, doc := ev.Tenant, ev.DocID
	rec, err := w.st.Source(ctx, tenant, doc)
	if errors.Is(err, store.ErrNotFound) {
		rec, err = store.SourceRecord{DocID: doc, Deleted: true}, nil
	}
	if err != nil {
		return fmt.Errorf("reading source %s: %w", doc, err)
	}
	// Entities D contributes now, those it contributed before (they lost
	// D's fragment but may live on through other documents: DeleteByDoc
	// below removes their items, so they are written again) and those it
	// touched.
	entityIDs := append(slices.Clone(rec.Entities), ev.Touched...)
	entityIDs = append(entityIDs, ev.Contributed...)
	slices.Sort(entityIDs)
	entityIDs = slices.Compact(entityIDs)
	ents, err := w.st.Entities(ctx, tenant, entityIDs)
	if err != nil {
		return fmt.Errorf("reading entities of %s: %w", doc, err)
	}
	var reports []store.Report
	if !rec.Deleted {
		all, err := w.st.ReportsBySource(ctx, tenant, doc)
		if err != nil {
			return fmt.Errorf("reading the reports citing %s: %w", doc, err)
		}
		for _, r := range all {
			if slices.Contains(r.Sources, provenance.SourceRef{DocID: doc, Version: rec.Version}) {
				reports = append(reports, r)
			}
		}
	}
	// Every document whose ACL the items carry, in one registry call.
	docs := []string{doc}
	for _, e := range ents {
		for _, f := range e.Sources {
			docs = append(docs, f.DocID)
		}
	}
	for _, r := range reports {
		for _, s := range r.Sources {
			docs = append(docs, s.DocID)
		}
	}
	acls, err := w.acls(ctx, tenant, docs)
	if err != nil {
		return err
	}

	var items []vector.Item
	if !rec.Deleted {
		for _, tu := range rec.TextUnits {
			if strings.TrimSpace(tu.Text) == "" {
				continue
			}
			items = append(items, vector.Item{ID: unitItemID(doc, tu.ID), Kind: vector.KindTextUnit, Text: tu.Text,
				Sources:  []vector.Source{{SourceRef: provenance.SourceRef{DocID: doc, Version: rec.Version, TextUnit: tu.ID}, ACL: acls[doc]}},
				Metadata: map[string]string{"doc_id": doc, "text_unit": tu.ID, "title": rec.Title}})
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
	if err := w.cfg.Vectors.DeleteByDoc(ctx, tenant, doc); err != nil {
		return fmt.Errorf("removing the vector items of %s: %w", doc, err)
	}
	w.vectorOps.WithLabelValues("delete_doc").Inc()
	if err := w.upsert(ctx, tenant, items); err != nil {
		return err
	}
	w.log.Debug("vector items rewritten", "tenant", tenant, "doc", doc, "version", rec.Version,
		"deleted", rec.Deleted, "items", len(items))
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
