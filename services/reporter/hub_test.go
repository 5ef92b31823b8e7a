package reporter_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/pkg/vector"
	vecembedded "github.com/kgstream/kgstream/pkg/vector/embedded"
	"github.com/kgstream/kgstream/services/reporter"
)

// countingEmbedder is the hashing embedder, counting the texts it embeds
// (how many items were built whole).
type countingEmbedder struct {
	embed.Embedder
	texts atomic.Int64
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.texts.Add(int64(len(texts)))
	return c.Embedder.Embed(ctx, texts)
}

const hubID = "service:kafka"

// hubRig is a worker over an embedded store and vector index where every
// document names one hub entity.
type hubRig struct {
	t   testing.TB
	st  *embedded.Store
	bus *stream.Bus
	w   *reporter.Worker
	ix  *vecembedded.Index
	emb *countingEmbedder
}

func newHubRig(t testing.TB) *hubRig {
	bus := streamtest.NewBus(t, streamtest.Options{})
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	r := &hubRig{t: t, st: st, bus: bus}
	r.w, r.ix, r.emb = r.worker()
	return r
}

// worker returns a worker with a fresh vector index over the rig's store.
func (r *hubRig) worker() (*reporter.Worker, *vecembedded.Index, *countingEmbedder) {
	ix, err := vecembedded.Open(filepath.Join(r.t.TempDir(), "vectors.db"), vecembedded.Options{NoSync: true})
	require.NoError(r.t, err)
	r.t.Cleanup(func() { require.NoError(r.t, ix.Close()) })
	emb := &countingEmbedder{Embedder: embed.NewHashing(64)}
	w, err := reporter.New(reporter.Config{Vectors: ix, Embedder: emb}, r.bus, r.st, nil, prometheus.NewRegistry())
	require.NoError(r.t, err)
	return w, ix, emb
}

// apply writes doc at version: one text unit, its incident and, when desc
// is not "", the hub with that description.
func (r *hubRig) apply(doc string, version int64, acl provenance.ACL, desc string) {
	r.t.Helper()
	ctx := r.t.Context()
	_, err := r.st.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: version, ACL: acl})
	require.NoError(r.t, err)
	c := store.Contributions{TextUnits: []events.TextUnit{{ID: "u0", Text: doc + " v" + fmt.Sprint(version) + ": " + desc}}}
	c.Entities = []store.EntityContribution{{ID: "incident:" + doc, Type: "incident", Name: doc, NameRank: 2, TextUnits: []string{"u0"}}}
	if desc != "" {
		c.Entities = append(c.Entities, store.EntityContribution{ID: hubID, Type: "service", Name: "Kafka", NameRank: 2, TextUnits: []string{"u0"}, Description: desc})
	}
	_, err = r.st.Apply(ctx, "acme", doc, version, c)
	require.NoError(r.t, err)
}

// remove deletes doc from the registry and the graph, as the resolver
// applies a deletion at version.
func (r *hubRig) remove(doc string, version int64) {
	r.t.Helper()
	_, err := r.st.MarkDeleted(r.t.Context(), "acme", doc)
	require.NoError(r.t, err)
	_, err = r.st.Delete(r.t.Context(), "acme", doc, version)
	require.NoError(r.t, err)
}

func graphMsg(t testing.TB, doc string, version int64, deleted bool, contributed ...string) *stream.Message {
	data, err := events.Encode(&events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: doc, Version: version,
		Deleted: deleted, Touched: []string{"incident:" + doc}, Contributed: contributed})
	require.NoError(t, err)
	return &stream.Message{Kind: events.KindGraphChanged, Tenant: "acme", Data: data}
}

func handleAll(t testing.TB, w *reporter.Worker, ms ...*stream.Message) {
	t.Helper()
	for i, err := range w.HandleVectors(t.Context(), ms) {
		require.NoError(t, err, "message %d", i)
	}
}

// item returns the entity item id as f reads it, and whether f may.
func item(t testing.TB, ix vector.Index, emb embed.Embedder, id string, f vector.Filter) (vector.Hit, bool) {
	t.Helper()
	v, err := emb.Embed(t.Context(), []string{"Kafka"})
	require.NoError(t, err)
	hits, err := ix.Search(t.Context(), "acme", vector.KindEntity, v[0], vector.MaxK, f)
	require.NoError(t, err)
	for _, h := range hits {
		if h.ID == id {
			return h, true
		}
	}
	return vector.Hit{}, false
}

