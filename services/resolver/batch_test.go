package resolver_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/resolver"
)

// batchFixture is a resolver whose batches the test hands over directly,
// so which events share a batch is decided by the test.
type batchFixture struct {
	bus *stream.Bus
	st  *embedded.Store
	w   *resolver.Worker
}

func setupBatch(t *testing.T, wrap func(store.GraphStore) store.GraphStore) *batchFixture {
	t.Helper()
	reg := prometheus.NewRegistry()
	bus := streamtest.NewBus(t, streamtest.Options{Metrics: stream.NewMetrics(reg)})
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	var g store.GraphStore = st
	if wrap != nil {
		g = wrap(st)
	}
	w, err := resolver.New(resolver.Config{}, bus, g, nil, reg)
	require.NoError(t, err)
	return &batchFixture{bus: bus, st: st, w: w}
}

func msg(t *testing.T, kind events.Kind, tenant string, ev events.Validator) *stream.Message {
	t.Helper()
	data, err := events.Encode(ev)
	require.NoError(t, err)
	return &stream.Message{Subject: "kg." + string(kind) + "." + tenant, Kind: kind, Tenant: tenant, Data: data, Deliveries: 1}
}

func extractedFor(tenant, doc string, version int64, failure string) *events.Extracted {
	ev := extracted(doc, version, failure)
	ev.Tenant = tenant
	return ev
}

// announced lists the graph.changed events of a tenant as doc@version.
func (f *batchFixture) announced(t *testing.T, tenant string) []string {
	t.Helper()
	var out []string
	for _, ev := range f.graphChanges(t, tenant) {
		out = append(out, fmt.Sprintf("%s@%d", ev.DocID, ev.Version))
	}
	sort.Strings(out)
	return out
}

// graphChanges returns the graph.changed events of a tenant, in stream
// order.
func (f *batchFixture) graphChanges(t *testing.T, tenant string) []events.GraphChanged {
	t.Helper()
	c, err := f.bus.JetStream().OrderedConsumer(t.Context(), f.bus.StreamName(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{f.bus.Subjects().For(events.KindGraphChanged, tenant)}})
	require.NoError(t, err)
	batch, err := c.FetchNoWait(100)
	require.NoError(t, err)
	var out []events.GraphChanged
	for m := range batch.Messages() {
		var ev events.GraphChanged
		require.NoError(t, events.Decode(m.Data(), &ev))
		out = append(out, ev)
	}
	return out
}

// A graph change names the applied version's doc type, so that a stage
// that acts on catalog documents only need not read the record of every
// other.
func TestGraphChangeNamesTheDocType(t *testing.T) {
	f := setupBatch(t, nil)
	ev := extractedFor("acme", "INC-1", 1, "disk full")
	ev.DocType = "postmortem"
	errs := f.w.HandleBatch(t.Context(), []*stream.Message{msg(t, events.KindExtracted, "acme", ev)})
	require.NoError(t, errs[0])
	changes := f.graphChanges(t, "acme")
	require.Len(t, changes, 1)
	require.Equal(t, "postmortem", changes[0].DocType)
}

