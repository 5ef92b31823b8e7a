//go:build integration

package query_test

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/query"
)

// seedDir is the seed corpus beside the checkout.
const seedDir = "../../../shared/corpora/seed-postmortems"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st := &failingStores{Stores: openStore(t)}
	loadSeed(t, st, tenantAcme)
	loadGlobex(t, st)
	f := &fixture{t: t, st: st}
	return f.withConfig(query.Config{})
}

// loadSeed loads the seed postmortems (recorded extraction) and the catalog
// into tenant, announcing each document in the registry first, as the
// gateway does.
func loadSeed(t *testing.T, st query.Stores, tenant string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(seedDir, "recorded-llm-extraction.json"))
	require.NoError(t, err)
	var rec map[string][]triple
	require.NoError(t, json.Unmarshal(raw, &rec))
	docs := make([]string, 0, len(rec))
	for d := range rec {
		docs = append(docs, d)
	}
	sort.Strings(docs)
	for _, doc := range docs {
		text, err := os.ReadFile(filepath.Join(seedDir, "docs", doc+".txt"))
		require.NoError(t, err)
		units := sentences(string(text))
		c := store.Contributions{Title: doc, DocType: "postmortem", TextUnits: units}
		seen := map[string]bool{}
		addEntity := func(typ, name string, tus []string) string {
			id := resolve.ID(typ, name)
			if !seen[id] {
				seen[id] = true
				c.Entities = append(c.Entities, store.EntityContribution{
					ID: id, Type: resolve.Type(typ), Name: name, NameRank: 2,
					Description: name + " is mentioned in " + doc + ".", TextUnits: tus,
				})
			}
			return id
		}
		for _, tr := range rec[doc] {
			tus := unitsFor(units, tr.Target)
			src := addEntity(tr.SourceType, tr.Source, []string{units[0].ID})
			tgt := addEntity(tr.TargetType, tr.Target, tus)
			c.Edges = append(c.Edges, store.EdgeContribution{Source: src, Relation: resolve.Type(tr.Relation), Target: tgt, Weight: 1, TextUnits: tus})
		}
		announceApply(t, st, tenant, doc, 1, incidentACL(), c)
	}
	announceApply(t, st, tenant, catalogDoc, 1, provenance.PublicACL(), catalogContributions(t))
	seedCommunities(t, st, tenant)
}

type catalogEntry struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name  string `yaml:"name"`
		Title string `yaml:"title"`
	} `yaml:"metadata"`
	Spec struct {
		Type  string `yaml:"type"`
		Owner string `yaml:"owner"`
	} `yaml:"spec"`
}

// catalogContributions turns catalog-info.yaml into services, teams (named
// by their titles, rank 0) and the six owned_by edges. Catalog facts have no
// text units: their citations name the document version only.
func catalogContributions(t *testing.T) store.Contributions {
	t.Helper()
	f, err := os.Open(filepath.Join(seedDir, "catalog-info.yaml"))
	require.NoError(t, err)
	defer f.Close()
	c := store.Contributions{Title: "catalog-info.yaml", DocType: "catalog"}
	dec := yaml.NewDecoder(f)
	for {
		var e catalogEntry
		if err := dec.Decode(&e); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		switch e.Kind {
		case "Component":
			id := resolve.ID(e.Spec.Type, e.Metadata.Name)
			c.Entities = append(c.Entities, store.EntityContribution{ID: id, Type: e.Spec.Type, Name: e.Metadata.Name, NameRank: 1})
			owner := strings.TrimPrefix(e.Spec.Owner, "group:")
			c.Edges = append(c.Edges, store.EdgeContribution{Source: id, Relation: "owned_by", Target: resolve.ID("team", owner), Weight: 1})
		case "Group":
			c.Entities = append(c.Entities, store.EntityContribution{ID: resolve.ID("team", e.Metadata.Name), Type: "team", Name: e.Metadata.Title, NameRank: 0})
		}
	}
	require.Len(t, c.Edges, 6)
	return c
}

// seedCommunities stores a small hierarchy with reports: c-0-cert (built on
// the three cert-manager incidents and the catalog), c-0-dns (INC-118 only)
// and their level-1 parent c-1-all.
func seedCommunities(t *testing.T, st query.Stores, tenant string) {
	t.Helper()
	ctx := t.Context()
	certSrc := refs("INC-101", "INC-112", "INC-121", catalogDoc)
	dnsSrc := refs("INC-118")
	allSrc := refs("INC-101", "INC-104", "INC-107", "INC-112", "INC-115", "INC-118", "INC-121", "INC-124", "INC-127", "INC-130", catalogDoc)
	cs := []store.Community{
		{ID: "c-0-cert", Level: 0, Parent: "c-1-all", Members: []string{"component:certmanager", "failure_mode:expiredcertificate", "incident:inc101", "incident:inc112", "incident:inc121"}, MemberHash: "h1", Sources: certSrc},
		{ID: "c-0-dns", Level: 0, Parent: "c-1-all", Members: []string{"component:dnsresolver", "failure_mode:dnsmisconfiguration", "incident:inc118"}, MemberHash: "h2", Sources: dnsSrc},
		{ID: "c-1-all", Level: 1, Children: []string{"c-0-cert", "c-0-dns"}, Members: []string{"component:certmanager", "component:dnsresolver", "failure_mode:dnsmisconfiguration", "failure_mode:expiredcertificate", "incident:inc101", "incident:inc112", "incident:inc118", "incident:inc121"}, MemberHash: "h3", Sources: allSrc},
	}
	require.NoError(t, st.ReplaceCommunities(ctx, tenant, 1, cs))
	for _, c := range cs {
		require.NoError(t, st.PutReport(ctx, tenant, store.Report{
			ID: "r-" + c.ID, Community: c.ID, Level: c.Level,
			Title:   "Community " + c.ID,
			Summary: "Incidents of " + c.ID + ".",
			Findings: []store.Finding{{
				Summary: "Expired certificates recur.", Explanation: "Three incidents share the failure.",
				Citations: c.Sources,
			}},
			Rating: 5, Sources: c.Sources, MemberHash: c.MemberHash, Writer: "test",
		}))
	}
}
