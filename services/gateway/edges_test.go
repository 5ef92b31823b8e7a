package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/redis"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/gateway"
)

// registry is every document of tenant acme as the registry holds it.
func (f *fixture) registry(t *testing.T) []provenance.SourceState {
	t.Helper()
	srcs, err := f.reg.ListSources(t.Context(), "acme")
	require.NoError(t, err)
	return srcs
}

// refused sends a request that must be refused with status and checks that
// neither the registry nor the stream moved.
func (f *fixture) refused(t *testing.T, status int, method, path, token, body string) map[string]any {
	t.Helper()
	before, msgs := f.registry(t), f.streamCount(t)
	got, out := f.do(t, method, path, token, body)
	require.Equal(t, status, got, "%s %s %s: %v", method, path, body, out)
	require.NotEmpty(t, errCode(out), out)
	require.Equal(t, before, f.registry(t), "a refused %s %s changed the registry", method, path)
	require.Equal(t, msgs, f.streamCount(t), "a refused %s %s published an event", method, path)
	return out
}

func TestVersionBoundsLeaveTheRegistryAsItWas(t *testing.T) {
	f := setup(t)
	for _, v := range []string{fmt.Sprint(int64(math.MaxInt64)), fmt.Sprint(provenance.MaxVersion),
		fmt.Sprint(provenance.MaxContentVersion + 1), "-1", "1e300", "9223372036854775808", "1.5"} {
		f.refused(t, 400, "POST", "/v1/documents", "w", `{"id":"pub","text":"x","version":`+v+`}`)
	}
	require.Empty(t, f.registry(t))

	// The last content version is taken; a next version past it is refused
	// and changes nothing, an explicit replay of it is allowed, and the
	// document can still be deleted.
	last := fmt.Sprint(provenance.MaxContentVersion)
	status, out := f.do(t, "POST", "/v1/documents", "u", `{"id":"pub","text":"x","version":`+last+`}`)
	require.Equal(t, 202, status, out)
	require.Equal(t, last, fmt.Sprint(int64(out["version"].(float64))))
	out = f.refused(t, 400, "POST", "/v1/documents", "u", `{"id":"pub","text":"next"}`)
	require.Contains(t, out["error"].(map[string]any)["message"], "last")
	f.refused(t, 400, "POST", "/v1/documents", "w", `{"id":"pub","text":"next","version":`+fmt.Sprint(provenance.MaxVersion)+`}`)
	f.refused(t, 409, "POST", "/v1/documents", "w", `{"id":"pub","text":"older","version":7}`)
	status, out = f.do(t, "DELETE", "/v1/documents/pub", "u", ``)
	require.Equal(t, 202, status, out)
	require.Equal(t, float64(provenance.MaxVersion), out["version"])
	st := f.registry(t)
	require.Len(t, st, 1)
	require.True(t, st[0].Deleted)
	require.Equal(t, provenance.MaxVersion, st[0].Version)
	// A deleted document at the largest version stays deleted.
	f.refused(t, 400, "POST", "/v1/documents", "u", `{"id":"pub","text":"back"}`)
	f.refused(t, 409, "POST", "/v1/documents", "u", `{"id":"pub","text":"back","version":3}`)
}

// raw sends a request with the given content type (none when empty).
func (f *fixture) raw(t *testing.T, method, path, token, contentType, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(data, &out), "every answer is JSON: %d %s", resp.StatusCode, data)
	return resp.StatusCode, out
}

