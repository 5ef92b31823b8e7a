package gateway_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/store/redis"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/gateway"
)

// dyingRegistry is the registry of a gateway process that dies right after
// a registry write returns, before it can publish anything: died runs
// then, with the state written.
type dyingRegistry struct {
	store.Stores
	died func(st provenance.SourceState)
}

func (r *dyingRegistry) after(st provenance.SourceState, err error) (provenance.SourceState, error) {
	if err == nil {
		r.died(st)
	}
	return st, err
}

func (r *dyingRegistry) Announce(ctx context.Context, tenant string, a store.Announcement) (provenance.SourceState, error) {
	return r.after(r.Stores.Announce(ctx, tenant, a))
}

func (r *dyingRegistry) SetACL(ctx context.Context, tenant, docID string, acl provenance.ACL) (provenance.SourceState, error) {
	return r.after(r.Stores.SetACL(ctx, tenant, docID, acl))
}

func (r *dyingRegistry) MarkDeleted(ctx context.Context, tenant, docID string) (provenance.SourceState, error) {
	return r.after(r.Stores.MarkDeleted(ctx, tenant, docID))
}

func (r *dyingRegistry) AnnounceRecording(ctx context.Context, tenant string, a store.Announcement, pend store.PendingFunc) (provenance.SourceState, error) {
	return r.after(r.Stores.AnnounceRecording(ctx, tenant, a, pend))
}

func (r *dyingRegistry) SetACLRecording(ctx context.Context, tenant, docID string, acl provenance.ACL, pend store.PendingFunc) (provenance.SourceState, error) {
	return r.after(r.Stores.SetACLRecording(ctx, tenant, docID, acl, pend))
}

func (r *dyingRegistry) DeleteRecording(ctx context.Context, tenant string, a store.Announcement, pend store.PendingFunc) (provenance.SourceState, error) {
	return r.after(r.Stores.DeleteRecording(ctx, tenant, a, pend))
}

// pendingIDs lists the event ids the registry's outbox holds.
func pendingIDs(t *testing.T, st store.Outbox) []string {
	t.Helper()
	ps, err := st.PendingEvents(context.WithoutCancel(t.Context()), "", "", 0)
	require.NoError(t, err)
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	return ids
}

// Three gateway processes each die right after their registry write (a
// new document, an ACL change, a deletion): the moment the write returns,
// the registry already holds the event it announces, and the process's
// connection to JetStream is gone, so nothing of it is published. A
// restarted gateway republishes all three. Before the outbox was part of
// the registry write, the event was recorded in a JetStream bucket after
// the registry write: a process dying there recorded nothing and the
// restarted gateway had nothing to republish.
func TestOutboxSurvivesADeathAfterTheRegistryWrite(t *testing.T) {
	for name, open := range registries() {
		t.Run(name, func(t *testing.T) { testOutboxSurvivesADeath(t, open(t)) })
	}
}

// registries opens fresh stores of each adapter: embedded, and Redis
// (127.0.0.1:6379 or KG_TEST_REDIS_URL) under a prefix of its own.
func registries() map[string]func(t testing.TB) store.Stores {
	return map[string]func(t testing.TB) store.Stores{
		"embedded": func(t testing.TB) store.Stores {
			st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			return st
		},
		"redis": func(t testing.TB) store.Stores {
			opts := &goredis.Options{Addr: "127.0.0.1:6379"}
			if u := os.Getenv("KG_TEST_REDIS_URL"); u != "" {
				var err error
				opts, err = goredis.ParseURL(u)
				require.NoError(t, err)
			}
			client := goredis.NewClient(opts)
			require.NoError(t, client.Ping(t.Context()).Err(), "Redis at %s", opts.Addr)
			prefix := "kgtest-gw-" + rand.Text()[:10]
			st := redis.New(client, prefix)
			t.Cleanup(func() {
				ctx := context.Background()
				c := goredis.NewClient(opts)
				defer c.Close()
				keys, _ := c.Keys(ctx, prefix+":*").Result()
				if len(keys) > 0 {
					c.Del(ctx, keys...)
				}
				st.Close()
			})
			return st
		},
	}
}

