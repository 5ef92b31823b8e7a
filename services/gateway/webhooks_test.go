package gateway_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/services/gateway"
)

const (
	ghSecret   = "It's a Secret to Everybody"
	glToken    = "gitlab-shared-token"
	jiraSecret = "jira-admin-secret"
	pdSecret   = "pagerduty-secret"
	whSecret   = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

func hooksConfig() gateway.WebhooksConfig {
	return gateway.WebhooksConfig{Providers: map[string]gateway.WebhookProvider{
		"github": {Secrets: []string{"previous secret", ghSecret}, Tenant: "acme", ACL: &provenance.ACL{Groups: []string{"eng"}}},
		"gitlab": {Secrets: []string{glToken}, Tenant: "acme", ACL: &provenance.ACL{Public: true}},
		"jira":   {Secrets: []string{jiraSecret}, Tenant: "ops", ACL: &provenance.ACL{Groups: []string{"sre"}}, DocType: "ticket"},
		// The generic schemes on other kinds: a relay re-signing GitHub
		// deliveries with Standard Webhooks, GitLab behind PagerDuty-style
		// signatures.
		"relay":   {Kind: gateway.KindGitHub, Scheme: gateway.SchemeStandardWebhooks, Secrets: []string{whSecret}, Tenant: "acme", ACL: &provenance.ACL{Public: true}},
		"gitlab2": {Kind: gateway.KindGitLab, Scheme: gateway.SchemePagerDutyV3, Secrets: []string{pdSecret}, Tenant: "beta", ACL: &provenance.ACL{Public: true}},
	}}
}

func setupWebhooks(t *testing.T) *fixture {
	t.Helper()
	return setupWith(t, gateway.Config{MaxBodyBytes: 1 << 20, Webhooks: hooksConfig()})
}

// ownPayload reads a payload written for these tests from testdata/webhooks.
func ownPayload(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "webhooks", rel))
	require.NoError(t, err)
	return data
}

// edit returns body with change applied to its decoded JSON.
func edit(t *testing.T, body []byte, change func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	change(m)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}

func obj(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }

func hexMAC(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func (f *fixture) hook(t *testing.T, provider string, h http.Header, body []byte) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", f.srv.URL+"/webhooks/"+provider, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(data, &out), "every answer is JSON: %s", data)
	return resp.StatusCode, out
}

func (f *fixture) github(t *testing.T, event, deliveryID string, body []byte) (int, map[string]any) {
	t.Helper()
	return f.hook(t, "github", http.Header{"X-Github-Event": {event}, "X-Github-Delivery": {deliveryID},
		"X-Hub-Signature-256": {"sha256=" + hexMAC(ghSecret, body)}}, body)
}

func (f *fixture) gitlab(t *testing.T, body []byte) (int, map[string]any) {
	t.Helper()
	return f.hook(t, "gitlab", http.Header{"X-Gitlab-Token": {glToken}}, body)
}

func (f *fixture) jira(t *testing.T, body []byte) (int, map[string]any) {
	t.Helper()
	return f.hook(t, "jira", http.Header{"X-Hub-Signature": {"sha256=" + hexMAC(jiraSecret, body)}}, body)
}

// docs returns the documents of a 202 answer.
func docs(t *testing.T, out map[string]any) []map[string]any {
	t.Helper()
	raw, _ := out["documents"].([]any)
	res := make([]map[string]any, len(raw))
	for i, d := range raw {
		res[i] = d.(map[string]any)
	}
	return res
}

func ms(t *testing.T, layout, s string) int64 {
	t.Helper()
	ts, err := time.Parse(layout, s)
	require.NoError(t, err)
	return ts.UnixMilli()
}

// event finds the message published with Nats-Msg-Id id.
func (f *fixture) event(t *testing.T, id string) (string, []byte) {
	t.Helper()
	s, err := f.bus.JetStream().Stream(t.Context(), f.bus.StreamName())
	require.NoError(t, err)
	info, err := s.Info(t.Context())
	require.NoError(t, err)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		require.NoError(t, err)
		if m.Header.Get("Nats-Msg-Id") == id {
			return m.Subject, m.Data
		}
	}
	t.Fatalf("no event %q on the stream", id)
	return "", nil
}

func (f *fixture) changed(t *testing.T, id string) events.DocChanged {
	t.Helper()
	subject, data := f.event(t, id)
	var ev events.DocChanged
	require.NoError(t, events.Decode(data, &ev))
	require.Equal(t, "kg.doc.changed."+ev.Tenant, subject)
	return ev
}