func TestBadBodiesAreRefused(t *testing.T) {
	f := setupWebhooks(t)
	status, out := f.do(t, "POST", "/v1/documents", "w", `{"id":"doc","text":"x"}`)
	require.Equal(t, 202, status, out)
	for _, c := range []struct {
		name, method, path, ct, body string
		status                       int
	}{
		{"acl null", "PUT", "/v1/documents/doc/acl", "application/json", `null`, 400},
		{"acl empty", "PUT", "/v1/documents/doc/acl", "application/json", `{}`, 400},
		{"acl blank names", "PUT", "/v1/documents/doc/acl", "application/json", `{"groups":[" "],"principals":[""]}`, 400},
		{"post acl empty", "POST", "/v1/documents", "application/json", `{"id":"doc","text":"y","acl":{}}`, 400},
		{"no content type", "POST", "/v1/documents", "", `{"id":"doc","text":"y"}`, 415},
		{"no content type acl", "PUT", "/v1/documents/doc/acl", "", `{"public":true}`, 415},
		{"text plain", "POST", "/v1/documents", "text/plain", `{"id":"doc","text":"y"}`, 415},
		{"json lookalike", "POST", "/v1/documents", "application/jsonx", `{"id":"doc","text":"y"}`, 415},
		{"invalid utf-8 in path", "DELETE", "/v1/documents/%FF", "", ``, 400},
		{"invalid utf-8 in acl path", "PUT", "/v1/documents/a%FFb/acl", "application/json", `{"public":true}`, 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, msgs := f.registry(t), f.streamCount(t)
			status, out := f.raw(t, c.method, c.path, "w", c.ct, c.body)
			require.Equal(t, c.status, status, out)
			require.NotEmpty(t, errCode(out))
			require.Equal(t, before, f.registry(t))
			require.Equal(t, msgs, f.streamCount(t))
		})
	}
	// A correctly signed webhook that is not JSON is 415.
	body := ownPayload(t, "github/issues.opened.json")
	for _, ct := range []string{"application/x-www-form-urlencoded", "text/plain", ""} {
		req, err := http.NewRequest("POST", f.srv.URL+"/webhooks/github", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header = http.Header{"X-Github-Event": {"issues"}, "X-Github-Delivery": {"d-ct-" + ct},
			"X-Hub-Signature-256": {"sha256=" + hexMAC(ghSecret, body)}}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 415, resp.StatusCode, "%q: %s", ct, data)
	}
	require.Len(t, f.registry(t), 1, "the refused webhooks wrote nothing")
}

func TestOutageAnswers503WithoutInternalDetail(t *testing.T) {
	bus := streamtest.NewBus(t, streamtest.Options{})
	// A registry whose Redis is not there: every call fails with the
	// client's dial error, which names the address.
	const addr = "127.0.0.1:1"
	client := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { client.Close() })
	reg := redis.New(client, "kgtest-outage")
	a, err := auth.New([]auth.Token{{Token: "w", Tenant: "acme", Principal: "writer", Writer: true},
		{Token: "u", Tenant: "acme", Principal: "user"}}, nil)
	require.NoError(t, err)
	g, err := gateway.New(gateway.Config{MaxBodyBytes: 4096}, reg, bus, a, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	f := &fixture{srv: srv, bus: bus}
	for _, c := range []struct{ method, path, token, body string }{
		{"POST", "/v1/documents", "w", `{"id":"d","text":"x"}`},
		{"POST", "/v1/documents", "u", `{"id":"d","text":"x"}`},
		{"DELETE", "/v1/documents/d", "w", ``},
		{"DELETE", "/v1/documents/d", "u", ``},
		{"PUT", "/v1/documents/d/acl", "w", `{"public":true}`},
		{"PUT", "/v1/documents/d/acl", "u", `{"public":true}`},
	} {
		status, out := f.do(t, c.method, c.path, c.token, c.body)
		require.Equal(t, 503, status, "%s %s: %v", c.method, c.path, out)
		require.Equal(t, "registry_unavailable", errCode(out))
		msg := fmt.Sprint(out)
		require.NotContains(t, msg, "127.0.0.1", "the answer names the store's address")
		require.NotContains(t, msg, "dial", "the answer carries the store's error")
	}
	require.Zero(t, f.streamCount(t))
}

