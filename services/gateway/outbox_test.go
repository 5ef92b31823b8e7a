package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/gateway"
)

func TestOutboxRepublishesWhatThePublishLost(t *testing.T) {
	ctx := t.Context()
	bus := streamtest.NewBus(t, streamtest.Options{})
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	a, err := auth.New([]auth.Token{{Token: "w", Tenant: "acme", Principal: "writer", Writer: true}}, nil)
	require.NoError(t, err)
	newGateway := func() (*gateway.Gateway, *prometheus.Registry, *fixture) {
		reg := prometheus.NewRegistry()
		g, err := gateway.New(gateway.Config{MaxBodyBytes: 1 << 16, PublishTimeout: 2 * time.Second, OutboxEvery: 20 * time.Millisecond},
			st, bus, a, nil, reg)
		require.NoError(t, err)
		srv := httptest.NewServer(g.Handler())
		t.Cleanup(srv.Close)
		return g, reg, &fixture{srv: srv, reg: st, bus: bus}
	}
	g1, reg1, f := newGateway()
	status, out := f.do(t, "POST", "/v1/documents", "w", `{"id":"kept/a","text":"before the outage","acl":{"groups":["sre"]}}`)
	require.Equal(t, 202, status, out)

	// The stream stops taking document events: every publish fails after
	// the registry moved.
	setSubjects, subjects := streamSubjects(t, bus)
	setSubjects([]string{"outage.nothing"})

	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/documents", `{"id":"lost/b","text":"written in the outage"}`},
		{"PUT", "/v1/documents/kept%2Fa/acl", `{"groups":["payments"]}`},
		{"POST", "/v1/documents", `{"id":"lost/c","text":"deleted in the outage"}`},
	} {
		status, out = f.do(t, c.method, c.path, "w", c.body)
		require.Equal(t, 503, status, out)
		require.Equal(t, "publish_failed", errCode(out))
	}
	status, out = f.do(t, "DELETE", "/v1/documents/lost%2Fc", "w", ``)
	require.Equal(t, 503, status, out)
	n, err := g1.Pending(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, 4.0, pendingGauge(t, reg1))
	require.Equal(t, 4, statusOutboxPending(t, st, bus), "what /v1/status reports")
	require.Equal(t, 1, int(f.streamCount(t)))

	// While the outage lasts, a round republishes nothing.
	left, err := g1.Republish(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, left)

	// The stream recovers and the caller never retries. Another gateway
	// process (a restart) republishes everything at start.
	setSubjects(subjects)
	g2, reg2, f2 := newGateway()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g2.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	streamtest.Eventually(t, 10*time.Second, func() error {
		if n, err := g2.Pending(ctx); err != nil || n != 0 {
			return fmt.Errorf("pending %d (%v)", n, err)
		}
		return nil
	})
	require.Equal(t, 0.0, pendingGauge(t, reg2))
	require.Equal(t, 0, statusOutboxPending(t, st, bus))
	require.Equal(t, 5, int(f2.streamCount(t)))
	for _, want := range []string{"acme/lost/b/1/changed", "acme/kept/a/1/acl-1", "acme/lost/c/1/changed", "acme/lost/c/2/deleted"} {
		require.True(t, hasMsgID(t, f2, want), "%s was not republished", want)
	}
	// A republished document counts as published: the same POST is a no-op.
	status, out = f2.do(t, "POST", "/v1/documents", "w", `{"id":"lost/b","text":"written in the outage"}`)
	require.Equal(t, 200, status, out)
	require.Equal(t, true, out["unchanged"])
}

