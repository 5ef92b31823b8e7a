package offline_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

func offlineExtract(t *testing.T, g offline.Gazetteer, text string) ([]events.RawEntity, []events.RawRelationship) {
	t.Helper()
	// Only the gazetteer: component-shaped names are another test's.
	x, err := offline.New(offline.Config{Gazetteer: g, DisableComponents: true, DisableBundled: true,
		DisableCoOccurrence: true})
	require.NoError(t, err)
	doc := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "D-1", Version: 1, Text: text}
	units := []events.TextUnit{{ID: "u1", Text: text, End: len(text)}}
	ents, rels, err := x.Extract(context.Background(), doc, units)
	require.NoError(t, err)
	return ents, rels
}

func mentioned(rels []events.RawRelationship) []string {
	var out []string
	for _, r := range rels {
		out = append(out, r.TargetType+":"+r.Target)
	}
	return out
}

// boundaryGazetteer names a few services, a team (by its title) and
// components, as a graph would after a catalog import.
func boundaryGazetteer() offline.StaticGazetteer {
	var g offline.StaticGazetteer
	add := func(typ, key, name string) {
		g = append(g, offline.Entry{ID: resolve.ID(typ, key), Type: typ, Name: name, Key: resolve.Key(key)})
	}
	for _, s := range []string{"checkout-api", "search-api", "auth-service", "ledger-api"} {
		add("service", s, s)
	}
	add("team", "data-platform", "Data Platform")
	add("team", "finance", "Finance")
	for _, c := range []string{"cert-manager", "ingress", "log-rotation"} {
		add("component", c, c)
	}
	return g
}

func TestOfflineMatchesNormalisedNamesOnWordBoundaries(t *testing.T) {
	g := boundaryGazetteer()
	for name, tc := range map[string]struct {
		text string
		want []string
	}{
		"spaced":         {"the Cert Manager webhook timed out", []string{"component:certmanager"}},
		"glued":          {"certmanager stopped issuing", []string{"component:certmanager"}},
		"exact":          {"cert-manager could not renew", []string{"component:certmanager"}},
		"underscore":     {"CHECKOUT_API returned 503s", []string{"service:checkoutapi"}},
		"title":          {"the Data Platform team was paged", []string{"team:dataplatform"}},
		"prefix":         {"xcert-manager is unrelated", nil},
		"suffix":         {"cert-managerx is another", nil},
		"plural":         {"both cert-managers failed", []string{"component:certmanager"}},
		"inside ident":   {"cert-manager-webhook failed", nil},
		"glued to prior": {"my-ingress was fine", nil},
		"sentence end":   {"traffic went to ingress. Then search-api.", []string{"component:ingress", "service:searchapi"}},
		"possessive":     {"auth-service's pods", []string{"service:authservice"}},
		"longest":        {"checkout api and checkout", []string{"service:checkoutapi"}},
		"no newline":     {"cert\nmanager", nil},
		"repeat once":    {"ingress, ingress and Ingress", []string{"component:ingress"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, rels := offlineExtract(t, g, tc.text)
			require.Equal(t, tc.want, mentioned(rels))
		})
	}
}

// graphStore serves EntitiesByType from a slice and counts the calls per
// type; the rest of the contract is not used by the gazetteer.
type graphStore struct {
	store.GraphStore
	entities []store.Entity
	calls    map[string]int
	onList   func() // called by every listing, when set
}

