package status_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
)

// pipelineKeys are the process-wide figures of /v1/status.
var pipelineKeys = []string{"pending", "dead_letters", "outbox_pending", "index_lag_seconds", "stage_lag_seconds", "llm", "sources"}

// auditKeys are the tenant's audit figures of /v1/status.
var auditKeys = []string{"orphan_edges", "orphan_entities", "index_mismatches", "stale_reports", "acl_mismatches", "vector_orphans", "stale_vectors"}

// busyBus returns a bus with one event of another tenant waiting for the
// extractor and one dead letter.
func busyBus(t *testing.T) *stream.Bus {
	t.Helper()
	ctx := t.Context()
	bus := streamtest.NewBus(t, streamtest.Options{})
	subj := bus.Subjects()
	_, err := bus.JetStream().CreateOrUpdateConsumer(ctx, bus.StreamName(), jetstream.ConsumerConfig{
		Durable: "extractor", FilterSubject: subj.All(events.KindDocChanged), AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	now := time.Now().UTC()
	_, err = bus.Publish(ctx, events.KindDocChanged, "globex", "globex/plan-7/1/changed", &events.DocChanged{
		Header: events.Header{Schema: events.SchemaVersion, Tenant: "globex"}, DocID: "plan-7", Version: 1,
		Title: "plan-7", Text: "merger plan", DocType: "note", ACL: provenance.PublicACL(), OccurredAt: now, ReceivedAt: now})
	require.NoError(t, err)
	msg := nats.NewMsg(subj.DLQ("extractor"))
	msg.Data, err = json.Marshal(stream.DeadLetter{Stage: "extractor", Subject: subj.For(events.KindDocChanged, "acme"),
		Error: "planted", Deliveries: 5, FailedAt: now})
	require.NoError(t, err)
	msg.Header.Set(jetstream.MsgIDHeader, "dlq/extractor/planted")
	_, err = bus.JetStream().PublishMsg(ctx, msg)
	require.NoError(t, err)
	return bus
}

// TestStatusPipelineFiguresAdminsOnly: a reader of tenant acme who cannot
// read a restricted incident gets counts of the public runbook only and
// none of the pipeline figures (another tenant's pending event, a dead
// letter, LLM spend) nor audit figures; a reader of every document gets the
// tenant's counts and audit figures but no pipeline figures; the admin gets
// everything.
func TestStatusPipelineFiguresAdminsOnly(t *testing.T) {
	ctx := t.Context()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	docs := []struct {
		id  string
		acl provenance.ACL
		c   store.Contributions
	}{
		{"runbook-1", provenance.PublicACL(), store.Contributions{
			Entities: []store.EntityContribution{{ID: "service:cart", Type: "service", Name: "cart"},
				{ID: "service:cache", Type: "service", Name: "cache"}},
			Edges: []store.EdgeContribution{{Source: "service:cart", Relation: "uses", Target: "service:cache", Weight: 1}}}},
		{"hush-1", provenance.ACL{Groups: []string{"sec"}}, store.Contributions{
			Entities: []store.EntityContribution{{ID: "incident:hush-1", Type: "incident", Name: "hush-1"},
				{ID: "service:vault", Type: "service", Name: "vault"}},
			Edges: []store.EdgeContribution{{Source: "incident:hush-1", Relation: "affected", Target: "service:vault", Weight: 1}}}},
	}
	for _, d := range docs {
		_, err := st.Announce(ctx, "acme", store.Announcement{DocID: d.id, Version: 1, ACL: d.acl})
		require.NoError(t, err)
		_, err = st.Apply(ctx, "acme", d.id, 1, d.c)
		require.NoError(t, err)
	}

	reg := prometheus.NewRegistry()
	llmCalls := prometheus.NewCounter(prometheus.CounterOpts{Name: "kgstream_llm_calls_total", Help: "LLM calls."})
	reg.MustRegister(llmCalls)
	llmCalls.Add(3)
	bus := busyBus(t)
	c, err := status.NewCollector(st, bus, []string{"extractor"}, nil, reg)
	require.NoError(t, err)
	rec, err := status.NewRecorder(status.RecorderConfig{Service: "extractor"}, bus, reg, nil)
	require.NoError(t, err)
	c.WithRecorder(rec)
	a, err := auth.New([]auth.Token{
		{Token: "root", Tenant: "acme", Principal: "root", Admin: true},
		{Token: "rita", Tenant: "acme", Principal: "rita"},
		{Token: "sam", Tenant: "acme", Principal: "sam", Groups: []string{"sec"}},
	}, nil)
	require.NoError(t, err)
	srv := httptest.NewServer(c.Handler(a))
	t.Cleanup(srv.Close)
	get := func(token, query string) (map[string]json.RawMessage, status.Report) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/status"+query, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var raw map[string]json.RawMessage
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&raw))
		body, err := json.Marshal(raw)
		require.NoError(t, err)
		var r status.Report
		require.NoError(t, json.Unmarshal(body, &r))
		return raw, r
	}
	type counts struct {
		Scope                               string
		Documents, Applied, Entities, Edges int
	}
	of := func(r status.Report) counts { return counts{r.Scope, r.Documents, r.Applied, r.Entities, r.Edges} }

	for _, q := range []string{"", "?audit=1"} {
		raw, rita := get("rita", q)
		require.Equal(t, counts{status.ScopeReadable, 1, 1, 2, 1}, of(rita), "rita counts the runbook only (%q)", q)
		for _, k := range append(append([]string{"problems"}, pipelineKeys...), auditKeys...) {
			require.NotContains(t, raw, k, "rita must not see %s (%q)", k, q)
		}
		require.False(t, rita.Audited)
		require.False(t, rita.Admin)

		raw, sam := get("sam", q)
		require.Equal(t, counts{status.ScopeTenant, 2, 2, 4, 2}, of(sam), "sam reads every document (%q)", q)
		for _, k := range pipelineKeys {
			require.NotContains(t, raw, k, "sam must not see %s (%q)", k, q)
		}
		for _, k := range auditKeys {
			require.Contains(t, raw, k, "sam sees the audit figures (%q)", q)
		}
		require.Equal(t, q != "", sam.Audited)
	}

	raw, root := get("root", "?audit=1")
	require.Equal(t, counts{status.ScopeTenant, 2, 2, 4, 2}, of(root))
	for _, k := range append(pipelineKeys, auditKeys...) {
		require.Contains(t, raw, k, "the admin sees %s", k)
	}
	require.True(t, root.Admin)
	require.True(t, root.Audited)
	require.Equal(t, map[string]uint64{"extractor": 1}, root.Pending, "the other tenant's event waits")
	require.EqualValues(t, 1, root.DeadLetters)
	require.NotNil(t, root.LLM)
	require.EqualValues(t, 3, root.LLM.Calls)
}
