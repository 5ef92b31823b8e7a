package clusterer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/catalog"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/clusterer"
)

// Fixtures of the unit tests. Tests fail (never skip) when they are missing.
const (
	// ownDir is this package's corpus of invented postmortems, laid out as
	// the seed corpus is.
	ownDir     = "testdata/postmortems"
	tenant     = "acme"
	catalogDoc = "catalog-info.yaml"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startBus runs a real JetStream server in-process with an in-memory
// stream; the bus's event metrics go to reg (nil: nowhere).
func startBus(t *testing.T, reg prometheus.Registerer) *stream.Bus {
	t.Helper()
	return streamtest.NewBus(t, streamtest.Options{Config: stream.Config{Storage: jetstream.MemoryStorage},
		Log: testLogger(t), Metrics: stream.NewMetrics(reg)})
}

// openStore opens an embedded store in a temporary directory.
func openStore(t *testing.T) *embedded.Store {
	t.Helper()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// env is a clusterer wired to a real bus and a real store. reg holds the
// clusterer's metrics and the bus's.
type env struct {
	bus       *stream.Bus
	st        *embedded.Store
	w         *clusterer.Worker
	reg       *prometheus.Registry
	published int // graph.changed events published by the test
}

func newEnv(t *testing.T, cfg clusterer.Config) *env {
	t.Helper()
	reg := prometheus.NewRegistry()
	e := &env{bus: startBus(t, reg), st: openStore(t), reg: reg}
	w, err := clusterer.New(cfg, e.bus, e.st, testLogger(t), e.reg)
	require.NoError(t, err)
	e.w = w
	return e
}

// run runs the worker until the test ends, waiting for Run to return.
func (e *env) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// eventually polls cond until it holds (see streamtest.Eventually).
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	streamtest.Eventually(t, timeout, cond)
}

// announcements returns the kg.communities.changed events on the stream, in order.
func announcements(t *testing.T, bus *stream.Bus) []events.CommunitiesChanged {
	t.Helper()
	ctx := t.Context()
	st, err := bus.JetStream().Stream(ctx, bus.StreamName())
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	subject := bus.Subjects().For(events.KindCommunitiesChanged, tenant)
	var out []events.CommunitiesChanged
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		require.NoError(t, err)
		if m.Subject != subject {
			continue
		}
		var ev events.CommunitiesChanged
		require.NoError(t, events.Decode(m.Data, &ev))
		out = append(out, ev)
	}
	return out
}

// publish announces a graph change the way the resolver does.
func (e *env) publish(t *testing.T, doc string, version int64, res store.ApplyResult) {
	t.Helper()
	_, err := e.bus.Publish(t.Context(), events.KindGraphChanged, tenant, events.GraphID(tenant, doc, version, 0),
		&events.GraphChanged{Header: events.Header{Tenant: tenant}, DocID: doc, Version: version,
			Touched: res.Touched, ReceivedAt: time.Now()})
	require.NoError(t, err)
	e.published++
}

// waitHandled polls until the clusterer has handled and acknowledged every
// graph.changed event the test published.
func (e *env) waitHandled(t *testing.T) {
	t.Helper()
	eventually(t, 20*time.Second, func() error {
		n := e.handled(t)
		if n != e.published {
			return fmt.Errorf("%d of %d events handled", n, e.published)
		}
		return nil
	})
}

func (e *env) handled(t *testing.T) int {
	t.Helper()
	mfs, err := e.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "kgstream_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			if have["stage"] == "clusterer" && have["outcome"] == "ok" {
				return int(m.GetCounter().GetValue())
			}
		}
	}
	return 0
}

// waitConsumer polls until the clusterer's durable consumer exists: Run
// has then listed the tenants and marked them dirty.
func (e *env) waitConsumer(t *testing.T) {
	t.Helper()
	eventually(t, 20*time.Second, func() error {
		_, err := e.bus.Pending(t.Context(), "clusterer")
		return err
	})
}

// graphChangedMsg is a graph.changed delivery for calling Handle directly.
func graphChangedMsg(t *testing.T, doc string, version int64, touched ...string) *stream.Message {
	t.Helper()
	data, err := events.Encode(&events.GraphChanged{Header: events.Header{Tenant: tenant}, DocID: doc,
		Version: version, Touched: touched, ReceivedAt: time.Now()})
	require.NoError(t, err)
	return &stream.Message{Kind: events.KindGraphChanged, Tenant: tenant, Data: data}
}

// triple is one recorded LLM relationship.
type triple struct {
	Source     string  `json:"source"`
	SourceType string  `json:"source_type"`
	Relation   string  `json:"relation"`
	Target     string  `json:"target"`
	TargetType string  `json:"target_type"`
	Strength   float64 `json:"strength"`
}

// incidentContributionsIn is incidentContributions for a document of the
// corpus in dir.
func incidentContributionsIn(t *testing.T, dir, doc string, triples []triple) store.Contributions {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(dir, "docs", doc+".txt"))
	require.NoError(t, err, "corpus %s is required", dir)
	unit := doc + "#0"
	c := store.Contributions{Title: doc, DocType: "incident",
		TextUnits: []events.TextUnit{{ID: unit, Text: string(text), End: len(text)}}}
	seen := map[string]bool{}
	entity := func(typ, name string) string {
		id := resolve.ID(typ, name)
		if !seen[id] {
			seen[id] = true
			c.Entities = append(c.Entities, store.EntityContribution{ID: id, Type: resolve.Type(typ), Name: name,
				NameRank: 2, TextUnits: []string{unit}})
		}
		return id
	}
	for _, r := range triples {
		src, dst := entity(r.SourceType, r.Source), entity(r.TargetType, r.Target)
		wt := r.Strength
		if wt <= 0 {
			wt = 1
		}
		c.Edges = append(c.Edges, store.EdgeContribution{Source: src, Relation: resolve.Type(r.Relation), Target: dst,
			Weight: wt, TextUnits: []string{unit}})
	}
	return c
}

