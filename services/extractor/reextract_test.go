package extractor_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/extractor"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

const rxTenant = "acme"

// rxEnv is a store, a bus, an offline extractor reading the catalog from
// the store, a small-window chunker and the re-extraction stage.
type rxEnv struct {
	st      *embedded.Store
	bus     *stream.Bus
	off     *offline.Extractor
	chunker *chunk.Chunker
	rx      *extractor.Reextractor
}

func newRxEnv(t *testing.T) *rxEnv {
	t.Helper()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	bus := streamtest.NewBus(t, streamtest.Options{Config: stream.Config{Storage: jetstream.MemoryStorage},
		Metrics: stream.NewMetrics(nil)})
	off, err := offline.New(offline.Config{Gazetteer: offline.NewCatalogGazetteer(st, time.Hour)})
	require.NoError(t, err)
	tk, err := chunk.NewTokenizer()
	require.NoError(t, err)
	// Small windows, so documents have several overlapping units.
	chunker, err := chunk.New(tk, 24, 4)
	require.NoError(t, err)
	rx, err := extractor.NewReextractor(extractor.ReextractConfig{}, bus, st, off, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	return &rxEnv{st: st, bus: bus, off: off, chunker: chunker, rx: rx}
}

// catalog applies a catalog document defining components (name -> title,
// "" for none), as the resolver would.
func (e *rxEnv) catalog(t *testing.T, version int64, components map[string]string) {
	t.Helper()
	_, err := e.st.Announce(t.Context(), rxTenant, store.Announcement{DocID: "catalog", Version: version,
		Source: extractor.CatalogSource, ACL: provenance.PublicACL()})
	require.NoError(t, err)
	c := store.Contributions{DocType: extractor.CatalogDocType, Title: "Service catalog"}
	for name, title := range components {
		id := resolve.ID("component", name)
		c.Entities = append(c.Entities, store.EntityContribution{ID: id, Type: "component", Name: name, NameRank: 1})
		if title != "" {
			c.Entities = append(c.Entities, store.EntityContribution{ID: id, Type: "component", Name: title, NameRank: 0})
		}
	}
	_, err = e.st.Apply(t.Context(), rxTenant, "catalog", version, c)
	require.NoError(t, err)
	e.off.InvalidateCatalog(rxTenant)
}

// extract extracts a document afresh with the catalog as it is now.
func (e *rxEnv) extract(t *testing.T, id, text string) events.Extracted {
	t.Helper()
	doc := &events.DocChanged{Header: events.Header{Tenant: rxTenant}, DocID: id, Version: 1, DocType: "incident",
		Title: "Incident " + id, Text: text}
	units := e.chunker.Chunk(id, 1, text)
	ents, rels, err := e.off.Extract(t.Context(), doc, units)
	require.NoError(t, err)
	return events.Extracted{Header: events.Header{Tenant: rxTenant}, DocID: id, Version: 1, Title: doc.Title,
		DocType: doc.DocType, Extractor: "offline", TextUnits: units, Entities: ents, Relationships: rels}
}

// ingest extracts a document with the catalog as it is now and applies
// it (entities only: candidate selection reads the entities a document
// linked, its units and its stored extraction).
func (e *rxEnv) ingest(t *testing.T, id, text string) events.Extracted {
	t.Helper()
	_, err := e.st.Announce(t.Context(), rxTenant, store.Announcement{DocID: id, Version: 1, ACL: provenance.PublicACL()})
	require.NoError(t, err)
	ev := e.extract(t, id, text)
	raw, err := events.Encode(&ev)
	require.NoError(t, err)
	c := store.Contributions{Title: ev.Title, DocType: ev.DocType, TextUnits: ev.TextUnits, Raw: raw}
	seen := map[string]bool{}
	for _, en := range ev.Entities {
		key := en.Key
		if key == "" {
			key = en.Name
		}
		eid := resolve.ID(en.Type, key)
		if !seen[eid] {
			seen[eid] = true
			c.Entities = append(c.Entities, store.EntityContribution{ID: eid, Type: resolve.Type(en.Type), Name: en.Name, NameRank: 2})
		}
	}
	_, err = e.st.Apply(t.Context(), rxTenant, id, 1, c)
	require.NoError(t, err)
	return ev
}

func (e *rxEnv) candidates(t *testing.T, ids ...string) []string {
	t.Helper()
	recs, err := e.rx.Candidates(t.Context(), rxTenant, ids)
	require.NoError(t, err)
	out := []string{}
	for _, r := range recs {
		out = append(out, r.DocID)
	}
	return out
}

func (e *rxEnv) source(t *testing.T, id string) store.SourceRecord {
	t.Helper()
	rec, err := e.st.Source(t.Context(), rxTenant, id)
	require.NoError(t, err)
	return rec
}

// extractedMsgs are the extracted events published on the bus.
func (e *rxEnv) extractedMsgs(t *testing.T) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := t.Context()
	s, err := e.bus.JetStream().Stream(ctx, e.bus.StreamName())
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	subject := e.bus.Subjects().For(events.KindExtracted, rxTenant)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		require.NoError(t, err)
		if m.Subject == subject {
			out = append(out, m)
		}
	}
	return out
}

