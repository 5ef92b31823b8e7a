package query_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

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

// RegistryGeneration fails with the registry; otherwise it is the inner
// store's, so the service keeps its registry views behind failingStores.
func (f *failingStores) RegistryGeneration(ctx context.Context, tenant string) (uint64, error) {
	if f.fail.Load() {
		return 0, errors.New("registry down")
	}
	return f.Stores.(store.RegistryGenerations).RegistryGeneration(ctx, tenant)
}

// SourcesChangedSince fails with the registry; otherwise it is the inner
// store's, so the service brings its registry views up to date behind
// failingStores as it does behind the adapters.
func (f *failingStores) SourcesChangedSince(ctx context.Context, tenant string, since uint64) ([]provenance.SourceState, bool, error) {
	if f.fail.Load() {
		return nil, false, errors.New("registry down")
	}
	return f.Stores.(store.RegistryChanges).SourcesChangedSince(ctx, tenant, since)
}

// EntityParts is the inner store's, so the service reads parts of
// entities behind failingStores as it does behind the adapters; a store
// without it is read whole (store.PartOf).
func (f *failingStores) EntityParts(ctx context.Context, tenant string, ids []string, textBytes int, docs map[string][]string) (map[string]store.EntityPart, error) {
	return entityParts(ctx, f.Stores, tenant, ids, textBytes, docs)
}

func entityParts(ctx context.Context, st query.Stores, tenant string, ids []string, textBytes int, docs map[string][]string) (map[string]store.EntityPart, error) {
	if ep, ok := st.(store.EntityParts); ok {
		return ep.EntityParts(ctx, tenant, ids, textBytes, docs)
	}
	es, err := st.Entities(ctx, tenant, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.EntityPart, len(es))
	for id, e := range es {
		out[id] = store.PartOf(e, textBytes, docs[id])
	}
	return out, nil
}

// EdgesAmong is the inner store's, so the service patches edge lists
// behind failingStores as it does behind the adapters; a store without it
// is read whole and filtered.
func (f *failingStores) EdgesAmong(ctx context.Context, tenant, id string, dir store.Direction, others []string) ([]store.Edge, error) {
	return edgesAmong(ctx, f.Stores, tenant, id, dir, others)
}

func edgesAmong(ctx context.Context, st query.Stores, tenant, id string, dir store.Direction, others []string) ([]store.Edge, error) {
	if ea, ok := st.(store.EdgesAmong); ok {
		return ea.EdgesAmong(ctx, tenant, id, dir, others)
	}
	es, err := st.Edges(ctx, tenant, id, dir)
	if err != nil {
		return nil, err
	}
	out := []store.Edge{}
	for _, e := range es {
		if _, among := slices.BinarySearch(others, store.FarEnd(e, dir)); among {
			out = append(out, e)
		}
	}
	return out, nil
}

type fixture struct {
	t   *testing.T
	st  *failingStores
	srv *httptest.Server
	reg *prometheus.Registry
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

func announceApply(t *testing.T, st query.Stores, tenant, doc string, version int64, acl provenance.ACL, c store.Contributions) {
	t.Helper()
	_, err := st.Announce(t.Context(), tenant, store.Announcement{DocID: doc, Version: version, ACL: acl, Title: c.Title})
	require.NoError(t, err)
	res, err := st.Apply(t.Context(), tenant, doc, version, c)
	require.NoError(t, err)
	require.Equal(t, store.Applied, res.Outcome)
}

func refs(docs ...string) []provenance.SourceRef {
	out := make([]provenance.SourceRef, len(docs))
	for i, d := range docs {
		out[i] = provenance.SourceRef{DocID: d, Version: 1}
	}
	return out
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