func TestIDsAsPeopleWriteThem(t *testing.T) {
	f := setup(t)
	long := strings.Repeat("é", provenance.MaxDocIDBytes/2)
	ids := []string{"team-a/2024/incident.md", "team-b/2024/incident.md", "Runbooks/Redis", "Runbooks%2FRedis",
		"ünïcødé/日本語", "a b", "50%/off?x=1#y", "github-like:owner/repo#1", long}
	for _, id := range ids {
		body, err := json.Marshal(map[string]any{"id": id, "text": "text of " + id})
		require.NoError(t, err)
		status, out := f.do(t, "POST", "/v1/documents", "w", string(body))
		require.Equal(t, 202, status, "%q: %v", id, out)
		require.Equal(t, id, out["id"])
		require.Equal(t, "acme/"+id+"/1/changed", out["event_id"])
	}
	got, err := f.reg.Sources(t.Context(), "acme", ids)
	require.NoError(t, err)
	require.Len(t, got, len(ids), "every id is its own document")
	// Every event carries its own message id, the id as written.
	stm, err := f.bus.JetStream().Stream(t.Context(), f.bus.StreamName())
	require.NoError(t, err)
	for i, id := range ids {
		msg, err := stm.GetMsg(t.Context(), uint64(i+1))
		require.NoError(t, err)
		require.Equal(t, "acme/"+id+"/1/changed", msg.Header.Get("Nats-Msg-Id"))
	}

	// In a path, the id is one escaped segment.
	status, out := f.do(t, "DELETE", "/v1/documents/team-a%2F2024%2Fincident.md", "w", ``)
	require.Equal(t, 202, status, out)
	require.Equal(t, "team-a/2024/incident.md", out["id"])
	status, out = f.do(t, "PUT", "/v1/documents/"+url.PathEscape("ünïcødé/日本語")+"/acl", "w", `{"groups":["sre"]}`)
	require.Equal(t, 202, status, out)
	status, out = f.do(t, "DELETE", "/v1/documents/"+url.PathEscape("50%/off?x=1#y"), "w", ``)
	require.Equal(t, 202, status, out)
	got, err = f.reg.Sources(t.Context(), "acme", ids)
	require.NoError(t, err)
	require.True(t, got["team-a/2024/incident.md"].Deleted)
	require.False(t, got["team-b/2024/incident.md"].Deleted, "deleting one path deleted another")
	require.Equal(t, []string{"sre"}, got["ünïcødé/日本語"].ACL.Groups)
	require.True(t, got["50%/off?x=1#y"].Deleted)
	require.False(t, got["Runbooks%2FRedis"].Deleted)

	// Ids that do not look like what they are, or cannot be carried, are
	// refused, in a body and in a path.
	for _, id := range []string{"", " lead", "trail ", "tab\t", "new\nline", "nul\x00", "bidi\u202egnp.exe", "isolate\u2066x",
		"zero\u200bwidth", "joiner\u200d", "bom\ufeff", "nel\u0085", "line\u2028sep", "bad\xffutf8", long + "x"} {
		body, err := json.Marshal(map[string]any{"id": id, "text": "x"})
		require.NoError(t, err)
		if !utf8.ValidString(id) {
			body = []byte("{\"id\":\"bad\xffutf8\",\"text\":\"x\"}")
		}
		out := f.refused(t, 400, "POST", "/v1/documents", "w", string(body))
		require.Equal(t, "invalid_field", errCode(out), "%q", id)
		if id != "" {
			f.refused(t, 400, "DELETE", "/v1/documents/"+url.PathEscape(id), "w", ``)
			f.refused(t, 400, "PUT", "/v1/documents/"+url.PathEscape(id)+"/acl", "w", `{"public":true}`)
		}
	}
}

func TestDotAndSlashIDsAreAddressed(t *testing.T) {
	f := setup(t)
	for _, id := range []string{"a", "b", ".", "..", "/", "a/../b", "./x"} {
		body, err := json.Marshal(map[string]any{"id": id, "text": "text of " + id})
		require.NoError(t, err)
		status, out := f.do(t, "POST", "/v1/documents", "w", string(body))
		require.Equal(t, 202, status, "%q: %v", id, out)
	}
	// Paths ServeMux would clean (and redirect) are refused, not followed:
	// DELETE /v1/documents/a/../b must not delete b.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/v1/documents/a/../b", "/v1/documents/./b", "/v1/documents/.", "/v1/documents/..",
		"/v1/documents/", "/v1/documents//acl", "/v1/documents/a/./acl", "/v1/documents/b/../a/acl"} {
		for _, method := range []string{"DELETE", "PUT"} {
			before := f.registry(t)
			req, err := http.NewRequest(method, f.srv.URL+p, strings.NewReader(`{"public":true}`))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer w")
			req.Header.Set("Content-Type", "application/json")
			resp, err := noRedirect.Do(req)
			require.NoError(t, err)
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, 400, resp.StatusCode, "%s %s: %s", method, p, data)
			var out map[string]any
			require.NoError(t, json.Unmarshal(data, &out), "%s %s answers JSON: %s", method, p, data)
			require.Equal(t, "invalid_path", errCode(out))
			require.Equal(t, before, f.registry(t))
		}
	}
	for _, p := range []string{"/webhooks/../v1/documents", "/webhooks/./github"} {
		status, out := f.raw(t, "POST", p, "w", "application/json", `{}`)
		require.Equal(t, 400, status, "%s: %v", p, out)
	}
	// Escaped, every one of them is addressed.
	for _, c := range []struct{ path, id string }{
		{"/v1/documents/%2E", "."}, {"/v1/documents/%2E%2E", ".."}, {"/v1/documents/%2F", "/"},
		{"/v1/documents/a%2F..%2Fb", "a/../b"}, {"/v1/documents/%2E%2Fx", "./x"},
	} {
		status, out := f.do(t, "PUT", c.path+"/acl", "w", `{"groups":["sre"]}`)
		require.Equal(t, 202, status, "%s: %v", c.path, out)
		require.Equal(t, c.id, out["id"])
		status, out = f.do(t, "DELETE", c.path, "w", ``)
		require.Equal(t, 202, status, "%s: %v", c.path, out)
		require.Equal(t, c.id, out["id"])
	}
	got, err := f.reg.Sources(t.Context(), "acme", []string{"a", "b"})
	require.NoError(t, err)
	require.False(t, got["a"].Deleted)
	require.False(t, got["b"].Deleted, "b was deleted through a path naming another document")
	status, out := f.do(t, "GET", "/v1/documents/a", "w", ``)
	require.Equal(t, 405, status, out)
}

