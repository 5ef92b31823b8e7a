package store_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
)

// memGraph carries out planned writes on maps, in the layout of heads and
// per-document fragments: the smallest possible adapter, to test Plan
// without any storage.
type memGraph struct {
	records  map[string]store.SourceRecord
	entities map[string]store.EntityHead
	edges    map[string]store.EdgeHead
	frags    map[string]map[string]store.Fragment // entity id -> doc id ->
	supports map[string]map[string]store.Fragment // edge id -> doc id ->
	// fragmentReads counts Plan's reads of every fragment of an entity.
	fragmentReads int
}

func newMemGraph() *memGraph {
	return &memGraph{
		records:  map[string]store.SourceRecord{},
		entities: map[string]store.EntityHead{}, edges: map[string]store.EdgeHead{},
		frags: map[string]map[string]store.Fragment{}, supports: map[string]map[string]store.Fragment{},
	}
}

func (m *memGraph) change(ch store.Change) (store.ApplyResult, error) {
	var old *store.SourceRecord
	if r, ok := m.records[ch.DocID]; ok {
		old = &r
	}
	entityIDs, edgeIDs := ch.Reads(old)
	st := store.State{
		Entities: map[string]store.EntityHead{}, Edges: map[string]store.EdgeHead{},
		EntityFragments: map[string]store.Fragment{}, EdgeSupports: map[string]store.Fragment{},
		Fragments: func(id string) ([]store.Fragment, error) {
			m.fragmentReads++
			return slices.Collect(maps.Values(m.frags[id])), nil
		},
	}
	for _, id := range entityIDs {
		if h, ok := m.entities[id]; ok {
			st.Entities[id] = h
		}
		if f, ok := m.frags[id][ch.DocID]; ok {
			st.EntityFragments[id] = f
		}
	}
	for _, id := range edgeIDs {
		if h, ok := m.edges[id]; ok {
			st.Edges[id] = h
		}
		if f, ok := m.supports[id][ch.DocID]; ok {
			st.EdgeSupports[id] = f
		}
	}
	w, err := store.Plan(ch, old, st)
	if err != nil || w.Record == nil {
		return w.Result, err
	}
	for _, e := range w.RemoveEntities {
		delete(m.entities, e.ID)
	}
	for _, e := range w.RemoveEdges {
		delete(m.edges, e.ID)
	}
	for _, id := range w.DeleteFragments {
		delete(m.frags[id], ch.DocID)
	}
	for _, id := range w.DeleteSupports {
		delete(m.supports[id], ch.DocID)
	}
	for _, e := range w.PutEntities {
		m.entities[e.ID] = e
	}
	for _, e := range w.PutEdges {
		m.edges[e.ID] = e
	}
	put := func(into map[string]map[string]store.Fragment, p store.Part) {
		if into[p.ID] == nil {
			into[p.ID] = map[string]store.Fragment{}
		}
		into[p.ID][p.Fragment.DocID] = p.Fragment
	}
	for _, p := range w.PutFragments {
		put(m.frags, p)
	}
	for _, p := range w.PutSupports {
		put(m.supports, p)
	}
	m.records[ch.DocID] = *w.Record
	return w.Result, nil
}

func (m *memGraph) graph() store.Graph {
	var g store.Graph
	for _, id := range slices.Sorted(maps.Keys(m.entities)) {
		g.Entities = append(g.Entities, store.AssembleEntity(m.entities[id], slices.Collect(maps.Values(m.frags[id]))))
	}
	for _, id := range slices.Sorted(maps.Keys(m.edges)) {
		g.Edges = append(g.Edges, store.AssembleEdge(m.edges[id], slices.Collect(maps.Values(m.supports[id]))))
	}
	return g
}

// audit audits the assembled graph, and every head against its fragments;
// no fragment may outlive its head.
func (m *memGraph) audit() store.AuditReport {
	rep := store.Audit(m.graph(), slices.Collect(maps.Values(m.records)), nil)
	for id, h := range m.entities {
		if p := store.CheckEntityHead(h, slices.Collect(maps.Values(m.frags[id]))); p != "" {
			rep.AddIndexMismatch("%s", p)
		}
	}
	for id, h := range m.edges {
		if p := store.CheckEdgeHead(h, slices.Collect(maps.Values(m.supports[id]))); p != "" {
			rep.AddIndexMismatch("%s", p)
		}
	}
	for id, fs := range m.frags {
		if _, ok := m.entities[id]; !ok && len(fs) > 0 {
			rep.AddIndexMismatch("entity %q: %d fragments without a head", id, len(fs))
		}
	}
	for id, fs := range m.supports {
		if _, ok := m.edges[id]; !ok && len(fs) > 0 {
			rep.AddIndexMismatch("edge %q: %d supports without a head", id, len(fs))
		}
	}
	return rep
}

