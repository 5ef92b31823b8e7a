package reporter

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
// DeleteByDoc(D) of its text units and reports (of every kind when D is
// deleted, after the patches below), then an upsert of D's text
// units and of the current reports built on D at its applied version. The
// entities D contributes, contributed before or touched have their items
// patched rather than rewritten: an entity's text holds its first
// fragments only (up to MaxEntityText bytes), so when that text is what
// the item holds already, D's change is D's source alone (its version and
// ACL, put; or removed when D no longer contributes), written with
// PatchSources without embedding the item again or writing the sources of
// the thousands of other documents a hub entity has. What the patch needs
// of an entity (its head, fragment count, first fragments and the batch's
// documents' fragments) comes from store.EntityParts when the store has
// it (the embedded one), so a hub's other fragments are not even decoded;
// from a whole entity otherwise. An item whose text changed, or that is
// missing, is built whole from the store. Either way
// the item is what a rebuild from the stores would write: its other
// sources were written, each from the stores, by the last change of their
// own documents, and ACL changes reach every item through UpdateACL.
// Reading the stores under vmu makes the outcome independent of the order
// in which graph, ACL and community events arrive: whichever handler runs
// last writes what the stores hold then. ACLs always come from the
// registry, never from the event, for the same reason.

// unitItemID is the vector item id of a document's text unit.
func unitItemID(docID, unit string) string { return docID + "#" + unit }

// vectorsOn reports whether vector indexing is configured.
func (w *Worker) vectorsOn() bool { return w.cfg.Vectors != nil }

// docChange is a graph change of one document as the vector stage sees it:
// the document and the entities its event names (Touched, Contributed).
// When the event does not name every entity the change altered
// (events.GraphChanged.NamesAll), unnamed is set and reindex also takes
// the entities whose items still cite the document.
type docChange struct {
	doc      string
	entities []string
	unnamed  bool
}

// changeOf is the docChange of a graph change event.
func changeOf(ev *events.GraphChanged) docChange {
	return docChange{doc: ev.DocID, entities: slices.Concat(ev.Touched, ev.Contributed), unnamed: !ev.NamesAll()}
}

// handleGraph re-indexes one document after the resolver applied (or
// deleted) it.
func (w *Worker) handleGraph(ctx context.Context, _ *stream.Message, ev *events.GraphChanged) error {
	w.vmu.Lock()
	defer w.vmu.Unlock()
	return w.reindex(ctx, ev.Tenant, []docChange{changeOf(ev)})
}

// HandleVectors is the vector consumer's batch handler: the graph changes
// of a batch are re-indexed together, per tenant (see reindex), and each
// ACL change on its own. Graph changes are state-based (the stores are read,
// not the events), so re-indexing several documents at once, or a document
// named twice once, writes what handling them one by one would have
// written last; what it saves is the per-document repetition: an entity
// touched by every document of the batch (a hub) is read, and its item
// patched, once per batch instead of once per document.
func (w *Worker) HandleVectors(ctx context.Context, ms []*stream.Message) []error {
	errs := make([]error, len(ms))
	type group struct {
		changes []docChange
		at      []int
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
			g.changes = append(g.changes, changeOf(ev))
			g.at = append(g.at, i)
		default:
			errs[i] = w.handle(ctx, m)
		}
	}
	for _, t := range tenants {
		g := groups[t]
		w.vmu.Lock()
		err := w.reindex(ctx, t, g.changes)
		w.vmu.Unlock()
		for _, i := range g.at {
			errs[i] = err
		}
	}
	return errs
}

