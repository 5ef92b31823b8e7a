package resolver_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/resolver"
)

const certAlias = `
aliases:
  - type: component
    canonical: cert-manager
    mentions: [certificate manager]
`

// aliasFixture is a resolver over a real JetStream and store with an alias
// table the test rewrites; batches are handed over directly.
type aliasFixture struct {
	st      *embedded.Store
	w       *resolver.Worker
	aliases string
	aw      *resolve.AliasWatcher
	reg     *prometheus.Registry
}

func setupAliases(t *testing.T, table string) *aliasFixture {
	t.Helper()
	reg := prometheus.NewRegistry()
	bus := streamtest.NewBus(t, streamtest.Options{Metrics: stream.NewMetrics(reg)})
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	p := filepath.Join(t.TempDir(), "aliases.yaml")
	require.NoError(t, os.WriteFile(p, []byte(table), 0o644))
	aw, err := resolve.NewAliasWatcher(p, nil)
	require.NoError(t, err)
	w, err := resolver.New(resolver.Config{Aliases: aw}, bus, st, nil, reg)
	require.NoError(t, err)
	return &aliasFixture{st: st, w: w, aliases: p, aw: aw, reg: reg}
}

// incidents are two incidents naming cert-manager by two spellings that
// only the alias table merges.
func incidents() []*events.Extracted {
	a := extracted("INC-1", 1, "expired certificate")
	a.Relationships[0].Target = "Certificate Manager"
	b := extracted("INC-2", 1, "bad upgrade")
	return []*events.Extracted{a, b}
}

func handle(t *testing.T, w *resolver.Worker, ms ...*stream.Message) {
	t.Helper()
	for i, err := range w.HandleBatch(t.Context(), ms) {
		require.NoError(t, err, "message %d", i)
	}
}

func reresolveMsg(t *testing.T, id string, docs ...string) *stream.Message {
	return msg(t, events.KindReresolve, "acme", &events.Reresolve{Header: events.Header{Tenant: "acme"},
		RequestID: id, DocIDs: docs, RequestedAt: time.Now().UTC()})
}

func resolution(t *testing.T, st store.GraphStore, doc string) int64 {
	t.Helper()
	rec, err := st.Source(t.Context(), "acme", doc)
	require.NoError(t, err)
	return rec.Resolution
}

// TestReresolveRequestAndAliasChangeAtOnce: a re-resolution request and
// the alias watcher's pass after an alias change run at the same time; both
// apply (each takes its own resolution number; neither is dropped as a
// duplicate) and the graph is the one a clean ingest with the new table
// gives.
func TestReresolveRequestAndAliasChangeAtOnce(t *testing.T) {
	f := setupAliases(t, "aliases: []\n")
	for _, ev := range incidents() {
		handle(t, f.w, msg(t, events.KindExtracted, "acme", ev))
	}
	split, err := f.st.Snapshot(t.Context(), "acme")
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(f.aliases, []byte(certAlias), 0o644))
	require.NoError(t, f.aw.Refresh())
	var wg sync.WaitGroup
	var reqErrs []error
	var passErr error
	var passed int
	wg.Add(2)
	go func() {
		defer wg.Done()
		reqErrs = f.w.HandleBatch(context.Background(), []*stream.Message{reresolveMsg(t, "r1", "INC-1", "INC-2")})
	}()
	go func() {
		defer wg.Done()
		passed, passErr = f.w.ReresolveAll(context.Background())
	}()
	wg.Wait()
	require.NoError(t, reqErrs[0])
	require.NoError(t, passErr)
	// The request re-applies both documents; the pass INC-1 when it ran
	// first (after the request, INC-1 already resolves as applied).
	want := int64(1 + passed)
	require.Equal(t, want, resolution(t, f.st, "INC-1"), "INC-1 resolved by the request and %d by the pass", passed)
	require.Equal(t, int64(1), resolution(t, f.st, "INC-2"))

	clean := setupAliases(t, certAlias)
	for _, ev := range incidents() {
		handle(t, clean.w, msg(t, events.KindExtracted, "acme", ev))
	}
	want2, err := clean.st.Snapshot(t.Context(), "acme")
	require.NoError(t, err)
	got, err := f.st.Snapshot(t.Context(), "acme")
	require.NoError(t, err)
	require.NotEqual(t, split, got, "the alias change merged nothing")
	require.Equal(t, want2, got)
}

