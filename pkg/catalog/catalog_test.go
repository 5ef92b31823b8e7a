package catalog_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/catalog"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
)

// fuzzSeeds are catalog files added to FuzzParse's seed corpus; the
// integration build adds the shared catalogs.
var fuzzSeeds = []string{"testdata/catalog-info.yaml"}

func triples(s *events.Structured) []string {
	out := make([]string, 0, len(s.Relationships))
	for _, r := range s.Relationships {
		out = append(out, r.SourceType+":"+r.Source+" -"+r.Relation+"-> "+r.TargetType+":"+r.Target)
	}
	slices.Sort(out)
	return out
}

func entity(t *testing.T, s *events.Structured, typ, key string) events.RawEntity {
	t.Helper()
	for _, e := range s.Entities {
		if e.Type == typ && e.Key == key {
			return e
		}
	}
	t.Fatalf("no entity %s:%s among %v", typ, key, s.Entities)
	return events.RawEntity{}
}

func TestParseOwnCatalog(t *testing.T) {
	data, err := os.ReadFile("testdata/catalog-info.yaml")
	require.NoError(t, err)
	s, skipped, err := catalog.Parse(data)
	require.NoError(t, err)
	require.Empty(t, skipped)
	require.Equal(t, []string{
		"resource:ledger-db -owned_by-> team:finance",
		"resource:ledger-db -part_of-> system:bookkeeping",
		"service:ledger-api -depends_on-> resource:ledger-db",
		"service:ledger-api -owned_by-> team:finance",
		"service:ledger-api -part_of-> system:bookkeeping",
		"service:mail-relay -owned_by-> team:comms",
		"service:search-indexer -owned_by-> team:catalogue",
		"system:bookkeeping -owned_by-> team:finance",
	}, triples(s))
	require.Len(t, s.Entities, 8)
	require.Equal(t, events.RawEntity{Name: "Finance", Type: "team", Key: "finance",
		Authority: events.AuthorityCatalogTitle}, entity(t, s, "team", "finance"))
	require.Equal(t, events.RawEntity{Name: "mail-relay", Type: "service", Key: "mail-relay",
		Authority: events.AuthorityCatalogName}, entity(t, s, "service", "mail-relay"))
}

func TestParseRefs(t *testing.T) {
	const y = `
kind: Component
metadata: {name: a}
spec:
  type: service
  owner: group:default/payments
  dependsOn: [resource:default/db, component:b, c, nothere]
  system: shop
---
kind: Component
metadata: {name: c}
spec: {type: library}
---
kind: Template
metadata: {name: t}
---
# empty document
---
kind: Group
metadata: {name: payments}
spec: {type: team, parent: org}
`
	s, skipped, err := catalog.Parse([]byte(y))
	require.NoError(t, err)
	require.Equal(t, []string{
		"service:a -depends_on-> component:b",
		"service:a -depends_on-> component:c",
		"service:a -depends_on-> resource:db",
		"service:a -owned_by-> team:payments",
		"service:a -part_of-> system:shop",
		"team:payments -child_of-> group:org",
	}, triples(s))
	require.Len(t, skipped, 2)
	require.Equal(t, 0, skipped[1].Index)
	require.Contains(t, skipped[1].Reason, `"nothere"`)
	require.Contains(t, skipped[1].Reason, "kind is required")
	require.Equal(t, catalog.Skipped{Index: 2, Kind: "Template", Name: "t", Reason: "unsupported kind"}, skipped[0])
}

func TestParseErrors(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"malformed":     {"kind: Component\nmetadata: {name: a}\n---\nkind: [unclosed\n", "document 1"},
		"no name":       {"kind: Component\nmetadata: {name: a}\n---\nkind: Group\nmetadata: {title: X}\n", "document 1 (line 4): Group has no metadata.name"},
		"no kind":       {"metadata: {name: a}\n", "document 0 (line 1): kind is missing"},
		"not a mapping": {"- a\n- b\n", "document 0 (line 1): want a mapping, got a sequence"},
		"bad field":     {"kind: Component\nmetadata: {name: a}\nspec: {dependsOn: {x: 1}}\n", "document 0"},
		"duplicate":     {"kind: Group\nmetadata: {name: a}\n---\nkind: Group\nmetadata: {name: A}\n", "document 1: Group \"A\" is already defined by document 0"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := catalog.Parse([]byte(tc.yaml))
			require.Error(t, err)
			require.True(t, errors.Is(err, catalog.ErrInvalidCatalog), "%v", err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("kind: Component\nmetadata: {name: a, title: A}\nspec: {type: service, owner: b, dependsOn: [c]}\n"))
	f.Add([]byte("---\n---\nkind: Group\nmetadata: {name: g}\nspec: {parent: 'group:x/y'}\n"))
	f.Add([]byte("kind: [\n"))
	f.Add([]byte("a: &x [*x]\n"))
	for _, p := range fuzzSeeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, _, err := catalog.Parse(data)
		if err != nil {
			if !errors.Is(err, catalog.ErrInvalidCatalog) {
				t.Fatalf("error does not wrap ErrInvalidCatalog: %v", err)
			}
			return
		}
		ids := map[string]bool{}
		for _, e := range s.Entities {
			if strings.TrimSpace(e.Name) == "" || e.Type == "" {
				t.Fatalf("entity without name or type: %+v", e)
			}
			ids[resolve.ID(e.Type, e.Key)] = true
		}
		for _, r := range s.Relationships {
			if !ids[resolve.ID(r.SourceType, r.Source)] || !ids[resolve.ID(r.TargetType, r.Target)] {
				t.Fatalf("relationship endpoint is not an entity: %+v", r)
			}
		}
	})
}