// statusOutboxPending is outbox_pending as an admin's /v1/status reports it.
func statusOutboxPending(t *testing.T, st status.Stores, bus *stream.Bus) int {
	t.Helper()
	c, err := status.NewCollector(st, bus, nil, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	r, err := c.Collect(t.Context(), "acme", false)
	require.NoError(t, err)
	require.NotNil(t, r.PipelineFigures)
	return r.OutboxPending
}

// pendingGauge is the value of kgstream_outbox_pending in reg.
func pendingGauge(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "kgstream_outbox_pending" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no kgstream_outbox_pending metric")
	return 0
}

func hasMsgID(t *testing.T, f *fixture, id string) bool {
	t.Helper()
	stm, err := f.bus.JetStream().Stream(t.Context(), f.bus.StreamName())
	require.NoError(t, err)
	for seq := uint64(1); seq <= f.streamCount(t); seq++ {
		msg, err := stm.GetMsg(t.Context(), seq)
		require.NoError(t, err)
		if msg.Header.Get("Nats-Msg-Id") == id {
			return true
		}
	}
	return false
}

// A pending event too large for a key-value record is kept by reference in
// the payload bucket and republished whole.
func TestOutboxKeepsLargeEventsByReference(t *testing.T) {
	ctx := t.Context()
	bus := streamtest.NewBus(t, streamtest.Options{})
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	a, err := auth.New([]auth.Token{{Token: "w", Tenant: "acme", Principal: "writer", Writer: true}}, nil)
	require.NoError(t, err)
	g, err := gateway.New(gateway.Config{MaxBodyBytes: 4 << 20, PublishTimeout: 2 * time.Second, OutboxEvery: time.Hour},
		st, bus, a, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	f := &fixture{srv: srv, reg: st, bus: bus}

	setSubjects, subjects := streamSubjects(t, bus)
	setSubjects([]string{"outage.nothing"})

	text := strings.Repeat("The cache node was replaced and the service fell back to the database. ", 30000) // ~2 MB
	require.Greater(t, len(text), bus.InlineMax())
	body, err := json.Marshal(map[string]any{"id": "big/doc", "text": text})
	require.NoError(t, err)
	status, out := f.do(t, "POST", "/v1/documents", "w", string(body))
	require.Equal(t, 503, status, out)
	n, err := g.Pending(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the large event is pending")

	setSubjects(subjects)
	left, err := g.Republish(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, left)
	require.True(t, hasMsgID(t, f, "acme/big/doc/1/changed"))
	js := bus.JetStream()
	stm, err := js.Stream(ctx, bus.StreamName())
	require.NoError(t, err)
	msg, err := stm.GetMsg(ctx, f.streamCount(t))
	require.NoError(t, err)
	sub, err := js.OrderedConsumer(ctx, bus.StreamName(), jetstream.OrderedConsumerConfig{OptStartSeq: msg.Sequence})
	require.NoError(t, err)
	m, err := sub.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	data, err := bus.EventData(ctx, m)
	require.NoError(t, err)
	var ev events.DocChanged
	require.NoError(t, events.Decode(data, &ev))
	require.Equal(t, text, ev.Text, "the republished event is whole")
}

// countingRegistry records every write a gateway makes to its registry
// and outbox, by method.
type countingRegistry struct {
	store.Stores
	mu     sync.Mutex
	writes []string
}

func (r *countingRegistry) wrote(method string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, method)
}

// take returns the writes made since the last call.
func (r *countingRegistry) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.writes
	r.writes = nil
	return w
}

func (r *countingRegistry) Announce(ctx context.Context, tenant string, a store.Announcement) (provenance.SourceState, error) {
	r.wrote("Announce")
	return r.Stores.Announce(ctx, tenant, a)
}

func (r *countingRegistry) SetACL(ctx context.Context, tenant, docID string, acl provenance.ACL) (provenance.SourceState, error) {
	r.wrote("SetACL")
	return r.Stores.SetACL(ctx, tenant, docID, acl)
}

func (r *countingRegistry) MarkDeleted(ctx context.Context, tenant, docID string) (provenance.SourceState, error) {
	r.wrote("MarkDeleted")
	return r.Stores.MarkDeleted(ctx, tenant, docID)
}

func (r *countingRegistry) AnnounceRecording(ctx context.Context, tenant string, a store.Announcement, pend store.PendingFunc) (provenance.SourceState, error) {
	r.wrote("AnnounceRecording")
	return r.Stores.AnnounceRecording(ctx, tenant, a, pend)
}

func (r *countingRegistry) SetACLRecording(ctx context.Context, tenant, docID string, acl provenance.ACL, pend store.PendingFunc) (provenance.SourceState, error) {
	r.wrote("SetACLRecording")
	return r.Stores.SetACLRecording(ctx, tenant, docID, acl, pend)
}

func (r *countingRegistry) DeleteRecording(ctx context.Context, tenant string, a store.Announcement, pend store.PendingFunc) (provenance.SourceState, error) {
	r.wrote("DeleteRecording")
	return r.Stores.DeleteRecording(ctx, tenant, a, pend)
}

func (r *countingRegistry) RecordPending(ctx context.Context, ps []store.Pending) error {
	r.wrote("RecordPending")
	return r.Stores.RecordPending(ctx, ps)
}

func (r *countingRegistry) Acknowledge(ctx context.Context, tenant string, ids []string, content *store.ContentAck) error {
	r.wrote("Acknowledge")
	return r.Stores.Acknowledge(ctx, tenant, ids, content)
}

// An accepted change is two registry writes: the change with its events,
// then, once the bus acknowledged them, one write that clears them and
// records the content (every write waits its turn on a single-writer
// store). An unchanged resend writes nothing; a deletion and an ACL change
// are two writes too. Each leaves nothing pending, and the content is
// recorded, as separate writes left it.
func TestAcceptedChangeIsTwoRegistryWrites(t *testing.T) {
	for name, open := range registries() {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			reg := &countingRegistry{Stores: st}
			bus := streamtest.NewBus(t, streamtest.Options{})
			a, err := auth.New([]auth.Token{{Token: "w", Tenant: "acme", Principal: "writer", Writer: true}}, nil)
			require.NoError(t, err)
			preg := prometheus.NewRegistry()
			g, err := gateway.New(gateway.Config{MaxBodyBytes: 1 << 16, PublishTimeout: 2 * time.Second, OutboxEvery: time.Hour},
				reg, bus, a, nil, preg)
			require.NoError(t, err)
			srv := httptest.NewServer(g.Handler())
			t.Cleanup(srv.Close)
			f := &fixture{srv: srv, bus: bus}
			settled := func(what string) {
				t.Helper()
				require.Empty(t, pendingIDs(t, st), "%s left events pending", what)
				require.Equal(t, 0.0, pendingGauge(t, preg), what)
			}

			status, out := f.do(t, "POST", "/v1/documents", "w", `{"id":"d","text":"first","acl":{"groups":["sre"]}}`)
			require.Equal(t, 202, status, out)
			require.Equal(t, []string{"AnnounceRecording", "Acknowledge"}, reg.take(), "a new document")
			settled("a new document")
			src, err := st.Sources(t.Context(), "acme", []string{"d"})
			require.NoError(t, err)
			require.NotEmpty(t, src["d"].ContentHash, "the acknowledged content is recorded")

			status, out = f.do(t, "POST", "/v1/documents", "w", `{"id":"d","text":"first","acl":{"groups":["sre"]}}`)
			require.Equal(t, 200, status, out)
			require.Equal(t, true, out["unchanged"])
			require.Empty(t, reg.take(), "an unchanged resend")

			// A new version that also moves the ACL publishes two events.
			status, out = f.do(t, "POST", "/v1/documents", "w", `{"id":"d","text":"second","acl":{"groups":["payments"]}}`)
			require.Equal(t, 202, status, out)
			require.Equal(t, []string{"AnnounceRecording", "Acknowledge"}, reg.take(), "a new version with a new ACL")
			settled("a new version with a new ACL")
			require.True(t, hasMsgID(t, f, "acme/d/2/changed"))
			require.True(t, hasMsgID(t, f, "acme/d/2/acl-1"))
			status, out = f.do(t, "POST", "/v1/documents", "w", `{"id":"d","text":"second","acl":{"groups":["payments"]}}`)
			require.Equal(t, 200, status, out)
			require.Equal(t, true, out["unchanged"], "the content of both events' version is recorded")

			status, out = f.do(t, "PUT", "/v1/documents/d/acl", "w", `{"groups":["sre"]}`)
			require.Equal(t, 202, status, out)
			require.Equal(t, []string{"SetACLRecording", "Acknowledge"}, reg.take(), "an ACL change")
			status, out = f.do(t, "DELETE", "/v1/documents/d", "w", ``)
			require.Equal(t, 202, status, out)
			require.Equal(t, []string{"DeleteRecording", "Acknowledge"}, reg.take(), "a deletion")
			settled("an ACL change and a deletion")
		})
	}
}

