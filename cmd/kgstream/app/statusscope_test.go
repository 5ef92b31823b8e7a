package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

// opsClient is c as the scenario tokens' admin, who alone gets the
// pipeline figures of /v1/status.
func opsClient(c *app.Client) *app.Client { return app.NewClient(c.BaseURL, "ops-token") }

// statusTokens: an admin, a writer, and a reader who may not read the
// restricted incident.
const statusTokens = `[
 {"token":"root-token","tenant":"acme","principal":"root","admin":true},
 {"token":"wri-token","tenant":"acme","principal":"wanda","writer":true},
 {"token":"rita-token","tenant":"acme","principal":"rita"}
]`

// rawStatus is GET /v1/status as token, key by key.
func rawStatus(t *testing.T, base, token, query string) map[string]json.RawMessage {
	t.Helper()
	var raw map[string]json.RawMessage
	require.NoError(t, app.NewClient(base, token).Do(t.Context(), http.MethodGet, "/v1/status"+query, "", nil, &raw))
	return raw
}

func intOf(t *testing.T, raw map[string]json.RawMessage, key string) int {
	t.Helper()
	n, err := strconv.Atoi(string(raw[key]))
	require.NoError(t, err, "%s = %s", key, raw[key])
	return n
}

// vectorItemsOf counts the vector items built from doc.
func vectorItemsOf(t *testing.T, a *app.App, doc string) int {
	t.Helper()
	n := 0
	require.NoError(t, a.Vectors.ScanSources(t.Context(), "acme", doc, func(vector.ItemSources) error { n++; return nil }))
	return n
}

// vectorKindsOf counts the vector items built on doc per kind.
func vectorKindsOf(t *testing.T, a *app.App, doc string) map[vector.Kind]int {
	t.Helper()
	n := map[vector.Kind]int{}
	require.NoError(t, a.Vectors.ScanSources(t.Context(), "acme", doc, func(it vector.ItemSources) error { n[it.Kind]++; return nil }))
	return n
}

// TestStatusScopesAndVectorACLAudit runs the all-in-one: a reader who may
// not read a restricted incident sees counts of the public runbook only
// and none of the pipeline figures; the admin sees them. Then the
// registry's ACL of the incident changes without its ACL event (lost): the
// audit reports its vector items as ACL mismatches, in /v1/status and the
// gauge, until the event is published and applied.
func TestStatusScopesAndVectorACLAudit(t *testing.T) {
	ctx := t.Context()
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	require.NoError(t, os.WriteFile(tokens, []byte(statusTokens), 0o600))
	a, err := app.Start(context.WithoutCancel(ctx), app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0",
		TokensFile: tokens, Log: quietLog(), Quiet: 50 * time.Millisecond, MaxDelay: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(a.Close)

	w := app.NewClient(a.URL(), "wri-token")
	for _, d := range []app.Document{
		{ID: "runbook-1", Title: "Cart runbook", Text: "Cart runbook\nThe cart-api service calls the pricing-api service.", DocType: "runbook"},
		{ID: "hush-1", Title: "Vault incident", Text: "Vault incident\nThe vault-api service leaked a signing key.", DocType: "incident",
			ACL: map[string]any{"groups": []string{"sec"}}},
	} {
		_, err := w.PostDocument(ctx, d)
		require.NoError(t, err)
	}
	root := app.NewClient(a.URL(), "root-token")
	require.NoError(t, root.WaitFor(ctx, 60*time.Second, func() (bool, error) {
		var st struct {
			Applied int               `json:"applied"`
			Pending map[string]uint64 `json:"pending"`
		}
		err := root.Do(ctx, http.MethodGet, "/v1/status", "", nil, &st)
		idle := true
		for _, s := range app.Stages {
			idle = idle && st.Pending[s] == 0
		}
		// Every stage idle and the incident's report indexed: its community
		// is clustered after a quiet period, then reported, so an idle
		// pipeline alone can still be before the report's vector.
		return err == nil && st.Applied == 2 && idle && vectorKindsOf(t, a, "hush-1")[vector.KindReport] > 0, err
	}))

	// The reader: her counts, no pipeline figures, no audit figures.
	for _, q := range []string{"", "?audit=1"} {
		rita := rawStatus(t, a.URL(), "rita-token", q)
		require.JSONEq(t, `"readable"`, string(rita["scope"]))
		require.Equal(t, 1, intOf(t, rita, "documents"), "rita counts the runbook only")
		for _, k := range []string{"pending", "dead_letters", "outbox_pending", "index_lag_seconds", "llm",
			"orphan_edges", "acl_mismatches", "vector_orphans", "problems"} {
			require.NotContains(t, rita, k, "rita must not see %s (%q)", k, q)
		}
	}
	// The admin: everything.
	adm := rawStatus(t, a.URL(), "root-token", "?audit=1")
	require.Equal(t, 2, intOf(t, adm, "documents"))
	for _, k := range []string{"pending", "dead_letters", "outbox_pending", "index_lag_seconds", "acl_mismatches", "vector_orphans"} {
		require.Contains(t, adm, k, "the admin sees %s", k)
	}
	require.Zero(t, intOf(t, adm, "acl_mismatches"), "%s", adm["problems"])
	require.Zero(t, intOf(t, adm, "vector_orphans"), "%s", adm["problems"])

	// A lost ACL event: the registry changes, the vector index does not.
	items := vectorItemsOf(t, a, "hush-1")
	st, err := a.Stores.SetACL(ctx, "acme", "hush-1", provenance.ACL{Groups: []string{"sec", "legal"}})
	require.NoError(t, err)
	adm = rawStatus(t, a.URL(), "root-token", "?audit=1")
	require.Equal(t, items, intOf(t, adm, "acl_mismatches"), "every item of hush-1: %s", adm["problems"])
	gauge := regexp.MustCompile(`(?m)^kgstream_vector_acl_mismatches\{tenant="acme"\} (\d+)$`)
	m := gauge.FindStringSubmatch(opsMetrics(t, a))
	require.NotNil(t, m, "the gauge is exported")
	require.Equal(t, strconv.Itoa(items), m[1])

	// The ACL event, as the gateway publishes it, reaches the reporter.
	_, err = a.Bus.Publish(ctx, events.KindDocACL, "acme", events.ACLID("acme", "hush-1", st.Version, st.ACLRevision),
		&events.DocACL{Header: events.Header{Schema: events.SchemaVersion, Tenant: "acme"}, DocID: "hush-1", Version: st.Version,
			ACLRevision: st.ACLRevision, ACL: st.ACL, ReceivedAt: time.Now().UTC()})
	require.NoError(t, err)
	require.NoError(t, root.WaitFor(ctx, 30*time.Second, func() (bool, error) {
		adm := rawStatus(t, a.URL(), "root-token", "?audit=1")
		return intOf(t, adm, "acl_mismatches") == 0, nil
	}))
	m = gauge.FindStringSubmatch(opsMetrics(t, a))
	require.Equal(t, "0", m[1])
}

// opsMetrics is the text of the ops listener's /metrics.
func opsMetrics(t *testing.T, a *app.App) string {
	t.Helper()
	resp, err := http.Get(a.OpsURL() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
