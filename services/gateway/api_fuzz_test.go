package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/gateway"
)

// fuzzGateway is one gateway (real embedded JetStream and store) for a
// whole fuzz run; requests go to its handler without a network.
type fuzzGateway struct {
	h   http.Handler
	reg *embedded.Store
}

func newFuzzGateway(f *testing.F) *fuzzGateway {
	f.Helper()
	bus := streamtest.NewBus(f, streamtest.Options{})
	st, err := embedded.Open(filepath.Join(f.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(f, err)
	f.Cleanup(func() { st.Close() })
	a, err := auth.New([]auth.Token{
		{Token: "w", Tenant: "acme", Principal: "writer", Writer: true},
		{Token: "u", Tenant: "acme", Principal: "user", Groups: []string{"sre"}},
	}, nil)
	require.NoError(f, err)
	g, err := gateway.New(gateway.Config{MaxBodyBytes: 1 << 14}, st, bus, a, nil, prometheus.NewRegistry())
	require.NoError(f, err)
	return &fuzzGateway{h: g.Handler(), reg: st}
}

func (fg *fuzzGateway) snapshot(t *testing.T) []provenance.SourceState {
	srcs, err := fg.reg.ListSources(t.Context(), "acme")
	require.NoError(t, err)
	return srcs
}

// serve sends one request and checks what every answer must be: JSON with
// an error code when not 2xx, never a 5xx, and a refused request leaves
// the registry as it was.
func (fg *fuzzGateway) serve(t *testing.T, req *http.Request) {
	before := fg.snapshot(t)
	rec := httptest.NewRecorder()
	fg.h.ServeHTTP(rec, req)
	var out map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), "%d %s", rec.Code, rec.Body)
	require.Less(t, rec.Code, 500, "%v", out)
	if rec.Code >= 300 {
		e, _ := out["error"].(map[string]any)
		require.NotEmpty(t, e["code"], "%v", out)
		require.Equal(t, before, fg.snapshot(t), "a refused request (%d %v) changed the registry", rec.Code, out)
	}
}

func FuzzDocumentBody(f *testing.F) {
	for _, s := range []string{`{"id":"a","text":"x"}`, `{"id":"team/a.md","text":"x","version":3,"acl":{"groups":["sre"]}}`,
		`{"id":"a","text":"x","version":9007199254740991}`, `{"id":"a","text":"x","acl":{}}`, `{"id":" a","text":"x"}`,
		`{"id":"a","text":"x","acl":{"public":true,"writers":{"principals":["user"]}}}`, `{"id":"a\u202e","text":"x"}`,
		`{"id":"a","text":"x","updated_at":"2025-01-01T00:00:00Z","title":"t","doc_type":"runbook","source":"wiki"}`, `null`, `[]`} {
		f.Add(s, "w")
		f.Add(s, "u")
	}
	fg := newFuzzGateway(f)
	f.Fuzz(func(t *testing.T, body, token string) {
		if token != "w" && token != "u" {
			token = "w"
		}
		req := httptest.NewRequest(http.MethodPost, "/v1/documents", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		fg.serve(t, req)
	})
}

func FuzzACLBody(f *testing.F) {
	for _, s := range []string{`{"public":true}`, `{"groups":["sre"]}`, `{}`, `null`, `{"principals":[""]}`,
		`{"groups":["sre"],"writers":{"groups":["sre"]}}`, `{"public":true}x`, `{"public":"yes"}`} {
		f.Add("doc", s)
		f.Add("team/doc", s)
		f.Add(".", s)
	}
	fg := newFuzzGateway(f)
	for _, id := range []string{"doc", "team/doc", "."} {
		body, _ := json.Marshal(map[string]any{"id": id, "text": "seeded"})
		req := httptest.NewRequest(http.MethodPost, "/v1/documents", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer w")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		fg.h.ServeHTTP(rec, req)
		require.Equal(f, 202, rec.Code, rec.Body.String())
	}
	f.Fuzz(func(t *testing.T, id, body string) {
		// The path a client builds: the id as one escaped segment.
		seg := url.PathEscape(id)
		if seg == "." || seg == ".." {
			seg = "%2E" + seg[1:]
			if len(seg) > 3 {
				seg = "%2E%2E"
			}
		}
		// Callers alternate between a writer token and a reader who may
		// not write the seeded documents.
		token := []string{"w", "u"}[len(body)%2]
		for _, p := range []string{"/v1/documents/" + seg + "/acl", "/v1/documents/" + seg} {
			u, err := url.Parse(p)
			if err != nil {
				continue
			}
			method := http.MethodPut
			if p == "/v1/documents/"+seg {
				method = http.MethodDelete
				if id == "" || id[0] != 'x' {
					// Deleting the seeded documents would leave little to
					// re-permission; delete only ids starting with x.
					continue
				}
			}
			req := httptest.NewRequest(method, "/", bytes.NewReader([]byte(body)))
			req.URL, req.RequestURI = u, u.RequestURI()
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			fg.serve(t, req)
		}
	})
}
