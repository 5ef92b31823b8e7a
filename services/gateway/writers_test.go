package gateway_test

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/gateway"
)

// setupPeople serves a gateway with a writer token (w), an admin (root),
// users in sre (u), in payments (p), with no group (x), and ann (a, no
// group), all in tenant acme, and a member of tenant beta (b).
func setupPeople(t *testing.T) *fixture {
	t.Helper()
	bus := streamtest.NewBus(t, streamtest.Options{})
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	a, err := auth.New([]auth.Token{
		{Token: "w", Tenant: "acme", Principal: "writer", Writer: true},
		{Token: "root", Tenant: "acme", Principal: "root", Admin: true},
		{Token: "u", Tenant: "acme", Principal: "user", Groups: []string{"sre"}},
		{Token: "p", Tenant: "acme", Principal: "pat", Groups: []string{"payments"}},
		{Token: "x", Tenant: "acme", Principal: "xavier"},
		{Token: "a", Tenant: "acme", Principal: "ann"},
		{Token: "b", Tenant: "beta", Principal: "bea", Groups: []string{"sre"}},
	}, nil)
	require.NoError(t, err)
	g, err := gateway.New(gateway.Config{MaxBodyBytes: 1 << 16}, st, bus, a, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, reg: st, bus: bus}
}

func TestWritersAreNotReaders(t *testing.T) {
	f := setupPeople(t)
	ok := func(method, path, token, body string) map[string]any {
		t.Helper()
		status, out := f.do(t, method, path, token, body)
		require.Less(t, status, 300, "%s %s by %s: %v", method, path, token, out)
		return out
	}
	writes := func(id string) [][3]string {
		return [][3]string{{"POST", "/v1/documents", `{"id":"` + id + `","text":"mine now","acl":{"public":true}}`},
			{"PUT", "/v1/documents/" + id + "/acl", `{"public":true}`}, {"DELETE", "/v1/documents/" + id, ``}}
	}

	// A public document created by a user names its author as writer:
	// every reader may read it, only the author may write it.
	ok("POST", "/v1/documents", "u", `{"id":"pub","text":"public runbook"}`)
	st, err := f.reg.Sources(t.Context(), "acme", []string{"pub"})
	require.NoError(t, err)
	require.Equal(t, []string{"user"}, st["pub"].ACL.Writers.Principals)
	for _, w := range writes("pub") {
		out := f.refused(t, 403, w[0], w[1], "x", w[2])
		require.Equal(t, "forbidden", errCode(out))
		f.refused(t, 403, w[0], w[1], "p", w[2])
	}
	ok("POST", "/v1/documents", "u", `{"id":"pub","text":"public runbook, v2"}`)
	// The author names the payments group as writers; pat may write now,
	// and the writers stay when an ACL naming none is sent.
	ok("PUT", "/v1/documents/pub/acl", "u", `{"public":true,"writers":{"groups":["payments"]}}`)
	ok("POST", "/v1/documents", "p", `{"id":"pub","text":"public runbook, v3"}`)
	ok("PUT", "/v1/documents/pub/acl", "p", `{"public":true}`)
	st, err = f.reg.Sources(t.Context(), "acme", []string{"pub"})
	require.NoError(t, err)
	require.Equal(t, provenance.Writers{Groups: []string{"payments"}}, st["pub"].ACL.Writers)
	f.refused(t, 403, "POST", "/v1/documents", "u", `{"id":"pub","text":"the author lost it"}`)

	// A restricted document: a caller who may not read it is told it does
	// not exist, exactly as for an id no one used.
	ok("POST", "/v1/documents", "w", `{"id":"sec","text":"sre only","acl":{"groups":["sre"]}}`)
	for _, w := range writes("sec") {
		got := f.refused(t, 404, w[0], w[1], "x", w[2])
		// A POST of an unknown id creates it; compare with a DELETE of one.
		method, ghost := w[0], strings.Replace(w[1], "sec", "ghost", 1)
		if method == "POST" {
			method, ghost = "DELETE", "/v1/documents/ghost"
		}
		_, unknown := f.do(t, method, ghost, "x", w[2])
		require.Equal(t, errCode(unknown), errCode(got))
		require.Equal(t, strings.ReplaceAll(unknown["error"].(map[string]any)["message"].(string), "ghost", "sec"),
			got["error"].(map[string]any)["message"], "the answer for a hidden document differs from an unknown one")
		f.refused(t, 404, w[0], w[1], "p", w[2])
		// A reader who is no writer may not write it either.
		f.refused(t, 403, w[0], w[1], "u", w[2])
	}
	// Writers are not readers: ann may write a document she cannot read.
	ok("PUT", "/v1/documents/sec/acl", "w", `{"groups":["sre"],"writers":{"principals":["ann"]}}`)
	ok("POST", "/v1/documents", "a", `{"id":"sec","text":"edited by ann","acl":{"groups":["sre"]}}`)
	st, err = f.reg.Sources(t.Context(), "acme", []string{"sec"})
	require.NoError(t, err)
	ann := provenance.Caller{Tenant: "acme", Principal: "ann"}
	require.False(t, provenance.Readable(ann, st["sec"]), "a writer became a reader")
	require.True(t, provenance.Writable(ann, st["sec"]))
	// Writer and admin tokens keep their powers.
	ok("PUT", "/v1/documents/sec/acl", "w", `{"groups":["payments"]}`)
	ok("POST", "/v1/documents", "root", `{"id":"sec","text":"by root","acl":{"groups":["payments"]}}`)
	ok("DELETE", "/v1/documents/sec", "root", ``)
	// Another tenant's member writes only in their own tenant.
	f.refused(t, 403, "POST", "/v1/documents", "b", `{"id":"pub","text":"x","tenant":"acme"}`)

	// The catalog is written by writers and admins only.
	cat := "apiVersion: backstage.io/v1alpha1\nkind: Component\nmetadata:\n  name: api\nspec:\n  type: service\n  owner: group:web\n"
	for _, tok := range []string{"u", "x", "p"} {
		f.refused(t, 403, "POST", "/v1/catalog", tok, cat)
	}
	ok("POST", "/v1/catalog", "w", cat)
	f.refused(t, 403, "POST", "/v1/catalog", "u", cat+"---\napiVersion: backstage.io/v1alpha1\nkind: Component\nmetadata:\n  name: web\nspec:\n  type: service\n")
	ok("POST", "/v1/catalog", "root", cat+"---\napiVersion: backstage.io/v1alpha1\nkind: Component\nmetadata:\n  name: web\nspec:\n  type: service\n")
}