// A change applied again (its first announcement failed) is announced as
// a duplicate: its event cannot name what the version before it held, so
// consumers patching by the ids it names must read afresh.
func TestRedeliveredChangeIsAnnouncedAsDuplicate(t *testing.T) {
	f := setupBatch(t, nil)
	m := msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-1", 1, "disk full"))
	restore := streamtest.Narrow(t, f.bus, events.KindGraphChanged)
	errs := f.w.HandleBatch(t.Context(), []*stream.Message{m})
	require.Error(t, errs[0], "the announcement failed")
	restore()
	require.EqualValues(t, 1, f.version(t, "acme", "INC-1"), "applied before the announcement failed")
	errs = f.w.HandleBatch(t.Context(), []*stream.Message{m,
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-2", 1, "disk full"))})
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	changes := f.graphChanges(t, "acme")
	require.Len(t, changes, 2)
	dup := map[string]bool{}
	for _, ev := range changes {
		dup[ev.DocID] = ev.Duplicate
	}
	require.Equal(t, map[string]bool{"INC-1": true, "INC-2": false}, dup)
}

func (f *batchFixture) version(t *testing.T, tenant, doc string) int64 {
	t.Helper()
	rec, err := f.st.Source(t.Context(), tenant, doc)
	require.NoError(t, err)
	return rec.Version
}

// Two versions of one document in one batch: only the newest is applied
// and announced, the older is stale, in either order.
func TestBatchTwoVersionsOfOneDocument(t *testing.T) {
	f := setupBatch(t, nil)
	ctx := t.Context()
	errs := f.w.HandleBatch(ctx, []*stream.Message{
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-1", 1, "expired certificate")),
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-2", 1, "disk full")),
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-1", 2, "bad upgrade")),
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-3", 2, "bad upgrade")),
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-3", 1, "expired certificate")),
	})
	require.Len(t, errs, 5)
	require.ErrorIs(t, errs[0], stream.ErrStale)
	require.NoError(t, errs[1])
	require.NoError(t, errs[2])
	require.NoError(t, errs[3])
	require.ErrorIs(t, errs[4], stream.ErrStale)
	require.EqualValues(t, 2, f.version(t, "acme", "INC-1"))
	require.EqualValues(t, 2, f.version(t, "acme", "INC-3"))
	_, err := f.st.Entity(ctx, "acme", "failure_mode:expiredcertificate")
	require.ErrorIs(t, err, store.ErrNotFound, "no older version was applied")
	require.Equal(t, []string{"INC-1@2", "INC-2@1", "INC-3@2"}, f.announced(t, "acme"))

	// The same batch again (a redelivery): everything is a duplicate or
	// stale, nothing changes, the announcements are de-duplicated.
	before, err := f.st.Snapshot(ctx, "acme")
	require.NoError(t, err)
	errs = f.w.HandleBatch(ctx, []*stream.Message{
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-1", 2, "bad upgrade")),
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-1", 1, "expired certificate")),
	})
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], stream.ErrStale)
	after, err := f.st.Snapshot(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.Equal(t, []string{"INC-1@2", "INC-2@1", "INC-3@2"}, f.announced(t, "acme"))
}

// A batch mixing tenants and kinds applies each tenant's events to that
// tenant only; an event whose tenant contradicts its subject is refused
// alone.
func TestBatchMixingTenants(t *testing.T) {
	f := setupBatch(t, nil)
	ctx := t.Context()
	spoofed := msg(t, events.KindExtracted, "acme", extractedFor("globex", "INC-9", 1, "disk full"))
	errs := f.w.HandleBatch(ctx, []*stream.Message{
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-1", 1, "expired certificate")),
		msg(t, events.KindExtracted, "globex", extractedFor("globex", "INC-1", 1, "disk full")),
		spoofed,
		msg(t, events.KindExtracted, "globex", extractedFor("globex", "INC-2", 1, "disk full")),
	})
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.True(t, stream.IsPermanent(errs[2]), "spoofed tenant: %v", errs[2])
	require.NoError(t, errs[3])
	_, err := f.st.Entity(ctx, "acme", "failure_mode:expiredcertificate")
	require.NoError(t, err)
	_, err = f.st.Entity(ctx, "acme", "failure_mode:diskfull")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = f.st.Entity(ctx, "globex", "failure_mode:expiredcertificate")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = f.st.Source(ctx, "globex", "INC-9")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, []string{"INC-1@1"}, f.announced(t, "acme"))
	require.Equal(t, []string{"INC-1@1", "INC-2@1"}, f.announced(t, "globex"))

	// A deletion batch for one tenant leaves the other alone.
	errs = f.w.HandleBatch(ctx, []*stream.Message{
		msg(t, events.KindDocDeleted, "globex", &events.DocDeleted{Header: events.Header{Tenant: "globex"}, DocID: "INC-1", Version: 2, ReceivedAt: time.Now()}),
	})
	require.NoError(t, errs[0])
	rec, err := f.st.Source(ctx, "globex", "INC-1")
	require.NoError(t, err)
	require.True(t, rec.Deleted)
	require.EqualValues(t, 1, f.version(t, "acme", "INC-1"))
}

