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

// memGraph carries out planned writes on maps: the smallest possible
// adapter, to test Plan without any storage.
type memGraph struct {
	records  map[string]store.SourceRecord
	entities map[string]store.Entity
	edges    map[string]store.Edge
}

func newMemGraph() *memGraph {
	return &memGraph{records: map[string]store.SourceRecord{}, entities: map[string]store.Entity{}, edges: map[string]store.Edge{}}
}

func (m *memGraph) change(ch store.Change) (store.ApplyResult, error) {
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
	w, err := store.Plan(ch, old, ents, eds)
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

func (m *memGraph) graph() store.Graph {
	var g store.Graph
	for _, id := range slices.Sorted(maps.Keys(m.entities)) {
		g.Entities = append(g.Entities, m.entities[id])
	}
	for _, id := range slices.Sorted(maps.Keys(m.edges)) {
		g.Edges = append(g.Edges, m.edges[id])
	}
	return g
}

func (m *memGraph) audit() store.AuditReport {
	return store.Audit(m.graph(), slices.Collect(maps.Values(m.records)), nil)
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
	e := store.Entity{ID: "t:a", Type: "t", Name: "A", Sources: []store.Fragment{{DocID: "d", Version: 1, Name: "A"}, {DocID: "x", Version: 1, Name: "A"}}}
	old := &store.SourceRecord{DocID: "d", Version: 1, Entities: []string{"t:a"}}
	in := map[string]store.Entity{"t:a": e}
	want := store.Entity{ID: e.ID, Type: e.Type, Name: e.Name, Sources: slices.Clone(e.Sources)}
	w, err := store.Plan(store.Change{DocID: "d", Version: 2}, old, in, nil)
	require.NoError(t, err)
	require.Equal(t, want, in["t:a"])
	require.Equal(t, []string{"x"}, []string{w.PutEntities[0].Sources[0].DocID})
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
