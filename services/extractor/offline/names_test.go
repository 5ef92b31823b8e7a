package offline_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// discovered extracts text with the bundled gazetteer and name discovery
// and returns the ids of the entities mentioned.
func discovered(t *testing.T, text string) []string {
	t.Helper()
	x, err := offline.New(offline.Config{DisablePatterns: true, DisableTaxonomy: true})
	require.NoError(t, err)
	doc := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "D-1", Version: 1, DocType: "incident", Text: text}
	_, rels, err := x.Extract(context.Background(), doc, []events.TextUnit{{ID: "u1", Text: text, End: len(text)}})
	require.NoError(t, err)
	var out []string
	for _, r := range rels {
		if r.Relation == offline.RelMentions {
			out = append(out, r.TargetType+":"+r.Target)
		}
	}
	return out
}

func TestBundledGazetteerNamesTechnology(t *testing.T) {
	g, err := offline.DefaultGazetteer()
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, e := range g {
		ids[e.ID] = true
	}
	require.GreaterOrEqual(t, len(ids), 500, "at least 500 entries")
	for text, want := range map[string][]string{
		"The k8s API server was slow.":                    {"component:kubernetes"},
		"Traefik returned 503s and CoreDNS crash-looped.": {"component:traefik", "component:coredns"},
		"The KIAM server certificate expired.":            {"component:kiam"},
		"EBS volumes of EC2 instances were stuck.":        {"cloud_service:amazonebs", "cloud_service:amazonec2"},
		"BigQuery and Cloud Pub/Sub errors rose.":         {"cloud_service:bigquery", "cloud_service:cloudpubsub"},
		"Kafka brokers and the Kafka broker restarted.":   {"component:kafka"},
		"after an upgrade, certmanager stopped":           {"component:certmanager"},
		"MediaWiki, Varnish and Swift were degraded.":     {"component:mediawiki", "component:varnish", "datastore:swift"},
		// Ordinary words are names only where written as names.
		"a swift recovery; the vault door; a flux of users": nil,
		"we applied the Helm chart, then Flux reverted it":  {"component:helm", "component:flux"},
	} {
		require.Equal(t, want, discovered(t, text), text)
	}
	_, err = offline.ParseGazetteer([]byte("version: 1\ngroups:\n  - {category: x, type: component, names: [Foo, foo]}\n"))
	require.Error(t, err, "two lines for one entity")
	_, err = offline.ParseGazetteer([]byte("version: 1\ngroups:\n  - {category: x, names: [Foo]}\n"))
	require.Error(t, err, "a group needs a type")
	extra, err := offline.ParseGazetteer([]byte("version: 1\ngroups:\n  - {category: in-house, type: service, names: [Ledger | ledger-svc]}\n"))
	require.NoError(t, err)
	x, err := offline.New(offline.Config{Extra: extra, DisablePatterns: true, DisableTaxonomy: true})
	require.NoError(t, err)
	text := "ledger-svc timed out"
	doc := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "D-2", Version: 1, DocType: "incident", Text: text}
	ents, _, err := x.Extract(t.Context(), doc, []events.TextUnit{{ID: "u1", Text: text, End: len(text)}})
	require.NoError(t, err)
	require.Equal(t, "Ledger", ents[1].Name, "an operator's entry, named by its display name")
}

func TestNameDiscoveryShapesAndStopLists(t *testing.T) {
	for text, want := range map[string][]string{
		"db1005 and cr2-esams lost power; ip-10-0-32-54 too.": {"host:db1005", "host:cr2esams", "host:ip1003254"},
		"checkout-api called orders-db via the rate-limiter.": {"service:checkoutapi", "component:ordersdb", "component:ratelimiter"},
		"MultiWriteBagOStuff broke edits in TwoColConflict.":  {"component:multiwritebagostuff", "component:twocolconflict"},
		"The DNS resolver and the Cert Manager failed.":       {"component:dnsresolver", "component:certmanager"},
		"ZORK failed. Then ZORK recovered.":                   {"component:zork"},
		// Stop lists: phrases, URL parameters, SQL, quoted log lines,
		// states, API operations, regions and versions.
		"an in-service self-service service-to-service call":                 nil,
		"see https://grafana.example.org/d/x?var-service=foo&var-db=bar now": nil,
		"We ran CREATE DATABASE x; then SELECT id FROM users WHERE id = 1.":  nil,
		`the log said "ZORK-api failed: BarDB unavailable" twice`:            nil,
		"Pods were in CrashLoopBackOff and NotReady; DescribeInstances":      nil,
		"Intermittent database errors in us-east-1 after sha256 checks.":     nil,
		"Done DB. Reducing cache misses helped.":                             nil,
	} {
		require.Equal(t, want, discovered(t, text), text)
	}
}

func TestLoadGazetteersReadsOperatorFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ours.yaml")
	require.NoError(t, os.WriteFile(p, []byte("version: 1\ngroups:\n  - {category: in-house, type: service, names: [Ledger | ledger-svc]}\n"), 0o600))
	g, err := offline.LoadGazetteers(" " + p + ", ")
	require.NoError(t, err)
	require.Len(t, g, 2)
	require.Equal(t, "service:ledger", g[1].ID)
	none, err := offline.LoadGazetteers("")
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = offline.LoadGazetteers(filepath.Join(dir, "missing.yaml"))
	require.Error(t, err)
}