func testOutboxSurvivesADeath(t *testing.T, st store.Stores) {
	ctx := t.Context()
	buses := streamtest.NewBuses(t, 4, streamtest.Options{})
	a, err := auth.New([]auth.Token{{Token: "w", Tenant: "acme", Principal: "writer", Writer: true}}, nil)
	require.NoError(t, err)
	cfg := gateway.Config{MaxBodyBytes: 1 << 16, PublishTimeout: 2 * time.Second, OutboxEvery: 20 * time.Millisecond}

	steps := []struct {
		method, path, body string
		event              string // the event the registry write announces
	}{
		{"POST", "/v1/documents", `{"id":"crash/a","text":"written by a process that died","acl":{"groups":["sre"]}}`, "acme/crash/a/1/changed"},
		{"PUT", "/v1/documents/crash%2Fa/acl", `{"groups":["payments"]}`, "acme/crash/a/1/acl-1"},
		{"POST", "/v1/documents", `{"id":"crash/b","text":"deleted by a process that died"}`, ""},
		{"DELETE", "/v1/documents/crash%2Fb", ``, "acme/crash/b/2/deleted"},
	}
	healthy := buses[3]
	f := &fixture{bus: healthy}
	for i, s := range steps {
		bus := healthy
		reg := gateway.Registry(st)
		var heldAtDeath []string
		if s.event != "" {
			bus = buses[min(i, 2)]
			reg = &dyingRegistry{Stores: st, died: func(provenance.SourceState) {
				// The window the outbox closes: after the registry write,
				// before any publish.
				ps, _ := st.PendingEvents(context.Background(), "", "", 0)
				for _, p := range ps {
					heldAtDeath = append(heldAtDeath, p.ID)
				}
				bus.JetStream().Conn().Close()
			}}
		}
		g, err := gateway.New(cfg, reg, bus, a, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		srv := httptest.NewServer(g.Handler())
		f.srv = srv
		status, out := f.do(t, s.method, s.path, "w", s.body)
		srv.Close()
		if s.event == "" {
			require.Equal(t, 202, status, out)
			continue
		}
		require.Equal(t, 503, status, "the dying process answers nothing useful: %v", out)
		require.Contains(t, heldAtDeath, s.event, "the registry write holds its event when it returns")
	}
	require.ElementsMatch(t, []string{"acme/crash/a/1/changed", "acme/crash/a/1/acl-1", "acme/crash/b/2/deleted"}, pendingIDs(t, st))
	require.Equal(t, 3, statusOutboxPending(t, st, healthy))
	for _, id := range []string{"acme/crash/a/1/changed", "acme/crash/a/1/acl-1", "acme/crash/b/2/deleted"} {
		require.False(t, hasMsgID(t, f, id), "%s was published by a process that died", id)
	}

	// The restart: a gateway on a live connection runs its outbox.
	reg := prometheus.NewRegistry()
	g, err := gateway.New(cfg, st, healthy, a, nil, reg)
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	streamtest.Eventually(t, 10*time.Second, func() error {
		if ids := pendingIDs(t, st); len(ids) != 0 {
			return fmt.Errorf("still pending: %v", ids)
		}
		return nil
	})
	for _, id := range []string{"acme/crash/a/1/changed", "acme/crash/a/1/acl-1", "acme/crash/b/2/deleted"} {
		require.True(t, hasMsgID(t, f, id), "%s was not republished", id)
	}
	streamtest.Eventually(t, 10*time.Second, func() error {
		if v := pendingGauge(t, reg); v != 0 {
			return fmt.Errorf("gauge %v", v)
		}
		return nil
	})
	require.Equal(t, 0, statusOutboxPending(t, st, healthy))
	srcs, err := st.Sources(ctx, "acme", []string{"crash/a", "crash/b"})
	require.NoError(t, err)
	require.Equal(t, []string{"payments"}, srcs["crash/a"].ACL.Groups)
	require.NotEmpty(t, srcs["crash/a"].ContentHash, "the republished content event recorded its content")
	require.True(t, srcs["crash/b"].Deleted)
}

// A refused request records nothing in the outbox, and a write the
// registry refuses mid-way (a stale version) neither.
func TestRefusedWritesLeaveNoPendingEvent(t *testing.T) {
	f := setup(t)
	status, out := f.do(t, "POST", "/v1/documents", "w", `{"id":"d","version":5,"text":"five"}`)
	require.Equal(t, 202, status, out)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/documents", `{"id":"d","version":3,"text":"stale"}`},
		{"POST", "/v1/documents", `{"id":"d","version":9007199254740992,"text":"too far"}`},
		{"PUT", "/v1/documents/ghost/acl", `{"public":true}`},
		{"DELETE", "/v1/documents/ghost", ``},
	} {
		status, out := f.do(t, c.method, c.path, "w", c.body)
		require.GreaterOrEqual(t, status, 400, "%s %s: %v", c.method, c.path, out)
		require.Less(t, status, 500, "%s %s: %v", c.method, c.path, out)
	}
	require.Empty(t, pendingIDs(t, f.reg))
}

