//go:build integration

package catalog_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/catalog"
	"github.com/kgstream/kgstream/pkg/events"
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

func init() {
	fuzzSeeds = append(fuzzSeeds, filepath.Join(shared, "corpora/seed-postmortems/catalog-info.yaml"),
		filepath.Join(shared, "catalog/systems.yaml"))
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
