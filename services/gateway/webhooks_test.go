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

// payload reads a real provider payload from the shared directory; a
// missing file fails the test.
func payload(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "webhooks", rel))
	require.NoError(t, err, "the shared webhook payloads are required")
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

func TestWebhookGitHubIssues(t *testing.T) {
	f := setupWebhooks(t)
	const id = "github:Codertocat/Hello-World#1"
	const title = "Spelling error in the README file"
	v1 := ms(t, time.RFC3339, "2019-05-15T15:20:18Z")

	opened := payload(t, "github/issues.opened.payload.json")
	status, out := f.github(t, "issues", "d-1", opened)
	require.Equal(t, 202, status, out)
	d := docs(t, out)
	require.Len(t, d, 1)
	require.Equal(t, id, d[0]["id"])
	require.EqualValues(t, v1, d[0]["version"], "the version is updated_at in unix milliseconds")
	eventID := "acme/" + id + "/" + strconv.FormatInt(v1, 10) + "/changed"
	require.Equal(t, eventID, d[0]["event_id"])
	ev := f.changed(t, eventID)
	require.Equal(t, "acme", ev.Tenant)
	require.Equal(t, id, ev.DocID)
	require.Equal(t, v1, ev.Version)
	require.Equal(t, title, ev.Title)
	require.Equal(t, title+"\n\nIt looks like you accidently spelled 'commit' with two 't's.", ev.Text)
	require.Equal(t, "issue", ev.DocType)
	require.Equal(t, "github", ev.Source)
	require.Equal(t, []string{"eng"}, ev.ACL.Groups)
	require.Equal(t, time.Date(2019, 5, 15, 15, 20, 18, 0, time.UTC), ev.OccurredAt.UTC())
	src := f.source(t, "acme", id)
	require.Equal(t, v1, src.Version)
	require.Equal(t, []string{"eng"}, src.ACL.Groups)
	require.EqualValues(t, 1, f.streamCount(t))

	// The same delivery again: answered from the delivery log.
	status, out = f.github(t, "issues", "d-1", opened)
	require.Equal(t, 202, status, out)
	require.Equal(t, true, out["duplicate"])
	require.Equal(t, eventID, docs(t, out)[0]["event_id"])
	// Another delivery with the same updated_at (the edit fixture): the same
	// version, an idempotent replay with the same event id.
	status, out = f.github(t, "issues", "d-2", payload(t, "github/issues.edited.payload.json"))
	require.Equal(t, 202, status, out)
	require.Equal(t, eventID, docs(t, out)[0]["event_id"])
	require.Equal(t, true, docs(t, out)[0]["duplicate"])
	require.EqualValues(t, 1, f.streamCount(t), "no new version, no new event")

	// Reopened two years later with an empty body.
	v2 := ms(t, time.RFC3339, "2021-10-11T16:40:56Z")
	status, out = f.github(t, "issues", "d-3", payload(t, "github/issues.reopened.payload.json"))
	require.Equal(t, 202, status, out)
	require.EqualValues(t, v2, docs(t, out)[0]["version"])
	ev = f.changed(t, docs(t, out)[0]["event_id"].(string))
	require.Equal(t, title, ev.Text, "text is the title when the body is empty")

	// An older delivery arriving late is stale: 202, not 409, nothing changes.
	status, out = f.github(t, "issues", "d-4", payload(t, "github/issues.labeled.payload.json"))
	require.Equal(t, 202, status, out)
	require.Equal(t, true, out["stale"], out)
	require.Equal(t, true, docs(t, out)[0]["stale"])
	require.EqualValues(t, 2, f.streamCount(t))
	require.Equal(t, v2, f.source(t, "acme", id).Version)

	// An incident label makes it an incident.
	v3 := ms(t, time.RFC3339, "2021-10-12T09:00:00Z")
	labeled := edit(t, payload(t, "github/issues.labeled.payload.json"), func(m map[string]any) {
		is := obj(m, "issue")
		is["updated_at"] = "2021-10-12T09:00:00Z"
		is["labels"] = []any{map[string]any{"name": "bug"}, map[string]any{"name": "Incident-SEV2"}}
	})
	status, out = f.github(t, "issues", "d-5", labeled)
	require.Equal(t, 202, status, out)
	require.EqualValues(t, v3, docs(t, out)[0]["version"])
	require.Equal(t, "incident", f.changed(t, docs(t, out)[0]["event_id"].(string)).DocType)

	// Deleted: the deletion wins over the payload's (older) updated_at.
	status, out = f.github(t, "issues", "d-6", payload(t, "github/issues.deleted.payload.json"))
	require.Equal(t, 202, status, out)
	d = docs(t, out)
	require.Len(t, d, 1)
	require.Equal(t, "deleted", d[0]["action"])
	require.EqualValues(t, v3+1, d[0]["version"])
	del := f.deleted(t, d[0]["event_id"].(string))
	require.Equal(t, id, del.DocID)
	require.Equal(t, v3+1, del.Version)
	require.True(t, f.source(t, "acme", id).Deleted)

	// A late edit after the deletion does not bring the issue back.
	status, out = f.github(t, "issues", "d-7", labeled)
	require.Equal(t, 202, status, out)
	require.Equal(t, true, out["stale"], out)
	require.True(t, f.source(t, "acme", id).Deleted)
	require.EqualValues(t, 4, f.streamCount(t))
}