// catalogContributionsIn is the catalog of the corpus in dir.
func catalogContributionsIn(t *testing.T, dir string) store.Contributions {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "catalog-info.yaml"))
	require.NoError(t, err, "corpus %s is required", dir)
	s, _, err := catalog.Parse(data)
	require.NoError(t, err)
	c := store.Contributions{Title: "Service catalog", DocType: "catalog"}
	for _, e := range s.Entities {
		key := e.Key
		if key == "" {
			key = e.Name
		}
		rank := 2 - e.Authority // catalog title 0, catalog name 1
		c.Entities = append(c.Entities, store.EntityContribution{ID: resolve.ID(e.Type, key), Type: e.Type,
			Name: e.Name, NameRank: rank})
	}
	for _, r := range s.Relationships {
		c.Edges = append(c.Edges, store.EdgeContribution{Source: resolve.ID(r.SourceType, r.Source),
			Relation: r.Relation, Target: resolve.ID(r.TargetType, r.Target), Weight: r.Strength})
	}
	return c
}

// recordingIn reads the recorded LLM extraction of the corpus in dir, by
// doc id.
func recordingIn(t *testing.T, dir string) map[string][]triple {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "recorded-llm-extraction.json"))
	require.NoError(t, err, "corpus %s is required", dir)
	var rec map[string][]triple
	require.NoError(t, json.Unmarshal(data, &rec))
	return rec
}

// applyOwn applies the catalog and the four recorded extractions of ownDir
// (version 1 each) and returns the union of the entities they touched.
func applyOwn(t *testing.T, st store.GraphStore) []string {
	t.Helper()
	ctx := t.Context()
	rec := recordingIn(t, ownDir)
	res, err := st.Apply(ctx, tenant, catalogDoc, 1, catalogContributionsIn(t, ownDir))
	require.NoError(t, err)
	touched := slices.Clone(res.Touched)
	docs := slices.Sorted(maps.Keys(rec))
	for _, d := range docs {
		res, err := st.Apply(ctx, tenant, d, 1, incidentContributionsIn(t, ownDir, d, rec[d]))
		require.NoError(t, err)
		require.Equal(t, store.Applied, res.Outcome)
		touched = append(touched, res.Touched...)
	}
	stats, err := st.Stats(ctx, tenant)
	require.NoError(t, err)
	// 3 services, 3 teams, 4 incidents, 4 components, 2 failure modes;
	// 3 owned_by edges and 3 per incident.
	require.Equal(t, store.Stats{Sources: 5, Entities: 16, Edges: 15}, stats)
	slices.Sort(touched)
	return slices.Compact(touched)
}

// levels groups communities as member sets per level, members mapped by
// label, each set sorted and the sets of a level sorted.
func levels(cs []store.Community, label func(string) string) map[int][][]string {
	out := map[int][][]string{}
	for _, c := range cs {
		ms := make([]string, len(c.Members))
		for i, m := range c.Members {
			ms[i] = label(m)
		}
		slices.Sort(ms)
		out[c.Level] = append(out[c.Level], ms)
	}
	for _, l := range out {
		sortSets(l)
	}
	return out
}

func sortSets(sets [][]string) {
	slices.SortFunc(sets, func(a, b []string) int { return slices.Compare(a, b) })
}

// names maps entity ids to display names.
func names(t *testing.T, st store.GraphStore) func(string) string {
	t.Helper()
	es, err := st.EntitiesByType(t.Context(), tenant, "")
	require.NoError(t, err)
	m := make(map[string]string, len(es))
	for _, e := range es {
		m[e.ID] = e.Name
	}
	return func(id string) string {
		if n, ok := m[id]; ok {
			return n
		}
		return id
	}
}

// metric returns the sample of the named metric whose labels include
// labels, failing the test if there is none.
func metric(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			return m
		}
	}
	t.Fatalf("no sample of %s with labels %v", name, labels)
	return nil
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// waitRun polls until the tenant's last clustering run is run.
func waitRun(t *testing.T, st store.CommunityStore, run int64) {
	t.Helper()
	eventually(t, 20*time.Second, func() error {
		got, err := st.LastRun(t.Context(), tenant)
		if err != nil {
			return err
		}
		if got != run {
			return fmt.Errorf("last run %d, want %d", got, run)
		}
		return nil
	})
}

func lastRun(t *testing.T, st store.CommunityStore) int64 {
	t.Helper()
	run, err := st.LastRun(t.Context(), tenant)
	require.NoError(t, err)
	return run
}

func communities(t *testing.T, st store.CommunityStore) []store.Community {
	t.Helper()
	cs, err := st.Communities(t.Context(), tenant)
	require.NoError(t, err)
	return cs
}

func sourceRef(doc string, version int64) provenance.SourceRef {
	return provenance.SourceRef{DocID: doc, Version: version}
}

// waitAnnouncements polls until n kg.communities.changed events are on the
// stream (a run's communities are stored before it is announced) and
// returns them.
func waitAnnouncements(t *testing.T, bus *stream.Bus, n int) []events.CommunitiesChanged {
	t.Helper()
	var evs []events.CommunitiesChanged
	eventually(t, 20*time.Second, func() error {
		evs = announcements(t, bus)
		if len(evs) != n {
			return fmt.Errorf("%d announcements, want %d", len(evs), n)
		}
		return nil
	})
	return evs
}
