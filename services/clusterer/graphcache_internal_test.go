package clusterer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
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
func randomChange(r *rand.Rand, doc string) store.Contributions {
	c := store.Contributions{Title: doc, TextUnits: []events.TextUnit{{ID: doc + "-u1", Text: "text"}}}
	if r.IntN(10) == 0 {
		return c // a version without entities
	}
	var ids []string
	for range 1 + r.IntN(6) {
		n := r.IntN(300)
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

	// A run that failed drops the kept graph: the next reads whole.
	w.graphs[tenant].entities["service:ghost"] = store.Entity{ID: "service:ghost"}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	change("doc-0")
	_, err = w.graphOf(cancelled, tenant, false)
	require.Error(t, err)
	require.Nil(t, w.graphs[tenant])
	check(62)
}
