package query_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/query"
)

// unitGraph is testdata/graph.yaml: the unit tests' own small graph.
type unitGraph struct {
	Documents []struct {
		ID     string            `yaml:"id"`
		Groups []string          `yaml:"groups"`
		Public bool              `yaml:"public"`
		Text   string            `yaml:"text"`
		Teams  map[string]string `yaml:"teams"`
		Edges  [][3]string       `yaml:"edges"`
	} `yaml:"documents"`
	Communities []struct {
		ID       string   `yaml:"id"`
		Level    int      `yaml:"level"`
		Parent   string   `yaml:"parent"`
		Children []string `yaml:"children"`
		Members  []string `yaml:"members"`
		Sources  []string `yaml:"sources"`
	} `yaml:"communities"`
}

// newUnitFixture serves tenant acme with testdata/graph.yaml and globex
// with its one postmortem (loadGlobex), as newFixture does with the seed.
func newUnitFixture(t *testing.T) *fixture {
	t.Helper()
	st := &failingStores{Stores: openStore(t)}
	loadUnitGraph(t, st, tenantAcme)
	loadGlobex(t, st)
	f := &fixture{t: t, st: st}
	return f.withConfig(query.Config{})
}

// entityID is the canonical id of a TYPE:NAME reference of the fixture.
func entityID(ref string) (id, typ, name string) {
	typ, name, _ = strings.Cut(ref, ":")
	return resolve.ID(typ, name), resolve.Type(typ), name
}

// loadUnitGraph announces and applies every document of the fixture to
// tenant, then stores its communities with one report each.
func loadUnitGraph(t *testing.T, st query.Stores, tenant string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "graph.yaml"))
	require.NoError(t, err)
	var g unitGraph
	require.NoError(t, yaml.Unmarshal(raw, &g))
	for _, d := range g.Documents {
		c := store.Contributions{Title: d.ID, DocType: "postmortem"}
		acl := provenance.ACL{Groups: d.Groups}
		if d.Public {
			acl, c.DocType = provenance.PublicACL(), "catalog"
		}
		if d.Text != "" {
			c.TextUnits = sentences(d.Text)
		}
		seen := map[string]bool{}
		add := func(ref string, rank int, units []string) string {
			id, typ, name := entityID(ref)
			if title, ok := d.Teams[name]; ok && typ == "team" {
				name = title
			}
			if !seen[id] {
				seen[id] = true
				e := store.EntityContribution{ID: id, Type: typ, Name: name, NameRank: rank, TextUnits: units}
				if len(units) > 0 {
					e.Description = name + " is mentioned in " + d.ID + "."
				}
				c.Entities = append(c.Entities, e)
			}
			return id
		}
		for _, e := range d.Edges {
			var src, tgt string
			var units []string
			if d.Public {
				src, tgt = add(e[0], 1, nil), add(e[2], 0, nil)
			} else {
				_, _, name := entityID(e[2])
				units = unitsFor(c.TextUnits, name)
				src, tgt = add(e[0], 2, []string{c.TextUnits[0].ID}), add(e[2], 2, units)
			}
			c.Edges = append(c.Edges, store.EdgeContribution{Source: src, Relation: e[1], Target: tgt, Weight: 1, TextUnits: units})
		}
		announceApply(t, st, tenant, d.ID, 1, acl, c)
	}
	var cs []store.Community
	for _, c := range g.Communities {
		members := make([]string, len(c.Members))
		for i, m := range c.Members {
			members[i], _, _ = entityID(m)
		}
		cs = append(cs, store.Community{ID: c.ID, Level: c.Level, Parent: c.Parent, Children: c.Children, Members: members,
			MemberHash: "h-" + c.ID, Sources: refs(c.Sources...)})
	}
	require.NoError(t, st.ReplaceCommunities(t.Context(), tenant, 1, cs))
	for _, c := range cs {
		require.NoError(t, st.PutReport(t.Context(), tenant, store.Report{
			ID: "r-" + c.ID, Community: c.ID, Level: c.Level, Title: "Community " + c.ID, Summary: "What " + c.ID + " holds.",
			Findings: []store.Finding{{Summary: "A finding of " + c.ID + ".", Explanation: "Its sources agree.", Citations: c.Sources}},
			Rating:   4, Sources: c.Sources, MemberHash: c.MemberHash, Writer: "test",
		}))
	}
}

// TestUnitGraphAdmission: the fixture's ACLs as the query routes apply
// them: an sre-only postmortem is invisible to oncall, the other tenant
// sees its own graph only, and a revocation takes effect on the next read.
func TestUnitGraphAdmission(t *testing.T) {
	f := newUnitFixture(t)
	var p pathsResp
	f.get(certPaths, tokBob, http.StatusOK, &p)
	require.Equal(t, []string{"Discovery", "Payments"}, p.terminalNames())
	require.ElementsMatch(t, []string{"PM-7", "PM-12", catalogDoc}, p.docs())

	f.get(certPaths, tokAlice, http.StatusOK, &p)
	require.Equal(t, []string{"Payments"}, p.terminalNames(), "PM-12 (sre only) leads to Discovery")
	require.NotContains(t, p.docs(), "PM-12")
	status, code := f.errorCode(http.MethodGet, "/v1/entities/incident/PM-12", tokAlice, nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "unknown_entity", code)

	f.get("/v1/paths?start=component:cert-manager&rels=~involved,affected", tokCarol, http.StatusOK, &p)
	require.Equal(t, []string{"billing"}, p.terminalNames())
	require.Equal(t, []string{"G-1"}, p.docs())
	status, _ = f.errorCode(http.MethodGet, "/v1/reports/r-c-0-cert", tokCarol, nil)
	require.Equal(t, http.StatusNotFound, status)
	f.get("/v1/reports/r-c-0-cert", tokBob, http.StatusOK, nil)

	_, err := f.st.SetACL(t.Context(), tenantAcme, "PM-7", provenance.ACL{Groups: []string{"sre"}})
	require.NoError(t, err)
	// Nothing alice may read supports cert-manager any more: it is unknown
	// to her, as if absent.
	status, code = f.errorCode(http.MethodGet, certPaths, tokAlice, nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "unknown_entity", code)
	f.get(certPaths, tokBob, http.StatusOK, &p)
	require.Equal(t, []string{"Discovery", "Payments"}, p.terminalNames())
}
