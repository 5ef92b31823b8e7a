package resolver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/resolver"
)

type fixture struct {
	bus     *stream.Bus
	st      *embedded.Store
	w       *resolver.Worker
	metrics *stream.Metrics
}

func setup(t *testing.T) *fixture {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := stream.NewMetrics(reg)
	bus := streamtest.NewBus(t, streamtest.Options{Metrics: m})
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	w, err := resolver.New(resolver.Config{MaxDeliver: 2, Backoff: []time.Duration{5 * time.Millisecond}}, bus, st, nil, reg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return &fixture{bus: bus, st: st, w: w, metrics: m}
}

func extracted(doc string, version int64, failure string) *events.Extracted {
	return &events.Extracted{Header: events.Header{Tenant: "acme"}, DocID: doc, Version: version, Extractor: "test",
		TextUnits: []events.TextUnit{{ID: "u1", Text: "text"}},
		Relationships: []events.RawRelationship{
			{Source: doc, SourceType: "incident", Relation: "involved", Target: "Cert Manager", TargetType: "component", TextUnit: "u1"},
			{Source: doc, SourceType: "incident", Relation: "failure", Target: failure, TargetType: "failure_mode", TextUnit: "u1"},
		},
		ReceivedAt: time.Now()}
}

func (f *fixture) publish(t *testing.T, kind events.Kind, id string, ev events.Validator) {
	t.Helper()
	_, err := f.bus.Publish(t.Context(), kind, "acme", id, ev)
	require.NoError(t, err)
}

func (f *fixture) waitCount(t *testing.T, outcome string, n float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for testutil.ToFloat64(f.metrics.Events.WithLabelValues("resolver", outcome)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %v %s events", n, outcome)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestOlderVersionAfterNewerChangesNothing(t *testing.T) {
	f := setup(t)
	f.publish(t, events.KindExtracted, "acme/INC-1/2/extracted", extracted("INC-1", 2, "bad upgrade"))
	f.waitCount(t, "ok", 1)
	before, err := f.st.Snapshot(t.Context(), "acme")
	require.NoError(t, err)

	f.publish(t, events.KindExtracted, "acme/INC-1/1/extracted", extracted("INC-1", 1, "expired certificate"))
	f.waitCount(t, "stale", 1)
	after, err := f.st.Snapshot(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, before, after)
	_, err = f.st.Entity(t.Context(), "acme", "failure_mode:expiredcertificate")
	require.ErrorIs(t, err, store.ErrNotFound)
	rec, err := f.st.Source(t.Context(), "acme", "INC-1")
	require.NoError(t, err)
	require.EqualValues(t, 2, rec.Version)
}

func TestEditRetractsAndDeleteRemoves(t *testing.T) {
	f := setup(t)
	f.publish(t, events.KindExtracted, "acme/INC-1/1/extracted", extracted("INC-1", 1, "expired certificate"))
	f.publish(t, events.KindExtracted, "acme/INC-2/1/extracted", extracted("INC-2", 1, "expired certificate"))
	f.waitCount(t, "ok", 2)
	f.publish(t, events.KindExtracted, "acme/INC-1/2/extracted", extracted("INC-1", 2, "bad upgrade"))
	f.waitCount(t, "ok", 3)
	e, err := f.st.Entity(t.Context(), "acme", "failure_mode:expiredcertificate")
	require.NoError(t, err, "INC-2 still supports it")
	require.Len(t, e.Sources, 1)
	in, err := f.st.Edges(t.Context(), "acme", "failure_mode:expiredcertificate", store.In)
	require.NoError(t, err)
	require.Len(t, in, 1)
	require.Equal(t, "incident:inc2", in[0].Source)

	f.publish(t, events.KindDocDeleted, "acme/INC-2/2/deleted", &events.DocDeleted{Header: events.Header{Tenant: "acme"},
		DocID: "INC-2", Version: 2, ReceivedAt: time.Now()})
	f.waitCount(t, "ok", 4)
	_, err = f.st.Entity(t.Context(), "acme", "failure_mode:expiredcertificate")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = f.st.Entity(t.Context(), "acme", "component:certmanager")
	require.NoError(t, err, "INC-1 still supports cert-manager")
	a, err := f.st.Audit(t.Context(), "acme")
	require.NoError(t, err)
	require.Zero(t, a.OrphanEdges)

	// A late redelivery of the deleted document's content is stale.
	f.publish(t, events.KindExtracted, "acme/INC-2/1/extracted-again", extracted("INC-2", 1, "expired certificate"))
	f.waitCount(t, "stale", 1)
}

func TestInvalidEventDeadLettered(t *testing.T) {
	f := setup(t)
	_, err := f.bus.JetStream().Publish(t.Context(), "kg.extracted.acme", []byte(`{"schema":1,"tenant":"acme","doc_id":""}`))
	require.NoError(t, err)
	f.waitCount(t, "dead_letter", 1)
	// Tenant in the body must match the subject.
	ev := extracted("INC-9", 1, "disk full")
	ev.Tenant = "other"
	data, err := events.Encode(ev)
	require.NoError(t, err)
	_, err = f.bus.JetStream().Publish(t.Context(), "kg.extracted.acme", data)
	require.NoError(t, err)
	f.waitCount(t, "dead_letter", 2)
	n, err := f.bus.DeadLetters(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
}

func newResolver(t *testing.T, aliases string) (*resolver.Worker, *embedded.Store) {
	t.Helper()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	var aw *resolve.AliasWatcher
	if aliases != "" {
		p := filepath.Join(t.TempDir(), "aliases.yaml")
		require.NoError(t, os.WriteFile(p, []byte(aliases), 0o644))
		aw, err = resolve.NewAliasWatcher(p, nil)
		require.NoError(t, err)
	}
	w, err := resolver.New(resolver.Config{Aliases: aw}, &stream.Bus{}, st, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	return w, st
}

func TestResolveNormalisesAndRanksNames(t *testing.T) {
	w, _ := newResolver(t, "")
	ev := &events.Extracted{Header: events.Header{Tenant: "acme"}, DocID: "d", Version: 1,
		TextUnits: []events.TextUnit{{ID: "u"}},
		Entities: []events.RawEntity{
			{Name: "payments", Type: "Team", Authority: events.AuthorityCatalogName},
			{Name: "Payments", Key: "payments", Type: "team", Authority: events.AuthorityCatalogTitle},
			{Name: "no type", Type: " "},
		},
		Relationships: []events.RawRelationship{
			{Source: "cert-manager", SourceType: "component", Relation: "Owned By", Target: "payments", TargetType: "team", TextUnit: "u"},
			{Source: "Cert Manager", SourceType: "component", Relation: "owned_by", Target: "PAYMENTS", TargetType: "team", TextUnit: "u"},
			{Source: "certmanager", SourceType: "", Relation: "owned_by", Target: "payments", TargetType: "team"},
		}}
	c, err := w.Resolve(t.Context(), ev)
	require.NoError(t, err)
	require.Len(t, c.Entities, 2)
	require.Equal(t, "component:certmanager", c.Entities[0].ID)
	require.Equal(t, "team:payments", c.Entities[1].ID)
	require.Equal(t, "Payments", c.Entities[1].Name, "the catalog title wins")
	require.Len(t, c.Edges, 1, "three spellings, one edge (the untyped one typed from this extraction)")
	require.Equal(t, "component:certmanager|owned_by|team:payments", c.Edges[0].ID())
	require.Equal(t, []string{"u"}, c.Edges[0].TextUnits)
}

// seedCatalog applies a catalog with a service titled differently from its
// name, and a name used by two types.
func seedCatalog(t *testing.T, st store.GraphStore) {
	t.Helper()
	_, err := st.Apply(t.Context(), "acme", "catalog", 1, store.Contributions{DocType: "catalog", Entities: []store.EntityContribution{
		{ID: "service:searchapi", Type: "service", Name: "Product Search", NameRank: 0},
		{ID: "service:payments", Type: "service", Name: "payments", NameRank: 1},
		{ID: "team:payments", Type: "team", Name: "Payments", NameRank: 0},
	}})
	require.NoError(t, err)
}

func TestAliasCatalogTitleAndAmbiguity(t *testing.T) {
	w, st := newResolver(t, `
aliases:
  - type: component
    canonical: cert-manager
    mentions: [certificate manager]
`)
	seedCatalog(t, st)
	ev := &events.Extracted{Header: events.Header{Tenant: "acme"}, DocID: "INC-1", Version: 1,
		Relationships: []events.RawRelationship{
			// The alias table merges a spelling normalisation cannot.
			{Source: "INC-1", SourceType: "incident", Relation: "involved", Target: "Certificate Manager", TargetType: "component"},
			// A mention of a catalog title links to the catalog entity.
			{Source: "INC-1", SourceType: "incident", Relation: "affected", Target: "product search", TargetType: "service"},
			// "payments" is a service and a team: an untyped mention is refused.
			{Source: "INC-1", SourceType: "incident", Relation: "affected", Target: "payments", TargetType: ""},
			// Untyped and unknown: refused.
			{Source: "INC-1", SourceType: "incident", Relation: "affected", Target: "mystery box", TargetType: ""},
		}}
	c, err := w.Resolve(t.Context(), ev)
	require.NoError(t, err)
	var ids []string
	for _, e := range c.Edges {
		ids = append(ids, e.ID())
	}
	require.Equal(t, []string{
		"incident:inc1|affected|service:searchapi",
		"incident:inc1|involved|component:certmanager",
	}, ids)
}

func TestDegreeJumpDetected(t *testing.T) {
	f := setup(t)
	first := &events.Extracted{Header: events.Header{Tenant: "acme"}, DocID: "INC-100", Version: 1, Extractor: "test", ReceivedAt: time.Now(),
		Relationships: []events.RawRelationship{{Source: "INC-100", SourceType: "incident", Relation: "affected", Target: "API", TargetType: "service"}}}
	f.publish(t, events.KindExtracted, "acme/INC-100/1/extracted", first)
	f.waitCount(t, "ok", 1)
	// One document links twelve more incidents to "api": a merge worth a look.
	ev := &events.Extracted{Header: events.Header{Tenant: "acme"}, DocID: "dump", Version: 1, Extractor: "test", ReceivedAt: time.Now()}
	for i := 0; i < 12; i++ {
		ev.Relationships = append(ev.Relationships, events.RawRelationship{Source: fmt.Sprintf("INC-%d", i), SourceType: "incident",
			Relation: "affected", Target: "api", TargetType: "service"})
	}
	f.publish(t, events.KindExtracted, "acme/dump/1/extracted", ev)
	f.waitCount(t, "ok", 2)
	require.EqualValues(t, 1, testutil.ToFloat64(f.w.DegreeJumps()))
	// An ordinary document checks nothing.
	f.publish(t, events.KindExtracted, "acme/INC-1/1/extracted", extracted("INC-1", 1, "disk full"))
	f.waitCount(t, "ok", 3)
	require.EqualValues(t, 1, testutil.ToFloat64(f.w.DegreeJumps()))
}

// graphOnly is a graph store that lists entities whole only (no
// store.EntityHeads), counting the listings.
type graphOnly struct {
	store.GraphStore
	listings int
}

func (g *graphOnly) EntitiesByType(ctx context.Context, tenant, typ string) ([]store.Entity, error) {
	g.listings++
	return g.GraphStore.EntitiesByType(ctx, tenant, typ)
}

// TestCatalogIndexFromHeads: the catalog index (titles and the types a
// name may have) read from the entity heads resolves mentions as the one
// read from whole entities does, and reads no entity whole.
func TestCatalogIndexFromHeads(t *testing.T) {
	_, st := newResolver(t, "")
	seedCatalog(t, st)
	// A catalog name (rank 1) unlike the entity's key is no title.
	_, err := st.Apply(t.Context(), "acme", "catalog-names", 1, store.Contributions{DocType: "catalog", Entities: []store.EntityContribution{
		{ID: "service:ledgerapi", Type: "service", Name: "Money Ledger", NameRank: 1},
	}})
	require.NoError(t, err)
	// Documents mention catalog entities by other spellings, and name
	// things of catalog types the catalog does not define.
	for i, name := range []string{"Product-Search", "payments", "ledger"} {
		_, err := st.Apply(t.Context(), "acme", fmt.Sprintf("INC-%d", i), 1, store.Contributions{Entities: []store.EntityContribution{
			{ID: "service:" + resolve.Key(name), Type: "service", Name: name, NameRank: 2},
			{ID: "component:" + resolve.Key(name), Type: "component", Name: name, NameRank: 2},
		}})
		require.NoError(t, err)
	}
	ev := &events.Extracted{Header: events.Header{Tenant: "acme"}, DocID: "INC-9", Version: 1,
		Relationships: []events.RawRelationship{
			{Source: "INC-9", SourceType: "incident", Relation: "affected", Target: "product search", TargetType: "service"},
			{Source: "INC-9", SourceType: "incident", Relation: "affected", Target: "Product Search", TargetType: ""},
			{Source: "INC-9", SourceType: "incident", Relation: "affected", Target: "payments", TargetType: ""},
			{Source: "INC-9", SourceType: "incident", Relation: "affected", Target: "ledger", TargetType: ""},
			{Source: "INC-9", SourceType: "incident", Relation: "affected", Target: "mystery box", TargetType: ""},
			{Source: "INC-9", SourceType: "incident", Relation: "affected", Target: "money ledger", TargetType: "service"},
		}}
	resolveWith := func(g store.GraphStore) store.Contributions {
		w, err := resolver.New(resolver.Config{}, &stream.Bus{}, g, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		c, err := w.Resolve(t.Context(), ev)
		require.NoError(t, err)
		return c
	}
	counted := &graphOnly{GraphStore: st}
	whole := resolveWith(counted)
	require.Equal(t, len(resolver.CatalogTypes), counted.listings)
	heads := &countingHeads{Store: st}
	fromHeads := resolveWith(heads)
	require.Zero(t, heads.whole, "no entity read whole")
	require.Equal(t, whole, fromHeads)
	var ids []string
	for _, e := range fromHeads.Edges {
		ids = append(ids, e.ID())
	}
	require.Equal(t, []string{"incident:inc9|affected|service:moneyledger", "incident:inc9|affected|service:searchapi"}, ids,
		"a title links, typed or not; a name two types have is refused; a catalog name is no title")
}

// countingHeads is the embedded store counting its whole listings.
type countingHeads struct {
	*embedded.Store
	whole int
}

func (c *countingHeads) EntitiesByType(ctx context.Context, tenant, typ string) ([]store.Entity, error) {
	c.whole++
	return c.Store.EntitiesByType(ctx, tenant, typ)
}