var everyone = vector.Filter{Principal: "root", Groups: []string{"sre", "secret"}}

// requireRebuilt checks that the hub's item is what a worker with an
// empty index writes from the stores as they are (every document applied
// re-announced in one batch): text, metadata, vector, and sources with
// their versions and ACLs, in document order.
func (r *hubRig) requireRebuilt(docs []string) vector.Hit {
	r.t.Helper()
	w, ix, emb := r.worker()
	var ms []*stream.Message
	for _, d := range docs {
		rec, err := r.st.Source(r.t.Context(), "acme", d)
		require.NoError(r.t, err)
		ms = append(ms, graphMsg(r.t, d, rec.Version, rec.Deleted))
	}
	handleAll(r.t, w, ms...)
	want, wok := item(r.t, ix, emb, hubID, everyone)
	got, gok := item(r.t, r.ix, r.emb, hubID, everyone)
	require.Equal(r.t, wok, gok, "the item exists after a rebuild, and after the patches")
	slices.SortFunc(got.Sources, func(a, b vector.Source) int { return strings.Compare(a.DocID, b.DocID) })
	require.Equal(r.t, want.Item, got.Item)
	require.InDelta(r.t, want.Score, got.Score, 1e-6, "the same vector")
	return got
}

// TestHubItemPatchedEqualsRebuild: an edit, a deletion and a revocation of
// documents of a hub entity, inside its text or not, leave the hub's
// vector item exactly what a rebuild writes, readable by those every
// source admits only; and a change outside the item's text embeds nothing
// but the document's own text unit.
func TestHubItemPatchedEqualsRebuild(t *testing.T) {
	r := newHubRig(t)
	const n = 200
	var docs []string
	var ms []*stream.Message
	for i := range n {
		d := fmt.Sprintf("doc-%03d", i)
		docs = append(docs, d)
		r.apply(d, 1, provenance.PublicACL(), fmt.Sprintf("Kafka carries the events of %s.", d))
		ms = append(ms, graphMsg(t, d, 1, false, hubID))
	}
	handleAll(t, r.w, ms...)
	hub := r.requireRebuilt(docs)
	require.Len(t, hub.Sources, n)
	require.Contains(t, hub.Text, "events of doc-000.")
	require.NotContains(t, hub.Text, "doc-150", "the text holds the first fragments only")
	eve := vector.Filter{Principal: "eve"}
	_, ok := item(t, r.ix, r.emb, hubID, eve)
	require.True(t, ok)

	// An edit outside the text: one source moves to version 2; only the
	// document's text unit is embedded.
	r.apply("doc-150", 2, provenance.PublicACL(), "Kafka lost a partition of doc-150.")
	before := r.emb.texts.Load()
	handleAll(t, r.w, graphMsg(t, "doc-150", 2, false, hubID))
	require.EqualValues(t, 1, r.emb.texts.Load()-before, "the hub is patched, not embedded")
	hub = r.requireRebuilt(docs)
	require.EqualValues(t, 2, hub.Sources[150].Version)

	// A document that stops naming the hub, and one that starts, in one batch.
	r.apply("doc-151", 2, provenance.PublicACL(), "")
	r.apply("doc-new", 1, provenance.PublicACL(), "Kafka carries the events of doc-new.")
	docs = append(docs, "doc-new")
	before = r.emb.texts.Load()
	handleAll(t, r.w, graphMsg(t, "doc-151", 2, false, hubID), graphMsg(t, "doc-new", 1, false, hubID))
	require.EqualValues(t, 3, r.emb.texts.Load()-before, "two units and the new incident")
	hub = r.requireRebuilt(docs)
	require.NotContains(t, hub.DocIDs(), "doc-151")
	require.Contains(t, hub.DocIDs(), "doc-new")

	// A revocation outside the text: eve loses the hub at once (the
	// registry first, then the ACL event), as a rebuild would have it.
	_, err := r.st.SetACL(t.Context(), "acme", "doc-160", provenance.ACL{Groups: []string{"secret"}})
	require.NoError(t, err)
	data, err := events.Encode(&events.DocACL{Header: events.Header{Tenant: "acme"}, DocID: "doc-160", Version: 1, ACLRevision: 1, ACL: provenance.PublicACL()})
	require.NoError(t, err)
	handleAll(t, r.w, &stream.Message{Kind: events.KindDocACL, Tenant: "acme", Data: data})
	_, ok = item(t, r.ix, r.emb, hubID, eve)
	require.False(t, ok, "a reader doc-160 no longer admits cannot get the hub")
	_, ok = item(t, r.ix, r.emb, hubID, vector.Filter{Principal: "sam", Groups: []string{"secret"}})
	require.True(t, ok)
	r.requireRebuilt(docs)

	// An edit of the revoked document keeps its registry ACL.
	r.apply("doc-160", 2, provenance.ACL{Groups: []string{"secret"}}, "Kafka was upgraded for doc-160.")
	handleAll(t, r.w, graphMsg(t, "doc-160", 2, false, hubID))
	_, ok = item(t, r.ix, r.emb, hubID, eve)
	require.False(t, ok)
	r.requireRebuilt(docs)

	// A deletion outside the text: the source goes, the item stays.
	r.remove("doc-170", 2)
	handleAll(t, r.w, graphMsg(t, "doc-170", 2, true, hubID, "incident:doc-170"))
	hub = r.requireRebuilt(docs)
	require.NotContains(t, hub.DocIDs(), "doc-170")

	// The deleted and revoked documents again, now inside the text: an
	// edit of a fragment the text holds rewrites the item whole.
	r.apply("doc-003", 2, provenance.PublicACL(), "Kafka dropped the events of doc-003.")
	before = r.emb.texts.Load()
	handleAll(t, r.w, graphMsg(t, "doc-003", 2, false, hubID))
	require.EqualValues(t, 2, r.emb.texts.Load()-before, "the unit and the hub")
	hub = r.requireRebuilt(docs)
	require.Contains(t, hub.Text, "dropped the events of doc-003")
	_, err = r.st.SetACL(t.Context(), "acme", "doc-004", provenance.ACL{Principals: []string{"ann"}})
	require.NoError(t, err)
	data, err = events.Encode(&events.DocACL{Header: events.Header{Tenant: "acme"}, DocID: "doc-004", Version: 1, ACLRevision: 1, ACL: provenance.PublicACL()})
	require.NoError(t, err)
	handleAll(t, r.w, &stream.Message{Kind: events.KindDocACL, Tenant: "acme", Data: data})
	_, ok = item(t, r.ix, r.emb, hubID, vector.Filter{Principal: "sam", Groups: []string{"secret"}})
	require.False(t, ok, "doc-004 admits ann only")
	r.requireRebuilt(docs)
	r.remove("doc-000", 2)
	handleAll(t, r.w, graphMsg(t, "doc-000", 2, true, hubID, "incident:doc-000"))
	hub = r.requireRebuilt(docs)
	require.NotContains(t, hub.Text, "events of doc-000.")
	require.NotContains(t, hub.DocIDs(), "doc-000")
}

