package query

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
)

// partReads is an embedded store (its EntityParts and EdgesAmong too)
// that records the entities read whole, the edge lists read whole and
// the entities whose edge lists were read by EdgesAmong.
type partReads struct {
	*embedded.Store
	mu                  sync.Mutex
	wholeEnts, amongIDs []string
	wholeEdges          []edgeKey
}

func (w *partReads) Entities(ctx context.Context, tenant string, ids []string) (map[string]store.Entity, error) {
	w.mu.Lock()
	w.wholeEnts = append(w.wholeEnts, ids...)
	w.mu.Unlock()
	return w.Store.Entities(ctx, tenant, ids)
}

func (w *partReads) Edges(ctx context.Context, tenant, id string, dir store.Direction) ([]store.Edge, error) {
	w.mu.Lock()
	w.wholeEdges = append(w.wholeEdges, edgeKey{id, dir})
	w.mu.Unlock()
	return w.Store.Edges(ctx, tenant, id, dir)
}

func (w *partReads) EdgesAmong(ctx context.Context, tenant, id string, dir store.Direction, others []string) ([]store.Edge, error) {
	w.mu.Lock()
	w.amongIDs = append(w.amongIDs, id)
	w.mu.Unlock()
	return w.Store.EdgesAmong(ctx, tenant, id, dir, others)
}

// taken returns what was recorded since the last call.
func (w *partReads) taken() (wholeEnts []string, wholeEdges []edgeKey, among []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wholeEnts, wholeEdges, among = w.wholeEnts, w.wholeEdges, w.amongIDs
	w.wholeEnts, w.wholeEdges, w.amongIDs = nil, nil, nil
	return wholeEnts, wholeEdges, among
}

// partsService is a live service over a partReads store of its own.
func partsService(t *testing.T) (*Service, *partReads) {
	t.Helper()
	db, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	st := &partReads{Store: db}
	a, err := auth.New(nil, nil)
	require.NoError(t, err)
	s, err := New(Config{}, st, a, nil, nil)
	require.NoError(t, err)
	s.cache.setLive(true)
	return s, st
}

// hubDocs applies random versions of documents naming a hub and a few of
// pool (spellings, ranks and descriptions varying; relations and ids
// holding '|' among them), each linked to the hub one way or the other,
// and deletes some.
type hubDocs struct {
	t        *testing.T
	db       *embedded.Store
	rng      *rand.Rand
	versions map[string]int64
}

const hub = "service:hub"

var (
	hubPool = []string{"component:c0", "component:c1", "component:c|x", "component:c1|uses|service:hub", "service:db", "service:q"}
	hubRels = []string{"uses", "a|b", "uses|component:c1", "affected"}
)

// newHubDocs returns hubDocs over db, its randomness seeded with seed,
// having applied documents INC-00 to INC-<n-1>.
func newHubDocs(t *testing.T, db *embedded.Store, seed uint64, n int) *hubDocs {
	h := &hubDocs{t: t, db: db, rng: rand.New(rand.NewPCG(seed, seed+1)), versions: map[string]int64{}}
	for i := range n {
		h.change(fmt.Sprintf("INC-%02d", i))
	}
	return h
}

