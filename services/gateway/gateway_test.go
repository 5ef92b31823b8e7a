package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/gateway"
)

type fixture struct {
	srv *httptest.Server
	reg *embedded.Store
	bus *stream.Bus
}

func setup(t *testing.T) *fixture {
	t.Helper()
	return setupWith(t, gateway.Config{MaxBodyBytes: 4096})
}

// setupWith serves a gateway with cfg over a real embedded JetStream and
// store, with a writer ("w"), a user in sre ("u") and an admin ("root").
func setupWith(t *testing.T, cfg gateway.Config) *fixture {
	t.Helper()
	bus := streamtest.NewBus(t, streamtest.Options{})
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	a, err := auth.New([]auth.Token{
		{Token: "w", Tenant: "acme", Principal: "writer", Writer: true},
		{Token: "u", Tenant: "acme", Principal: "user", Groups: []string{"sre"}},
		{Token: "root", Tenant: "acme", Principal: "root", Admin: true},
	}, nil)
	require.NoError(t, err)
	g, err := gateway.New(cfg, st, bus, a, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, reg: st, bus: bus}
}

func (f *fixture) do(t *testing.T, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if !strings.HasPrefix(path, "/v1/catalog") {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(data, &out), "every answer is JSON: %s", data)
	return resp.StatusCode, out
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// streamCount counts the events on the stream (nothing is half-applied: a
// rejected request publishes nothing).
func (f *fixture) streamCount(t *testing.T) uint64 {
	t.Helper()
	s, err := f.bus.JetStream().Stream(t.Context(), f.bus.StreamName())
	require.NoError(t, err)
	info, err := s.Info(t.Context())
	require.NoError(t, err)
	return info.State.Msgs
}

func TestBadInput(t *testing.T) {
	f := setup(t)
	cases := []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"no token", "POST", "/v1/documents", "", `{"id":"a","text":"x"}`, 401, "unauthenticated"},
		{"bad token", "POST", "/v1/documents", "nope", `{"id":"a","text":"x"}`, 401, "unauthenticated"},
		{"malformed json", "POST", "/v1/documents", "w", `{"id":"a",`, 400, "malformed_json"},
		{"wrong type", "POST", "/v1/documents", "w", `{"id":"a","text":"x","version":"two"}`, 400, "invalid_field"},
		{"wrong type acl", "POST", "/v1/documents", "w", `{"id":"a","text":"x","acl":{"groups":"sre"}}`, 400, "invalid_field"},
		{"unknown field", "POST", "/v1/documents", "w", `{"id":"a","text":"x","colour":"red"}`, 400, "malformed_json"},
		{"missing id", "POST", "/v1/documents", "w", `{"text":"x"}`, 400, "invalid_field"},
		{"missing text", "POST", "/v1/documents", "w", `{"id":"a"}`, 400, "invalid_field"},
		{"blank text", "POST", "/v1/documents", "w", `{"id":"a","text":"   "}`, 400, "invalid_field"},
		{"space around id", "POST", "/v1/documents", "w", `{"id":" a","text":"x"}`, 400, "invalid_field"},
		{"negative version", "POST", "/v1/documents", "w", `{"id":"a","text":"x","version":-1}`, 400, "invalid_field"},
		{"oversized", "POST", "/v1/documents", "w", `{"id":"a","text":"` + strings.Repeat("x", 5000) + `"}`, 413, "body_too_large"},
		{"empty body", "POST", "/v1/documents", "w", ``, 400, "empty_body"},
		{"other tenant", "POST", "/v1/documents", "w", `{"id":"a","text":"x","tenant":"beta"}`, 403, "forbidden_tenant"},
		{"bad updated_at", "POST", "/v1/documents", "w", `{"id":"a","text":"x","updated_at":"yesterday"}`, 400, "invalid_field"},
		{"delete unknown", "DELETE", "/v1/documents/ghost", "w", ``, 404, "unknown_document"},
		{"acl unknown", "PUT", "/v1/documents/ghost/acl", "w", `{"groups":["sre"]}`, 404, "unknown_document"},
		{"bad catalog", "POST", "/v1/catalog", "w", "kind: [", 400, "invalid_catalog"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, out := f.do(t, c.method, c.path, c.token, c.body)
			require.Equal(t, c.status, status, out)
			require.Equal(t, c.code, errCode(out), out)
			e := out["error"].(map[string]any)
			require.NotEmpty(t, e["message"])
		})
	}
	require.Zero(t, f.streamCount(t), "a rejected request published an event")
	srcs, err := f.reg.ListSources(t.Context(), "acme")
	require.NoError(t, err)
	require.Empty(t, srcs, "a rejected request wrote to the registry")
}