// TestRepublishSettlesEachEventOnItsOwn: a round publishes a page of
// pending events together and settles each by its own acknowledgement.
// With the stream taking document changes again but still not ACL
// changes, the changes are cleared (their content recorded: the same
// POST is then unchanged) and the ACL events stay pending, on both
// stores; once the stream takes those too, the next round clears them.
func TestRepublishSettlesEachEventOnItsOwn(t *testing.T) {
	for name, open := range registries() {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			st := open(t)
			bus := streamtest.NewBus(t, streamtest.Options{})
			a, err := auth.New([]auth.Token{{Token: "w", Tenant: "acme", Principal: "writer", Writer: true}}, nil)
			require.NoError(t, err)
			g, err := gateway.New(gateway.Config{MaxBodyBytes: 1 << 16, PublishTimeout: 2 * time.Second, OutboxEvery: time.Hour},
				st, bus, a, nil, prometheus.NewRegistry())
			require.NoError(t, err)
			srv := httptest.NewServer(g.Handler())
			t.Cleanup(srv.Close)
			f := &fixture{srv: srv, bus: bus}
			setSubjects, subjects := streamSubjects(t, bus)
			setSubjects([]string{"outage.nothing"})
			// Each refused publish takes the client's retries: the writes
			// are sent together.
			const docs = 70 // more than a page
			var writes errgroup.Group
			for i := range docs {
				writes.Go(func() error {
					return refused(srv.URL, "POST", "/v1/documents", fmt.Sprintf(`{"id":"d%02d","text":"text %d","acl":{"groups":["sre"]}}`, i, i))
				})
			}
			require.NoError(t, writes.Wait())
			for i := range 5 {
				writes.Go(func() error {
					return refused(srv.URL, "PUT", fmt.Sprintf("/v1/documents/d%02d/acl", i), `{"groups":["payments"]}`)
				})
			}
			require.NoError(t, writes.Wait())
			require.Len(t, pendingIDs(t, st), docs+5)

			setSubjects([]string{bus.Subjects().All(events.KindDocChanged)})
			left, err := g.Republish(ctx)
			require.NoError(t, err)
			require.Equal(t, 5, left)
			var want []string
			for i := range 5 {
				want = append(want, fmt.Sprintf("acme/d%02d/1/acl-1", i))
			}
			require.ElementsMatch(t, want, pendingIDs(t, st))
			// The content of each change is recorded: the same POST (with
			// the ACL the registry holds) changes nothing.
			for _, i := range []int{0, 42, docs - 1} {
				require.True(t, hasMsgID(t, f, fmt.Sprintf("acme/d%02d/1/changed", i)))
				group := "sre"
				if i < 5 {
					group = "payments"
				}
				status, out := f.do(t, "POST", "/v1/documents", "w", fmt.Sprintf(`{"id":"d%02d","text":"text %d","acl":{"groups":[%q]}}`, i, i, group))
				require.Equal(t, 200, status, out)
				require.Equal(t, true, out["unchanged"], "d%02d", i)
			}

			setSubjects(subjects)
			left, err = g.Republish(ctx)
			require.NoError(t, err)
			require.Equal(t, 0, left)
			require.Empty(t, pendingIDs(t, st))
			require.True(t, hasMsgID(t, f, "acme/d03/1/acl-1"))
		})
	}
}

// refused sends a writer's request to the gateway at url and expects 503
// (the publish failed; the event is pending).
func refused(url, method, path, body string) error {
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer w")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		return fmt.Errorf("%s %s answered %d, want 503", method, path, resp.StatusCode)
	}
	return nil
}

// streamSubjects returns a function that sets the subjects the bus's
// stream takes (an outage of what it no longer takes: publishes fail)
// and the subjects it takes now, to set back.
func streamSubjects(tb testing.TB, bus *stream.Bus) (set func([]string), subjects []string) {
	tb.Helper()
	ctx := tb.Context()
	js := bus.JetStream()
	stm, err := js.Stream(ctx, bus.StreamName())
	require.NoError(tb, err)
	info, err := stm.Info(ctx)
	require.NoError(tb, err)
	cfg := info.Config
	return func(s []string) {
		tb.Helper()
		cfg.Subjects = s
		_, err := js.UpdateStream(ctx, cfg)
		require.NoError(tb, err)
	}, cfg.Subjects
}