func TestProviderNamespacesBelongToTheirReceivers(t *testing.T) {
	f := setupWebhooks(t)
	const id = "github:acme-co/ledger#7"
	// The document API does not write in a configured receiver's namespace,
	// whoever asks.
	for _, c := range []struct{ token, id, tenant string }{
		{"u", id, ""}, {"w", id, ""}, {"root", id, ""}, {"u", "github-wiki:x/Home", ""}, {"w", "gitlab:group/p#4", ""},
		{"root", "jira:OPS-1", "ops"},
	} {
		body, err := json.Marshal(map[string]any{"id": c.id, "text": "squatted", "tenant": c.tenant,
			"acl": map[string]any{"principals": []string{"user"}}})
		require.NoError(t, err)
		out := f.refused(t, 403, "POST", "/v1/documents", c.token, string(body))
		require.Equal(t, "reserved_id", errCode(out))
		require.Contains(t, out["error"].(map[string]any)["message"], "webhook receiver")
	}
	f.refused(t, 403, "POST", "/v1/catalog?id=github:catalog", "w",
		"apiVersion: backstage.io/v1alpha1\nkind: Component\nmetadata:\n  name: api\nspec:\n  type: service\n")
	// Outside a tenant's receivers the prefix is an ordinary id.
	status, out := f.do(t, "POST", "/v1/documents", "w", `{"id":"jira:OPS-1","text":"acme has no jira receiver"}`)
	require.Equal(t, 202, status, out)

	// A document squatted in the namespace before it was reserved: the
	// signed delivery sets the receiver's ACL and says so with an ACL event.
	_, err := f.reg.Announce(t.Context(), "acme", store.Announcement{DocID: id, Version: 1,
		ACL: provenance.ACL{Principals: []string{"user"}}, Title: "squat"})
	require.NoError(t, err)
	status, out = f.github(t, "issues", "d-squat", ownPayload(t, "github/issues.opened.json"))
	require.Equal(t, 202, status, out)
	src := f.source(t, "acme", id)
	require.Equal(t, provenance.ACL{Groups: []string{"eng"}}, src.ACL, "the squatter kept the ACL")
	require.False(t, provenance.Readable(provenance.Caller{Tenant: "acme", Principal: "user"}, src))
	ids, acls := f.aclEvents(t)
	require.Len(t, ids, 1)
	require.Equal(t, []string{"eng"}, acls[0].Groups)

	// A document the receiver created keeps an ACL an admin set on it.
	status, out = f.do(t, "PUT", "/v1/documents/"+url.PathEscape(id)+"/acl", "root", `{"groups":["security"]}`)
	require.Equal(t, 202, status, out)
	status, out = f.github(t, "issues", "d-edit", ownPayload(t, "github/issues.edited.json"))
	require.Equal(t, 202, status, out)
	require.Equal(t, []string{"security"}, f.source(t, "acme", id).ACL.Groups)
}

// A resend that changes only the writers is a new version with the new
// writers, not an unchanged document.
func TestChangingOnlyTheWritersIsANewVersion(t *testing.T) {
	f := setupPeople(t)
	doc := `{"id":"rb","text":"same text","acl":{"public":true,"writers":{"groups":["sre"]}}}`
	status, out := f.do(t, "POST", "/v1/documents", "w", doc)
	require.Equal(t, 202, status, out)
	status, out = f.do(t, "POST", "/v1/documents", "u", strings.Replace(doc, `"sre"`, `"payments"`, 1))
	require.Equal(t, 202, status, out)
	require.EqualValues(t, 2, out["version"])
	st, err := f.reg.Sources(t.Context(), "acme", []string{"rb"})
	require.NoError(t, err)
	require.Equal(t, provenance.Writers{Groups: []string{"payments"}}, st["rb"].ACL.Writers)
	status, out = f.do(t, "POST", "/v1/documents", "p", strings.Replace(doc, `"sre"`, `"payments"`, 1))
	require.Equal(t, 200, status, out)
	require.Equal(t, true, out["unchanged"])
}
