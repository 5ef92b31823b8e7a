package clusterer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
)

// randomChange draws a version of doc: a few entities of a pool of 300
// (types fixed per id, names varying so display names move), edges among
// them with relations and strengths drawn, or none at all.
func randomChange(r *rand.Rand, doc string) store.Contributions { return randomChangeOf(r, doc, 300) }

// randomChangeOf is randomChange over a pool of pool entities.
func randomChangeOf(r *rand.Rand, doc string, pool int) store.Contributions {
	c := store.Contributions{Title: doc, TextUnits: []events.TextUnit{{ID: doc + "-u1", Text: "text"}}}
	if r.IntN(10) == 0 {
		return c // a version without entities
	}
	var ids []string
	for range 1 + r.IntN(6) {
		n := r.IntN(pool)
		id := fmt.Sprintf("service:s%03d", n)
		if slices.Contains(ids, id) {
			continue
		}
		ids = append(ids, id)
		c.Entities = append(c.Entities, store.EntityContribution{ID: id, Type: "service",
			Name: fmt.Sprintf("S%03d-%d", n, r.IntN(3)), NameRank: 2, Description: "described by " + doc,
			TextUnits: []string{doc + "-u1"}})
	}
	seen := map[string]bool{}
	for range r.IntN(2 * len(ids)) {
		e := store.EdgeContribution{Source: ids[r.IntN(len(ids))], Relation: []string{"depends_on", "caused"}[r.IntN(2)],
			Target: ids[r.IntN(len(ids))], Description: "linked in " + doc, Weight: float64(r.IntN(4)),
			TextUnits: []string{doc + "-u1"}}
		if !seen[e.ID()] {
			seen[e.ID()] = true
			c.Edges = append(c.Edges, e)
		}
	}
	return c
}