func (f *fixture) deleted(t *testing.T, id string) events.DocDeleted {
	t.Helper()
	subject, data := f.event(t, id)
	var ev events.DocDeleted
	require.NoError(t, events.Decode(data, &ev))
	require.Equal(t, "kg.doc.deleted."+ev.Tenant, subject)
	return ev
}

func (f *fixture) source(t *testing.T, tenant, id string) provenance.SourceState {
	t.Helper()
	srcs, err := f.reg.Sources(t.Context(), tenant, []string{id})
	require.NoError(t, err)
	require.Contains(t, srcs, id)
	return srcs[id]
}

// TestWebhookOwnPayloads takes one delivery of each provider through its
// receiver: the document id, version, text and event it publishes.
func TestWebhookOwnPayloads(t *testing.T) {
	f := setupWebhooks(t)
	const ghID = "github:acme-co/ledger#7"
	v1 := ms(t, time.RFC3339, "2025-03-03T08:15:00Z")
	status, out := f.github(t, "issues", "own-1", ownPayload(t, "github/issues.opened.json"))
	require.Equal(t, 202, status, out)
	require.Equal(t, ghID, docs(t, out)[0]["id"])
	require.EqualValues(t, v1, docs(t, out)[0]["version"])
	ev := f.changed(t, "acme/"+ghID+"/"+strconv.FormatInt(v1, 10)+"/changed")
	require.Equal(t, "Ledger writes rejected", ev.Title)
	require.Equal(t, "Ledger writes rejected\n\nledger-api refused writes for 25 minutes: the database volume was full.", ev.Text)
	require.Equal(t, "incident", ev.DocType, "the incident label sets the doc type")
	require.Equal(t, []string{"eng"}, ev.ACL.Groups)

	v2 := ms(t, time.RFC3339, "2025-03-03T10:40:00Z")
	status, out = f.github(t, "issues", "own-2", ownPayload(t, "github/issues.edited.json"))
	require.Equal(t, 202, status, out)
	require.EqualValues(t, v2, docs(t, out)[0]["version"])
	require.Equal(t, v2, f.source(t, "acme", ghID).Version)
	// The older delivery again, under a new delivery id: stale, nothing changes.
	status, out = f.github(t, "issues", "own-3", ownPayload(t, "github/issues.opened.json"))
	require.Equal(t, 202, status, out)
	require.Equal(t, true, docs(t, out)[0]["stale"], out)
	require.Equal(t, v2, f.source(t, "acme", ghID).Version)

	status, out = f.gitlab(t, ownPayload(t, "gitlab/issue.json"))
	require.Equal(t, 202, status, out)
	glID := docs(t, out)[0]["id"].(string)
	require.Equal(t, "gitlab:acme-co/mail#3", glID)
	glVersion := ms(t, "2006-01-02 15:04:05 MST", "2025-03-17 14:02:00 UTC")
	ev = f.changed(t, "acme/"+glID+"/"+strconv.FormatInt(glVersion, 10)+"/changed")
	require.Contains(t, ev.Text, "The relay queue stopped draining")
	require.True(t, ev.ACL.Public)

	status, out = f.gitlab(t, ownPayload(t, "gitlab/wiki_page.json"))
	require.Equal(t, 202, status, out)
	require.Equal(t, "gitlab-wiki:acme-co/runbooks/disk-full", docs(t, out)[0]["id"])

	status, out = f.jira(t, ownPayload(t, "jira/issue_created.json"))
	require.Equal(t, 202, status, out)
	require.Equal(t, "jira:OPS-12", docs(t, out)[0]["id"])
	jiraVersion := ms(t, "2006-01-02T15:04:05.000-0700", "2025-04-02T09:30:00.000+0000")
	ev = f.changed(t, "ops/jira:OPS-12/"+strconv.FormatInt(jiraVersion, 10)+"/changed")
	require.Equal(t, "incident", ev.DocType, "the Incident issue type sets the doc type")
	require.Equal(t, []string{"sre"}, ev.ACL.Groups)
	require.Contains(t, ev.Text, "Old index snapshots filled the search volume")
}