func TestWebhookGitHubCommentsAndTransfer(t *testing.T) {
	f := setupWebhooks(t)
	const issue = "github:Codertocat/Hello-World#1"
	const comment = issue + "/comment/492700400"
	status, out := f.github(t, "issues", "c-0", payload(t, "github/issues.opened.payload.json"))
	require.Equal(t, 202, status, out)

	status, out = f.github(t, "issue_comment", "c-1", payload(t, "github/issue_comment.created.payload.json"))
	require.Equal(t, 202, status, out)
	d := docs(t, out)
	require.Equal(t, comment, d[0]["id"])
	require.EqualValues(t, ms(t, time.RFC3339, "2019-05-15T15:20:21Z"), d[0]["version"])
	ev := f.changed(t, d[0]["event_id"].(string))
	require.Equal(t, "comment", ev.DocType)
	require.Equal(t, "Comment by Codertocat on Codertocat/Hello-World#1: Spelling error in the README file", ev.Title)
	require.Equal(t, ev.Title+"\n\nYou are totally right! I'll get this fixed right away.", ev.Text)

	status, out = f.github(t, "issue_comment", "c-2", payload(t, "github/issue_comment.edited.payload.json"))
	require.Equal(t, 202, status, out)
	d = docs(t, out)
	require.EqualValues(t, ms(t, time.RFC3339, "2019-05-15T15:20:22Z"), d[0]["version"])
	require.Contains(t, f.changed(t, d[0]["event_id"].(string)).Text, "I'll get this fixed today.")

	// Comments on pull requests are not documents.
	onPR := edit(t, payload(t, "github/issue_comment.created.payload.json"), func(m map[string]any) {
		obj(m, "issue")["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1"}
	})
	status, out = f.github(t, "issue_comment", "c-3", onPR)
	require.Equal(t, 202, status, out)
	require.Equal(t, "comment on a pull request", out["ignored"])

	// Deleting the issue deletes its comments too.
	status, out = f.github(t, "issues", "c-4", payload(t, "github/issues.deleted.payload.json"))
	require.Equal(t, 202, status, out)
	d = docs(t, out)
	require.Len(t, d, 2, out)
	require.Equal(t, issue, d[0]["id"])
	require.Equal(t, comment, d[1]["id"])
	for _, doc := range d {
		require.Equal(t, "deleted", doc["action"])
		require.Equal(t, doc["id"], f.deleted(t, doc["event_id"].(string)).DocID)
		require.True(t, f.source(t, "acme", doc["id"].(string)).Deleted)
	}

	// A transfer deletes the old id; never seen before, it is recorded as a
	// tombstone above the payload's version so late edits are stale.
	const old = "github:octo-org/octo-repo#1"
	status, out = f.github(t, "issues", "c-5", payload(t, "github/issues.transferred.payload.json"))
	require.Equal(t, 202, status, out)
	d = docs(t, out)
	require.Len(t, d, 1)
	require.Equal(t, old, d[0]["id"])
	vt := ms(t, time.RFC3339, "2019-10-25T22:46:30Z")
	require.EqualValues(t, vt+1, d[0]["version"])
	require.Equal(t, vt+1, f.deleted(t, d[0]["event_id"].(string)).Version)
	require.True(t, f.source(t, "acme", old).Deleted)
}

