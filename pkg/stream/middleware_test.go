package stream_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
)

func encoded(t *testing.T, ev events.Validator) []byte {
	t.Helper()
	data, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestChainOrder: the first middleware is the outermost.
func TestChainOrder(t *testing.T) {
	var trace []string
	mark := func(name string) stream.Middleware {
		return func(next stream.Handler) stream.Handler {
			return func(ctx context.Context, m *stream.Message) error {
				trace = append(trace, name)
				return next(ctx, m)
			}
		}
	}
	h := func(context.Context, *stream.Message) error { trace = append(trace, "h"); return nil }
	for _, tc := range []struct {
		name string
		mw   []stream.Middleware
		want []string
	}{
		{"none", nil, []string{"h"}},
		{"one", []stream.Middleware{mark("a")}, []string{"a", "h"}},
		{"three", []stream.Middleware{mark("a"), mark("b"), mark("c")}, []string{"a", "b", "c", "h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trace = nil
			if err := stream.Chain(h, tc.mw...)(t.Context(), &stream.Message{}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(trace, tc.want) {
				t.Fatalf("trace = %v, want %v", trace, tc.want)
			}
		})
	}
}

// TestRecover: a panic becomes a permanent error; errors and successes
// pass through unchanged.
func TestRecover(t *testing.T) {
	boom := errors.New("store is down")
	for _, tc := range []struct {
		name      string
		h         stream.Handler
		wantErr   error
		permanent bool
	}{
		{"ok", func(context.Context, *stream.Message) error { return nil }, nil, false},
		{"error", func(context.Context, *stream.Message) error { return boom }, boom, false},
		{"panic", func(context.Context, *stream.Message) error { panic("boom") }, nil, true},
		{"nil map", func(context.Context, *stream.Message) error {
			var m map[string]int
			//lint:ignore SA5000 the write panics on purpose: Recover must turn it into a permanent error
			m["x"] = 1
			return nil
		}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := stream.Recover(tc.h)(t.Context(), &stream.Message{})
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && !tc.permanent && err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if stream.IsPermanent(err) != tc.permanent {
				t.Fatalf("IsPermanent(%v) = %v, want %v", err, stream.IsPermanent(err), tc.permanent)
			}
		})
	}
}

// TestTyped: the body is decoded into the kind's struct and the event's
// tenant must be the subject's; anything else is refused as permanent
// before the function runs.
func TestTyped(t *testing.T) {
	graph := func(tenant string) []byte {
		return encoded(t, &events.GraphChanged{Header: events.Header{Tenant: tenant}, DocID: "d1", Version: 3,
			ReceivedAt: time.Now()})
	}
	retry := errors.New("try again")
	for _, tc := range []struct {
		name      string
		tenant    string // the subject's
		data      []byte
		fnErr     error
		wantCall  bool
		wantErr   error
		permanent bool
	}{
		{name: "decoded", tenant: "acme", data: graph("acme"), wantCall: true},
		{name: "fn error passes", tenant: "acme", data: graph("acme"), fnErr: retry, wantCall: true, wantErr: retry},
		{name: "other tenant", tenant: "globex", data: graph("acme"), wantErr: stream.ErrTenantMismatch, permanent: true},
		{name: "malformed", tenant: "acme", data: []byte(`{"schema":1`), wantErr: events.ErrInvalidEvent, permanent: true},
		{name: "unknown field", tenant: "acme", data: []byte(`{"schema":1,"tenant":"acme","doc_id":"d","version":1,"x":1}`),
			wantErr: events.ErrInvalidEvent, permanent: true},
		{name: "wrong schema", tenant: "acme", data: []byte(`{"schema":9,"tenant":"acme","doc_id":"d","version":1}`),
			wantErr: events.ErrInvalidEvent, permanent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *events.GraphChanged
			h := stream.Typed(func(_ context.Context, _ *stream.Message, ev *events.GraphChanged) error {
				got = ev
				return tc.fnErr
			})
			err := h(t.Context(), &stream.Message{Subject: "kg.graph.changed." + tc.tenant, Kind: events.KindGraphChanged,
				Tenant: tc.tenant, Data: tc.data})
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if stream.IsPermanent(err) != tc.permanent {
				t.Fatalf("IsPermanent(%v) = %v, want %v", err, stream.IsPermanent(err), tc.permanent)
			}
			if (got != nil) != tc.wantCall {
				t.Fatalf("called = %v, want %v", got != nil, tc.wantCall)
			}
			if got != nil && (got.DocID != "d1" || got.Version != 3 || got.Tenant != "acme") {
				t.Fatalf("decoded %+v", got)
			}
		})
	}
}

// TestMux: each kind reaches its own handler; an unknown kind is a
// permanent error.
func TestMux(t *testing.T) {
	var called events.Kind
	route := func(k events.Kind) stream.Handler {
		return func(context.Context, *stream.Message) error { called = k; return nil }
	}
	routes := map[events.Kind]stream.Handler{
		events.KindGraphChanged: route(events.KindGraphChanged),
		events.KindDocACL:       route(events.KindDocACL),
	}
	mux := stream.Mux(routes)
	// Changing the map afterwards does not change the routes.
	routes[events.KindDocDeleted] = route(events.KindDocDeleted)
	for _, tc := range []struct {
		kind    events.Kind
		wantErr bool
	}{
		{events.KindGraphChanged, false},
		{events.KindDocACL, false},
		{events.KindDocDeleted, true},
		{events.KindCommunitiesChanged, true},
		{"", true},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			called = ""
			err := mux(t.Context(), &stream.Message{Kind: tc.kind, Subject: "kg." + string(tc.kind) + ".acme"})
			if tc.wantErr {
				if !errors.Is(err, stream.ErrUnknownKind) || !stream.IsPermanent(err) || called != "" {
					t.Fatalf("err = %v (permanent %v), called %q: want a permanent ErrUnknownKind", err, stream.IsPermanent(err), called)
				}
				return
			}
			if err != nil || called != tc.kind {
				t.Fatalf("err = %v, called %q, want %q", err, called, tc.kind)
			}
		})
	}
}

// TestTypedOnTheBus: through a real stage, an event whose tenant is not
// its subject's is dead-lettered with the reason, at the first delivery.
func TestTypedOnTheBus(t *testing.T) {
	bus, _ := newBus(t)
	handled := make(chan string, 4)
	run(t, bus, stream.ConsumerConfig{Stage: "typed", Kinds: []events.Kind{events.KindDocChanged}},
		stream.Typed(func(_ context.Context, _ *stream.Message, ev *events.DocChanged) error {
			handled <- ev.DocID
			return nil
		}))
	// An acme event on globex's subject, straight onto the stream.
	if _, err := bus.JetStream().Publish(t.Context(), "kg.doc.changed.globex", encoded(t, doc("d", 1))); err != nil {
		t.Fatal(err)
	}
	publish(t, bus, "acme/ok/1/changed", doc("ok", 1))
	select {
	case id := <-handled:
		if id != "ok" {
			t.Fatalf("handled %q, want only ok", id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the valid event was not handled")
	}
	var dls []stream.DeadLetter
	waitFor(t, "dead letter", func() bool { dls = readDLQ(t, bus, "typed"); return len(dls) == 1 })
	if dls[0].Subject != "kg.doc.changed.globex" || dls[0].Deliveries != 1 {
		t.Fatalf("dead letter = %+v", dls[0])
	}
	if want := `event of tenant "acme" on subject "kg.doc.changed.globex"`; !strings.Contains(dls[0].Error, want) {
		t.Fatalf("reason %q lacks %q", dls[0].Error, want)
	}
}