// citedEntities returns the entities whose vector items have doc among
// their sources.
func (w *Worker) citedEntities(ctx context.Context, tenant, doc string) ([]string, error) {
	var ids []string
	err := w.cfg.Vectors.ScanSources(ctx, tenant, doc, func(it vector.ItemSources) error {
		if it.Kind == vector.KindEntity {
			ids = append(ids, it.ID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finding the entity items citing %s: %w", doc, err)
	}
	slices.Sort(ids)
	return ids, nil
}

// reindex rewrites the vector items of the changes' documents (one tenant)
// from the stores: DeleteByDoc of each document's text units and reports,
// then one upsert of their text units and the current reports built on
// them at their applied versions; and the items of the entities they
// contribute now, contributed before or touched (the events' lists), each
// patched for the documents of the changes naming it or, when its text
// changed, rebuilt (see the comment at the top). The caller holds vmu.
func (w *Worker) reindex(ctx context.Context, tenant string, changes []docChange) error {
	var docs []string
	for _, c := range changes {
		docs = append(docs, c.doc)
	}
	slices.Sort(docs)
	docs = slices.Compact(docs)
	// named: for each entity, the documents of the batch that name it.
	named := map[string][]string{}
	name := func(doc string, entities []string) {
		for _, id := range entities {
			if ds := named[id]; len(ds) == 0 || ds[len(ds)-1] != doc {
				named[id] = append(ds, doc)
			}
		}
	}
	recs, err := w.records(ctx, tenant, docs)
	if err != nil {
		return err
	}
	for i, doc := range docs {
		rec := recs[i]
		// Entities D contributes now, those it contributed before (they
		// lost D's fragment but may live on through other documents) and
		// those it touched.
		name(doc, rec.Entities)
	}
	for _, c := range changes {
		name(c.doc, c.entities)
		if c.unnamed {
			// A redelivered change names only what the applied version
			// contributes (and an older build's event, or one of a
			// document without entities, names nothing contributed): the
			// entities the version before contributed, which lost the
			// document's fragment, are found by their items, which still
			// cite it.
			cited, err := w.citedEntities(ctx, tenant, c.doc)
			if err != nil {
				return err
			}
			name(c.doc, cited)
		}
	}
	entityIDs := make([]string, 0, len(named))
	for id, ds := range named {
		slices.Sort(ds)
		named[id] = slices.Compact(ds)
		entityIDs = append(entityIDs, id)
	}
	slices.Sort(entityIDs)
	parts, whole, err := w.entityParts(ctx, tenant, entityIDs, named)
	if err != nil {
		return fmt.Errorf("reading entities of %d documents: %w", len(docs), err)
	}
	reports, err := w.currentReports(ctx, tenant, recs)
	if err != nil {
		return err
	}
	// The ACLs of the documents, and of the reports' sources, in one
	// registry call; an entity rebuilt whole needs its other sources' too.
	aclDocs := slices.Clone(docs)
	for _, r := range reports {
		for _, s := range r.Sources {
			aclDocs = append(aclDocs, s.DocID)
		}
	}
	acls, err := w.acls(ctx, tenant, aclDocs)
	if err != nil {
		return err
	}

	rebuildIDs, err := w.patchEntities(ctx, tenant, entityIDs, parts, named, acls)
	if err != nil {
		return err
	}
	// An item built whole needs the whole entity (read already when the
	// parts were made from it); one gone since was removed by the change
	// that removed it, whose event follows.
	var rebuild []store.Entity
	if len(rebuildIDs) > 0 {
		if whole == nil {
			if whole, err = w.st.Entities(ctx, tenant, rebuildIDs); err != nil {
				return fmt.Errorf("reading %d entities to index whole: %w", len(rebuildIDs), err)
			}
		}
		for _, id := range rebuildIDs {
			if e, ok := whole[id]; ok {
				rebuild = append(rebuild, e)
			}
		}
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
	if len(rebuild) > 0 {
		var more []string
		for _, e := range rebuild {
			for _, f := range e.Sources {
				if _, ok := acls[f.DocID]; !ok {
					more = append(more, f.DocID)
				}
			}
		}
		if len(more) > 0 {
			extra, err := w.acls(ctx, tenant, more)
			if err != nil {
				return err
			}
			maps.Copy(acls, extra)
		}
		for _, e := range rebuild {
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
	// A deleted document's entities were patched above, those its event
	// names; removing every item still built on it, of every kind, makes
	// sure none is left readable through it should an event have named too
	// few (such an item is written again by the next change of one of its
	// other documents).
	gone := make([]vector.DocKinds, len(docs))
	for i, doc := range docs {
		gone[i] = vector.DocKinds{DocID: doc, Kinds: []vector.Kind{vector.KindTextUnit, vector.KindReport}}
		if recs[i].Deleted {
			gone[i].Kinds = nil
		}
	}
	if err := w.replaceDocItems(ctx, tenant, gone, items); err != nil {
		return err
	}
	w.log.Debug("vector items rewritten", "tenant", tenant, "docs", len(docs), "items", len(items), "entities", len(entityIDs), "entities_rebuilt", len(rebuild))
	return nil
}

// records reads the records of docs, in one read when the store reads
// many at once (store.SourceRecords); a document without one (never
// applied, or gone) gets a tombstone.
func (w *Worker) records(ctx context.Context, tenant string, docs []string) ([]store.SourceRecord, error) {
	recs := make([]store.SourceRecord, len(docs))
	if sr, ok := w.st.(store.SourceRecords); ok {
		got, err := sr.SourceRecords(ctx, tenant, docs)
		if err != nil {
			return nil, fmt.Errorf("reading the records of %d documents: %w", len(docs), err)
		}
		for i, doc := range docs {
			rec, ok := got[doc]
			if !ok {
				rec = store.SourceRecord{DocID: doc, Deleted: true}
			}
			recs[i] = rec
		}
		return recs, nil
	}
	for i, doc := range docs {
		rec, err := w.st.Source(ctx, tenant, doc)
		if errors.Is(err, store.ErrNotFound) {
			rec, err = store.SourceRecord{DocID: doc, Deleted: true}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading source %s: %w", doc, err)
		}
		recs[i] = rec
	}
	return recs, nil
}

// currentReports returns the reports built on the documents recs (those
// not deleted) at their applied versions: for each document in turn, the
// reports citing it at that version, by id, each once. The citations of
// the reports citing any of them are read from the by-source index, and
// only the reports citing one at its applied version are decoded, once
// each: a report built from thousands of documents (a hub community's)
// cites most documents of a batch.
func (w *Worker) currentReports(ctx context.Context, tenant string, recs []store.SourceRecord) ([]store.Report, error) {
	var docs []string
	for _, rec := range recs {
		if !rec.Deleted {
			docs = append(docs, rec.DocID)
		}
	}
	if len(docs) == 0 {
		return nil, nil
	}
	cites, err := w.st.ReportCitationsOf(ctx, tenant, docs)
	if err != nil {
		return nil, fmt.Errorf("reading the citations of the reports citing %d documents: %w", len(docs), err)
	}
	// citing[i]: the reports citing recs[i] at its version, by id. A hub
	// report's citations are read once, not once per document.
	at := make(map[provenance.SourceRef]int, len(docs))
	for i, rec := range recs {
		if !rec.Deleted {
			at[provenance.SourceRef{DocID: rec.DocID, Version: rec.Version}] = i
		}
	}
	citing := make([][]string, len(recs))
	var ids []string
	for id, refs := range cites {
		for _, ref := range refs {
			if i, ok := at[provenance.SourceRef{DocID: ref.DocID, Version: ref.Version}]; ok {
				citing[i] = append(citing[i], id)
			}
		}
	}
	for i := range citing {
		slices.Sort(citing[i])
		ids = append(ids, citing[i]...)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	byID, err := w.st.ReportsByID(ctx, tenant, ids)
	if err != nil {
		return nil, fmt.Errorf("reading %d reports citing %d documents: %w", len(ids), len(docs), err)
	}
	// The reports as read (a report rewritten since its citations were
	// read is taken as it is now): those whose sources hold the document
	// at its version, in the documents' order, each once.
	var reports []store.Report
	seen := make(map[string]bool, len(ids))
	for i, rec := range recs {
		for _, id := range citing[i] {
			r, ok := byID[id]
			if ok && !seen[id] && slices.Contains(r.Sources, provenance.SourceRef{DocID: rec.DocID, Version: rec.Version}) {
				seen[id] = true
				reports = append(reports, r)
			}
		}
	}
	return reports, nil
}

// entityParts returns the parts of the entities among ids that exist (see
// store.EntityParts): what their items' texts are made of (head, fragment
// count, first fragments up to MaxEntityText bytes) and the fragments of
// the documents named[id]. A store that can read them without every
// fragment does; of another, the entities are read whole, and returned
// too (nil otherwise). An entity whose fragments name a document twice
// gets a part with no fragments (it can have no item).
func (w *Worker) entityParts(ctx context.Context, tenant string, ids []string, named map[string][]string) (map[string]store.EntityPart, map[string]store.Entity, error) {
	if ep, ok := w.st.(store.EntityParts); ok {
		parts, err := ep.EntityParts(ctx, tenant, ids, w.cfg.MaxEntityText, named)
		return parts, nil, err
	}
	ents, err := w.st.Entities(ctx, tenant, ids)
	if err != nil {
		return nil, nil, err
	}
	parts := make(map[string]store.EntityPart, len(ents))
	for id, e := range ents {
		if !distinctDocs(e.Sources) {
			parts[id] = store.EntityPart{ID: id, Type: e.Type, Name: e.Name}
			continue
		}
		parts[id] = store.PartOf(e, w.cfg.MaxEntityText, named[id])
	}
	return parts, ents, nil
}

// patchEntities brings the items of the entities ids (parts holds those
// the graph store still has) up to date for the documents of the batch
// naming each (named): an item whose text and metadata are unchanged gets
// those documents' sources put (the document still contributes: its
// fragment's version, its current ACL from acls) or removed, and an
// entity that is gone, or can have no item, loses its item. It returns the
// ids of the entities whose items PatchSources did not apply (missing, or
// another text), to be built whole.
func (w *Worker) patchEntities(ctx context.Context, tenant string, ids []string, parts map[string]store.EntityPart, named map[string][]string, acls map[string]provenance.ACL) ([]string, error) {
	var (
		patches []vector.SourcePatch
		drop    []string
	)
	for _, id := range ids {
		e, ok := parts[id]
		if !ok {
			drop = append(drop, id)
			continue
		}
		text, meta, ok := w.itemText(e.Name, e.Type, e.Fragments, e.First)
		if !ok {
			drop = append(drop, id)
			continue
		}
		p := vector.SourcePatch{Kind: vector.KindEntity, ID: id, Text: text, Metadata: meta}
		for _, d := range named[id] {
			if f, ok := e.Of[d]; ok {
				p.Put = append(p.Put, vector.Source{SourceRef: provenance.SourceRef{DocID: d, Version: f.Version}, ACL: acls[d]})
			} else {
				p.Remove = append(p.Remove, d)
			}
		}
		patches = append(patches, p)
	}
	if len(drop) > 0 {
		if err := w.cfg.Vectors.Delete(ctx, tenant, drop, vector.KindEntity); err != nil {
			return nil, fmt.Errorf("removing the vector items of %d entities: %w", len(drop), err)
		}
		w.vectorOps.WithLabelValues("delete").Add(float64(len(drop)))
	}
	if len(patches) == 0 {
		return nil, nil
	}
	applied, err := w.cfg.Vectors.PatchSources(ctx, tenant, patches)
	if err != nil {
		return nil, fmt.Errorf("patching the sources of %d entity items: %w", len(patches), err)
	}
	var rebuild []string
	for i, p := range patches {
		if applied[i] {
			w.vectorOps.WithLabelValues("patch_entity").Inc()
		} else {
			rebuild = append(rebuild, p.ID)
		}
	}
	return rebuild, nil
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
// each fragment's description, bounded by MaxEntityText bytes (see
// entityText), with a source per fragment.
func (w *Worker) entityItem(e store.Entity, acls map[string]provenance.ACL) (vector.Item, bool) {
	text, meta, ok := w.entityText(e)
	if !ok {
		return vector.Item{}, false
	}
	srcs := make([]vector.Source, len(e.Sources))
	for i, f := range e.Sources {
		srcs[i] = vector.Source{SourceRef: provenance.SourceRef{DocID: f.DocID, Version: f.Version}, ACL: acls[f.DocID]}
	}
	return vector.Item{ID: e.ID, Kind: vector.KindEntity, Text: text, Sources: srcs, Metadata: meta}, true
}

// entityText is the text and metadata of an entity's item (see itemText),
// and whether the entity can have an item: one fragment per document (the
// store keeps one; checked all the same, as an item may not name a
// document twice).
func (w *Worker) entityText(e store.Entity) (string, map[string]string, bool) {
	if !distinctDocs(e.Sources) {
		return "", nil, false // one version per document, or nothing
	}
	return w.itemText(e.Name, e.Type, len(e.Sources), e.Sources)
}

// itemText is the text and metadata of the item of an entity of n
// fragments whose first fragments (in doc-id order) are first: its name
// and type and the fragments' descriptions in order while the text is
// shorter than MaxEntityText, cut there. So it reads the fragments that
// make the text only: first needs to hold no more than those (see
// store.EntityPart). The entity can have an item when it has one to
// MaxSources fragments.
func (w *Worker) itemText(name, typ string, n int, first []store.Fragment) (string, map[string]string, bool) {
	if n == 0 || n > vector.MaxSources {
		return "", nil, false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s).", name, strings.ReplaceAll(typ, "_", " "))
	for _, f := range first {
		if b.Len() >= w.cfg.MaxEntityText {
			break
		}
		if f.Description != "" {
			b.WriteString(" " + f.Description)
		}
	}
	text := b.String()
	if len(text) > w.cfg.MaxEntityText {
		text = strings.ToValidUTF8(text[:w.cfg.MaxEntityText], "")
	}
	return text, map[string]string{"type": typ, "name": name}, true
}

// distinctDocs reports whether no document has two fragments: in one pass
// when they are sorted by document, as the store keeps them.
func distinctDocs(frags []store.Fragment) bool {
	sorted := true
	for i := 1; i < len(frags) && sorted; i++ {
		sorted = frags[i-1].DocID < frags[i].DocID
	}
	if sorted {
		return true
	}
	seen := make(map[string]bool, len(frags))
	for _, f := range frags {
		if seen[f.DocID] {
			return false
		}
		seen[f.DocID] = true
	}
	return true
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

// embedItems fills in the items' vectors, EmbedBatch texts per call. A
// text embedded lately takes the vector it got then (see vectorMemo): a
// re-indexed document's report items and text units are mostly what they
// were. The caller holds vmu.
func (w *Worker) embedItems(ctx context.Context, items []vector.Item) error {
	var todo []int
	for i := range items {
		if v, ok := w.memo.get(items[i].Text); ok {
			items[i].Vector = slices.Clone(v)
		} else {
			todo = append(todo, i)
		}
	}
	for start := 0; start < len(todo); start += w.cfg.EmbedBatch {
		at := todo[start:min(start+w.cfg.EmbedBatch, len(todo))]
		texts := make([]string, len(at))
		for i, j := range at {
			texts[i] = items[j].Text
		}
		vecs, err := w.cfg.Embedder.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("embedding %d texts: %w", len(texts), err)
		}
		if len(vecs) != len(texts) {
			return fmt.Errorf("embedding %d texts: the embedder returned %d vectors", len(texts), len(vecs))
		}
		for i, v := range vecs {
			items[at[i]].Vector = v
			w.memo.put(texts[i], slices.Clone(v))
		}
		w.embedded.Add(float64(len(texts)))
	}
	return nil
}

// memoBytes bounds each of vectorMemo's two generations (texts and
// vectors), so the memo holds 2*memoBytes at most.
const memoBytes = 8 << 20

// vectorMemo remembers the vectors of the texts embedded lately, in two
// generations: when the current one is full it becomes the previous one,
// and the previous one is dropped. The embedder is a function of the text
// (the hashing one is; an endpoint's model is one for as long as the
// process runs), so a remembered vector is the one embedding again would
// give. It is used under vmu.
type vectorMemo struct {
	cur, prev map[string][]float32
	size      int
}

func (m *vectorMemo) get(text string) ([]float32, bool) {
	if v, ok := m.cur[text]; ok {
		return v, true
	}
	v, ok := m.prev[text]
	if ok {
		m.put(text, v)
	}
	return v, ok
}

func (m *vectorMemo) put(text string, v []float32) {
	if m.cur == nil || m.size >= memoBytes {
		m.prev, m.cur, m.size = m.cur, map[string][]float32{}, 0
	}
	if _, ok := m.cur[text]; !ok {
		m.cur[text] = v
		m.size += len(text) + 4*len(v)
	}
}

// docItemsReplacer is an index that removes documents' items and writes
// others in one call, leaving alone the items it would remove and write
// again unchanged (see embedded.Index.ReplaceDocItems): re-indexing a
// document rewrites mostly such items.
type docItemsReplacer interface {
	ReplaceDocItems(ctx context.Context, tenant string, docs []vector.DocKinds, items []vector.Item) error
}

// replaceDocItems removes the items of docs (DeleteByDoc of each), then
// writes items, in one call when the index can. Items the index refuses
// (a *vector.BatchError: nothing was written) are written as without it,
// so the documents' items are removed all the same (a deleted document's
// above all) before the upsert fails.
func (w *Worker) replaceDocItems(ctx context.Context, tenant string, docs []vector.DocKinds, items []vector.Item) error {
	if r, ok := w.cfg.Vectors.(docItemsReplacer); ok {
		err := r.ReplaceDocItems(ctx, tenant, docs, items)
		if err == nil {
			w.vectorOps.WithLabelValues("delete_doc").Add(float64(len(docs)))
			for _, it := range items {
				w.vectorOps.WithLabelValues("upsert_" + string(it.Kind)).Inc()
			}
			return nil
		}
		if be := (*vector.BatchError)(nil); !errors.As(err, &be) {
			return fmt.Errorf("rewriting the vector items of %d documents: %w", len(docs), err)
		}
	}
	for _, d := range docs {
		if err := w.cfg.Vectors.DeleteByDoc(ctx, tenant, d.DocID, d.Kinds...); err != nil {
			return fmt.Errorf("removing the vector items of %s: %w", d.DocID, err)
		}
		w.vectorOps.WithLabelValues("delete_doc").Inc()
	}
	return w.upsert(ctx, tenant, items)
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