// change applies (or deletes) a new version of doc and returns what its
// event names, as the resolver names it.
func (h *hubDocs) change(doc string) namedChange {
	t, ctx, rng := h.t, h.t.Context(), h.rng
	t.Helper()
	var named []string
	if rec, err := h.db.Source(ctx, "acme", doc); err == nil {
		named = slices.Clone(rec.Entities)
	}
	h.versions[doc]++
	v := h.versions[doc]
	var res store.ApplyResult
	var err error
	if named != nil && rng.IntN(5) == 0 {
		_, err = h.db.MarkDeleted(ctx, "acme", doc)
		require.NoError(t, err)
		res, err = h.db.Delete(ctx, "acme", doc, v)
		require.NoError(t, err)
	} else {
		_, err = h.db.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: v, ACL: provenance.PublicACL()})
		require.NoError(t, err)
		ents := []store.EntityContribution{{ID: hub, Type: "service", Name: []string{"hub", "Hub", "the hub"}[rng.IntN(3)],
			NameRank: 1 + rng.IntN(2), Description: fmt.Sprintf("%s v%d on the hub", doc, v), TextUnits: []string{"u0"}}}
		var edges []store.EdgeContribution
		for _, j := range rng.Perm(len(hubPool))[:rng.IntN(4)] {
			x := hubPool[j]
			typ, _, _ := strings.Cut(x, ":")
			ents = append(ents, store.EntityContribution{ID: x, Type: typ, Name: fmt.Sprintf("%s %s", x, doc), NameRank: 2,
				Description: fmt.Sprintf("%s v%d", doc, v), TextUnits: []string{"u0"}})
			e := store.EdgeContribution{Source: hub, Relation: hubRels[rng.IntN(len(hubRels))], Target: x, Weight: 1,
				Description: fmt.Sprintf("%s v%d", doc, v), TextUnits: []string{"u0"}}
			if rng.IntN(2) == 0 {
				e.Source, e.Target = x, hub
			}
			edges = append(edges, e)
		}
		slices.SortFunc(ents, func(a, b store.EntityContribution) int { return cmp.Compare(a.ID, b.ID) })
		res, err = h.db.Apply(ctx, "acme", doc, v, store.Contributions{Title: doc, DocType: "postmortem",
			TextUnits: []events.TextUnit{{ID: "u0", Text: "text", End: 4}}, Entities: ents, Edges: edges})
		require.NoError(t, err)
		for _, e := range ents {
			named = append(named, e.ID)
		}
	}
	require.Equal(t, store.Applied, res.Outcome)
	named = append(named, res.Touched...)
	slices.Sort(named)
	return changeOf(doc, slices.Compact(named))
}

// TestReadChangedIsTheEntitiesAsStored: after random runs of changes of
// documents naming a hub and a few other entities (hubDocs), the changed
// entities as readChanged makes them from the index before the run, the
// run's documents' fragments and the heads are the entities as stored,
// and the hub, which every document names, is never read whole; when the
// run's documents are not known, every changed entity is read whole, as
// is the hub when the index is older than the changes given.
func TestReadChangedIsTheEntitiesAsStored(t *testing.T) {
	ctx := t.Context()
	s, st := partsService(t)
	docs := newHubDocs(t, st.Store, 7, 20)
	for round := range 60 {
		all, err := st.EntitiesByType(ctx, "acme", "")
		require.NoError(t, err)
		from := newNameIndex(all, nameWords)
		run := namedChange{docs: map[string][]string{}}
		for range 1 + docs.rng.IntN(3) {
			run = run.then(docs.change(fmt.Sprintf("INC-%02d", docs.rng.IntN(24))))
		}
		st.taken()
		got, err := s.readChanged(ctx, "acme", from, run)
		require.NoError(t, err)
		want, err := st.Store.Entities(ctx, "acme", run.ids)
		require.NoError(t, err)
		require.Equal(t, want, got, "round %d: %v", round, run)
		whole, _, _ := st.taken()
		if _, had := from.entity(hub); had {
			require.NotContains(t, whole, hub, "round %d: the hub is read by its changed fragments", round)
		}

		got, err = s.readChanged(ctx, "acme", from, namedChange{ids: run.ids})
		require.NoError(t, err)
		require.Equal(t, want, got)
		whole, _, _ = st.taken()
		require.Equal(t, run.ids, whole, "documents not known: read whole")
	}

	// An index older than the changes given (a change not followed, a
	// new document naming the hub): the hub's fragments then do not
	// number what its head counts, and it is read whole.
	all, err := st.EntitiesByType(ctx, "acme", "")
	require.NoError(t, err)
	from := newNameIndex(all, nameWords)
	docs.change("INC-new")
	run := docs.change("INC-00")
	got, err := s.readChanged(ctx, "acme", from, run)
	require.NoError(t, err)
	want, err := st.Store.Entities(ctx, "acme", []string{hub})
	require.NoError(t, err)
	require.Equal(t, want[hub], got[hub])
	whole, _, _ := st.taken()
	require.Contains(t, whole, hub)
}