func (g *graphStore) EntitiesByType(_ context.Context, _, typ string) ([]store.Entity, error) {
	if typ == "" {
		panic("the gazetteer lists every type, not the catalog's")
	}
	if g.calls == nil {
		g.calls = map[string]int{}
	}
	g.calls[typ]++
	if g.onList != nil {
		g.onList()
	}
	var out []store.Entity
	for _, e := range g.entities {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out, nil
}

// scans is how many times the gazetteer read the catalog types.
func (g *graphStore) scans() int {
	n := 0
	for _, c := range g.calls {
		n = max(n, c)
	}
	return n
}

func TestCatalogGazetteerListsCatalogNamesOnly(t *testing.T) {
	gs := &graphStore{entities: []store.Entity{
		// Made by mentions only: another document's state, never a name to
		// look for.
		{ID: "component:certmanager", Type: "component", Name: "cert-manager",
			Sources: []store.Fragment{{DocID: "INC-112", Name: "Cert Manager", NameRank: 2}, {DocID: "INC-101", Name: "cert-manager", NameRank: 2}}},
		{ID: "service:checkoutapi", Type: "service", Name: "checkout-api",
			Sources: []store.Fragment{{DocID: "catalog", Name: "checkout-api", NameRank: 1}, {DocID: "INC-1", Name: "Checkout API", NameRank: 2}}},
		{ID: "team:payments", Type: "team", Name: "Payments", Sources: []store.Fragment{{DocID: "catalog", Name: "Payments", NameRank: 0}}},
		{ID: "component:pages", Type: "component", Name: "Pages", Sources: []store.Fragment{{DocID: "catalog", Name: "Pages", NameRank: 0}}},
		{ID: "failure_mode:expiredcertificate", Type: "failure_mode", Name: "expired certificate"},
		{ID: "incident:inc101", Type: "incident", Name: "INC-101"},
	}}
	g := offline.NewCatalogGazetteer(gs, time.Hour)
	got, err := g.Entries(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, []offline.Entry{
		{ID: "component:pages", Type: "component", Name: "Pages", Key: "pages", Catalog: true, AsName: true},
		{ID: "service:checkoutapi", Type: "service", Name: "checkout-api", Key: "checkoutapi", Catalog: true},
		{ID: "team:payments", Type: "team", Name: "Payments", Key: "payments", Catalog: true, AsName: true},
	}, got, "catalog types only, in id order")
	_, err = g.Entries(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, 1, gs.scans(), "cached within the TTL")
	_, err = g.Entries(t.Context(), "other")
	require.NoError(t, err)
	require.Equal(t, 2, gs.scans(), "cached per tenant")

	empty := &graphStore{}
	eg := offline.NewCatalogGazetteer(empty, time.Hour)
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	offline.SetNow(eg, func() time.Time { return clock })
	for range 2 {
		_, err = eg.Entries(t.Context(), "acme")
		require.NoError(t, err)
	}
	require.Equal(t, 1, empty.scans(), "an empty list is kept for a moment")
	clock = clock.Add(999 * time.Millisecond)
	_, err = eg.Entries(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, 1, empty.scans())
	clock = clock.Add(2 * time.Millisecond)
	_, err = eg.Entries(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, 2, empty.scans(), "an empty list is kept a second only, not the TTL")
	eg.Invalidate("acme")
	_, err = eg.Entries(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, 3, empty.scans(), "Invalidate drops it")

	// A tenant so large that looking for its catalog takes a while: the
	// empty list is kept 20 times as long as the look took (9 types, 10ms
	// each: 1.8s).
	slow := &graphStore{}
	sg := offline.NewCatalogGazetteer(slow, time.Hour)
	offline.SetNow(sg, func() time.Time { return clock })
	slow.onList = func() { clock = clock.Add(10 * time.Millisecond) }
	_, err = sg.Entries(t.Context(), "acme")
	require.NoError(t, err)
	clock = clock.Add(1700 * time.Millisecond)
	_, err = sg.Entries(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, 1, slow.scans(), "kept 1.8s, not 1s")
	clock = clock.Add(101 * time.Millisecond)
	_, err = sg.Entries(t.Context(), "acme")
	require.NoError(t, err)
	require.Equal(t, 2, slow.scans(), "and no longer")

	_, rels := offlineExtract(t, g, "The Payments team saw checkout-api fail; payments were lost.")
	require.Equal(t, []string{"team:payments", "service:checkoutapi"}, mentioned(rels),
		"a team links where the text speaks of the team, not of payments")
	_, rels = offlineExtract(t, g, "Users could not open their pages. Later the Pages component failed.")
	require.Equal(t, []string{"component:pages"}, mentioned(rels), "an ordinary-word title links only where written as a name")
	require.Contains(t, rels[len(rels)-1].Description, `"Pages"`)
}