// An outbox an older gateway kept in the key-value bucket outbox_<stream>
// is moved into the registry at start and republished; the bucket is
// deleted and not read again.
func TestOutboxMovesTheOldBucket(t *testing.T) {
	ctx := t.Context()
	bus := streamtest.NewBus(t, streamtest.Options{})
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	_, err = st.Announce(ctx, "acme", store.Announcement{DocID: "old/doc", ACL: provenance.PublicACL()})
	require.NoError(t, err)
	oldRecord := func(doc string) []byte {
		ev := &events.DocChanged{Header: events.Header{Schema: events.SchemaVersion, Tenant: "acme"}, DocID: doc, Version: 1,
			Text: "kept by an older gateway", ACL: provenance.PublicACL(), ReceivedAt: time.Now().UTC()}
		data, err := events.Encode(ev)
		require.NoError(t, err)
		rec, err := json.Marshal(map[string]any{"kind": events.KindDocChanged, "tenant": "acme", "msg_id": "acme/" + doc + "/1/changed",
			"event": json.RawMessage(data), "doc_id": doc, "version": 1, "content_hash": "h-" + doc})
		require.NoError(t, err)
		return rec
	}
	putOld := func(key, doc string) {
		kv, err := bus.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bus.OutboxBucket(), History: 1})
		require.NoError(t, err)
		_, err = kv.Put(ctx, key, oldRecord(doc))
		require.NoError(t, err)
	}
	putOld("k1", "old/doc")

	a, err := auth.New([]auth.Token{{Token: "w", Tenant: "acme", Principal: "writer", Writer: true}}, nil)
	require.NoError(t, err)
	g, err := gateway.New(gateway.Config{MaxBodyBytes: 1 << 16, PublishTimeout: 2 * time.Second, OutboxEvery: time.Hour},
		st, bus, a, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.Equal(t, 1, statusOutboxPending(t, st, bus), "status counts the old bucket until it is moved")
	left, err := g.Republish(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, left)
	f := &fixture{reg: st, bus: bus}
	require.True(t, hasMsgID(t, f, "acme/old/doc/1/changed"))
	_, err = bus.JetStream().KeyValue(ctx, bus.OutboxBucket())
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound, "the old bucket is deleted")
	srcs, err := st.Sources(ctx, "acme", []string{"old/doc"})
	require.NoError(t, err)
	require.Equal(t, "h-old/doc", srcs["old/doc"].ContentHash)

	// Once moved, the bucket is not read again.
	putOld("k2", "old/late")
	_, err = g.Republish(ctx)
	require.NoError(t, err)
	require.False(t, hasMsgID(t, f, "acme/old/late/1/changed"))
	require.Empty(t, pendingIDs(t, st))
	require.EqualValues(t, 1, f.streamCount(t))
}