func TestAcceptedVersionsAndEvents(t *testing.T) {
	f := setup(t)
	status, out := f.do(t, "POST", "/v1/documents", "w", `{"id":"INC-1","text":"first","acl":{"groups":["sre"]}}`)
	require.Equal(t, 202, status, out)
	require.EqualValues(t, 1, out["version"])
	require.Equal(t, "acme/INC-1/1/changed", out["event_id"])

	// Same explicit version and content again: nothing to do.
	status, out = f.do(t, "POST", "/v1/documents", "w", `{"id":"INC-1","version":1,"text":"first","acl":{"groups":["sre"]}}`)
	require.Equal(t, 200, status, out)
	require.Equal(t, true, out["unchanged"])

	status, out = f.do(t, "POST", "/v1/documents", "w", `{"id":"INC-1","text":"second"}`)
	require.Equal(t, 202, status, out)
	require.EqualValues(t, 2, out["version"])

	// An older version after a newer one changes nothing.
	status, out = f.do(t, "POST", "/v1/documents", "w", `{"id":"INC-1","version":1,"text":"old"}`)
	require.Equal(t, 409, status, out)
	require.Equal(t, "stale_version", errCode(out))

	status, out = f.do(t, "PUT", "/v1/documents/INC-1/acl", "w", `{"groups":["payments"]}`)
	require.Equal(t, 202, status, out)
	require.Equal(t, "acme/INC-1/2/acl-2", out["event_id"])
	srcs, err := f.reg.Sources(t.Context(), "acme", []string{"INC-1"})
	require.NoError(t, err)
	require.Equal(t, []string{"payments"}, srcs["INC-1"].ACL.Groups, "the ACL is in force as soon as 202 is answered")

	// A user who cannot read INC-1 (now payments only) may not overwrite,
	// re-permission or delete it, and is told it does not exist; the
	// service account may.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/documents", `{"id":"INC-1","text":"mine now","acl":{"public":true}}`},
		{"PUT", "/v1/documents/INC-1/acl", `{"public":true}`},
		{"DELETE", "/v1/documents/INC-1", ``},
	} {
		status, out = f.do(t, c.method, c.path, "u", c.body)
		require.Equal(t, 404, status, out)
		require.Equal(t, "unknown_document", errCode(out))
	}
	// A document the user created, the user may write.
	status, out = f.do(t, "POST", "/v1/documents", "u", `{"id":"RB-1","text":"runbook","acl":{"groups":["sre"]}}`)
	require.Equal(t, 202, status, out)
	status, out = f.do(t, "POST", "/v1/documents", "u", `{"id":"RB-1","text":"runbook v2","acl":{"groups":["sre"]}}`)
	require.Equal(t, 202, status, out)

	status, out = f.do(t, "DELETE", "/v1/documents/INC-1", "w", ``)
	require.Equal(t, 202, status, out)
	require.EqualValues(t, 3, out["version"])
	require.Equal(t, "acme/INC-1/3/deleted", out["event_id"])

	// Admin may write to another tenant.
	status, out = f.do(t, "POST", "/v1/documents", "root", `{"id":"X","text":"x","tenant":"beta"}`)
	require.Equal(t, 202, status, out)
	require.Equal(t, "beta/X/1/changed", out["event_id"])

	status, out = f.do(t, "POST", "/v1/catalog?id=cat", "w", "apiVersion: backstage.io/v1alpha1\nkind: Component\nmetadata:\n  name: api\nspec:\n  type: service\n  owner: group:web\n")
	require.Equal(t, 202, status, out)

	// changed v1, changed v2 and its ACL event (sre to public), acl, RB-1 v1
	// and v2, deleted, beta changed, catalog = 9 events.
	require.EqualValues(t, 9, f.streamCount(t))
	stm, err := f.bus.JetStream().Stream(t.Context(), f.bus.StreamName())
	require.NoError(t, err)
	msg, err := stm.GetLastMsgForSubject(t.Context(), "kg.doc.changed.acme")
	require.NoError(t, err)
	var ev events.DocChanged
	require.NoError(t, events.Decode(msg.Data, &ev))
	require.Equal(t, "cat", ev.DocID)
	require.NotNil(t, ev.Structured)
}