func TestWebhookGenericSchemesThroughRoute(t *testing.T) {
	f := setupWebhooks(t)
	body := ownPayload(t, "github/issues.opened.json")
	sign := func(id string, ts int64) http.Header {
		key, err := base64.StdEncoding.DecodeString(whSecret[len("whsec_"):])
		require.NoError(t, err)
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "." + string(body)))
		return http.Header{"X-Github-Event": {"issues"}, "Webhook-Id": {id}, "Webhook-Timestamp": {strconv.FormatInt(ts, 10)},
			"Webhook-Signature": {"v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))}}
	}
	status, out := f.hook(t, "relay", sign("msg_1", time.Now().Unix()), body)
	require.Equal(t, 202, status, out)
	require.Equal(t, "github:acme-co/ledger#7", docs(t, out)[0]["id"])
	// The same message id again: a duplicate (webhook-id is the delivery id).
	status, out = f.hook(t, "relay", sign("msg_1", time.Now().Unix()), body)
	require.Equal(t, 202, status, out)
	require.Equal(t, true, out["duplicate"])
	// A replay with its old timestamp is refused.
	status, out = f.hook(t, "relay", sign("msg_2", time.Now().Add(-10*time.Minute).Unix()), body)
	require.Equal(t, 401, status, out)
	require.Equal(t, "stale_signature", errCode(out))

	wiki := ownPayload(t, "gitlab/wiki_page.json")
	status, out = f.hook(t, "gitlab2", http.Header{"X-Pagerduty-Signature": {"v1=00, v1=" + hexMAC(pdSecret, wiki)}}, wiki)
	require.Equal(t, 202, status, out)
	require.Equal(t, "beta/gitlab-wiki:acme-co/runbooks/disk-full/1/changed", docs(t, out)[0]["event_id"])
}