// racingRegistry lets a concurrent writer announce a version of a document
// just before the gateway's own registry write of it.
type racingRegistry struct {
	store.Stores
	raced bool
}

func (r *racingRegistry) AnnounceRecording(ctx context.Context, tenant string, a store.Announcement, pend store.PendingFunc) (provenance.SourceState, error) {
	if !r.raced {
		r.raced = true
		if _, err := r.Stores.Announce(ctx, tenant, store.Announcement{DocID: a.DocID, ACL: a.ACL}); err != nil {
			return provenance.SourceState{}, err
		}
	}
	return r.Stores.AnnounceRecording(ctx, tenant, a, pend)
}

// A large event is kept in the payload bucket before the registry
// transaction, as the version the gateway expects; when a concurrent
// writer took that version, the transaction keeps the event it actually
// records (at the next version) and the republished event is that one,
// whole.
func TestLargePendingEventFollowsTheVersionTaken(t *testing.T) {
	ctx := t.Context()
	bus := streamtest.NewBus(t, streamtest.Options{})
	st := registries()["embedded"](t)
	a, err := auth.New([]auth.Token{{Token: "w", Tenant: "acme", Principal: "writer", Writer: true}}, nil)
	require.NoError(t, err)
	g, err := gateway.New(gateway.Config{MaxBodyBytes: 4 << 20, PublishTimeout: 2 * time.Second, OutboxEvery: time.Hour},
		&racingRegistry{Stores: st}, bus, a, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	f := &fixture{srv: srv, bus: bus}

	restore := streamtest.Narrow(t, bus, events.KindDocChanged)
	text := strings.Repeat("The cache node was replaced and the service fell back to the database. ", 30000) // ~2 MB
	require.Greater(t, len(text), bus.InlineMax())
	body, err := json.Marshal(map[string]any{"id": "big/doc", "text": text})
	require.NoError(t, err)
	status, out := f.do(t, "POST", "/v1/documents", "w", string(body))
	require.Equal(t, 503, status, out)
	require.Equal(t, []string{"acme/big/doc/2/changed"}, pendingIDs(t, st), "the event of the version the registry took")

	restore()
	left, err := g.Republish(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, left)
	stm, err := bus.JetStream().Stream(ctx, bus.StreamName())
	require.NoError(t, err)
	msg, err := stm.GetMsg(ctx, f.streamCount(t))
	require.NoError(t, err)
	require.Equal(t, "acme/big/doc/2/changed", msg.Header.Get("Nats-Msg-Id"))
	sub, err := bus.JetStream().OrderedConsumer(ctx, bus.StreamName(), jetstream.OrderedConsumerConfig{OptStartSeq: msg.Sequence})
	require.NoError(t, err)
	m, err := sub.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	data, err := bus.EventData(ctx, m)
	require.NoError(t, err)
	var ev events.DocChanged
	require.NoError(t, events.Decode(data, &ev))
	require.EqualValues(t, 2, ev.Version)
	require.Equal(t, text, ev.Text, "the republished event is whole")
}

// A webhook deletion with a later version (the payload's update time)
// announces that version and deletes in one registry write. It used to be
// two writes: a process dying between them left the version without the
// deletion, and a normal deletion left the first write's record of the
// deletion at the announced version pending (a message id no one cleared,
// published again later). Now a process dying right after the one write
// leaves exactly the deletion pending, and a restarted gateway publishes
// it.
func TestDeletionAtALaterVersionIsOneWrite(t *testing.T) {
	ctx := t.Context()
	buses := streamtest.NewBuses(t, 2, streamtest.Options{})
	bus, doomed := buses[0], buses[1]
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	a, err := auth.New([]auth.Token{{Token: "w", Tenant: "acme", Principal: "writer", Writer: true}}, nil)
	require.NoError(t, err)
	cfg := gateway.Config{MaxBodyBytes: 1 << 20, Webhooks: hooksConfig(), PublishTimeout: 2 * time.Second, OutboxEvery: 20 * time.Millisecond}

	serve := func(reg gateway.Registry, bus *stream.Bus) *fixture {
		g, err := gateway.New(cfg, reg, bus, a, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		srv := httptest.NewServer(g.Handler())
		t.Cleanup(srv.Close)
		return &fixture{srv: srv, reg: st, bus: bus}
	}
	created := ownPayload(t, "jira/issue_created.json")
	status, out := serve(st, bus).jira(t, created)
	require.Equal(t, 202, status, out)
	require.Empty(t, pendingIDs(t, st))

	deleted := edit(t, created, func(m map[string]any) {
		m["webhookEvent"] = "jira:issue_deleted"
		obj(obj(m, "issue"), "fields")["updated"] = "2025-04-03T10:00:00.000+0000"
	})
	var heldAtDeath []string
	dying := &dyingRegistry{Stores: st, died: func(provenance.SourceState) {
		heldAtDeath = pendingIDs(t, st)
		doomed.JetStream().Conn().Close()
	}}
	status, out = serve(dying, doomed).jira(t, deleted)
	require.GreaterOrEqual(t, status, 500, "the dying process answers nothing useful: %v", out)

	version := ms(t, "2006-01-02T15:04:05.000-0700", "2025-04-03T10:00:00.000+0000")
	src, err := st.Sources(ctx, "ops", []string{"jira:OPS-12"})
	require.NoError(t, err)
	require.Equal(t, version+1, src["jira:OPS-12"].Version, "the payload's version, then the deletion")
	require.True(t, src["jira:OPS-12"].Deleted)
	want := "ops/jira:OPS-12/" + strconv.FormatInt(version+1, 10) + "/deleted"
	require.Equal(t, []string{want}, heldAtDeath, "the one write held the deletion when it returned")
	require.Equal(t, []string{want}, pendingIDs(t, st), "the deletion, and nothing else, is pending")

	g, err := gateway.New(cfg, st, bus, a, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	f := &fixture{reg: st, bus: bus}
	streamtest.Eventually(t, 10*time.Second, func() error {
		if !hasMsgID(t, f, want) {
			return fmt.Errorf("%s not published", want)
		}
		if ids := pendingIDs(t, st); len(ids) != 0 {
			return fmt.Errorf("still pending: %v", ids)
		}
		return nil
	})

	// A deletion at a later version that nothing interrupts leaves nothing
	// pending (the two writes used to leave the first one's record).
	other := edit(t, created, func(m map[string]any) { obj(m, "issue")["key"] = "OPS-13" })
	status, out = serve(st, bus).jira(t, other)
	require.Equal(t, 202, status, out)
	status, out = serve(st, bus).jira(t, edit(t, other, func(m map[string]any) {
		m["webhookEvent"] = "jira:issue_deleted"
		obj(obj(m, "issue"), "fields")["updated"] = "2025-04-03T10:00:00.000+0000"
	}))
	require.Equal(t, 202, status, out)
	src, err = st.Sources(ctx, "ops", []string{"jira:OPS-13"})
	require.NoError(t, err)
	require.Equal(t, version+1, src["jira:OPS-13"].Version)
	require.True(t, src["jira:OPS-13"].Deleted)
	require.True(t, hasMsgID(t, f, "ops/jira:OPS-13/"+strconv.FormatInt(version+1, 10)+"/deleted"))
	require.Empty(t, pendingIDs(t, st), "nothing is left to publish again")
}