func TestWebhookGitHubGollum(t *testing.T) {
	f := setupWebhooks(t)
	const id = "github-wiki:Codertocat/Hello-World/Home"
	body := payload(t, "github/gollum.payload.json")
	status, out := f.github(t, "gollum", "g-1", body)
	require.Equal(t, 202, status, out)
	d := docs(t, out)
	require.Len(t, d, 1)
	require.Equal(t, id, d[0]["id"])
	require.EqualValues(t, 1, d[0]["version"], "no update time in the payload: the next version")
	ev := f.changed(t, d[0]["event_id"].(string))
	require.Equal(t, "Home", ev.Title)
	require.Equal(t, "Home", ev.Text, "the payload has no page text: title and summary")
	require.Equal(t, "wiki", ev.DocType)

	// A redelivery (same delivery id) creates no new version.
	status, out = f.github(t, "gollum", "g-1", body)
	require.Equal(t, 202, status, out)
	require.Equal(t, true, out["duplicate"])
	require.EqualValues(t, 1, docs(t, out)[0]["version"])
	require.EqualValues(t, 1, f.streamCount(t))
	require.EqualValues(t, 1, f.source(t, "acme", id).Version)

	// A new delivery is a new edit.
	status, out = f.github(t, "gollum", "g-2", payload(t, "github/gollum.with-installation.payload.json"))
	require.Equal(t, 202, status, out)
	require.EqualValues(t, 2, docs(t, out)[0]["version"])
	require.EqualValues(t, 2, f.streamCount(t))
}

func TestWebhookGitLab(t *testing.T) {
	f := setupWebhooks(t)
	const wiki = "gitlab-wiki:root/awesome-project/awesome"
	status, out := f.gitlab(t, payload(t, "gitlab/gitlab.wikipage-event.json"))
	require.Equal(t, 202, status, out)
	d := docs(t, out)
	require.Equal(t, wiki, d[0]["id"])
	require.EqualValues(t, 1, d[0]["version"])
	ev := f.changed(t, d[0]["event_id"].(string))
	require.Equal(t, "Awesome", ev.Title)
	require.Equal(t, "Awesome\n\nawesome content goes here", ev.Text)
	require.Equal(t, "wiki", ev.DocType)
	require.True(t, ev.ACL.Public)

	deleted := edit(t, payload(t, "gitlab/gitlab.wikipage-event.json"), func(m map[string]any) {
		obj(m, "object_attributes")["action"] = "delete"
	})
	status, out = f.gitlab(t, deleted)
	require.Equal(t, 202, status, out)
	d = docs(t, out)
	require.Equal(t, "deleted", d[0]["action"])
	require.EqualValues(t, 2, f.deleted(t, d[0]["event_id"].(string)).Version)

	const issue = "gitlab:gitlabhq/gitlab-test#23"
	status, out = f.gitlab(t, payload(t, "gitlab/gitlab.issue-event.json"))
	require.Equal(t, 202, status, out)
	d = docs(t, out)
	require.Equal(t, issue, d[0]["id"])
	require.EqualValues(t, ms(t, time.RFC3339, "2013-12-03T17:15:43Z"), d[0]["version"])
	ev = f.changed(t, d[0]["event_id"].(string))
	require.Equal(t, "New API: create/update/delete file\n\nCreate new API for manipulations with repository", ev.Text)
	require.Equal(t, "issue", ev.DocType)

	const note = "gitlab:gitlab-org/gitlab-test#17/note/1241"
	status, out = f.gitlab(t, payload(t, "gitlab/gitlab.comment-issue-event.json"))
	require.Equal(t, 202, status, out)
	d = docs(t, out)
	require.Equal(t, note, d[0]["id"])
	require.EqualValues(t, ms(t, "2006-01-02 15:04:05 MST", "2015-05-17 17:06:40 UTC"), d[0]["version"])
	ev = f.changed(t, d[0]["event_id"].(string))
	require.Equal(t, "Comment on gitlab-org/gitlab-test#17: test\n\nHello world", ev.Text)

	// An issue made confidential later is withdrawn.
	confidential := edit(t, payload(t, "gitlab/gitlab.issue-event.json"), func(m map[string]any) {
		oa := obj(m, "object_attributes")
		oa["confidential"], oa["updated_at"], oa["action"] = true, "2013-12-04T08:00:00Z", "update"
	})
	status, out = f.gitlab(t, confidential)
	require.Equal(t, 202, status, out)
	d = docs(t, out)
	require.Equal(t, issue, d[0]["id"])
	require.Equal(t, "deleted", d[0]["action"])
	require.True(t, f.source(t, "acme", issue).Deleted)

	// Merge requests, pushes and system notes are not handled.
	status, out = f.gitlab(t, []byte(`{"object_kind":"push","project":{"path_with_namespace":"a/b"}}`))
	require.Equal(t, 202, status, out)
	require.Equal(t, `event "push" is not handled`, out["ignored"])
	system := edit(t, payload(t, "gitlab/gitlab.comment-issue-event.json"), func(m map[string]any) {
		obj(m, "object_attributes")["system"] = true
	})
	status, out = f.gitlab(t, system)
	require.Equal(t, 202, status, out)
	require.Equal(t, "system note", out["ignored"])
}

