package app_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/provenance"
)

// probeTokens: tenant acme has an admin (who reads sec and eng material), a
// writer without groups, a reader in eng and a reader without groups;
// tenant other has a writer in the same groups, who must see nothing of acme.
const probeTokens = `[
 {"token":"adm-token","tenant":"acme","principal":"ada","groups":["sec","eng"],"admin":true},
 {"token":"wri-token","tenant":"acme","principal":"wanda","writer":true},
 {"token":"rg-token","tenant":"acme","principal":"rita","groups":["eng"]},
 {"token":"rn-token","tenant":"acme","principal":"nick"},
 {"token":"oth-token","tenant":"other","principal":"olga","groups":["sec","eng"],"writer":true}
]`

const probeWebhookSecret = "probe-secret"

// probeAnswer is one HTTP answer of the all-in-one.
type probeAnswer struct {
	status int
	code   string
	body   string
}

type prober struct {
	t    *testing.T
	base string
}

func (p prober) do(token, method, path, contentType string, body []byte, header map[string]string) probeAnswer {
	p.t.Helper()
	req, err := http.NewRequestWithContext(p.t.Context(), method, p.base+path, bytes.NewReader(body))
	require.NoError(p.t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(p.t, err, "%s %s", method, path)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(p.t, err)
	a := probeAnswer{status: resp.StatusCode, body: string(data)}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		require.NoError(p.t, json.Unmarshal(data, &e), "%s %s answers %d with a JSON error body: %s", method, path, resp.StatusCode, data)
		require.NotEmpty(p.t, e.Error.Code, "%s %s: %s", method, path, data)
		a.code = e.Error.Code
	}
	return a
}

func (p prober) getJSON(token, path string, out any) {
	p.t.Helper()
	a := p.do(token, http.MethodGet, path, "", nil, nil)
	require.Equal(p.t, http.StatusOK, a.status, "GET %s: %s", path, a.body)
	require.NoError(p.t, json.Unmarshal([]byte(a.body), out), "GET %s", path)
}

// registry is what the admin sees of tenant acme's registry: every source
// (id, title, version, source, ACL) and the tenant-wide document count.
func (p prober) registry() string {
	p.t.Helper()
	var ids []string
	for {
		var list struct {
			Sources []struct{ ID string } `json:"sources"`
			Total   int                   `json:"total"`
		}
		p.getJSON("adm-token", fmt.Sprintf("/v1/sources?limit=1000&offset=%d", len(ids)), &list)
		for _, s := range list.Sources {
			ids = append(ids, s.ID)
		}
		if len(list.Sources) == 0 || len(ids) >= list.Total {
			break
		}
	}
	var b strings.Builder
	for _, id := range ids {
		var d struct {
			ID, Title, Source string
			Version           int64
			ACL               json.RawMessage `json:"acl"`
		}
		p.getJSON("adm-token", "/v1/source?id="+url.QueryEscape(id), &d)
		fmt.Fprintf(&b, "%q v%d title=%q source=%q acl=%s\n", d.ID, d.Version, d.Title, d.Source, d.ACL)
	}
	var st struct {
		Documents int    `json:"documents"`
		Scope     string `json:"scope"`
	}
	p.getJSON("adm-token", "/v1/status", &st)
	fmt.Fprintf(&b, "documents=%d scope=%s\n", st.Documents, st.Scope)
	return b.String()
}

func (p prober) post(token string, d map[string]any) probeAnswer {
	p.t.Helper()
	body, err := json.Marshal(d)
	require.NoError(p.t, err)
	return p.do(token, http.MethodPost, "/v1/documents", "application/json", body, nil)
}

func (p prober) mustAccept(a probeAnswer, what string) {
	p.t.Helper()
	require.Contains(p.t, []int{http.StatusOK, http.StatusAccepted}, a.status, "%s: %s", what, a.body)
}

// edgeProbe is one request and the answer it must get.
type edgeProbe struct {
	name   string
	token  string
	method string
	path   string
	ctype  string
	body   []byte
	header map[string]string
	status int
	code   string
	// changes is set for an accepted write: the registry is allowed to move.
	changes bool
}

func jsonBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func signGitHub(body []byte) string {
	mac := hmac.New(sha256.New, []byte(probeWebhookSecret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

const probeCatalog = `apiVersion: backstage.io/v1alpha1
kind: Component
metadata:
  name: ledger-api
spec:
  type: service
  owner: team-ledger
  lifecycle: production
`

// Markers of the restricted documents: words that appear nowhere else.
var (
	hushMarkers = []string{"hush-doc-7", "quillfeather", "brassmoth"}
	engMarkers  = []string{"eng-doc-3", "tinderloom", "copperwren"}
)

// TestEdgeProbesAgainstAllInOne sends the edge probes to a live all-in-one
// with a tokens file and a webhooks file: each refused request gets its
// status and JSON error code and leaves the registry as it was; readers with
// and without groups never see a restricted document through any read
// path, and the other tenant sees nothing of acme.
func TestEdgeProbesAgainstAllInOne(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	require.NoError(t, os.WriteFile(tokens, []byte(probeTokens), 0o600))
	hooks := filepath.Join(dir, "webhooks.yaml")
	require.NoError(t, os.WriteFile(hooks, []byte("providers:\n  github: {secrets: ["+probeWebhookSecret+"], tenant: acme, acl: {groups: [eng]}}\n"), 0o600))
	a := startApp(t, app.Config{TokensFile: tokens, WebhooksFile: hooks})
	p := prober{t: t, base: a.URL()}

	// The material: written by the writer (who is in no group).
	p.mustAccept(p.post("wri-token", map[string]any{"id": "pub-1", "version": 5,
		"text": "The ledger-api service depends on postgres for its orders."}), "pub-1")
	p.mustAccept(p.post("wri-token", map[string]any{"id": "hush-doc-7", "title": "Quillfeather rollout",
		"text": "The quillfeather-gateway outage was caused by the brassmoth cache. Quillfeather engineers restarted brassmoth.",
		"acl":  map[string]any{"groups": []string{"sec"}}}), "hush-doc-7")
	p.mustAccept(p.post("wri-token", map[string]any{"id": "eng-doc-3", "title": "Tinderloom upgrade",
		"text": "The tinderloom scheduler failed after the copperwren upgrade.",
		"acl":  map[string]any{"groups": []string{"eng"}}}), "eng-doc-3")
	p.mustAccept(p.post("wri-token", map[string]any{"id": "flip-doc", "version": 2,
		"text": "The saltmarsh relay moved to the harborline cluster.", "acl": map[string]any{"groups": []string{"sec"}}}), "flip-doc")
	// A reader creates a document: its ACL names her as its writer.
	p.mustAccept(p.post("rg-token", map[string]any{"id": "rita-note",
		"text": "Notes on the ledger-api on-call rotation."}), "rita-note")
	waitApplied(t, p, 5)

	big := strings.Repeat("The ledger-api service writes its orders to postgres. ", 22000) // ~1.2 MB
	tooBig := bytes.Repeat([]byte("x"), 4<<20+512<<10)
	hookBody := []byte(`{"action":"opened"}`)
	maxV := provenance.MaxContentVersion

	probes := []edgeProbe{
		// Authentication.
		{name: "no token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "x", "text": "y"}), status: 401, code: "unauthenticated"},
		{name: "bad token", token: "nope", method: "GET", path: "/v1/status", status: 401, code: "unauthenticated"},

		// 1. Version bounds.
		{name: "version int64 max", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "pub-1", "version": int64(9223372036854775807), "text": "t"}), status: 400, code: "invalid_field"},
		{name: "version above the content maximum", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "pub-1", "version": maxV + 1, "text": "t"}), status: 400, code: "invalid_field"},
		{name: "negative version", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "pub-1", "version": -1, "text": "t"}), status: 400, code: "invalid_field"},
		{name: "fractional version", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: []byte(`{"id":"pub-1","version":6.5,"text":"t"}`), status: 400, code: "invalid_field"},
		{name: "version beyond int64", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: []byte(`{"id":"pub-1","version":92233720368547758070,"text":"t"}`), status: 400, code: "invalid_field"},
		{name: "stale version", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "pub-1", "version": 3, "text": "older"}), status: 409, code: "stale_version"},
		{name: "the content maximum is accepted", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "max-doc", "version": maxV, "text": "At the last version."}), status: 202, changes: true},
		{name: "no next version after the maximum", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "max-doc", "text": "One more."}), status: 400, code: "invalid_field"},
		{name: "a document at the maximum can still be deleted", token: "wri-token", method: "DELETE", path: "/v1/documents/max-doc",
			status: 202, changes: true},

		// 2. Sizes.
		{name: "body over 4 MiB", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: append(append([]byte(`{"id":"huge","text":"`), tooBig...), `"}`...), status: 413, code: "body_too_large"},
		{name: "catalog body over 4 MiB", token: "wri-token", method: "POST", path: "/v1/catalog?id=huge-cat", ctype: "application/yaml",
			body: tooBig, status: 413, code: "body_too_large"},
		{name: "1.2 MB document carried by reference", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "big-doc", "text": big}), status: 202, changes: true},

		// 3. Readers are not writers.
		{name: "reader without groups overwrites a public document", token: "rn-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "pub-1", "text": "defaced"}), status: 403, code: "forbidden"},
		{name: "reader with groups overwrites a public document", token: "rg-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "pub-1", "text": "defaced"}), status: 403, code: "forbidden"},
		{name: "reader re-permissions a public document", token: "rg-token", method: "PUT", path: "/v1/documents/pub-1/acl", ctype: "application/json",
			body: []byte(`{"groups":["eng"]}`), status: 403, code: "forbidden"},
		{name: "reader deletes a public document", token: "rn-token", method: "DELETE", path: "/v1/documents/pub-1", status: 403, code: "forbidden"},
		{name: "reader deletes another reader's document", token: "rn-token", method: "DELETE", path: "/v1/documents/rita-note", status: 403, code: "forbidden"},
		{name: "reader makes herself a writer of a public document", token: "rn-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body:   jsonBody(map[string]any{"id": "pub-1", "text": "mine", "acl": map[string]any{"public": true, "writers": map[string]any{"principals": []string{"nick"}}}}),
			status: 403, code: "forbidden"},
		{name: "author edits her own document", token: "rg-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "rita-note", "text": "Notes on the ledger-api on-call rotation, revised."}), status: 202, changes: true},
		{name: "reader without groups writes a catalog", token: "rn-token", method: "POST", path: "/v1/catalog?id=cat-1", ctype: "application/yaml",
			body: []byte(probeCatalog), status: 403, code: "forbidden"},
		{name: "reader with groups writes a catalog", token: "rg-token", method: "POST", path: "/v1/catalog?id=cat-1", ctype: "application/yaml",
			body: []byte(probeCatalog), status: 403, code: "forbidden"},
		{name: "writer writes a catalog", token: "wri-token", method: "POST", path: "/v1/catalog?id=cat-1", ctype: "application/yaml",
			body: []byte(probeCatalog), status: 202, changes: true},
		{name: "reader replaces the writer's catalog", token: "rg-token", method: "POST", path: "/v1/catalog?id=cat-1", ctype: "application/yaml",
			body: []byte(probeCatalog + "  system: stolen\n"), status: 403, code: "forbidden"},

		// 3. A write to a document the caller may not read is a write to an unknown id.
		{name: "unknown id: ACL", token: "rn-token", method: "PUT", path: "/v1/documents/never-was/acl", ctype: "application/json",
			body: []byte(`{"public":true}`), status: 404, code: "unknown_document"},
		{name: "unknown id: delete", token: "rn-token", method: "DELETE", path: "/v1/documents/never-was", status: 404, code: "unknown_document"},
		{name: "unreadable: overwrite (no groups)", token: "rn-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "hush-doc-7", "text": "squat"}), status: 404, code: "unknown_document"},
		{name: "unreadable: overwrite (groups)", token: "rg-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "hush-doc-7", "text": "squat", "acl": map[string]any{"public": true}}), status: 404, code: "unknown_document"},
		{name: "unreadable: ACL", token: "rg-token", method: "PUT", path: "/v1/documents/hush-doc-7/acl", ctype: "application/json",
			body: []byte(`{"public":true}`), status: 404, code: "unknown_document"},
		{name: "unreadable: delete", token: "rn-token", method: "DELETE", path: "/v1/documents/eng-doc-3", status: 404, code: "unknown_document"},
		{name: "other tenant: delete", token: "oth-token", method: "DELETE", path: "/v1/documents/hush-doc-7", status: 404, code: "unknown_document"},
		{name: "other tenant: ACL", token: "oth-token", method: "PUT", path: "/v1/documents/pub-1/acl", ctype: "application/json",
			body: []byte(`{"public":true}`), status: 404, code: "unknown_document"},
		{name: "other tenant: write into acme", token: "oth-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "pub-1", "text": "cross", "tenant": "acme"}), status: 403, code: "forbidden_tenant"},
		{name: "other tenant: delete in acme", token: "oth-token", method: "DELETE", path: "/v1/documents/pub-1?tenant=acme", status: 403, code: "forbidden_tenant"},

		// 4. Provider namespaces belong to their receivers.
		{name: "github id squatted by a reader", token: "rg-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "github:acme/repo#1", "text": "squat"}), status: 403, code: "reserved_id"},
		{name: "github wiki id squatted by the writer", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "github-wiki:acme/repo/Home", "text": "squat"}), status: 403, code: "reserved_id"},
		{name: "github id squatted by the admin", token: "adm-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "github:acme/repo#2", "text": "squat"}), status: 403, code: "reserved_id"},
		{name: "catalog under a github id", token: "wri-token", method: "POST", path: "/v1/catalog?id=github:cat", ctype: "application/yaml",
			body: []byte(probeCatalog), status: 403, code: "reserved_id"},

		// 7. Error mapping.
		{name: "invalid escape in a path", token: "wri-token", method: "DELETE", path: "/v1/documents/%FF", status: 400, code: "invalid_field"},
		{name: "invalid escape in an ACL path", token: "wri-token", method: "PUT", path: "/v1/documents/%FF/acl", ctype: "application/json",
			body: []byte(`{"public":true}`), status: 400, code: "invalid_field"},
		{name: "dot segments", token: "wri-token", method: "DELETE", path: "/v1/documents/a/../pub-1", status: 400, code: "invalid_path"},
		{name: "null ACL", token: "wri-token", method: "PUT", path: "/v1/documents/pub-1/acl", ctype: "application/json",
			body: []byte(`null`), status: 400, code: "invalid_field"},
		{name: "empty ACL", token: "wri-token", method: "PUT", path: "/v1/documents/pub-1/acl", ctype: "application/json",
			body: []byte(`{}`), status: 400, code: "invalid_field"},
		{name: "ACL with writers and no reader", token: "wri-token", method: "PUT", path: "/v1/documents/pub-1/acl", ctype: "application/json",
			body: []byte(`{"writers":{"principals":["nick"]}}`), status: 400, code: "invalid_field"},
		{name: "empty ACL on a new document", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: []byte(`{"id":"nobody-reads","text":"t","acl":{}}`), status: 400, code: "invalid_field"},
		{name: "bidi override in an id", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "pub\u202e1-", "text": "t"}), status: 400, code: "invalid_field"},
		{name: "zero-width character in an id", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "pub\u200b-1", "text": "t"}), status: 400, code: "invalid_field"},
		{name: "leading space in an id", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": " pub-1", "text": "t"}), status: 400, code: "invalid_field"},
		{name: "trailing space in an id", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: jsonBody(map[string]any{"id": "pub-1 ", "text": "t"}), status: 400, code: "invalid_field"},
		{name: "zero-width id in a path", token: "wri-token", method: "DELETE", path: "/v1/documents/pub%E2%80%8B-1", status: 400, code: "invalid_field"},
		{name: "no Content-Type", token: "wri-token", method: "POST", path: "/v1/documents",
			body: jsonBody(map[string]any{"id": "pub-1", "text": "t"}), status: 415, code: "unsupported_media_type"},
		{name: "text/plain", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "text/plain",
			body: jsonBody(map[string]any{"id": "pub-1", "text": "t"}), status: 415, code: "unsupported_media_type"},
		{name: "ACL without Content-Type", token: "wri-token", method: "PUT", path: "/v1/documents/pub-1/acl",
			body: []byte(`{"public":true}`), status: 415, code: "unsupported_media_type"},
		{name: "unknown field", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: []byte(`{"id":"pub-1","text":"t","owner":"nick"}`), status: 400, code: "malformed_json"},
		{name: "empty text", token: "wri-token", method: "POST", path: "/v1/documents", ctype: "application/json",
			body: []byte(`{"id":"pub-1","text":"  "}`), status: 400, code: "invalid_field"},
		{name: "signed webhook, text/plain", method: "POST", path: "/webhooks/github", ctype: "text/plain", body: hookBody,
			header: map[string]string{"X-GitHub-Event": "issues", "X-GitHub-Delivery": "probe-1", "X-Hub-Signature-256": signGitHub(hookBody)},
			status: 415, code: "unsupported_media_type"},
		{name: "signed webhook, no Content-Type", method: "POST", path: "/webhooks/github", body: hookBody,
			header: map[string]string{"X-GitHub-Event": "issues", "X-GitHub-Delivery": "probe-2", "X-Hub-Signature-256": signGitHub(hookBody)},
			status: 415, code: "unsupported_media_type"},
		{name: "badly signed webhook", method: "POST", path: "/webhooks/github", ctype: "application/json", body: hookBody,
			header: map[string]string{"X-GitHub-Event": "issues", "X-GitHub-Delivery": "probe-3", "X-Hub-Signature-256": "sha256=00"},
			status: 401, code: "bad_signature"},
		{name: "unconfigured provider", method: "POST", path: "/webhooks/gitlab", ctype: "application/json", body: hookBody,
			status: 404, code: "unknown_provider"},
		{name: "invalid id in a read parameter", token: "rg-token", method: "GET", path: "/v1/source?id=%FF", status: 404, code: "not_found"},
		{name: "repeated read parameter", token: "rg-token", method: "GET", path: "/v1/source?id=pub-1&id=hush-doc-7", status: 400, code: "invalid_param"},
		{name: "query without mode", token: "rg-token", method: "POST", path: "/v1/query", ctype: "application/json",
			body: []byte(`{"question":"what?"}`), status: 400, code: "missing_field"},

		// 6. /metrics is not on the API address.
		{name: "metrics on the API address", method: "GET", path: "/metrics", status: 404},
	}

	for _, pr := range probes {
		before := p.registry()
		got := p.do(pr.token, pr.method, pr.path, pr.ctype, pr.body, pr.header)
		if got.status != pr.status || (pr.code != "" && got.code != pr.code) {
			body := got.body
			if len(body) > 300 {
				body = body[:300] + "..."
			}
			t.Errorf("%s: %s %s answered %d %q, want %d %q: %s", pr.name, pr.method, pr.path, got.status, got.code, pr.status, pr.code, body)
			continue
		}
		if !pr.changes {
			require.Equal(t, before, p.registry(), "%s: a refused request changed the registry", pr.name)
		}
		if got.status/100 != 2 {
			for _, m := range append(append([]string{}, hushMarkers[1:]...), engMarkers[1:]...) {
				require.NotContains(t, strings.ToLower(got.body), m, "%s: the error names restricted material", pr.name)
			}
		}
	}
	// An unreadable document and an unknown one answer alike.
	hush := p.do("rn-token", "DELETE", "/v1/documents/hush-doc-7", "", nil, nil)
	unknown := p.do("rn-token", "DELETE", "/v1/documents/never-was", "", nil, nil)
	require.Equal(t, strings.ReplaceAll(unknown.body, "never-was", "ID"), strings.ReplaceAll(hush.body, "hush-doc-7", "ID"))

	// 5. Same version, new ACL: an ACL event reaches the vector index, so
	// the newly admitted readers find the passage.
	saltmarsh := func(token string) bool {
		a := p.do(token, "POST", "/v1/query", "application/json", []byte(`{"mode":"basic","question":"Where did the saltmarsh relay move?"}`), nil)
		require.Equal(t, 200, a.status, a.body)
		return strings.Contains(strings.ToLower(a.body), "harborline")
	}
	require.False(t, saltmarsh("rn-token"), "flip-doc is readable by sec only")
	require.True(t, saltmarsh("adm-token"), "the admin, in sec, finds flip-doc (else the check above proves nothing)")
	flip := p.post("wri-token", map[string]any{"id": "flip-doc", "version": 2,
		"text": "The saltmarsh relay moved to the harborline cluster.", "acl": map[string]any{"public": true}})
	require.Equal(t, 202, flip.status, flip.body)
	eventually(t, 60*time.Second, "the newly public flip-doc in nick's basic answers", func() bool { return saltmarsh("rn-token") })

	waitApplied(t, p, 7) // pub-1, hush, eng, flip, rita-note, big-doc, cat-1 applied; max-doc deleted
	var audited struct {
		Audited     bool   `json:"audited"`
		OrphanEdges int    `json:"orphan_edges"`
		DeadLetters uint64 `json:"dead_letters"`
	}
	p.getJSON("adm-token", "/v1/status?audit=1", &audited)
	require.True(t, audited.Audited)
	require.Zero(t, audited.OrphanEdges)
	require.Zero(t, audited.DeadLetters)

	// 9. The outbox is empty once every publish was acknowledged.
	// (The gauge is set by the outbox's sweeps: poll for it.)
	eventually(t, 60*time.Second, "kgstream_outbox_pending 0 on the ops listener", func() bool {
		return strings.Contains(metricsOf(t, a.OpsURL())(), "\nkgstream_outbox_pending 0\n")
	})

	// 6. Status counts only what the caller reads.
	var adm, rg, rn, oth struct {
		Documents int    `json:"documents"`
		Entities  int    `json:"entities"`
		Scope     string `json:"scope"`
	}
	p.getJSON("adm-token", "/v1/status", &adm)
	p.getJSON("rg-token", "/v1/status", &rg)
	p.getJSON("rn-token", "/v1/status", &rn)
	p.getJSON("oth-token", "/v1/status", &oth)
	// acme: pub-1, hush-doc-7 (sec), eng-doc-3 (eng), flip-doc, rita-note, big-doc, cat-1.
	require.Equal(t, 7, adm.Documents, "the admin counts the tenant")
	require.Equal(t, "readable", rg.Scope)
	require.Equal(t, 6, rg.Documents, "rita reads all but hush-doc-7")
	require.Equal(t, 5, rn.Documents, "nick reads the public documents")
	require.Less(t, rn.Entities, adm.Entities)
	require.Equal(t, 0, oth.Documents, "tenant other has no document")

	// Readers with and without groups never see the restricted documents.
	admView := readPaths(t, p, "adm-token")
	for _, m := range append(append([]string{}, hushMarkers...), engMarkers...) {
		require.NotEmpty(t, admView.where(m), "the admin sees %q (else the checks below prove nothing)", m)
	}
	for _, mode := range []string{"basic", "local", "drift"} {
		for i, ms := range [][]string{hushMarkers, engMarkers} {
			what := fmt.Sprintf("POST /v1/query %s %q", mode, probeQuestions[i])
			require.Contains(t, admView[what], ms[1], "the admin's %s answer finds the restricted document", mode)
		}
	}
	rgView := readPaths(t, p, "rg-token")
	for _, m := range engMarkers {
		require.NotEmpty(t, rgView.where(m), "rita, in eng, sees %q", m)
	}
	for _, m := range hushMarkers {
		require.Empty(t, rgView.where(m), "rita sees the sec-only document's %q", m)
	}
	rnView := readPaths(t, p, "rn-token")
	othView := readPaths(t, p, "oth-token")
	for _, m := range append(append([]string{}, hushMarkers...), engMarkers...) {
		require.Empty(t, rnView.where(m), "nick, in no group, sees restricted %q", m)
		require.Empty(t, othView.where(m), "tenant other sees acme's restricted %q", m)
	}
	for _, m := range []string{"pub-1", "rita-note", "ledger-api", "saltmarsh"} {
		require.NotEmpty(t, rnView.where(m), "nick reads the public %q", m)
		require.Empty(t, othView.where(m), "tenant other sees acme's public %q", m)
	}
	for _, k := range []string{"reports_considered", "reports_dropped", `"candidates"`, `"dropped"`} {
		require.Empty(t, rnView.where(k), "answers count hidden material")
		require.Empty(t, rgView.where(k), "answers count hidden material")
	}
}

// waitApplied polls the admin's status until n documents are applied and
// nothing is pending.
func waitApplied(t *testing.T, p prober, n int) {
	t.Helper()
	var st statusResp
	eventually(t, 3*time.Minute, fmt.Sprintf("%d documents applied (last status: %+v)", n, &st), func() bool {
		p.getJSON("adm-token", "/v1/status", &st)
		return st.Applied == n && idle(st)
	})
}

// readPaths is everything token reads through the read API of tenant acme,
// lowercased: status, sources, each restricted and public source, entities
// (listed and each one the admin sees), communities and their reports, and
// the query modes asked about the restricted documents.
func readPaths(t *testing.T, p prober, token string) readView {
	t.Helper()
	view := readView{}
	var what string
	add := func(a probeAnswer) {
		if a.status/100 == 5 {
			t.Errorf("%s: %s answered %d: %s", token, what, a.status, a.body)
		}
		view[what] += strings.ToLower(a.body)
	}
	get := func(path string) { what = "GET " + path; add(p.do(token, "GET", path, "", nil, nil)) }
	// getEcho is get for a path naming something: a refusal may repeat the
	// name asked for, which tells nothing, so it is taken out.
	getEcho := func(path string, names ...string) {
		what = "GET " + path
		a := p.do(token, "GET", path, "", nil, nil)
		if a.status/100 != 2 {
			a.body = strings.ToLower(a.body)
			for _, n := range names {
				a.body = strings.ReplaceAll(a.body, strings.ToLower(n), "<asked>")
			}
		}
		add(a)
	}
	for _, path := range []string{"/v1/status", "/v1/status?audit=1", "/v1/me", "/v1/sources", "/v1/sources?q=quill",
		"/v1/sources?q=tinder", "/v1/entities", "/v1/entities?q=brassmoth", "/v1/entities?q=copperwren", "/v1/entities?q=ledger",
		"/v1/communities", "/v1/aliases", "/v1/status/deadletters"} {
		get(path)
	}
	for _, id := range []string{"pub-1", "rita-note", "flip-doc", "hush-doc-7", "eng-doc-3", "cat-1"} {
		getEcho("/v1/source?id="+url.QueryEscape(id), id)
	}
	// Entities and reports by the ids the admin sees.
	var srcs []struct {
		Indexed *struct {
			Entities []entity `json:"entities"`
		} `json:"indexed"`
	}
	for _, id := range []string{"hush-doc-7", "eng-doc-3", "pub-1"} {
		var s struct {
			Indexed *struct {
				Entities []entity `json:"entities"`
			} `json:"indexed"`
		}
		p.getJSON("adm-token", "/v1/source?id="+id, &s)
		srcs = append(srcs, s)
	}
	for _, s := range srcs {
		require.NotNil(t, s.Indexed)
		for _, e := range s.Indexed.Entities {
			getEcho("/v1/entities/"+url.PathEscape(e.Type)+"/"+url.PathEscape(e.Name), e.ID, e.Name)
			getEcho("/v1/paths?start="+url.QueryEscape(e.ID), e.ID, e.Name)
			getEcho("/v1/aggregate?start="+url.QueryEscape(e.ID), e.ID, e.Name)
		}
	}
	var comms struct {
		Communities []struct {
			ReportID string `json:"report_id"`
		} `json:"communities"`
	}
	p.getJSON("adm-token", "/v1/communities", &comms)
	for _, c := range comms.Communities {
		if c.ReportID != "" {
			getEcho("/v1/reports/"+url.PathEscape(c.ReportID), c.ReportID)
		}
	}
	// The questions name no marker (drift repeats its question in a
	// follow-up), so a marker in an answer comes from the material.
	for _, q := range probeQuestions {
		for _, mode := range []string{"basic", "local", "global", "drift", "auto"} {
			what = fmt.Sprintf("POST /v1/query %s %q", mode, q)
			add(p.do(token, "POST", "/v1/query", "application/json", jsonBody(map[string]any{"mode": mode, "question": q}), nil))
		}
	}
	return view
}

// probeQuestions ask about the restricted documents in their own words.
var probeQuestions = []string{"Which outage was caused by a cache, and what did the engineers restart?",
	"Which scheduler failed after an upgrade?", "What does ledger-api depend on? Where did the relay move?"}

// readView is what a caller read, lowercased, by request.
type readView map[string]string

// where names the requests whose answers contain s.
func (v readView) where(s string) []string {
	var out []string
	for what, body := range v {
		if strings.Contains(body, s) {
			out = append(out, what)
		}
	}
	slices.Sort(out)
	return out
}