func mentions(ev events.Extracted) []string {
	var out []string
	for _, r := range ev.Relationships {
		if r.Relation == offline.RelMentions {
			out = append(out, r.TargetType+":"+r.Target)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

const (
	textA = "At 09:12 the frobnicator stopped draining its queue and checkout requests timed out. " +
		"On-call restarted the frobnicator and latency recovered by 09:40."
	textB = "The Frob Engine rejected every batch after the deploy; the rollback fixed it."
	textC = "Disk usage on the build hosts crossed ninety percent overnight and the jobs slowed down."
	textD = "The widgetizer leaked file handles until the node ran out of them."
)

func TestReextractCandidates(t *testing.T) {
	e := newRxEnv(t)
	e.catalog(t, 1, map[string]string{"widgetizer": ""})
	e.ingest(t, "inc-a", textA) // names frobnicator before the catalog does
	e.ingest(t, "inc-b", textB) // names frobnicator by its future title
	e.ingest(t, "inc-c", textC) // names no catalog entity
	e.ingest(t, "inc-d", textD) // links widgetizer
	e.ingest(t, "inc-gone", textA)
	_, err := e.st.MarkDeleted(t.Context(), rxTenant, "inc-gone")
	require.NoError(t, err)
	_, err = e.st.Delete(t.Context(), rxTenant, "inc-gone", 2)
	require.NoError(t, err)
	_, err = e.st.Announce(t.Context(), rxTenant, store.Announcement{DocID: "inc-pending", Version: 1})
	require.NoError(t, err) // announced, not applied: extracted with the new catalog anyway

	require.Equal(t, []string{"inc-d"}, e.candidates(t, "component:widgetizer"), "a document linking the entity")
	require.Equal(t, []string{"inc-a"}, e.candidates(t, "component:frobnicator"), "by key, before the title is known")

	e.catalog(t, 2, map[string]string{"widgetizer": "", "frobnicator": "Frob Engine"})
	require.Equal(t, []string{"inc-a", "inc-b"}, e.candidates(t, "component:frobnicator"), "by key and by catalog title")
	require.Equal(t, []string{"inc-a", "inc-b", "inc-d"}, e.candidates(t, "component:frobnicator", "component:widgetizer"))
	require.Empty(t, e.candidates(t, "component:nothing-names-this"))
}

func TestReextractPublishesOnlyChangedExtractions(t *testing.T) {
	e := newRxEnv(t)
	e.catalog(t, 1, map[string]string{"widgetizer": ""})
	before := e.ingest(t, "inc-a", textA)
	require.Greater(t, len(before.TextUnits), 1, "the text spans overlapping units")
	require.Equal(t, textA, chunk.UnitsText(before.TextUnits))
	require.NotContains(t, mentions(before), "component:frobnicator")
	linked := e.ingest(t, "inc-d", textD)
	require.Contains(t, mentions(linked), "component:widgetizer")

	// Unchanged by the catalog: nothing is published.
	ok, err := e.rx.Reextract(t.Context(), rxTenant, e.source(t, "inc-d"), extractor.ReasonCatalog)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, e.rx.CatalogChanged(t.Context(), rxTenant, []string{"component:widgetizer"}))
	require.Empty(t, e.extractedMsgs(t))

	// The catalog gains frobnicator: inc-a is extracted again, exactly as
	// a fresh extraction with the new catalog.
	e.catalog(t, 2, map[string]string{"widgetizer": "", "frobnicator": ""})
	require.NoError(t, e.rx.CatalogChanged(t.Context(), rxTenant, []string{"component:frobnicator", "component:widgetizer"}))
	msgs := e.extractedMsgs(t)
	require.Len(t, msgs, 1)
	require.Equal(t, events.MsgID(rxTenant, "inc-a", 1, "extracted-r1"), msgs[0].Header.Get(jetstream.MsgIDHeader))
	var got events.Extracted
	require.NoError(t, events.Decode(msgs[0].Data, &got))
	require.Equal(t, int64(1), got.Resolution)
	fresh := e.extract(t, "inc-a", textA)
	require.Equal(t, fresh.TextUnits, got.TextUnits)
	require.Equal(t, fresh.Entities, got.Entities)
	require.Equal(t, fresh.Relationships, got.Relationships)
	require.Contains(t, mentions(got), "component:frobnicator")
	require.Equal(t, 1.0, testutil.ToFloat64(e.rx.Reextractions().WithLabelValues(extractor.ReasonCatalog)))

	// Handled again before the resolver applied it: the same extraction is
	// on its way, nothing more is published.
	require.NoError(t, e.rx.CatalogChanged(t.Context(), rxTenant, []string{"component:frobnicator"}))
	require.Len(t, e.extractedMsgs(t), 1)

	// The catalog drops frobnicator before r1 was applied: r2 brings the
	// applied extraction back.
	e.catalog(t, 3, map[string]string{"widgetizer": ""})
	require.NoError(t, e.rx.CatalogChanged(t.Context(), rxTenant, []string{"component:frobnicator", "component:widgetizer"}))
	msgs = e.extractedMsgs(t)
	require.Len(t, msgs, 2)
	require.Equal(t, events.MsgID(rxTenant, "inc-a", 1, "extracted-r2"), msgs[1].Header.Get(jetstream.MsgIDHeader))
	require.NoError(t, events.Decode(msgs[1].Data, &got))
	require.Equal(t, before.Entities, got.Entities)
	require.ElementsMatch(t, before.Relationships, got.Relationships) // none: nil and empty alike
}

func TestReextractStageActsOnCatalogDocumentsOnly(t *testing.T) {
	e := newRxEnv(t)
	e.ingest(t, "inc-a", textA)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.rx.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	publish := func(doc string, version int64, touched []string) {
		ev := &events.GraphChanged{Header: events.Header{Tenant: rxTenant}, DocID: doc, Version: version,
			Touched: touched, Contributed: touched, ReceivedAt: time.Now()}
		_, err := e.bus.Publish(t.Context(), events.KindGraphChanged, rxTenant,
			events.MsgID(rxTenant, doc, version, "graph"), ev)
		require.NoError(t, err)
	}
	// An incident naming the component is not a catalog: nothing happens.
	publish("inc-a", 1, []string{"component:frobnicator"})
	e.catalog(t, 1, map[string]string{"frobnicator": ""})
	publish("catalog", 1, []string{"component:frobnicator"})
	streamtest.Eventually(t, 20*time.Second, func() error {
		if n := len(e.extractedMsgs(t)); n != 1 {
			return fmt.Errorf("%d extracted events, want 1", n)
		}
		return nil
	})
	var got events.Extracted
	require.NoError(t, events.Decode(e.extractedMsgs(t)[0].Data, &got))
	require.Equal(t, "inc-a", got.DocID)
	require.True(t, strings.Contains(strings.Join(mentions(got), " "), "component:frobnicator"))
}

// sourceCounting counts the records the re-extraction stage reads.
type sourceCounting struct {
	*embedded.Store
	reads atomic.Int64
}

func (s *sourceCounting) Source(ctx context.Context, tenant, docID string) (store.SourceRecord, error) {
	s.reads.Add(1)
	return s.Store.Source(ctx, tenant, docID)
}

// The stage reads a document's record only when the change may concern
// it: a change naming a doc type other than the catalog's, of a document
// received after the tenant's last catalog change, is left unread; a
// change without a doc type (an older build's event), a catalog
// document's and one received before a catalog change are read, and the
// last is re-extracted against the new catalog.
func TestReextractStageReadsOnlyWhatMayConcernIt(t *testing.T) {
	e := newRxEnv(t)
	st := &sourceCounting{Store: e.st}
	rx, err := extractor.NewReextractor(extractor.ReextractConfig{}, e.bus, st, e.off, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	e.ingest(t, "inc-a", textA)
	handle := func(ev events.GraphChanged) {
		t.Helper()
		ev.Header = events.Header{Schema: events.SchemaVersion, Tenant: rxTenant}
		data, err := events.Encode(&ev)
		require.NoError(t, err)
		require.NoError(t, rx.Handle(t.Context(), &stream.Message{Kind: events.KindGraphChanged, Tenant: rxTenant, Data: data}))
	}
	before := time.Now()
	handle(events.GraphChanged{DocID: "inc-a", Version: 1, DocType: "incident", ReceivedAt: before})
	require.Zero(t, st.reads.Load(), "an incident's change, no catalog change: its record was read")
	handle(events.GraphChanged{DocID: "inc-a", Version: 1, ReceivedAt: before})
	require.EqualValues(t, 1, st.reads.Load(), "a change without a doc type is read")

	e.catalog(t, 1, map[string]string{"frobnicator": ""})
	handle(events.GraphChanged{DocID: "catalog", Version: 1, DocType: extractor.CatalogDocType, ReceivedAt: time.Now(),
		Touched: []string{"component:frobnicator"}})
	require.Greater(t, st.reads.Load(), int64(1), "the catalog's change is read")
	extracted := len(e.extractedMsgs(t))
	require.Equal(t, 1, extracted, "inc-a is re-extracted once for the catalog")

	reads := st.reads.Load()
	handle(events.GraphChanged{DocID: "inc-a", Version: 1, DocType: "incident", ReceivedAt: time.Now().Add(time.Minute)})
	require.Equal(t, reads, st.reads.Load(), "a document received after the catalog change was read")
	handle(events.GraphChanged{DocID: "inc-a", Version: 1, DocType: "incident", ReceivedAt: before})
	require.Equal(t, reads+1, st.reads.Load(), "a document received before the catalog change is read")
}

// TestRedeliveredCatalogChangeReachesWhatItDropped: the event of a
// redelivered catalog change names only what the applied catalog holds;
// the documents citing a component the catalog dropped are extracted
// again all the same.
func TestRedeliveredCatalogChangeReachesWhatItDropped(t *testing.T) {
	e := newRxEnv(t)
	e.catalog(t, 1, map[string]string{"frobnicator": ""})
	e.ingest(t, "inc-a", textA)
	e.catalog(t, 2, map[string]string{"widgetizer": ""})
	before := len(e.extractedMsgs(t))
	ev := events.GraphChanged{Header: events.Header{Schema: events.SchemaVersion, Tenant: rxTenant}, DocID: "catalog", Version: 2,
		DocType: extractor.CatalogDocType, ReceivedAt: time.Now(), Duplicate: true, Contributed: []string{"component:widgetizer"}}
	data, err := events.Encode(&ev)
	require.NoError(t, err)
	require.NoError(t, e.rx.Handle(t.Context(), &stream.Message{Kind: events.KindGraphChanged, Tenant: rxTenant, Data: data}))
	msgs := e.extractedMsgs(t)
	require.Len(t, msgs, before+1, "inc-a, which cites the dropped frobnicator, is extracted again")
	var got events.Extracted
	require.NoError(t, events.Decode(msgs[len(msgs)-1].Data, &got))
	require.Equal(t, "inc-a", got.DocID)
}