func TestWebhookJira(t *testing.T) {
	f := setupWebhooks(t)
	const id = "jira:BBCOM-1398"
	created := payload(t, "jira/issue.created.json")
	status, out := f.jira(t, created)
	require.Equal(t, 202, status, out)
	d := docs(t, out)
	require.Equal(t, id, d[0]["id"])
	v := ms(t, "2006-01-02T15:04:05.000-0700", "2018-01-11T13:08:03.317+0300")
	require.EqualValues(t, v, d[0]["version"])
	ev := f.changed(t, d[0]["event_id"].(string))
	require.Equal(t, "ops", ev.Tenant, "the tenant is the provider's")
	require.Equal(t, "Prueba de creación de tareas en un proyecto público", ev.Title)
	require.Equal(t, "Prueba de creación de tareas en un proyecto público\n\nInfo", ev.Text)
	require.Equal(t, "ticket", ev.DocType, "the provider's doc_type")
	require.Equal(t, []string{"sre"}, ev.ACL.Groups)

	// A moved issue: the new key is announced, the old key's document goes
	// (never seen here, so nothing to delete).
	status, out = f.jira(t, payload(t, "jira/issue.updated.move-issue.json"))
	require.Equal(t, 202, status, out)
	d = docs(t, out)
	require.Len(t, d, 2)
	require.Equal(t, "jira:INDEV-130", d[0]["id"])
	require.Equal(t, "jira:TCP-2", d[1]["id"])
	require.Equal(t, "unknown document", d[1]["ignored"])

	status, out = f.jira(t, payload(t, "jira/comment.updated.json"))
	require.Equal(t, 202, status, out)
	d = docs(t, out)
	require.Equal(t, "jira:INDEV-28/comment/10757", d[0]["id"])
	ev = f.changed(t, d[0]["event_id"].(string))
	require.Equal(t, "comment", ev.DocType)
	require.Contains(t, ev.Title, "INDEV-28: Тест линков")

	status, out = f.jira(t, payload(t, "jira/comment.created.json"))
	require.Equal(t, 202, status, out)
	require.Equal(t, "comment without its issue", out["ignored"])

	status, out = f.jira(t, payload(t, "jira/issuelink.created.json"))
	require.Equal(t, 202, status, out)
	require.Equal(t, `event "issuelink_created" is not handled`, out["ignored"])

	deleted := edit(t, created, func(m map[string]any) { m["webhookEvent"] = "jira:issue_deleted" })
	status, out = f.jira(t, deleted)
	require.Equal(t, 202, status, out)
	d = docs(t, out)
	require.Equal(t, "deleted", d[0]["action"])
	require.Equal(t, v+1, f.deleted(t, d[0]["event_id"].(string)).Version)
	require.True(t, f.source(t, "ops", id).Deleted)

	// An issue under a security level is withdrawn, not indexed.
	secured := edit(t, payload(t, "jira/issue.updated.status-changed.json"), func(m map[string]any) {
		obj(obj(m, "issue"), "fields")["security"] = map[string]any{"id": "10000", "name": "Restricted"}
	})
	status, out = f.jira(t, secured)
	require.Equal(t, 202, status, out)
	d = docs(t, out)
	require.Equal(t, "jira:INDEV-6", d[0]["id"])
	require.Equal(t, "deleted", d[0]["action"])
	require.True(t, f.source(t, "ops", "jira:INDEV-6").Deleted)
}

func TestWebhookGenericSchemesThroughRoute(t *testing.T) {
	f := setupWebhooks(t)
	body := payload(t, "github/issues.opened.payload.json")
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
	require.Equal(t, "github:Codertocat/Hello-World#1", docs(t, out)[0]["id"])
	// The same message id again: a duplicate (webhook-id is the delivery id).
	status, out = f.hook(t, "relay", sign("msg_1", time.Now().Unix()), body)
	require.Equal(t, 202, status, out)
	require.Equal(t, true, out["duplicate"])
	// A replay with its old timestamp is refused.
	status, out = f.hook(t, "relay", sign("msg_2", time.Now().Add(-10*time.Minute).Unix()), body)
	require.Equal(t, 401, status, out)
	require.Equal(t, "stale_signature", errCode(out))

	wiki := payload(t, "gitlab/gitlab.wikipage-event.json")
	status, out = f.hook(t, "gitlab2", http.Header{"X-Pagerduty-Signature": {"v1=00, v1=" + hexMAC(pdSecret, wiki)}}, wiki)
	require.Equal(t, 202, status, out)
	require.Equal(t, "beta/gitlab-wiki:root/awesome-project/awesome/1/changed", docs(t, out)[0]["event_id"])
}

func TestWebhookRejects(t *testing.T) {
	f := setupWebhooks(t)
	gh := payload(t, "github/issues.opened.payload.json")
	gl := payload(t, "gitlab/gitlab.issue-event.json")
	jr := payload(t, "jira/issue.created.json")
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