// TestPatchedEdgesAreTheEdgesAsStored: after random runs of changes of
// documents linking a hub and a few other entities (hubDocs), the edge
// lists a set's successors patch for the entities the changes named are
// the lists as stored, in the store's order; no list is read whole again,
// and only those of entities the changes named are patched.
func TestPatchedEdgesAreTheEdgesAsStored(t *testing.T) {
	ctx := t.Context()
	s, st := partsService(t)
	docs := newHubDocs(t, st.Store, 11, 16)
	keys := []edgeKey{{hub, store.Out}, {hub, store.In}, {"service:other", store.Out}}
	for _, x := range hubPool {
		keys = append(keys, edgeKey{x, store.Out}, edgeKey{x, store.In})
	}
	// Every list read once; the set then follows runs of changes.
	g := &graphSet{}
	v := newView(ctx, s, provenance.Caller{Tenant: "acme"})
	for _, k := range keys {
		_, err := v.storedEdges(g, k)
		require.NoError(t, err)
	}
	for round := range 40 {
		run := namedChange{docs: map[string][]string{}}
		for range 1 + docs.rng.IntN(3) {
			ch := docs.change(fmt.Sprintf("INC-%02d", docs.rng.IntN(20)))
			run = run.then(ch)
			next, ok := g.succeed(ch)
			require.True(t, ok)
			g = next
		}
		st.taken()
		for _, k := range keys {
			got, err := v.storedEdges(g, k)
			require.NoError(t, err)
			want, err := st.Store.Edges(ctx, "acme", k.id, k.dir)
			require.NoError(t, err)
			require.Equal(t, want, got, "round %d: edges of %s (%v)", round, k.id, k.dir)
		}
		_, whole, among := st.taken()
		require.Empty(t, whole, "round %d: every list patched, none read whole", round)
		for _, id := range among {
			require.Contains(t, run.ids, id, "round %d: only the lists of the entities the changes named are patched", round)
		}
	}
}

// TestLatePatchOfAnOlderSetIsReadWhole: a request that took the graph
// reads before a change came, and patches their name index after a
// newer set patched its own, reads the changed entities whole: a record
// it made by parts (the fragments of its own changes' documents, the
// others from the index before) would be older than the newer set's,
// numbered later, and taken for the newer one when a fold of it is
// rebased on.
func TestLatePatchOfAnOlderSetIsReadWhole(t *testing.T) {
	ctx := t.Context()
	s, st := partsService(t)
	db := st.Store
	const x, y = "component:x", "component:y"
	apply := func(doc string, v int64, id, desc string) namedChange {
		t.Helper()
		_, err := db.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: v, ACL: provenance.PublicACL()})
		require.NoError(t, err)
		_, err = db.Apply(ctx, "acme", doc, v, store.Contributions{Title: doc, DocType: "postmortem",
			TextUnits: []events.TextUnit{{ID: "u0", Text: "text", End: 4}},
			Entities:  []store.EntityContribution{{ID: id, Type: "component", Name: "n", Description: desc, TextUnits: []string{"u0"}}}})
		require.NoError(t, err)
		return changeOf(doc, []string{id})
	}
	apply("A", 1, x, "A v1")
	apply("B", 1, x, "B v1")
	apply("Z", 1, y, "Z v1")
	current := func() *graphSet {
		t.Helper()
		g, err := s.graphSet(ctx, "acme")
		require.NoError(t, err)
		return g
	}
	_, err := s.nameIndexOf(ctx, "acme", current())
	require.NoError(t, err)
	s.cache.graph.change("acme", apply("A", 2, x, "A v2"))
	g1 := current() // a request takes the set following A's edit
	s.cache.graph.change("acme", apply("B", 2, x, "B v2"))
	g2 := current()
	ix2, err := s.nameIndexOf(ctx, "acme", g2) // a request on the newer set
	require.NoError(t, err)
	ix1, err := s.nameIndexOf(ctx, "acme", g1) // the late request on the older one
	require.NoError(t, err)
	ix1.folds.finish(ix1.fold(), ix1) // its patch made the lineage's fold
	s.cache.graph.change("acme", apply("Z", 2, y, "Z v2"))
	g3 := current()
	require.Same(t, ix2, g3.from)
	ix3, err := s.nameIndexOf(ctx, "acme", g3)
	require.NoError(t, err)
	want, err := db.Entities(ctx, "acme", []string{x})
	require.NoError(t, err)
	got, _ := ix3.entity(x)
	require.Equal(t, want[x], got, "B's fragment as stored")
}
