package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/gateway"
)

// applyExtraction stores doc's extraction in the graph as the resolver
// would, at resolution res.
func applyExtraction(t *testing.T, f *fixture, doc string, res int64) {
	t.Helper()
	ev := &events.Extracted{Header: events.Header{Tenant: "acme"}, DocID: doc, Version: 1, Extractor: "test",
		TextUnits: []events.TextUnit{{ID: "u1", Text: "text"}}, ReceivedAt: time.Now().UTC(),
		Entities: []events.RawEntity{{Name: "cert-manager", Type: "component", TextUnit: "u1"}}}
	raw, err := events.Encode(ev)
	require.NoError(t, err)
	_, errs, err := f.reg.ApplyBatch(t.Context(), "acme", []store.Change{{DocID: doc, Version: 1, Contributions: store.Contributions{
		Entities:  []store.EntityContribution{{ID: "component:certmanager", Type: "component", Name: "cert-manager", TextUnits: []string{"u1"}}},
		TextUnits: ev.TextUnits, Resolution: res, Raw: raw}}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
}

// kindMessages returns the events of kind on the stream.
func kindMessages(t *testing.T, f *fixture, kind events.Kind) []*jetstream.RawStreamMsg {
	t.Helper()
	s, err := f.bus.JetStream().Stream(t.Context(), f.bus.StreamName())
	require.NoError(t, err)
	info, err := s.Info(t.Context())
	require.NoError(t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		require.NoError(t, err)
		if k, _, err := f.bus.Subjects().Parse(m.Subject); err == nil && k == kind {
			out = append(out, m)
		}
	}
	return out
}

// setupGraph is setup with re-resolution on: the embedded store is both
// registry and graph store.
func setupGraph(t *testing.T) *fixture {
	t.Helper()
	f, _ := setupGraphWith(t, gateway.Config{})
	return f
}

// setupOutbox is setupGraph with a publish timeout and an outbox period
// short enough for a test of a stream outage; its outbox does not run
// until runOutbox.
func setupOutbox(t *testing.T) (*fixture, *gateway.Gateway) {
	t.Helper()
	return setupGraphWith(t, gateway.Config{PublishTimeout: 2 * time.Second, OutboxEvery: 20 * time.Millisecond})
}

// setupGraphWith builds the gateway of setupGraph with cfg (its graph
// store set) and returns it too.
func setupGraphWith(t *testing.T, cfg gateway.Config) (*fixture, *gateway.Gateway) {
	t.Helper()
	bus := streamtest.NewBus(t, streamtest.Options{})
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	a, err := auth.New([]auth.Token{
		{Token: "w", Tenant: "acme", Principal: "writer", Writer: true},
		{Token: "root", Tenant: "acme", Principal: "root", Admin: true},
	}, nil)
	require.NoError(t, err)
	cfg.Graph = st
	g, err := gateway.New(cfg, st, bus, a, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, reg: st, bus: bus}, g
}

// runOutbox runs the gateway's outbox republisher until the test ends.
func runOutbox(t *testing.T, g *gateway.Gateway) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
}

// TestReresolvePublishesARequest: re-resolving an entity publishes one
// kg.reresolve request naming its sources, for the resolver to number; the
// gateway publishes no kg.extracted event (the extractor's alone), and two
// requests are two events even when nothing was applied between them.
func TestReresolvePublishesARequest(t *testing.T) {
	f := setupGraph(t)
	applyExtraction(t, f, "INC-1", 0)
	applyExtraction(t, f, "INC-2", 3)

	code, out := f.do(t, "POST", "/v1/entities/reresolve", "w", `{"entity":"component:cert-manager"}`)
	require.Equal(t, 403, code, "%v", out)
	for range 2 {
		code, out = f.do(t, "POST", "/v1/entities/reresolve", "root", `{"entity":"component:cert-manager"}`)
		require.Equal(t, 202, code, "%v", out)
		require.Equal(t, []any{"INC-1", "INC-2"}, out["sources"])
	}

	require.Empty(t, kindMessages(t, f, events.KindExtracted), "the gateway published kg.extracted")
	reqs := kindMessages(t, f, events.KindReresolve)
	require.Len(t, reqs, 2, "two requests are two events")
	for _, m := range reqs {
		require.Equal(t, "kg.reresolve.acme", m.Subject)
		ev, err := stream.DecodeTyped[events.Reresolve](&stream.Message{Tenant: "acme", Subject: m.Subject, Data: m.Data})
		require.NoError(t, err)
		require.Equal(t, []string{"INC-1", "INC-2"}, ev.DocIDs)
		require.Equal(t, "component:certmanager", ev.Entity)
		require.Equal(t, events.ReresolveID("acme", ev.RequestID), m.Header.Get("Nats-Msg-Id"))
	}
}

// TestReresolveRequestSurvivesAnOutage: a request the stream refuses is
// accepted as queued (a retry would be a second request), kept in the
// outbox and published once the stream takes it again.
func TestReresolveRequestSurvivesAnOutage(t *testing.T) {
	f, g := setupOutbox(t)
	applyExtraction(t, f, "INC-1", 0)

	restore := streamtest.Narrow(t, f.bus, events.KindReresolve)
	code, out := f.do(t, "POST", "/v1/entities/reresolve", "root", `{"entity":"component:cert-manager"}`)
	require.Equal(t, 202, code, "%v", out)
	require.Equal(t, true, out["queued"])
	require.Empty(t, kindMessages(t, f, events.KindReresolve))
	restore()
	runOutbox(t, g)
	streamtest.Eventually(t, 20*time.Second, func() error {
		if n := len(kindMessages(t, f, events.KindReresolve)); n != 1 {
			return fmt.Errorf("%d re-resolution requests on the stream", n)
		}
		return nil
	})
}