// wholeGraph is memGraph in the layout before heads, planned by the
// reference planner (store.PlanWhole).
type wholeGraph struct {
	records  map[string]store.SourceRecord
	entities map[string]store.Entity
	edges    map[string]store.Edge
}

func newWholeGraph() *wholeGraph {
	return &wholeGraph{records: map[string]store.SourceRecord{}, entities: map[string]store.Entity{}, edges: map[string]store.Edge{}}
}

func (m *wholeGraph) change(ch store.Change) (store.ApplyResult, error) {
	var old *store.SourceRecord
	if r, ok := m.records[ch.DocID]; ok {
		old = &r
	}
	entityIDs, edgeIDs := ch.Reads(old)
	ents, eds := map[string]store.Entity{}, map[string]store.Edge{}
	for _, id := range entityIDs {
		if e, ok := m.entities[id]; ok {
			ents[id] = e
		}
	}
	for _, id := range edgeIDs {
		if e, ok := m.edges[id]; ok {
			eds[id] = e
		}
	}
	w, err := store.PlanWhole(ch, old, ents, eds)
	if err != nil || w.Record == nil {
		return w.Result, err
	}
	for _, e := range w.RemoveEntities {
		delete(m.entities, e.ID)
	}
	for _, e := range w.RemoveEdges {
		delete(m.edges, e.ID)
	}
	for _, e := range w.PutEntities {
		m.entities[e.ID] = e
	}
	for _, e := range w.PutEdges {
		m.edges[e.ID] = e
	}
	m.records[ch.DocID] = *w.Record
	return w.Result, nil
}

func (m *wholeGraph) graph() store.Graph {
	var g store.Graph
	for _, id := range slices.Sorted(maps.Keys(m.entities)) {
		g.Entities = append(g.Entities, m.entities[id])
	}
	for _, id := range slices.Sorted(maps.Keys(m.edges)) {
		g.Edges = append(g.Edges, m.edges[id])
	}
	return g
}

// randomContributions draws a document version over a small universe of
// entities, so documents overlap a lot. Names depend only on entity and rank,
// which makes the final state independent of the order of application.
func randomContributions(r *rand.Rand) store.Contributions {
	var c store.Contributions
	units := r.IntN(3)
	for i := range units {
		c.TextUnits = append(c.TextUnits, events.TextUnit{ID: fmt.Sprintf("u%d", i)})
	}
	unit := func() []string {
		if units == 0 {
			return nil
		}
		return []string{fmt.Sprintf("u%d", r.IntN(units))}
	}
	for range r.IntN(6) {
		n, rank := r.IntN(8), r.IntN(3)
		c.Entities = append(c.Entities, store.EntityContribution{
			ID: fmt.Sprintf("t:e%d", n), Type: "t", Name: fmt.Sprintf("E%d/%d", n, rank), NameRank: rank,
			Description: fmt.Sprintf("d%d", r.IntN(2)), TextUnits: unit(),
		})
	}
	for range r.IntN(6) {
		if len(c.Entities) == 0 {
			break
		}
		a, b := c.Entities[r.IntN(len(c.Entities))], c.Entities[r.IntN(len(c.Entities))]
		c.Edges = append(c.Edges, store.EdgeContribution{Source: a.ID, Relation: []string{"x", "y"}[r.IntN(2)], Target: b.ID,
			Weight: float64(r.IntN(3)), TextUnits: unit()})
	}
	return c
}