// An event the store refuses is dead-lettered alone; the others of its
// batch are applied and announced.
func TestBatchInvalidDocumentDoesNotLoseOthers(t *testing.T) {
	f := setupBatch(t, nil)
	ctx := t.Context()
	bad := extractedFor("acme", "INC-2", 1, "disk full")
	bad.TextUnits = append(bad.TextUnits, bad.TextUnits[0]) // a duplicate text unit id
	errs := f.w.HandleBatch(ctx, []*stream.Message{
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-1", 1, "expired certificate")),
		msg(t, events.KindExtracted, "acme", bad),
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-3", 1, "bad upgrade")),
	})
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], store.ErrInvalid)
	require.True(t, stream.IsPermanent(errs[1]))
	require.NoError(t, errs[2])
	_, err := f.st.Source(ctx, "acme", "INC-2")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, []string{"INC-1@1", "INC-3@1"}, f.announced(t, "acme"))
}

// failingStore is the real store failing every ApplyBatch that contains
// one document, as a store would that cannot take it right now.
type failingStore struct {
	store.GraphStore
	doc string
}

var errStoreBusy = errors.New("store busy")

func (s failingStore) ApplyBatch(ctx context.Context, tenant string, changes []store.Change) ([]store.ApplyResult, []error, error) {
	for _, ch := range changes {
		if ch.DocID == s.doc {
			return nil, nil, errStoreBusy
		}
	}
	return s.GraphStore.ApplyBatch(ctx, tenant, changes)
}

// When the store fails a whole batch, the documents are applied one by
// one: only the one it cannot take is retried, the others are applied.
func TestBatchStoreErrorDoesNotLoseOthers(t *testing.T) {
	f := setupBatch(t, func(g store.GraphStore) store.GraphStore { return failingStore{g, "INC-2"} })
	ctx := t.Context()
	errs := f.w.HandleBatch(ctx, []*stream.Message{
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-1", 1, "expired certificate")),
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-2", 1, "disk full")),
		msg(t, events.KindDocDeleted, "acme", &events.DocDeleted{Header: events.Header{Tenant: "acme"}, DocID: "INC-4", Version: 1, ReceivedAt: time.Now()}),
	})
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], errStoreBusy)
	require.False(t, stream.IsPermanent(errs[1]), "a store error is retried")
	require.NoError(t, errs[2])
	require.EqualValues(t, 1, f.version(t, "acme", "INC-1"))
	_, err := f.st.Source(ctx, "acme", "INC-2")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, []string{"INC-1@1", "INC-4@1"}, f.announced(t, "acme"))
}

// countingStore is the real store counting the record reads the resolver
// makes: one at a time (Source) or a run's at once (SourceIndexes).
type countingStore struct {
	store.GraphStore
	bulk             store.SourceIndexes
	sources, indexes int
}

func (s *countingStore) Source(ctx context.Context, tenant, docID string) (store.SourceRecord, error) {
	s.sources++
	return s.GraphStore.Source(ctx, tenant, docID)
}

func (s *countingStore) SourceIndexes(ctx context.Context, tenant string, ids []string) (map[string]store.SourceIndex, error) {
	s.indexes++
	return s.bulk.SourceIndexes(ctx, tenant, ids)
}

// A batch's records are read once for the run, not once per document; a
// document at its applied version (a redelivery) is read whole, as its
// extraction number needs.
func TestBatchReadsRecordsOncePerRun(t *testing.T) {
	var cs *countingStore
	f := setupBatch(t, func(g store.GraphStore) store.GraphStore {
		cs = &countingStore{GraphStore: g, bulk: g.(store.SourceIndexes)}
		return cs
	})
	ctx := t.Context()
	batch := []*stream.Message{
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-1", 1, "expired certificate")),
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-2", 1, "disk full")),
		msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-3", 1, "bad upgrade")),
	}
	for _, err := range f.w.HandleBatch(ctx, batch) {
		require.NoError(t, err)
	}
	require.Equal(t, 1, cs.indexes, "one read of the run's records")
	require.Zero(t, cs.sources, "no record read one by one")
	require.Equal(t, []string{"INC-1@1", "INC-2@1", "INC-3@1"}, f.announced(t, "acme"))

	// The same versions again: each at its applied version, read whole.
	cs.indexes, cs.sources = 0, 0
	for _, err := range f.w.HandleBatch(ctx, batch) {
		require.NoError(t, err)
	}
	require.Equal(t, 1, cs.indexes)
	require.Equal(t, 3, cs.sources)
}
