//go:build integration

package gateway_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// payload reads a real provider payload from the shared directory; a
// missing file fails the test.
func payload(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "webhooks", rel))
	require.NoError(t, err, "the shared webhook payloads are required")
	return data
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