// TestPlanRandom runs random applies and deletes of overlapping documents:
// after every step the graph audits clean, and the final graph equals the one
// obtained by applying only each document's final version.
func TestPlanRandom(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		m := newMemGraph()
		final := map[string]store.Change{}
		for step := range 60 {
			doc := fmt.Sprintf("doc%d", r.IntN(5))
			ch := store.Change{DocID: doc, Version: int64(r.IntN(10) + 1), Delete: r.IntN(6) == 0, Now: now}
			if !ch.Delete {
				ch.Contributions = randomContributions(r)
			}
			res, err := m.change(ch)
			require.NoError(t, err)
			if res.Outcome == store.Applied {
				final[doc] = ch
			}
			rep := m.audit()
			require.Zero(t, rep.OrphanEdges+rep.OrphanEntities+rep.IndexMismatches, "seed %d step %d: %v", seed, step, rep.Problems)
		}
		replay := newMemGraph()
		for _, doc := range slices.Sorted(maps.Keys(final)) {
			_, err := replay.change(final[doc])
			require.NoError(t, err)
		}
		require.Equal(t, replay.graph(), m.graph(), "seed %d: the final state depends only on the final versions", seed)
		require.Equal(t, replay.records, m.records)
	}
}

func TestOutcome(t *testing.T) {
	live := &store.SourceRecord{Version: 5}
	dead := &store.SourceRecord{Version: 5, Deleted: true}
	for _, tc := range []struct {
		old     *store.SourceRecord
		version int64
		delete  bool
		want    store.Outcome
	}{
		{nil, 1, false, store.Applied},
		{nil, 1, true, store.Applied},
		{live, 4, false, store.Stale},
		{live, 5, false, store.Duplicate},
		{live, 6, false, store.Applied},
		{live, 4, true, store.Stale},
		{live, 5, true, store.Applied}, // the deletion wins the tie
		{dead, 5, false, store.Stale},
		{dead, 6, false, store.Applied},
		{dead, 5, true, store.Duplicate},
		{dead, 4, true, store.Stale},
		{dead, 6, true, store.Applied},
	} {
		got := store.Change{DocID: "d", Version: tc.version, Delete: tc.delete}.Outcome(tc.old)
		require.Equal(t, tc.want, got, "%+v version %d delete %v", tc.old, tc.version, tc.delete)
	}
}

func TestPlanDoesNotModifyInputs(t *testing.T) {
	h := store.EntityHead{ID: "t:a", Type: "t", Name: "A", Names: []store.NameVote{{Name: "A", Count: 2, First: "d"}}}
	old := &store.SourceRecord{DocID: "d", Version: 1, Entities: []string{"t:a"}}
	st := store.State{
		Entities:        map[string]store.EntityHead{"t:a": h},
		EntityFragments: map[string]store.Fragment{"t:a": {DocID: "d", Version: 1, Name: "A"}},
	}
	w, err := store.Plan(store.Change{DocID: "d", Version: 2}, old, st)
	require.NoError(t, err)
	require.Equal(t, []store.NameVote{{Name: "A", Count: 2, First: "d"}}, st.Entities["t:a"].Names)
	require.Equal(t, []store.NameVote{{Name: "A", Count: 1}}, w.PutEntities[0].Names)
	require.Equal(t, []string{"t:a"}, w.DeleteFragments)
}

func TestContributionsValidate(t *testing.T) {
	ok := store.Contributions{
		TextUnits: []events.TextUnit{{ID: "u"}},
		Entities:  []store.EntityContribution{{ID: "t:a", Type: "t", Name: "A", TextUnits: []string{"u"}}},
		Edges:     []store.EdgeContribution{{Source: "t:a", Relation: "r", Target: "t:a"}},
	}
	require.NoError(t, ok.Validate())
	long := ok
	long.Entities = []store.EntityContribution{{ID: string(make([]byte, store.MaxEntityIDLen+1)), Type: "t", Name: "A"}}
	err := long.Validate()
	require.True(t, errors.Is(err, store.ErrInvalid), "%v", err)
}