func TestUnchangedDocumentIsANoOp(t *testing.T) {
	f := setup(t)
	doc := `{"id":"runbooks/redis.md","title":"Redis","doc_type":"runbook","source":"wiki","text":"Restart the primary.","acl":{"groups":["sre"]}}`
	status, out := f.do(t, "POST", "/v1/documents", "w", doc)
	require.Equal(t, 202, status, out)
	require.EqualValues(t, 1, out["version"])
	require.EqualValues(t, 1, f.streamCount(t))
	before := f.registry(t)

	// The same document again, with or without its version: 200 unchanged,
	// no version, no event.
	for _, body := range []string{doc, strings.Replace(doc, `{"id"`, `{"version":1,"id"`, 1),
		strings.Replace(doc, `"groups":["sre"]`, `"groups":["sre","sre"," sre"]`, 1)} {
		status, out = f.do(t, "POST", "/v1/documents", "w", body)
		require.Equal(t, 200, status, out)
		require.Equal(t, true, out["unchanged"])
		require.EqualValues(t, 1, out["version"])
		require.Equal(t, "acme/runbooks/redis.md/1/changed", out["event_id"])
		require.EqualValues(t, 1, f.streamCount(t), "an unchanged document published an event")
		require.Equal(t, before, f.registry(t))
	}
	// Any part of the content or the ACL changed is a new version.
	version, msgs := 1, uint64(1)
	for _, c := range [][2]string{{`"Restart the primary."`, `"Restart the replica."`}, {`"Redis"`, `"Redis 7"`},
		{`"runbook"`, `"page"`}, {`"wiki"`, `"git"`}, {`"groups":["sre"]`, `"groups":["sre","dba"]`}} {
		doc = strings.Replace(doc, c[0], c[1], 1)
		status, out = f.do(t, "POST", "/v1/documents", "w", doc)
		require.Equal(t, 202, status, "%s: %v", c[1], out)
		version++
		msgs++
		if strings.Contains(c[0], "groups") {
			msgs++ // its ACL event
		}
		require.EqualValues(t, version, out["version"])
		require.Equal(t, msgs, f.streamCount(t))
		status, out = f.do(t, "POST", "/v1/documents", "w", doc)
		require.Equal(t, 200, status, out)
		require.Equal(t, msgs, f.streamCount(t))
	}
	// An ACL set through PUT is what the document has: posting it with
	// that ACL is unchanged, with the old one it is a change.
	status, out = f.do(t, "PUT", "/v1/documents/runbooks%2Fredis.md/acl", "w", `{"public":true}`)
	require.Equal(t, 202, status, out)
	msgs = f.streamCount(t)
	status, out = f.do(t, "POST", "/v1/documents", "w", strings.Replace(doc, `"groups":["sre","dba"]`, `"public":true`, 1))
	require.Equal(t, 200, status, out)
	require.Equal(t, msgs, f.streamCount(t))
	status, out = f.do(t, "POST", "/v1/documents", "w", doc)
	require.Equal(t, 202, status, out)

	// A deleted document posted again comes back.
	status, out = f.do(t, "DELETE", "/v1/documents/runbooks%2Fredis.md", "w", ``)
	require.Equal(t, 202, status, out)
	status, out = f.do(t, "POST", "/v1/documents", "w", doc)
	require.Equal(t, 202, status, out)

	// A version recorded without an acknowledged event (its publish was
	// lost) is published by the identical retry.
	_, err := f.reg.Announce(t.Context(), "acme", store.Announcement{DocID: "lost", Version: 4, ACL: provenance.PublicACL()})
	require.NoError(t, err)
	msgs = f.streamCount(t)
	status, out = f.do(t, "POST", "/v1/documents", "w", `{"id":"lost","version":4,"text":"x"}`)
	require.Equal(t, 202, status, out)
	require.Equal(t, msgs+1, f.streamCount(t))
	status, out = f.do(t, "POST", "/v1/documents", "w", `{"id":"lost","version":4,"text":"x"}`)
	require.Equal(t, 200, status, out)

	// The catalog too.
	cat := "apiVersion: backstage.io/v1alpha1\nkind: Component\nmetadata:\n  name: api\nspec:\n  type: service\n  owner: group:web\n"
	status, out = f.do(t, "POST", "/v1/catalog?id=cat", "w", cat)
	require.Equal(t, 202, status, out)
	msgs = f.streamCount(t)
	status, out = f.do(t, "POST", "/v1/catalog?id=cat", "w", cat)
	require.Equal(t, 200, status, out)
	require.Equal(t, true, out["unchanged"])
	require.Equal(t, msgs, f.streamCount(t))
}