// TestHubItemGoesWithItsLastSource: an entity whose every document is
// deleted loses its item, and one that comes back gets it again.
func TestHubItemGoesWithItsLastSource(t *testing.T) {
	r := newHubRig(t)
	r.apply("a", 1, provenance.PublicACL(), "Kafka in a.")
	r.apply("b", 1, provenance.PublicACL(), "Kafka in b.")
	handleAll(t, r.w, graphMsg(t, "a", 1, false, hubID), graphMsg(t, "b", 1, false, hubID))
	_, ok := item(t, r.ix, r.emb, hubID, everyone)
	require.True(t, ok)
	r.apply("b", 2, provenance.PublicACL(), "")
	handleAll(t, r.w, graphMsg(t, "b", 2, false, hubID))
	r.requireRebuilt([]string{"a", "b"})
	r.remove("a", 2)
	handleAll(t, r.w, graphMsg(t, "a", 2, true, hubID))
	_, ok = item(t, r.ix, r.emb, hubID, everyone)
	require.False(t, ok)
	r.requireRebuilt([]string{"a", "b"})
	r.apply("b", 3, provenance.PublicACL(), "Kafka is back in b.")
	handleAll(t, r.w, graphMsg(t, "b", 3, false, hubID))
	hub := r.requireRebuilt([]string{"a", "b"})
	require.Equal(t, []string{"b"}, hub.DocIDs())
}

