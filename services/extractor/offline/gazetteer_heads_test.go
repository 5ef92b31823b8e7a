package offline_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/store/storetest"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// wholeEntities is a graph store that lists entities whole only: the
// gazetteer's path for stores without store.EntityHeads. It counts the
// whole listings.
type wholeEntities struct {
	store.GraphStore
	listings int
}

func (w *wholeEntities) EntitiesByType(ctx context.Context, tenant, typ string) ([]store.Entity, error) {
	w.listings++
	return w.GraphStore.EntitiesByType(ctx, tenant, typ)
}

// countedHeads is the embedded store with its listings counted, heads and
// whole entities apart.
type countedHeads struct {
	*embedded.Store
	whole, heads int
}

func (c *countedHeads) EntitiesByType(ctx context.Context, tenant, typ string) ([]store.Entity, error) {
	c.whole++
	return c.Store.EntitiesByType(ctx, tenant, typ)
}

func (c *countedHeads) EntityHeadsByType(ctx context.Context, tenant, typ string) ([]store.EntityHead, error) {
	c.heads++
	return c.Store.EntityHeadsByType(ctx, tenant, typ)
}

// TestCatalogGazetteerReadsHeads: on a store listing entity heads, the
// catalog entries come from the heads' spelling tallies, no entity is read
// whole, and they are the entries the whole entities give.
func TestCatalogGazetteerReadsHeads(t *testing.T) {
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	ctx := t.Context()
	unit := func(doc string) []events.TextUnit {
		return []events.TextUnit{{ID: doc + "#0", Text: "text of " + doc, End: 10}}
	}
	ent := func(id, typ, name string, rank int, doc string) store.EntityContribution {
		return store.EntityContribution{ID: id, Type: typ, Name: name, NameRank: rank, Description: name, TextUnits: []string{doc + "#0"}}
	}
	apply := func(doc string, ents ...store.EntityContribution) {
		_, err := st.Apply(ctx, "acme", doc, 1, store.Contributions{Title: doc, TextUnits: unit(doc), Entities: ents})
		require.NoError(t, err)
	}
	// A catalog names a service twice (title and name) and a team; an
	// old catalog gave the service a third name, padded with spaces.
	apply("catalog", ent("service:checkoutapi", "service", "Checkout API", 0, "catalog"),
		ent("team:payments", "team", "Payments", 0, "catalog"))
	apply("catalog-names", ent("service:checkoutapi", "service", "checkout-api", 1, "catalog-names"))
	apply("catalog-old", ent("service:checkoutapi", "service", " checkout ", 1, "catalog-old"))
	// Documents mention them, and things no catalog defines; one mentions
	// a team by a name the catalog never gave it.
	for _, doc := range []string{"INC-1", "INC-2", "INC-3"} {
		apply(doc, ent("service:checkoutapi", "service", "Checkout Api", 2, doc),
			ent("team:payments", "team", "payments team", 2, doc),
			ent("component:certmanager", "component", "cert-manager", 2, doc),
			ent("incident:"+doc, "incident", doc, 2, doc))
	}
	want := []offline.Entry{
		offline.CatalogEntry("service:checkoutapi", "service", "Checkout API", "checkoutapi"),
		offline.CatalogEntry("service:checkoutapi", "service", "checkout", "checkoutapi"),
		offline.CatalogEntry("service:checkoutapi", "service", "checkout-api", "checkoutapi"),
		offline.CatalogEntry("team:payments", "team", "Payments", "payments"),
	}

	heads := &countedHeads{Store: st}
	got, err := offline.NewCatalogGazetteer(heads, time.Hour).Entries(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Zero(t, heads.whole, "no entity read whole")
	require.Equal(t, len(offline.CatalogTypes()), heads.heads, "the heads of each catalog type")

	whole := &wholeEntities{GraphStore: st}
	got, err = offline.NewCatalogGazetteer(whole, time.Hour).Entries(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, want, got, "whole entities give the same entries")
	require.Equal(t, len(offline.CatalogTypes()), whole.listings)
}

// BenchmarkCatalogGazetteerRefresh times one refresh of a tenant's catalog
// entries (what a gazetteer does once per TTL, once a second for a tenant
// without a catalog) on an embedded store preloaded with
// KG_GAZETTEER_BENCH_DOCS documents (default 10,000) drawn as the store's
// apply benchmark draws them (storetest.BenchCorpus: 8 entity mentions and
// 10 edges each over as many entities as documents, two of its five types
// catalog types), from the entity heads and from whole entities.
func BenchmarkCatalogGazetteerRefresh(b *testing.B) {
	docs := 10_000
	if v := os.Getenv("KG_GAZETTEER_BENCH_DOCS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("KG_GAZETTEER_BENCH_DOCS=%q: want a positive count", v)
		}
		docs = n
	}
	st, err := embedded.Open(filepath.Join(b.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	corpus := storetest.BenchCorpus{Docs: docs, EdgesPerDoc: storetest.BenchEdgesPerDoc, Entities: docs}
	storetest.Preload(b, st, "bench", corpus, 2)
	stats, err := st.Stats(b.Context(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d documents, %d entities, %d edges", stats.Sources, stats.Entities, stats.Edges)
	for _, c := range []struct {
		name string
		gs   store.GraphStore
	}{{"heads", st}, {"whole", &wholeEntities{GraphStore: st}}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				g := offline.NewCatalogGazetteer(c.gs, time.Hour)
				if _, err := g.Entries(b.Context(), "bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