// aclEvents is every ACL event on the stream, in order.
func (f *fixture) aclEvents(t *testing.T) (ids []string, acls []provenance.ACL) {
	t.Helper()
	stm, err := f.bus.JetStream().Stream(t.Context(), f.bus.StreamName())
	require.NoError(t, err)
	for seq := uint64(1); seq <= f.streamCount(t); seq++ {
		msg, err := stm.GetMsg(t.Context(), seq)
		require.NoError(t, err)
		if !strings.HasPrefix(msg.Subject, "kg.doc.acl.") {
			continue
		}
		var ev events.DocACL
		require.NoError(t, events.Decode(msg.Data, &ev))
		ids = append(ids, msg.Header.Get("Nats-Msg-Id"))
		acls = append(acls, ev.ACL)
	}
	return ids, acls
}

func TestSameVersionACLChangePublishesAnACLEvent(t *testing.T) {
	f := setup(t)
	post := func(body string, status int) map[string]any {
		t.Helper()
		got, out := f.do(t, "POST", "/v1/documents", "w", body)
		require.Equal(t, status, got, out)
		return out
	}
	post(`{"id":"INC-7","version":1,"text":"db down","acl":{"groups":["sre"]}}`, 202)
	ids, _ := f.aclEvents(t)
	require.Empty(t, ids, "a new document has no ACL event")

	// The same version with a new ACL: the registry takes it and an ACL
	// event of its own says so.
	post(`{"id":"INC-7","version":1,"text":"db down","acl":{"groups":["payments"]}}`, 202)
	ids, acls := f.aclEvents(t)
	require.Equal(t, []string{"acme/INC-7/1/acl-1"}, ids)
	require.Equal(t, []string{"payments"}, acls[0].Groups)
	post(`{"id":"INC-7","version":1,"text":"db down","acl":{"public":true}}`, 202)
	post(`{"id":"INC-7","version":1,"text":"db down","acl":{"public":true}}`, 200)
	ids, acls = f.aclEvents(t)
	require.Equal(t, []string{"acme/INC-7/1/acl-1", "acme/INC-7/1/acl-2"}, ids)
	require.True(t, acls[1].Public)

	// PUT and a new version with a new ACL each have their own too.
	status, out := f.do(t, "PUT", "/v1/documents/INC-7/acl", "w", `{"principals":["ann"]}`)
	require.Equal(t, 202, status, out)
	require.Equal(t, "acme/INC-7/1/acl-3", out["event_id"])
	post(`{"id":"INC-7","text":"db down again","acl":{"groups":["sre"]}}`, 202)
	ids, acls = f.aclEvents(t)
	require.Equal(t, []string{"acme/INC-7/1/acl-1", "acme/INC-7/1/acl-2", "acme/INC-7/1/acl-3", "acme/INC-7/2/acl-4"}, ids)
	require.Equal(t, []string{"ann"}, acls[2].Principals)
	require.Equal(t, []string{"sre"}, acls[3].Groups)
	st, err := f.reg.Sources(t.Context(), "acme", []string{"INC-7"})
	require.NoError(t, err)
	require.Equal(t, acls[3], st["INC-7"].ACL, "the last ACL event carries the registry's ACL")
}