// BenchmarkHubEdit measures the vector stage of an edit of one document
// naming a hub entity of n documents, outside the hub's text (the usual
// case: the text holds the first fragments): the document's graph change
// handled alone, per edit. The store write of the edit is not timed.
func BenchmarkHubEdit(b *testing.B) {
	for _, n := range []int{500, 5000} {
		b.Run(fmt.Sprintf("sources=%d", n), func(b *testing.B) {
			r := newHubRig(b)
			var ms []*stream.Message
			for i := range n {
				d := fmt.Sprintf("doc-%04d", i)
				r.apply(d, 1, provenance.PublicACL(), fmt.Sprintf("Kafka carries the events of %s.", d))
				ms = append(ms, graphMsg(b, d, 1, false, hubID))
				if len(ms) == 256 || i == n-1 {
					handleAll(b, r.w, ms...)
					ms = ms[:0]
				}
			}
			if _, ok := item(b, r.ix, r.emb, hubID, everyone); !ok {
				b.Fatal("the hub has no item")
			}
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				d := fmt.Sprintf("doc-%04d", n-1-i%(n/2))
				v := int64(2 + i/(n/2))
				r.apply(d, v, provenance.PublicACL(), fmt.Sprintf("Kafka carries the events of %s, edit %d.", d, i))
				m := graphMsg(b, d, v, false, hubID)
				b.StartTimer()
				handleAll(b, r.w, m)
			}
		})
	}
}

// TestDeletionEventNamingTooFewLeavesNoItem: a deletion whose event names
// none of the document's entities (an event built from too little) still
// leaves no item with the deleted document among its sources: the hub's
// item, which the patches never reached, is removed, and the next change
// of one of its other documents writes it again without it.
func TestDeletionEventNamingTooFewLeavesNoItem(t *testing.T) {
	r := newHubRig(t)
	docs := []string{"a", "b", "c"}
	var ms []*stream.Message
	for _, d := range docs {
		r.apply(d, 1, provenance.PublicACL(), "Kafka in "+d+".")
		ms = append(ms, graphMsg(t, d, 1, false, hubID))
	}
	handleAll(t, r.w, ms...)
	hub, ok := item(t, r.ix, r.emb, hubID, everyone)
	require.True(t, ok)
	require.Contains(t, hub.DocIDs(), "c")

	r.remove("c", 2)
	data, err := events.Encode(&events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: "c", Version: 2, Deleted: true})
	require.NoError(t, err)
	handleAll(t, r.w, &stream.Message{Kind: events.KindGraphChanged, Tenant: "acme", Data: data})
	for _, kind := range vector.Kinds() {
		v, err := r.emb.Embed(t.Context(), []string{"Kafka"})
		require.NoError(t, err)
		hits, err := r.ix.Search(t.Context(), "acme", kind, v[0], vector.MaxK, everyone)
		require.NoError(t, err)
		for _, h := range hits {
			require.NotContains(t, h.DocIDs(), "c", "%s item %s is still built on the deleted document", kind, h.ID)
		}
	}

	r.apply("a", 2, provenance.PublicACL(), "Kafka again in a.")
	handleAll(t, r.w, graphMsg(t, "a", 2, false, hubID))
	hub = r.requireRebuilt(docs)
	require.Equal(t, []string{"a", "b"}, hub.DocIDs())
}

// entityReads is the embedded store recording the ids of each Entities
// call (whole entities, every fragment decoded).
type entityReads struct {
	*embedded.Store
	mu    sync.Mutex
	whole []string
}

func (s *entityReads) Entities(ctx context.Context, tenant string, ids []string) (map[string]store.Entity, error) {
	s.mu.Lock()
	s.whole = append(s.whole, ids...)
	s.mu.Unlock()
	return s.Store.Entities(ctx, tenant, ids)
}

func (s *entityReads) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.whole
	s.whole = nil
	return out
}

// wholeOnly is a store without store.EntityParts: its entities are read
// whole.
type wholeOnly struct{ reporter.Stores }