// variedContributions draws a document version whose entities change type
// and spelling from one document to the next, and whose edges sometimes
// spell one id with other endpoints: what the display name, the type
// change and the edge id rules of Plan are about.
func variedContributions(r *rand.Rand) store.Contributions {
	var c store.Contributions
	ids := []string{"t:a", "t:b", "t:c", "t:p", "t:p|x", "t:q"}
	types := map[string]string{}
	for range r.IntN(6) {
		id := ids[r.IntN(len(ids))]
		typ, ok := types[id]
		if !ok {
			typ = []string{"t", "t", "t", "u"}[r.IntN(4)]
			types[id] = typ
		}
		c.Entities = append(c.Entities, store.EntityContribution{
			ID: id, Type: typ, Name: []string{"Alpha", "alpha", "ALPHA", "Beta"}[r.IntN(4)], NameRank: r.IntN(3),
			Description: fmt.Sprintf("d%d", r.IntN(2)),
		})
	}
	for range r.IntN(5) {
		if len(c.Entities) == 0 {
			break
		}
		a, b := c.Entities[r.IntN(len(c.Entities))], c.Entities[r.IntN(len(c.Entities))]
		c.Edges = append(c.Edges, store.EdgeContribution{Source: a.ID, Relation: []string{"x", "y", "x|y"}[r.IntN(3)], Target: b.ID,
			Weight: float64(r.IntN(3))})
	}
	if r.IntN(3) > 0 { // an edge most documents state: more supports than a head holds
		c.Entities = append(c.Entities, store.EntityContribution{ID: "h:hub", Type: "h", Name: "Hub"},
			store.EntityContribution{ID: "h:spoke", Type: "h", Name: "Spoke"})
		c.Edges = append(c.Edges, store.EdgeContribution{Source: "h:hub", Relation: "x", Target: "h:spoke",
			Weight: float64(r.IntN(3)), Description: fmt.Sprintf("d%d", r.IntN(2))})
	}
	return c
}

// TestPlanMatchesWholePlanner applies the same random changes to the
// layout of heads and fragments (Plan) and to whole entities and edges
// (the reference planner of the layout before): every result, error and
// assembled graph must be the same.
func TestPlanMatchesWholePlanner(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	steps, reads, spilled := 0, 0, 0
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 2))
		heads, whole := newMemGraph(), newWholeGraph()
		for step := range 80 {
			ch := store.Change{DocID: fmt.Sprintf("doc%d", r.IntN(7)), Version: int64(r.IntN(12) + 1), Delete: r.IntN(8) == 0, Now: now}
			if !ch.Delete {
				if r.IntN(2) == 0 {
					ch.Contributions = variedContributions(r)
				} else {
					ch.Contributions = randomContributions(r)
				}
				ch.Contributions.Resolution = int64(r.IntN(2))
			}
			got, gotErr := heads.change(ch)
			want, wantErr := whole.change(ch)
			require.Equal(t, wantErr == nil, gotErr == nil, "seed %d step %d: errors %v and %v", seed, step, gotErr, wantErr)
			require.Equal(t, want, got, "seed %d step %d", seed, step)
			require.Equal(t, whole.graph(), heads.graph(), "seed %d step %d", seed, step)
			require.Equal(t, whole.records, heads.records, "seed %d step %d", seed, step)
			rep := heads.audit()
			require.Zero(t, rep.OrphanEdges+rep.OrphanEntities+rep.IndexMismatches, "seed %d step %d: %v", seed, step, rep.Problems)
			steps++
			for _, h := range heads.edges {
				spilled += b2i(h.Spilled)
			}
		}
		reads += heads.fragmentReads
	}
	t.Logf("%d changes read every fragment of an entity %d times; %d edge heads after a change had spilled their supports", steps, reads, spilled)
	require.Positive(t, reads, "no change needed a tie's lowest doc id")
	require.Positive(t, spilled, "no edge had more supports than its head holds")
}

// TestPlanReadsOwnFragments: edits and deletions of documents naming a
// hub, the lowest doc id among them included, never read the hub's other
// fragments.
func TestPlanReadsOwnFragments(t *testing.T) {
	m := newMemGraph()
	hub := func(name string) store.Contributions {
		return store.Contributions{Entities: []store.EntityContribution{{ID: "t:hub", Type: "t", Name: name, NameRank: 2}}}
	}
	for i := range 100 {
		_, err := m.change(store.Change{DocID: fmt.Sprintf("doc%03d", i), Version: 1, Contributions: hub("Hub")})
		require.NoError(t, err)
	}
	_, err := m.change(store.Change{DocID: "doc999", Version: 1, Contributions: hub("HUB")})
	require.NoError(t, err)
	for v := range int64(3) {
		_, err := m.change(store.Change{DocID: "doc000", Version: 2 + v, Contributions: hub("Hub")})
		require.NoError(t, err)
	}
	_, err = m.change(store.Change{DocID: "doc000", Version: 9, Delete: true})
	require.NoError(t, err)
	require.Zero(t, m.fragmentReads)
	require.Equal(t, []store.NameVote{{Rank: 2, Name: "HUB", Count: 1, First: "doc999"}, {Rank: 2, Name: "Hub", Count: 99}}, m.entities["t:hub"].Names)
	require.Equal(t, "Hub", m.entities["t:hub"].Name)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