// TestConcurrentRequestsBothApply: two re-resolution requests for the same
// documents at once are two resolutions; the second is not taken for a
// duplicate of the first.
func TestConcurrentRequestsBothApply(t *testing.T) {
	f := setupAliases(t, "aliases: []\n")
	for _, ev := range incidents() {
		handle(t, f.w, msg(t, events.KindExtracted, "acme", ev))
	}
	var wg sync.WaitGroup
	errs := make([][]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f.w.HandleBatch(context.Background(), []*stream.Message{reresolveMsg(t, []string{"a", "b"}[i], "INC-1", "INC-2")})
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0][0])
	require.NoError(t, errs[1][0])
	require.Equal(t, int64(2), resolution(t, f.st, "INC-1"))
	require.Equal(t, int64(2), resolution(t, f.st, "INC-2"))
}

// TestReextractionAfterReresolutionApplies: the extractor numbers its
// extractions, the resolver its resolutions. A re-extraction (extraction 1)
// arriving after a re-resolution already took resolution 1 is applied as
// resolution 2, not dropped as a duplicate; its redelivery is a duplicate;
// a later re-resolution keeps the re-extraction.
func TestReextractionAfterReresolutionApplies(t *testing.T) {
	f := setupAliases(t, "aliases: []\n")
	first := extracted("INC-1", 1, "expired certificate")
	handle(t, f.w, msg(t, events.KindExtracted, "acme", first))
	handle(t, f.w, reresolveMsg(t, "r1", "INC-1"))
	require.Equal(t, int64(1), resolution(t, f.st, "INC-1"))

	again := extracted("INC-1", 1, "disk full")
	again.Resolution = 1
	handle(t, f.w, msg(t, events.KindExtracted, "acme", again))
	require.Equal(t, int64(2), resolution(t, f.st, "INC-1"))
	_, err := f.st.Entity(t.Context(), "acme", "failure_mode:diskfull")
	require.NoError(t, err, "the re-extraction was dropped")

	handle(t, f.w, msg(t, events.KindExtracted, "acme", again))
	require.Equal(t, int64(2), resolution(t, f.st, "INC-1"), "a redelivered re-extraction applied again")
	older := extracted("INC-1", 1, "expired certificate")
	handle(t, f.w, msg(t, events.KindExtracted, "acme", older))
	require.Equal(t, int64(2), resolution(t, f.st, "INC-1"), "the first extraction replaced its re-extraction")

	handle(t, f.w, reresolveMsg(t, "r2", "INC-1"))
	require.Equal(t, int64(3), resolution(t, f.st, "INC-1"))
	_, err = f.st.Entity(t.Context(), "acme", "failure_mode:diskfull")
	require.NoError(t, err, "a re-resolution went back to the first extraction")
}

// TestReresolveRefusesOtherTenantsRequest: a request whose tenant is not
// its subject's is refused permanently.
func TestReresolveRefusesOtherTenantsRequest(t *testing.T) {
	f := setupAliases(t, "aliases: []\n")
	m := reresolveMsg(t, "r1", "INC-1")
	m.Tenant, m.Subject = "globex", "kg.reresolve.globex"
	err := f.w.HandleBatch(t.Context(), []*stream.Message{m})[0]
	require.ErrorIs(t, err, stream.ErrTenantMismatch)
	require.True(t, stream.IsPermanent(err))
}

// TestHandleRefusesOtherTenantsEvent: an extraction or a deletion whose
// tenant is not its subject's is refused permanently and changes nothing;
// the others of its batch are applied.
func TestHandleRefusesOtherTenantsEvent(t *testing.T) {
	f := setupBatch(t, nil)
	ok := msg(t, events.KindExtracted, "acme", extractedFor("acme", "INC-1", 1, "disk full"))
	spoofed := msg(t, events.KindExtracted, "globex", extractedFor("acme", "INC-2", 1, "disk full"))
	deletion := msg(t, events.KindDocDeleted, "globex", &events.DocDeleted{Header: events.Header{Tenant: "acme"}, DocID: "INC-1", Version: 2})
	errs := f.w.HandleBatch(t.Context(), []*stream.Message{ok, spoofed, deletion})
	require.NoError(t, errs[0])
	for _, err := range errs[1:] {
		require.ErrorIs(t, err, stream.ErrTenantMismatch)
		require.True(t, stream.IsPermanent(err))
	}
	require.Equal(t, int64(1), f.version(t, "acme", "INC-1"), "the refused deletion was applied")
	_, err := f.st.Source(t.Context(), "acme", "INC-2")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = f.st.Source(t.Context(), "globex", "INC-2")
	require.ErrorIs(t, err, store.ErrNotFound)
}
