package offline_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// tenantGazetteer gives each tenant its own catalog slice, which a test
// may replace.
type tenantGazetteer struct {
	mu       sync.Mutex
	catalogs map[string][]offline.Entry
}

func (g *tenantGazetteer) Entries(_ context.Context, tenant string) ([]offline.Entry, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.catalogs[tenant], nil
}

func (g *tenantGazetteer) set(tenant string, es []offline.Entry) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.catalogs[tenant] = es
}

// TestCatalogMatcherIsKeptAcrossDocuments: one extractor, keeping each
// tenant's catalog matcher between documents, extracts every document as
// an extractor made for that document alone does: per tenant, after the
// catalog changes, and for a document whose own entity is a catalog
// entity (which must not find itself).
func TestCatalogMatcherIsKeptAcrossDocuments(t *testing.T) {
	self := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "INC-7", Version: 1, DocType: "incident",
		Text: "INC-7: checkout-api failed after the cert-manager upgrade; INC-7 was closed once Redis recovered."}
	selfEntity := offline.DocEntity(self)
	gaz := &tenantGazetteer{catalogs: map[string][]offline.Entry{
		"acme": append(boundaryGazetteer(), offline.CatalogEntry(offline.EntityID(selfEntity), selfEntity.Type, "INC-7", "inc7")),
		"globex": {offline.CatalogEntry("service:ledger", "service", "Ledger", "ledger"),
			offline.CatalogEntry("component:redis", "component", "Redis", "redis")},
	}}
	doc := func(tenant, id, text string) *events.DocChanged {
		return &events.DocChanged{Header: events.Header{Tenant: tenant}, DocID: id, Version: 1, DocType: "incident", Text: text}
	}
	texts := []string{
		"checkout-api returned 503s while Redis was failing over; the Data Platform team was paged.",
		"The Ledger service timed out on Kubernetes; cert-manager could not renew; INC-7 was the same.",
		"Redis and the Ledger were fine; search-api and ingress were not.",
	}
	extract := func(x *offline.Extractor, d *events.DocChanged) ([]events.RawEntity, []events.RawRelationship) {
		units := []events.TextUnit{{ID: d.DocID + "#0", Text: d.Text, End: len(d.Text)}}
		ents, rels, err := x.Extract(t.Context(), d, units)
		require.NoError(t, err)
		return ents, rels
	}
	shared, err := offline.New(offline.Config{Gazetteer: gaz})
	require.NoError(t, err)
	check := func(d *events.DocChanged) []events.RawRelationship {
		fresh, err := offline.New(offline.Config{Gazetteer: gaz})
		require.NoError(t, err)
		wantEnts, wantRels := extract(fresh, d)
		gotEnts, gotRels := extract(shared, d)
		require.Equal(t, wantEnts, gotEnts, "%s/%s", d.Tenant, d.DocID)
		require.Equal(t, wantRels, gotRels, "%s/%s", d.Tenant, d.DocID)
		return gotRels
	}
	for round := range 2 {
		for i, text := range texts {
			check(doc("acme", "A-"+string(rune('1'+i)), text))
			check(doc("globex", "G-"+string(rune('1'+i)), text))
		}
		rels := check(self)
		for _, r := range rels {
			require.NotEqual(t, offline.EntityID(selfEntity), r.TargetType+":"+r.Target, "a document never mentions itself")
		}
		if round == 0 {
			// The catalog changes: a new slice, which the next documents use.
			gaz.set("globex", []offline.Entry{offline.CatalogEntry("service:searchapi", "service", "search-api", "searchapi")})
		}
	}
	found := func(d *events.DocChanged, id string) bool {
		_, rels := extract(shared, d)
		for _, r := range rels {
			if r.TargetType+":"+r.Target == id {
				return true
			}
		}
		return false
	}
	// Documents of both tenants extracted at once, as the extractor's
	// workers do, while a catalog changes: each as a fresh extractor
	// extracts it (the race detector watches the kept matchers).
	var docs []*events.DocChanged
	for i, text := range texts {
		docs = append(docs, doc("acme", "C-"+string(rune('1'+i)), text), doc("globex", "C-"+string(rune('1'+i)), text))
	}
	docs = append(docs, self)
	want := make([][]events.RawRelationship, len(docs))
	for i, d := range docs {
		fresh, err := offline.New(offline.Config{Gazetteer: gaz})
		require.NoError(t, err)
		_, want[i] = extract(fresh, d)
	}
	got := make([][][]events.RawRelationship, 4)
	var wg sync.WaitGroup
	for w := range got {
		wg.Go(func() {
			for _, d := range docs {
				units := []events.TextUnit{{ID: d.DocID + "#0", Text: d.Text, End: len(d.Text)}}
				_, rels, err := shared.Extract(context.Background(), d, units)
				if err != nil {
					panic(err)
				}
				got[w] = append(got[w], rels)
			}
		})
	}
	wg.Go(func() { gaz.set("acme", slices.Clone(gaz.catalogs["acme"])) }) // equal entries, another slice
	wg.Wait()
	for w := range got {
		require.Equal(t, want, got[w], "worker %d", w)
	}

	require.True(t, found(doc("globex", "G-9", texts[2]), "service:searchapi"), "the changed catalog is used")
	require.False(t, found(doc("globex", "G-9", texts[2]), "service:ledger"), "the old catalog is not")
	require.True(t, found(doc("acme", "A-9", texts[1]), offline.EntityID(selfEntity)), "another document finds the catalog entity")
}
