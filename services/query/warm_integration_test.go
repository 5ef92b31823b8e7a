//go:build integration

package query_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/query"
)

// warmedFixture serves a query service over st, following bus, with
// Config.WarmOnStart, once its warm-up is over.
func warmedFixture(t *testing.T, bus *stream.Bus, st *failingStores) *fixture {
	t.Helper()
	return warmedFixtureWith(t, query.Config{Events: bus, WarmOnStart: true}, st)
}

// warmedFixtureWith is warmedFixture with cfg (Events and WarmOnStart
// set).
func warmedFixtureWith(t *testing.T, cfg query.Config, st *failingStores) *fixture {
	t.Helper()
	a, err := newAuth()
	require.NoError(t, err)
	svc, err := query.New(cfg, st, a, nil, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case <-svc.Warmed():
	case <-time.After(30 * time.Second):
		t.Fatal("not warmed within 30s")
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	f := &fixture{t: t, st: st, srv: srv}
	return f
}

// TestWarmOnStartServesTheFirstLocalQuestion: with Config.WarmOnStart, the
// service reads and indexes every tenant's documents, entity names,
// communities and reports as it starts, so the first local question after
// a start reads none of them; what was warmed holds content only, so a
// revocation and a deletion recorded by the registry alone still count at
// the very next question.
func TestWarmOnStartServesTheFirstLocalQuestion(t *testing.T) {
	bus := streamtest.NewBus(t, streamtest.Options{})
	cs := &countingStores{Stores: openStore(t), calls: map[string]int{}}
	st := &failingStores{Stores: cs}
	loadSeed(t, st, tenantAcme)
	loadGlobex(t, st)
	f := warmedFixture(t, bus, st)

	const doc = "INC-101"
	q := map[string]any{"mode": "local", "question": "What happened to cert-manager?"}
	cites := func(token string) bool {
		t.Helper()
		var raw json.RawMessage
		require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", token, q, &raw), "%s", raw)
		return strings.Contains(string(raw), `"doc_id":"`+doc+`"`)
	}
	cs.reset()
	require.True(t, cites(tokAlice), "the first question after the start cites %s", doc)
	calls := cs.reset()
	for _, read := range []string{"Source", "EntitiesByType()", "Communities", "Reports", "ListSources"} {
		require.Zero(t, calls[read], "the first local question after the warm-up read %s: %v", read, calls)
	}
	require.True(t, cites(tokBob))

	// A revocation for alice (oncall), registry only: her next question
	// leaves the document out; bob (sre) keeps it until its deletion.
	_, err := st.SetACL(t.Context(), tenantAcme, doc, provenance.ACL{Groups: []string{"sre"}})
	require.NoError(t, err)
	require.False(t, cites(tokAlice), "the revocation counts at once")
	require.True(t, cites(tokBob), "a caller still admitted keeps the document")
	_, err = st.MarkDeleted(t.Context(), tenantAcme, doc)
	require.NoError(t, err)
	require.False(t, cites(tokBob), "the deletion counts at once")
}

// overlappingListings counts the listings of every entity of a tenant
// and holds each until another starts (or a while passes), so listings
// that concurrent requests would make overlap.
type overlappingListings struct {
	*countingStores
	started chan struct{}
}

func (o *overlappingListings) EntitiesByType(ctx context.Context, tenant, typ string) ([]store.Entity, error) {
	if typ == "" {
		select {
		case o.started <- struct{}{}: // another listing waits: let it go on
		case <-o.started: // another listing started
		case <-time.After(300 * time.Millisecond):
		}
	}
	return o.countingStores.EntitiesByType(ctx, tenant, typ)
}

// TestConcurrentFirstQuestionsListEntitiesOnce: local questions arriving
// together before the name index is built wait for one listing of the
// tenant's entities instead of each making its own.
func TestConcurrentFirstQuestionsListEntitiesOnce(t *testing.T) {
	bus := streamtest.NewBus(t, streamtest.Options{})
	cs := &countingStores{Stores: openStore(t), calls: map[string]int{}}
	st := &failingStores{Stores: &overlappingListings{countingStores: cs, started: make(chan struct{})}}
	loadSeed(t, st, tenantAcme)
	loadGlobex(t, st)
	a, err := newAuth()
	require.NoError(t, err)
	svc, err := query.New(query.Config{Events: bus}, st, a, nil, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	f := &fixture{t: t, st: st, srv: srv}
	// The caches are live once the consumer runs: two aggregates, one
	// relation read (and no entity listing).
	streamtest.Eventually(t, 10*time.Second, func() error {
		cs.reset()
		for range 2 {
			var a aggResp
			f.get("/v1/aggregate?type=incident&rel=failure", tokAlice, http.StatusOK, &a)
		}
		if n := cs.reset()["EdgesByRelation"]; n > 1 {
			return fmt.Errorf("%d relation reads for two aggregates", n)
		}
		return nil
	})
	q := map[string]any{"mode": "local", "question": "What happened to cert-manager?"}
	var wg sync.WaitGroup
	for _, tok := range []string{tokAlice, tokBob, tokAlice, tokBob} {
		wg.Go(func() {
			var raw json.RawMessage
			if status := f.do(http.MethodPost, "/v1/query", tok, q, &raw); status != http.StatusOK {
				t.Errorf("status %d: %s", status, raw)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 1, cs.reset()["EntitiesByType()"], "one listing for four concurrent first questions")
}

// TestWarmedWithoutWarmUp: a service that does not warm (no WarmOnStart,
// or no events to follow) is warm at once, so a process waiting on
// Warmed for its readiness is ready as soon as it serves; one that warms
// is not before Run.
func TestWarmedWithoutWarmUp(t *testing.T) {
	bus := streamtest.NewBus(t, streamtest.Options{})
	a, err := newAuth()
	require.NoError(t, err)
	st := openStore(t)
	for _, cfg := range []query.Config{{}, {Events: bus}, {WarmOnStart: true}} {
		svc, err := query.New(cfg, st, a, nil, nil)
		require.NoError(t, err)
		select {
		case <-svc.Warmed():
		default:
			t.Fatalf("Warmed is open for %+v, which does not warm", cfg)
		}
	}
	svc, err := query.New(query.Config{Events: bus, WarmOnStart: true}, st, a, nil, nil)
	require.NoError(t, err)
	select {
	case <-svc.Warmed():
		t.Fatal("Warmed is closed before Run warmed")
	default:
	}
}

// warmedSeed is warmedFixture over the seed corpus in a store whose reads
// are counted: the fixture, the store itself (to write without counting),
// the counts and the bus.
func warmedSeed(t *testing.T) (*fixture, query.Stores, *countingStores, *stream.Bus) {
	t.Helper()
	bus := streamtest.NewBus(t, streamtest.Options{})
	base := openStore(t)
	cs := &countingStores{Stores: base, calls: map[string]int{}}
	st := &failingStores{Stores: cs}
	loadSeed(t, st, tenantAcme)
	return warmedFixture(t, bus, st), base, cs, bus
}

// changedReads is calls of what: for "Entities", the entities read by id
// whole or by their parts (EntityParts: changed entities whose changed
// documents are known).
func changedReads(calls map[string]int, what string) int {
	if what == "Entities" {
		return calls["Entities"] + calls["EntityParts"]
	}
	return calls[what]
}

// TestAppliedDocumentsAreReadInTheBackground: with the warm-up, a document
// applied after it (its kg.graph.changed followed) is read into the unit
// cache in the background, so the first question about it reads no
// source; what is read is content only: the document's deletion counts at
// the next question.
func TestAppliedDocumentsAreReadInTheBackground(t *testing.T) {
	f, base, cs, bus := warmedSeed(t)

	const doc = "INC-170"
	units := []events.TextUnit{{ID: "u0", Text: "INC-170: the quasar gateway dropped every websocket after the kestrel rollout.", End: 80}}
	c := store.Contributions{Title: doc, DocType: "postmortem", TextUnits: units,
		Entities: []store.EntityContribution{
			{ID: "incident:inc170", Type: "incident", Name: doc, NameRank: 2, TextUnits: []string{"u0"}},
			{ID: "service:quasargateway", Type: "service", Name: "quasar gateway", NameRank: 2, TextUnits: []string{"u0"}},
		},
		Edges: []store.EdgeContribution{
			{Source: "incident:inc170", Relation: "affected", Target: "service:quasargateway", Weight: 1, TextUnits: []string{"u0"}},
		}}
	read := func(what ...string) func() error {
		return func() error {
			cs.mu.Lock()
			defer cs.mu.Unlock()
			for _, w := range what {
				if changedReads(cs.calls, w) == 0 {
					return fmt.Errorf("no %s read yet: %v", w, cs.calls)
				}
			}
			return nil
		}
	}
	// Applied through the store itself: only the service's reads count.
	// No question used the name index yet: the document is read at once,
	// its entities only once the tenant has been quiet for 5s (an import
	// going on does not patch the index every second for nobody).
	cs.reset()
	quiet := c
	quiet.Title = "INC-169"
	applyAnnounced(t, base, bus, "INC-169", 1, &quiet)
	streamtest.Eventually(t, 10*time.Second, read("Source"))
	time.Sleep(time.Second)
	require.Zero(t, changedReads(cs.reset(), "Entities"), "entities read while the tenant was not quiet yet, for a name index no request used")
	streamtest.Eventually(t, 15*time.Second, read("Entities"))

	q := map[string]any{"mode": "local", "question": "What happened to the quasar gateway?"}
	var raw json.RawMessage
	cs.reset()
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokAlice, q, &raw), "%s", raw)
	require.Zero(t, changedReads(cs.reset(), "Entities"), "the first question after the quiet import read its entities itself")
	// Now a question used it: the changed entities are read within a
	// second.
	cs.reset()
	applyAnnounced(t, base, bus, doc, 1, &c)
	streamtest.Eventually(t, 10*time.Second, read("Source", "Entities"))
	// citesFor asks question and reports whether the answer cites doc.
	citesFor := func(question map[string]any, doc string) func() bool {
		return func() bool {
			t.Helper()
			var raw json.RawMessage
			require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokAlice, question, &raw), "%s", raw)
			return strings.Contains(string(raw), `"doc_id":"`+doc+`"`)
		}
	}
	cites := citesFor(q, doc)
	cs.reset()
	require.True(t, cites(), "the first question about the applied document cites it")
	calls := cs.reset()
	require.Zero(t, calls["Source"], "the first question read the applied document itself")
	require.Zero(t, changedReads(calls, "Entities"), "the first question read the changed entities itself")

	_, err := base.MarkDeleted(t.Context(), tenantAcme, doc)
	require.NoError(t, err)
	require.False(t, cites(), "the deletion counts at once")

	// While the background keeps the name index patched (and questions
	// may use the index it made, recentNames, whose choice
	// TestRecentNamesServesTheLastBackgroundPatch checks): a new entity is
	// found within a few seconds of its change; a deletion still counts
	// at once.
	const next = "INC-171"
	n := store.Contributions{Title: next, DocType: "postmortem",
		TextUnits: []events.TextUnit{{ID: "u0", Text: "INC-171: the nebula cache evicted every session after the orion deploy.", End: 70}},
		Entities: []store.EntityContribution{
			{ID: "incident:inc171", Type: "incident", Name: next, NameRank: 2, TextUnits: []string{"u0"}},
			{ID: "service:nebulacache", Type: "service", Name: "nebula cache", NameRank: 2, TextUnits: []string{"u0"}},
		},
		Edges: []store.EdgeContribution{
			{Source: "incident:inc171", Relation: "affected", Target: "service:nebulacache", Weight: 1, TextUnits: []string{"u0"}},
		}}
	applyAnnounced(t, base, bus, next, 1, &n)
	nq := map[string]any{"mode": "local", "question": "What happened to the nebula cache?"}
	citesNext := citesFor(nq, next)
	streamtest.Eventually(t, 5*time.Second, func() error {
		if !citesNext() {
			return errors.New("the new entity is not found yet")
		}
		return nil
	})
	_, err = base.MarkDeleted(t.Context(), tenantAcme, next)
	require.NoError(t, err)
	require.False(t, citesNext(), "the deletion counts at once")
}

// TestBackgroundReadsGiveWay: with Config.GiveWay, the background read of
// documents applied after the warm-up waits while the stage it names has
// a backlog above its bound, and is made once that backlog is worked off.
func TestBackgroundReadsGiveWay(t *testing.T) {
	bus := streamtest.NewBus(t, streamtest.Options{})
	base := openStore(t)
	cs := &countingStores{Stores: base, calls: map[string]int{}}
	st := &failingStores{Stores: cs}
	loadSeed(t, st, tenantAcme)
	// "front" stands for the resolver: a durable on kg.graph.changed that
	// nobody consumes until the test drains it.
	front, err := bus.JetStream().CreateOrUpdateConsumer(t.Context(), bus.StreamName(), jetstream.ConsumerConfig{
		Durable: "front", FilterSubject: bus.Subjects().All(events.KindGraphChanged), AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	warmedFixtureWith(t, query.Config{Events: bus, WarmOnStart: true,
		GiveWay: &stream.GiveWay{Stages: []string{"front"}, Above: 1, Max: time.Hour, Poll: 10 * time.Millisecond}}, st)

	cs.reset()
	for _, doc := range []string{"INC-168", "INC-169"} {
		c := store.Contributions{Title: doc, DocType: "postmortem",
			TextUnits: []events.TextUnit{{ID: "u0", Text: doc + ": the pulsar queue stalled after the vega upgrade.", End: 60}},
			Entities:  []store.EntityContribution{{ID: "service:pulsarqueue", Type: "service", Name: "pulsar queue", NameRank: 2, TextUnits: []string{"u0"}}}}
		applyAnnounced(t, base, bus, doc, 1, &c)
	}
	// Two graph changes pending for "front", above its bound of one: a
	// second past keepWarm's gathering, nothing is read.
	time.Sleep(keepWarmEvery + 500*time.Millisecond)
	require.Zero(t, cs.reset()["Source"], "documents read in the background while the front stage had 2 events pending")

	batch, err := front.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(t.Context()))
	}
	streamtest.Eventually(t, 10*time.Second, func() error {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		if n := cs.calls["Source"]; n < 2 {
			return fmt.Errorf("%d documents read in the background, want both", n)
		}
		return nil
	})
}

// keepWarmEvery is keepWarm's gathering time (keepwarm.go).
const keepWarmEvery = time.Second

// TestChangedReportsAreReadInTheBackground: after the warm-up, the event
// of a report rewrite (or of a re-clustering) makes the service read the
// tenant's communities and reports again in the background, so the next
// global question reads neither and shows the rewritten report; the
// reports read ahead hold content only, so a revocation recorded by the
// registry alone (a new version no one may read) still counts at the next
// question.
func TestChangedReportsAreReadInTheBackground(t *testing.T) {
	f, base, cs, bus := warmedSeed(t)
	ctx := t.Context()
	globalQ := map[string]any{"mode": "global", "question": "What are the recurring root causes of our incidents?"}

	for i, kind := range []events.Kind{events.KindReportsChanged, events.KindCommunitiesChanged} {
		rep, err := base.Report(ctx, tenantAcme, "r-c-0-cert")
		require.NoError(t, err)
		rep.Title = fmt.Sprintf("Certificates that expire unnoticed (%d)", i)
		require.NoError(t, base.PutReport(ctx, tenantAcme, rep))
		cs.reset()
		var ev events.Validator = &events.ReportsChanged{Header: events.Header{Tenant: tenantAcme}, Reports: []string{rep.ID}}
		if kind == events.KindCommunitiesChanged {
			ev = &events.CommunitiesChanged{Header: events.Header{Tenant: tenantAcme}, Run: int64(2 + i)}
		}
		_, err = bus.Publish(ctx, kind, tenantAcme, fmt.Sprintf("changed-%d", i), ev)
		require.NoError(t, err)
		streamtest.Eventually(t, 10*time.Second, func() error {
			cs.mu.Lock()
			n := cs.calls["Reports"]
			cs.mu.Unlock()
			if n == 0 {
				return fmt.Errorf("the reports are not read again after %s yet", kind)
			}
			return nil
		})
		time.Sleep(100 * time.Millisecond) // the background read finishes
		cs.reset()
		titles := reportTitles(ask(t, f, tokAlice, globalQ))
		require.True(t, slices.ContainsFunc(titles, func(s string) bool { return strings.HasPrefix(s, rep.Title) }), "%v", titles)
		calls := cs.reset()
		require.Zero(t, calls["Reports"], "after %s the question read the reports itself: %v", kind, calls)
		require.Zero(t, calls["Communities"], "after %s the question read the communities itself: %v", kind, calls)
	}

	// Content only: a revocation without any event counts at once.
	rep, err := base.Report(ctx, tenantAcme, "r-c-0-cert")
	require.NoError(t, err)
	require.NotEmpty(t, rep.Sources)
	src, err := base.Source(ctx, tenantAcme, rep.Sources[0].DocID)
	require.NoError(t, err)
	_, err = base.Announce(ctx, tenantAcme, store.Announcement{DocID: src.DocID, Version: src.Version + 1,
		ACL: provenance.ACL{Groups: []string{"nobody"}}})
	require.NoError(t, err)
	titles := reportTitles(ask(t, f, tokAlice, globalQ))
	require.False(t, slices.ContainsFunc(titles, func(s string) bool { return strings.HasPrefix(s, rep.Title) }),
		"the report citing the revoked %s is still read: %v", src.DocID, titles)
}
