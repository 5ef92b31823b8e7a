//go:build integration

package resolver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/catalog"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/services/resolver"
)

const seedDir = "../../../shared/corpora/seed-postmortems"

// seedExtractions is the recorded LLM extraction of the seed corpus plus its
// catalog, as the extractor hands them to the resolver.
func seedExtractions(t *testing.T) []*events.Extracted {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(seedDir, "recorded-llm-extraction.json"))
	require.NoError(t, err, "the seed corpus must be at ../shared beside the checkout")
	var rec map[string][]events.RawRelationship
	require.NoError(t, json.Unmarshal(raw, &rec))
	var out []*events.Extracted
	for doc, rels := range rec {
		out = append(out, &events.Extracted{Header: events.Header{Tenant: "acme"}, DocID: doc, Version: 1, Relationships: rels})
	}
	cat, err := os.ReadFile(filepath.Join(seedDir, "catalog-info.yaml"))
	require.NoError(t, err)
	st, _, err := catalog.Parse(cat)
	require.NoError(t, err)
	out = append(out, &events.Extracted{Header: events.Header{Tenant: "acme"}, DocID: "catalog", Version: 1, DocType: "catalog",
		Entities: st.Entities, Relationships: st.Relationships})
	sort.Slice(out, func(i, j int) bool { return out[i].DocID < out[j].DocID })
	return out
}

// TestResolutionQuality measures the bridge question of EXPECTED.md with and
// without resolution: which teams were affected by incidents involving
// cert-manager?
func TestResolutionQuality(t *testing.T) {
	want := []string{"Discovery", "Identity", "Messaging", "Payments"}
	for _, c := range []struct {
		name              string
		exact             bool
		nodes, edges      int
		precision, recall float64
	}{
		{"resolved", false, 36, 39, 1.0, 1.0},
		{"unresolved", true, 38, 39, 1.0, 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{NoSync: true})
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			w, err := resolver.New(resolver.Config{ExactNames: c.exact}, &stream.Bus{}, st, nil, prometheus.NewRegistry())
			require.NoError(t, err)
			for _, ev := range seedExtractions(t) {
				contrib, err := w.Resolve(t.Context(), ev)
				require.NoError(t, err)
				_, err = st.Apply(t.Context(), "acme", ev.DocID, 1, contrib)
				require.NoError(t, err)
			}
			stats, err := st.Stats(t.Context(), "acme")
			require.NoError(t, err)
			require.Equal(t, c.nodes, stats.Entities)
			require.Equal(t, c.edges, stats.Edges)

			start := "component:certmanager"
			if c.exact {
				start = "component:cert-manager"
			}
			teams := map[string]bool{}
			in, err := st.Edges(t.Context(), "acme", start, store.In)
			require.NoError(t, err)
			for _, inv := range in {
				if inv.Relation != "involved" {
					continue
				}
				out, err := st.Edges(t.Context(), "acme", inv.Source, store.Out)
				require.NoError(t, err)
				for _, aff := range out {
					if aff.Relation != "affected" {
						continue
					}
					own, err := st.Edges(t.Context(), "acme", aff.Target, store.Out)
					require.NoError(t, err)
					for _, o := range own {
						if o.Relation == "owned_by" {
							e, err := st.Entity(t.Context(), "acme", o.Target)
							require.NoError(t, err)
							teams[e.Name] = true
						}
					}
				}
			}
			hit := 0
			for _, n := range want {
				if teams[n] {
					hit++
				}
			}
			precision := float64(hit) / float64(max(1, len(teams)))
			recall := float64(hit) / float64(len(want))
			t.Logf("%s: teams %v precision %.2f recall %.2f, %d nodes / %d edges", c.name, teams, precision, recall, stats.Entities, stats.Edges)
			require.Equal(t, c.precision, precision)
			require.Equal(t, c.recall, recall)
		})
	}
}
