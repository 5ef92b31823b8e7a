package catalog_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/catalog"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
)

// shared is the design-time fixture tree next to the work tree. Tests fail
// (never skip) without it: a silently skipped fixture test proves nothing.
const shared = "../../../shared"

func readShared(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(shared, rel))
	require.NoError(t, err, "fixture %s is required", rel)
	return data
}

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

func TestParseSeedCatalog(t *testing.T) {
	s, skipped, err := catalog.Parse(readShared(t, "corpora/seed-postmortems/catalog-info.yaml"))
	require.NoError(t, err)
	require.Empty(t, skipped)
	require.Equal(t, []string{
		"service:auth-service -owned_by-> team:identity",
		"service:checkout-api -owned_by-> team:payments",
		"service:ingest-worker -owned_by-> team:data-platform",
		"service:mobile-gateway -owned_by-> team:mobile",
		"service:notification-service -owned_by-> team:messaging",
		"service:search-api -owned_by-> team:discovery",
	}, triples(s))
	require.Len(t, s.Entities, 12)

	got := entity(t, s, "team", "data-platform")
	require.Equal(t, events.RawEntity{Name: "Data Platform", Type: "team", Key: "data-platform",
		Authority: events.AuthorityCatalogTitle}, got)
	got = entity(t, s, "service", "checkout-api")
	require.Equal(t, events.RawEntity{Name: "checkout-api", Type: "service", Key: "checkout-api",
		Authority: events.AuthorityCatalogName}, got)
}

func TestParseSharedCatalogs(t *testing.T) {
	var all []byte
	for _, f := range []string{"components.yaml", "domains-and-groups.yaml", "systems.yaml"} {
		all = append(all, "\n---\n"...)
		all = append(all, readShared(t, filepath.Join("catalog", f))...)
	}
	s, skipped, err := catalog.Parse(all)
	require.NoError(t, err)
	require.Empty(t, skipped)

	rels := triples(s)
	for _, want := range []string{
		// owner defaults to Group; team-a is defined with spec.type team.
		"service:artist-lookup -owned_by-> team:team-a",
		"service:artist-lookup -part_of-> system:artist-engagement-portal",
		// website is not a service.
		"component:www-artist -owned_by-> team:team-a",
		"service:wayback-search -provides_api-> api:wayback-search",
		"service:wayback-search -consumes_api-> api:wayback-archive",
		"service:wayback-archive-ingestion -part_of-> service:wayback-archive",
		// user: refs keep their kind.
		"service:shuffle-api -owned_by-> user:guest",
		"component:playback-sdk -part_of-> system:audio-playback",
		"api:wayback-search -owned_by-> team:team-a",
		"system:audio-playback -part_of-> domain:playback",
		"system:artist-engagement-portal -owned_by-> team:team-a",
		"domain:artists -part_of-> domain:audio",
		"domain:playback -owned_by-> user:frank.tiernan",
		// Groups defined with a type other than team are groups.
		"domain:audio -owned_by-> group:acme-corp",
		"group:infrastructure -child_of-> group:acme-corp",
		"team:team-a -child_of-> group:backstage",
		"user:janelle.dawe -member_of-> team:team-a",
		"resource:artists-db -part_of-> system:artist-engagement-portal",
		"resource:artists-db -owned_by-> team:team-a",
	} {
		require.Contains(t, rels, want)
	}
	// An undefined Group referenced as owner is a team (documented rule).
	require.Contains(t, rels, "service:podcast-api -owned_by-> team:team-b")
	e := entity(t, s, "team", "team-b")
	require.Equal(t, events.AuthorityCatalogName, e.Authority)

	d := entity(t, s, "domain", "artists")
	require.Equal(t, "Artists", d.Name)
	require.Equal(t, "Everything related to artists", d.Description)

	// Every relationship endpoint is an entity.
	ids := map[string]bool{}
	for _, e := range s.Entities {
		ids[e.Type+":"+e.Key] = true
	}
	for _, r := range s.Relationships {
		require.True(t, ids[r.SourceType+":"+r.Source], "source of %v", r)
		require.True(t, ids[r.TargetType+":"+r.Target], "target of %v", r)
	}
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
	for _, p := range []string{"corpora/seed-postmortems/catalog-info.yaml", "catalog/systems.yaml"} {
		if data, err := os.ReadFile(filepath.Join(shared, p)); err == nil {
			f.Add(data)
		}
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