// TestHubPatchReadsPartOfTheHub: an edit of a document outside the hub's
// text patches the hub's item from the first fragments and the document's
// own, never reading the hub whole; an edit inside the text rebuilds it
// from the whole hub. A store that can only read entities whole writes the
// same items.
func TestHubPatchReadsPartOfTheHub(t *testing.T) {
	r := newHubRig(t)
	reads := &entityReads{Store: r.st}
	w, err := reporter.New(reporter.Config{Vectors: r.ix, Embedder: r.emb}, r.bus, reads, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	const n = 200
	var docs []string
	var ms []*stream.Message
	for i := range n {
		d := fmt.Sprintf("doc-%03d", i)
		docs = append(docs, d)
		r.apply(d, 1, provenance.PublicACL(), fmt.Sprintf("Kafka carries the events of %s.", d))
		ms = append(ms, graphMsg(t, d, 1, false, hubID))
	}
	handleAll(t, w, ms...)
	require.Contains(t, reads.take(), hubID, "a new item is built whole")
	r.requireRebuilt(docs)

	r.apply("doc-150", 2, provenance.PublicACL(), "Kafka lost a partition of doc-150.")
	handleAll(t, w, graphMsg(t, "doc-150", 2, false, hubID))
	require.NotContains(t, reads.take(), hubID, "patched without reading the hub whole")
	require.EqualValues(t, 2, r.requireRebuilt(docs).Sources[150].Version)

	r.apply("doc-003", 2, provenance.PublicACL(), "Kafka dropped the events of doc-003.")
	handleAll(t, w, graphMsg(t, "doc-003", 2, false, hubID))
	require.Equal(t, []string{hubID}, reads.take(), "another text: the hub is read whole, once")
	require.Contains(t, r.requireRebuilt(docs).Text, "dropped the events of doc-003")

	// The same edits through a store reading entities whole.
	whole, err := reporter.New(reporter.Config{Vectors: r.ix, Embedder: r.emb}, r.bus, wholeOnly{r.st}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	r.apply("doc-160", 2, provenance.PublicACL(), "Kafka was upgraded for doc-160.")
	handleAll(t, whole, graphMsg(t, "doc-160", 2, false, hubID))
	require.EqualValues(t, 2, r.requireRebuilt(docs).Sources[160].Version)
	r.apply("doc-004", 2, provenance.PublicACL(), "Kafka replayed the events of doc-004.")
	handleAll(t, whole, graphMsg(t, "doc-004", 2, false, hubID))
	require.Contains(t, r.requireRebuilt(docs).Text, "replayed the events of doc-004")
}

// reportReads is the embedded store counting the reports it decodes for
// the vector stage (by id or by the documents they cite).
type reportReads struct {
	*embedded.Store
	decoded atomic.Int64
}

func (s *reportReads) ReportsByID(ctx context.Context, tenant string, ids []string) (map[string]store.Report, error) {
	rs, err := s.Store.ReportsByID(ctx, tenant, ids)
	s.decoded.Add(int64(len(rs)))
	return rs, err
}

func (s *reportReads) ReportsBySource(ctx context.Context, tenant, docID string) ([]store.Report, error) {
	rs, err := s.Store.ReportsBySource(ctx, tenant, docID)
	s.decoded.Add(int64(len(rs)))
	return rs, err
}

// TestHubReportReadOnceABatch: a batch of graph changes of documents a
// hub community's report cites decodes that report once, not once per
// document, and indexes it with every source; a report citing a document
// at a version other than its applied one is not decoded at all (it is
// not built on the document as applied) and loses its item.
func TestHubReportReadOnceABatch(t *testing.T) {
	r := newHubRig(t)
	reads := &reportReads{Store: r.st}
	w, err := reporter.New(reporter.Config{Vectors: r.ix, Embedder: r.emb}, r.bus, reads, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	const n = 20
	var docs []string
	var refs []provenance.SourceRef
	var ms []*stream.Message
	for i := range n {
		d := fmt.Sprintf("doc-%03d", i)
		docs = append(docs, d)
		refs = append(refs, provenance.SourceRef{DocID: d, Version: 1})
		r.apply(d, 1, provenance.PublicACL(), fmt.Sprintf("Kafka carries the events of %s.", d))
		ms = append(ms, graphMsg(t, d, 1, false, hubID))
	}
	ctx := t.Context()
	require.NoError(t, r.st.PutReports(ctx, "acme", []store.Report{
		{ID: "r-c0-hub", Community: "c0-hub", Title: "Kafka", Summary: "Every document names Kafka.", Sources: refs, MemberHash: "h", Writer: "extractive"},
		{ID: "r-c0-old", Community: "c0-old", Title: "Old", Summary: "Built on doc-003 before its edit.",
			Sources: []provenance.SourceRef{{DocID: "doc-003", Version: 2}}, MemberHash: "h", Writer: "extractive"},
	}))
	handleAll(t, w, ms...)
	require.EqualValues(t, 1, reads.decoded.Load(), "reports decoded for a batch of %d documents", n)
	v, err := r.emb.Embed(ctx, []string{"Kafka"})
	require.NoError(t, err)
	hits, err := r.ix.Search(ctx, "acme", vector.KindReport, v[0], vector.MaxK, everyone)
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Equal(t, "r-c0-hub", hits[0].ID)
	require.Equal(t, docs, hits[0].DocIDs())
	require.Equal(t, "Kafka: Every document names Kafka.", hits[0].Text)
}

// TestReindexEmbedsNoTextTwice: a document re-indexed unchanged embeds
// nothing again (its text unit and the report citing it take the vectors
// they got), an edit embeds its new texts, and the items stay what a
// rebuild writes.
func TestReindexEmbedsNoTextTwice(t *testing.T) {
	r := newHubRig(t)
	ctx := t.Context()
	var docs []string
	for _, d := range []string{"a", "b"} {
		docs = append(docs, d)
		r.apply(d, 1, provenance.PublicACL(), "Kafka carries the events of "+d+".")
	}
	require.NoError(t, r.st.PutReports(ctx, "acme", []store.Report{{ID: "r-c0-hub", Community: "c0-hub", Title: "Kafka",
		Summary: "Both documents name Kafka.", Sources: []provenance.SourceRef{{DocID: "a", Version: 1}, {DocID: "b", Version: 1}},
		MemberHash: "h", Writer: "extractive"}}))
	handleAll(t, r.w, graphMsg(t, "a", 1, false, hubID), graphMsg(t, "b", 1, false, hubID))
	require.EqualValues(t, 6, r.emb.texts.Load(), "2 text units, 2 incidents, the hub and the report")
	handleAll(t, r.w, graphMsg(t, "a", 1, false, hubID))
	require.EqualValues(t, 6, r.emb.texts.Load(), "texts embedded again")
	r.requireRebuilt(docs)

	r.apply("a", 2, provenance.PublicACL(), "Kafka lost the events of a.")
	handleAll(t, r.w, graphMsg(t, "a", 2, false, hubID))
	require.Greater(t, r.emb.texts.Load(), int64(6), "a's new texts are embedded")
	r.requireRebuilt(docs)
}

// TestRefusedItemsStillRemoveTheDocuments: when the index refuses a
// batch's items (vectors of other dimensions than it holds: the embedder
// changed), the batch fails, but a deleted document's items are removed
// all the same, as deleting them before the upsert did.
func TestRefusedItemsStillRemoveTheDocuments(t *testing.T) {
	r := newHubRig(t)
	ctx := t.Context()
	r.apply("a", 1, provenance.PublicACL(), "Kafka carries the events of a.")
	r.apply("b", 1, provenance.PublicACL(), "Kafka carries the events of b.")
	handleAll(t, r.w, graphMsg(t, "a", 1, false, hubID), graphMsg(t, "b", 1, false, hubID))
	docItems := func(doc string) int {
		n := 0
		require.NoError(t, r.ix.ScanSources(ctx, "acme", doc, func(vector.ItemSources) error { n++; return nil }))
		return n
	}
	require.Positive(t, docItems("b"))

	r.remove("b", 2)
	r.apply("a", 2, provenance.PublicACL(), "Kafka lost the events of a.")
	other, err := reporter.New(reporter.Config{Vectors: r.ix, Embedder: embed.NewHashing(32)}, r.bus, r.st, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	errs := other.HandleVectors(ctx, []*stream.Message{graphMsg(t, "a", 2, false, hubID), graphMsg(t, "b", 2, true, hubID)})
	var be *vector.BatchError
	require.ErrorAs(t, errs[0], &be)
	require.Zero(t, docItems("b"), "items of the deleted document left")
}
