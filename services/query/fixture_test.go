package query_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/services/query"
)

// openStore is the one place that picks the store the tests run against.
func openStore(t *testing.T) query.Stores {
	t.Helper()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kgstream.db"), embedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// Tenants, tokens and groups of the fixture. Incident postmortems are
// readable by oncall and sre; the catalog is public within the tenant.
const (
	tenantAcme   = "acme"
	tenantGlobex = "globex"
	tokAlice     = "tok-alice" // acme, group oncall
	tokBob       = "tok-bob"   // acme, group sre
	tokCarol     = "tok-carol" // globex, group oncall
	catalogDoc   = "catalog-info"
	seedDir      = "../../../shared/corpora/seed-postmortems" // beside the checkout
)

// failingStores makes Sources fail on demand, to check that reads fail closed.
type failingStores struct {
	query.Stores
	fail atomic.Bool
}

func (f *failingStores) Sources(ctx context.Context, tenant string, ids []string) (map[string]provenance.SourceState, error) {
	if f.fail.Load() {
		return nil, errors.New("registry down")
	}
	return f.Stores.Sources(ctx, tenant, ids)
}

func (f *failingStores) ListSources(ctx context.Context, tenant string) ([]provenance.SourceState, error) {
	if f.fail.Load() {
		return nil, errors.New("registry down")
	}
	return f.Stores.ListSources(ctx, tenant)
}

type fixture struct {
	t   *testing.T
	st  *failingStores
	srv *httptest.Server
	reg *prometheus.Registry
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st := &failingStores{Stores: openStore(t)}
	loadSeed(t, st, tenantAcme)
	loadGlobex(t, st)
	f := &fixture{t: t, st: st}
	return f.withConfig(query.Config{})
}

// withConfig returns a fixture over the same stores served by a new Service
// with cfg, on its own server and metrics registry.
func (f *fixture) withConfig(cfg query.Config) *fixture {
	f.t.Helper()
	a, err := newAuth()
	require.NoError(f.t, err)
	reg := prometheus.NewRegistry()
	svc, err := query.New(cfg, f.st, a, nil, reg)
	require.NoError(f.t, err)
	srv := httptest.NewServer(svc.Handler())
	f.t.Cleanup(srv.Close)
	return &fixture{t: f.t, st: f.st, srv: srv, reg: reg}
}

// newAuth knows the three fixture callers and refuses anonymous requests.
func newAuth() (*auth.Authenticator, error) {
	return auth.New([]auth.Token{
		{Token: tokAlice, Tenant: tenantAcme, Principal: "alice", Groups: []string{"oncall"}},
		{Token: tokBob, Tenant: tenantAcme, Principal: "bob", Groups: []string{"sre"}},
		{Token: tokCarol, Tenant: tenantGlobex, Principal: "carol", Groups: []string{"oncall"}},
	}, nil)
}

// do sends a request and decodes the JSON response into out (if not nil),
// returning the status.
func (f *fixture) do(method, path, token string, body any, out any) int {
	f.t.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.(string)
		if !ok {
			raw, err := json.Marshal(body)
			require.NoError(f.t, err)
			b = string(raw)
		}
		rd = strings.NewReader(b)
	}
	req, err := http.NewRequestWithContext(f.t.Context(), method, f.srv.URL+path, rd)
	require.NoError(f.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.srv.Client().Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(f.t, err)
	require.Equal(f.t, "application/json", resp.Header.Get("Content-Type"), "body: %s", raw)
	if out != nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		require.NoError(f.t, dec.Decode(out), "body: %s", raw)
	}
	return resp.StatusCode
}

// get sends a GET and requires status want.
func (f *fixture) get(path, token string, want int, out any) {
	f.t.Helper()
	var raw json.RawMessage
	got := f.do(http.MethodGet, path, token, nil, &raw)
	require.Equal(f.t, want, got, "GET %s: %s", path, raw)
	if out != nil {
		require.NoError(f.t, json.Unmarshal(raw, out))
	}
}

// errorCode sends a request and returns its status and error code.
func (f *fixture) errorCode(method, path, token string, body any) (int, string) {
	f.t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	status := f.do(method, path, token, body, &e)
	return status, e.Error.Code
}

// incidentACL is the ACL of every postmortem.
func incidentACL() provenance.ACL { return provenance.ACL{Groups: []string{"oncall", "sre"}} }

type triple struct {
	Source     string `json:"source"`
	SourceType string `json:"source_type"`
	Relation   string `json:"relation"`
	Target     string `json:"target"`
	TargetType string `json:"target_type"`
}

// sentences splits a postmortem into text units, one per sentence.
func sentences(text string) []events.TextUnit {
	var out []events.TextUnit
	start := 0
	for i := 0; i < len(text); i++ {
		if text[i] == '.' && (i+1 == len(text) || text[i+1] == ' ' || text[i+1] == '\n') {
			s := strings.TrimSpace(text[start : i+1])
			if s != "" {
				out = append(out, events.TextUnit{ID: "u" + strconv.Itoa(len(out)), Text: s, Start: start, End: i + 1})
			}
			start = i + 1
		}
	}
	if rest := strings.TrimSpace(text[start:]); rest != "" {
		out = append(out, events.TextUnit{ID: "u" + strconv.Itoa(len(out)), Text: rest, Start: start, End: len(text)})
	}
	return out
}

// unitsFor returns the text units that mention name (by normalisation key),
// or the first unit when none does, so every fact has support.
func unitsFor(units []events.TextUnit, name string) []string {
	var out []string
	k := resolve.Key(name)
	for _, u := range units {
		if strings.Contains(resolve.Key(u.Text), k) {
			out = append(out, u.ID)
		}
	}
	if len(out) == 0 {
		out = []string{units[0].ID}
	}
	return out
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

func announceApply(t *testing.T, st query.Stores, tenant, doc string, version int64, acl provenance.ACL, c store.Contributions) {
	t.Helper()
	_, err := st.Announce(t.Context(), tenant, store.Announcement{DocID: doc, Version: version, ACL: acl, Title: c.Title})
	require.NoError(t, err)
	res, err := st.Apply(t.Context(), tenant, doc, version, c)
	require.NoError(t, err)
	require.Equal(t, store.Applied, res.Outcome)
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

func refs(docs ...string) []provenance.SourceRef {
	out := make([]provenance.SourceRef, len(docs))
	for i, d := range docs {
		out[i] = provenance.SourceRef{DocID: d, Version: 1}
	}
	return out
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

// loadGlobex gives the other tenant one postmortem of its own that also
// involves a cert-manager, so tenant isolation is visible both ways.
func loadGlobex(t *testing.T, st query.Stores) {
	t.Helper()
	units := []events.TextUnit{{ID: "u0", Text: "G-1: cert-manager broke billing.", End: 32}}
	c := store.Contributions{Title: "G-1", TextUnits: units,
		Entities: []store.EntityContribution{
			{ID: "incident:g1", Type: "incident", Name: "G-1", NameRank: 2, TextUnits: []string{"u0"}},
			{ID: "component:certmanager", Type: "component", Name: "cert-manager", NameRank: 2, TextUnits: []string{"u0"}},
			{ID: "service:billing", Type: "service", Name: "billing", NameRank: 2, TextUnits: []string{"u0"}},
		},
		Edges: []store.EdgeContribution{
			{Source: "incident:g1", Relation: "involved", Target: "component:certmanager", TextUnits: []string{"u0"}},
			{Source: "incident:g1", Relation: "affected", Target: "service:billing", TextUnits: []string{"u0"}},
		},
	}
	announceApply(t, st, tenantGlobex, "G-1", 1, incidentACL(), c)
}