func TestWebhookRejects(t *testing.T) {
	f := setupWebhooks(t)
	gh := ownPayload(t, "github/issues.opened.json")
	gl := ownPayload(t, "gitlab/issue.json")
	jr := ownPayload(t, "jira/issue_created.json")
	malformed := []byte(`{"action": "opened", "issue": `)
	cases := []struct {
		name, provider string
		header         http.Header
		body           []byte
		status         int
		code           string
	}{
		{"github unsigned", "github", http.Header{"X-Github-Event": {"issues"}}, gh, 401, "unsigned"},
		{"github bearer instead of signature", "github", http.Header{"X-Github-Event": {"issues"}, "Authorization": {"Bearer w"}}, gh, 401, "unsigned"},
		{"github wrong secret", "github", http.Header{"X-Github-Event": {"issues"}, "X-Hub-Signature-256": {"sha256=" + hexMAC("wrong", gh)}}, gh, 401, "bad_signature"},
		{"github signature of another body", "github", http.Header{"X-Github-Event": {"issues"}, "X-Hub-Signature-256": {"sha256=" + hexMAC(ghSecret, jr)}}, gh, 401, "bad_signature"},
		{"gitlab unsigned", "gitlab", http.Header{}, gl, 401, "unsigned"},
		{"gitlab wrong token", "gitlab", http.Header{"X-Gitlab-Token": {"guess"}}, gl, 401, "bad_signature"},
		{"jira unsigned", "jira", http.Header{}, jr, 401, "unsigned"},
		{"jira wrong header", "jira", http.Header{"X-Hub-Signature-256": {"sha256=" + hexMAC(jiraSecret, jr)}}, jr, 401, "unsigned"},
		{"jira wrong secret", "jira", http.Header{"X-Hub-Signature": {"sha256=" + hexMAC(ghSecret, jr)}}, jr, 401, "bad_signature"},
		{"pagerduty wrong", "gitlab2", http.Header{"X-Pagerduty-Signature": {"v1=" + hexMAC("wrong", gl)}}, gl, 401, "bad_signature"},
		{"standard unsigned", "relay", http.Header{"X-Github-Event": {"issues"}}, gh, 401, "unsigned"},
		{"unknown provider", "bitbucket", http.Header{}, gh, 404, "unknown_provider"},
		{"github malformed", "github", http.Header{"X-Github-Event": {"issues"}, "X-Hub-Signature-256": {"sha256=" + hexMAC(ghSecret, malformed)}}, malformed, 400, "malformed_payload"},
		{"github no event header", "github", http.Header{"X-Hub-Signature-256": {"sha256=" + hexMAC(ghSecret, gh)}}, gh, 400, "malformed_payload"},
		{"gitlab malformed", "gitlab", http.Header{"X-Gitlab-Token": {glToken}}, malformed, 400, "malformed_payload"},
		{"jira malformed", "jira", http.Header{"X-Hub-Signature": {"sha256=" + hexMAC(jiraSecret, malformed)}}, malformed, 400, "malformed_payload"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, out := f.hook(t, c.provider, c.header, c.body)
			require.Equal(t, c.status, status, out)
			require.Equal(t, c.code, errCode(out), out)
			require.NotEmpty(t, out["error"].(map[string]any)["message"])
		})
	}
	ignored := []struct {
		name, event string
		body        []byte
		reason      string
	}{
		{"ping", "ping", []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`), "ping"},
		{"push", "push", []byte(`{"ref":"refs/heads/main"}`), `event "push" is not handled`},
		{"no pages", "gollum", []byte(`{"pages":[],"repository":{"full_name":"a/b"}}`), "the delivery names no document"},
	}
	for _, c := range ignored {
		t.Run(c.name, func(t *testing.T) {
			status, out := f.github(t, c.event, "", c.body)
			require.Equal(t, 202, status, out)
			require.Equal(t, c.reason, out["ignored"])
		})
	}
	require.Zero(t, f.streamCount(t), "a refused or ignored delivery published an event")
	for _, tenant := range []string{"acme", "ops", "beta"} {
		srcs, err := f.reg.ListSources(t.Context(), tenant)
		require.NoError(t, err)
		require.Empty(t, srcs, "a refused or ignored delivery wrote to the registry")
	}
}

func TestLoadWebhooks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	t.Setenv("KG_TEST_GITLAB_TOKEN", "from-env")
	c, err := gateway.LoadWebhooks(write("hooks.yaml", `
delivery_ttl: 24h
providers:
  github:
    secrets: ["s1", "s2"]
    tenant: acme
    acl: {groups: [eng]}
  gitlab:
    secret_env: [KG_TEST_GITLAB_TOKEN]
    tenant: acme
    acl: {public: true}
    doc_type: incident
  incidents:
    kind: github
    scheme: standard-webhooks
    secrets: ["`+whSecret+`"]
    tolerance: 2m
    tenant: ops
    acl: {principals: [oncall]}
`))
	require.NoError(t, err)
	require.Equal(t, gateway.Duration(24*time.Hour), c.DeliveryTTL)
	require.Equal(t, []string{"from-env"}, c.Providers["gitlab"].Secrets)
	require.Equal(t, "incident", c.Providers["gitlab"].DocType)
	require.Equal(t, gateway.Duration(2*time.Minute), c.Providers["incidents"].Tolerance)
	require.Equal(t, []string{"oncall"}, c.Providers["incidents"].ACL.Principals)

	c, err = gateway.LoadWebhooks(write("hooks.json", `{"providers":{"jira":{"secrets":["x"],"tenant":"ops","acl":{"public":true}}}}`))
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, c.Providers["jira"].Secrets)

	for name, text := range map[string]string{
		"unknown field":  `{"providers":{"github":{"secrets":["x"],"tenant":"a","acl":{},"colour":"red"}}}`,
		"env unset":      `{"providers":{"github":{"secret_env":["KG_TEST_UNSET_SECRET"],"tenant":"a","acl":{}}}}`,
		"no acl":         `{"providers":{"github":{"secrets":["x"],"tenant":"a"}}}`,
		"no secret":      `{"providers":{"github":{"tenant":"a","acl":{}}}}`,
		"bad tenant":     `{"providers":{"github":{"secrets":["x"],"tenant":"A B","acl":{}}}}`,
		"unknown kind":   `{"providers":{"bitbucket":{"secrets":["x"],"tenant":"a","acl":{}}}}`,
		"bad name":       `{"providers":{"Git Hub":{"kind":"github","secrets":["x"],"tenant":"a","acl":{}}}}`,
		"bad scheme":     `{"providers":{"github":{"scheme":"md5","secrets":["x"],"tenant":"a","acl":{}}}}`,
		"bad duration":   `{"delivery_ttl":"soon","providers":{}}`,
		"bad whsec":      `{"providers":{"github":{"scheme":"standard-webhooks","secrets":["nope!"],"tenant":"a","acl":{}}}}`,
		"not json/yaml:": `{"providers":`,
	} {
		_, err := gateway.LoadWebhooks(write("bad.json", text))
		require.Error(t, err, name)
	}
	_, err = gateway.LoadWebhooks(filepath.Join(dir, "missing.json"))
	require.Error(t, err)
}