// TestPatchedGraphIsTheSnapshot: after every round of random applies,
// edits (entities, edges, names and strengths changing; versions moving
// every support) and deletions, each announced as the resolver announces
// it, the graph a run patches is the graph read whole, reduced to what
// clustering reads; rounds naming too much, or a change naming nothing,
// read whole.
func TestPatchedGraphIsTheSnapshot(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	reg := prometheus.NewRegistry()
	w := &Worker{st: st, stale: map[string]*stale{}, graphs: map[string]*graphCache{},
		graphReads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reads"}, []string{"read"})}
	reg.MustRegister(w.graphReads)
	const tenant = "acme"
	r := rand.New(rand.NewPCG(7, 7))
	versions := map[string]int64{}
	change := func(doc string) {
		rec, err := st.Source(ctx, tenant, doc)
		var prev []string
		if err == nil && !rec.Deleted {
			prev = slices.Clone(rec.Entities)
		}
		versions[doc]++
		var res store.ApplyResult
		deleted := versions[doc] > 1 && r.IntN(5) == 0
		if deleted {
			res, err = st.Delete(ctx, tenant, doc, versions[doc])
		} else {
			c := randomChange(r, doc)
			for _, e := range c.Entities {
				prev = append(prev, e.ID)
			}
			res, err = st.Apply(ctx, tenant, doc, versions[doc], c)
		}
		require.NoError(t, err)
		slices.Sort(prev)
		w.noteChanged(&events.GraphChanged{Header: events.Header{Tenant: tenant}, DocID: doc, Version: versions[doc],
			Deleted: deleted, Touched: res.Touched, Contributed: slices.Compact(prev)})
	}
	check := func(round int) {
		got, err := w.graphOf(ctx, tenant, false)
		require.NoError(t, err)
		snap, err := st.Snapshot(ctx, tenant)
		require.NoError(t, err)
		want := newGraphCache(snap).graph()
		require.Equal(t, want, got, "round %d", round)
	}
	for i := range 80 {
		change(fmt.Sprintf("doc-%d", i))
	}
	check(0)
	require.Equal(t, 1.0, testutil.ToFloat64(w.graphReads.WithLabelValues("whole")))
	for round := 1; round <= 60; round++ {
		for range 1 + r.IntN(2) {
			change(fmt.Sprintf("doc-%d", r.IntN(100)))
		}
		check(round)
	}
	patched := testutil.ToFloat64(w.graphReads.WithLabelValues("patched"))
	whole := testutil.ToFloat64(w.graphReads.WithLabelValues("whole"))
	t.Logf("60 rounds: %.0f patched, %.0f read whole", patched, whole)
	require.Greater(t, patched, 30.0, "most rounds patch")
	require.Greater(t, whole, 1.0, "a change naming no entity reads whole")

	// A round naming more than a quarter of the entities reads whole.
	for i := range 100 {
		change(fmt.Sprintf("doc-%d", i))
	}
	check(61)
	require.Equal(t, whole+1, testutil.ToFloat64(w.graphReads.WithLabelValues("whole")))

	// A change applied again after its announcement failed is announced
	// as a duplicate, naming only what the applied version contributes:
	// the run reads whole (patching by those ids would keep what the
	// version before held).
	rec, err := st.Source(ctx, tenant, "doc-1")
	require.NoError(t, err)
	c := randomChange(r, "doc-1")
	for len(c.Entities) == 0 {
		c = randomChange(r, "doc-1")
	}
	versions["doc-1"]++
	_, err = st.Apply(ctx, tenant, "doc-1", versions["doc-1"], c)
	require.NoError(t, err)
	var now []string
	for _, e := range c.Entities {
		now = append(now, e.ID)
	}
	slices.Sort(now)
	require.NotEqual(t, rec.Entities, now)
	w.noteChanged(&events.GraphChanged{Header: events.Header{Tenant: tenant}, DocID: "doc-1", Version: versions["doc-1"],
		Duplicate: true, Contributed: now})
	whole = testutil.ToFloat64(w.graphReads.WithLabelValues("whole"))
	check(62)
	require.Equal(t, whole+1, testutil.ToFloat64(w.graphReads.WithLabelValues("whole")))

	// A run that failed drops the kept graph: the next reads whole.
	w.graphs[tenant].entities["service:ghost"] = node{id: "service:ghost"}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	change("doc-0")
	_, err = w.graphOf(cancelled, tenant, false)
	require.Error(t, err)
	require.Nil(t, w.graphs[tenant])
	check(63)
}

// BenchmarkGraphOf compares a run's read of the graph after one edit:
// patched (the edited document's entities and their edges read again)
// against whole (Snapshot), on KG_BENCH_DOCS (default 20,000) random
// documents of up to six entities of a pool of as many entities as
// documents, and reports the kept graph's live heap per edge.
func BenchmarkGraphOf(b *testing.B) {
	ctx := context.Background()
	docs := 20000
	if v := os.Getenv("KG_BENCH_DOCS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err)
		docs = n
	}
	st, err := embedded.Open(filepath.Join(b.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, st.Close()) })
	r := rand.New(rand.NewPCG(1, 2))
	const batch = 500
	for i := 0; i < docs; i += batch {
		var chs []store.Change
		for j := i; j < min(i+batch, docs); j++ {
			d := fmt.Sprintf("doc-%d", j)
			chs = append(chs, store.Change{DocID: d, Version: 1, Contributions: randomChangeOf(r, d, docs)})
		}
		_, errs, err := st.ApplyBatch(ctx, "acme", chs)
		require.NoError(b, err)
		for _, e := range errs {
			require.NoError(b, e)
		}
	}
	w := &Worker{st: st, stale: map[string]*stale{}, graphs: map[string]*graphCache{},
		graphReads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reads"}, []string{"read"})}
	// The kept graph's heap: live heap after reading it less live heap
	// before, each after two collections (the second empties sync.Pools,
	// which the store's decoding fills).
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	g, err := w.graphOf(ctx, "acme", true)
	require.NoError(b, err)
	edges := len(g.links)
	g = cgraph{} // what a run is handed, not what is kept
	kept := float64(heap()-before) / float64(edges)
	version := int64(1)
	edit := func() {
		version++
		d := fmt.Sprintf("doc-%d", r.IntN(docs))
		rec, err := st.Source(ctx, "acme", d)
		require.NoError(b, err)
		c := randomChangeOf(r, d, docs)
		prev := slices.Clone(rec.Entities)
		for _, e := range c.Entities {
			prev = append(prev, e.ID)
		}
		res, err := st.Apply(ctx, "acme", d, rec.Version+1, c)
		require.NoError(b, err)
		slices.Sort(prev)
		w.noteChanged(&events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: d, Version: rec.Version + 1,
			Touched: res.Touched, Contributed: slices.Compact(prev)})
	}
	for _, mode := range []string{"patched", "whole"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				edit()
				b.StartTimer()
				_, err := w.graphOf(ctx, "acme", mode == "whole")
				require.NoError(b, err)
			}
			b.ReportMetric(kept, "kept-B/edge")
			b.ReportMetric(float64(edges), "edges")
		})
	}
}
