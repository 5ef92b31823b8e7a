package query

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/store"
)

// nameModel is the model of TestPatchedNameIndexIsRebuilt: the entities
// as stored, changed at random.
type nameModel struct {
	rng   *rand.Rand
	state map[string]store.Entity
	ids   []string
}

var modelWords = []string{"cert", "manager", "certmanager", "ledger", "payments", "gateway", "gatway", "disk", "full",
	"kafka", "broker", "brokers", "redis", "cluster", "clusters", "api", "db", "postgres", "postgre", "dns"}

func newNameModel(seed uint64) *nameModel {
	m := &nameModel{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), state: map[string]store.Entity{}}
	for _, typ := range []string{"component", "service", "incident"} {
		for i := range 20 {
			m.ids = append(m.ids, fmt.Sprintf("%s:%s%d", typ, modelWords[i%len(modelWords)], i%7))
		}
	}
	slices.Sort(m.ids)
	m.ids = slices.Compact(m.ids)
	return m
}

func (m *nameModel) name() string {
	n := 1 + m.rng.IntN(3)
	ws := make([]string, n)
	for i := range ws {
		ws[i] = modelWords[m.rng.IntN(len(modelWords))]
	}
	if m.rng.IntN(3) == 0 {
		return slices.Concat(ws, []string{"Service"})[0] + " " + ws[n-1]
	}
	s := ws[0]
	for _, w := range ws[1:] {
		s += " " + w
	}
	return s
}

// entity is a random record for id: names, fragments of a few documents,
// text units shared with other entities.
func (m *nameModel) entity(id string) store.Entity {
	typ, _, _ := cutID(id)
	e := store.Entity{ID: id, Type: typ, Name: m.name()}
	for d := range 4 {
		if m.rng.IntN(2) == 0 {
			continue
		}
		f := store.Fragment{DocID: fmt.Sprintf("doc-%d", d), Version: 1}
		if m.rng.IntN(2) == 0 {
			f.Name = m.name()
		}
		for range m.rng.IntN(3) {
			f.TextUnits = append(f.TextUnits, fmt.Sprintf("u%d", m.rng.IntN(4)))
		}
		e.Sources = append(e.Sources, f)
	}
	return e
}

// recite is e as one document changed: one fragment re-cited, dropped or
// added (names kept but for the added one's), sorted by document.
func (m *nameModel) recite(e store.Entity) store.Entity {
	e.Sources = slices.Clone(e.Sources)
	doc := fmt.Sprintf("doc-%d", m.rng.IntN(5))
	i := slices.IndexFunc(e.Sources, func(f store.Fragment) bool { return f.DocID == doc })
	switch {
	case i >= 0 && m.rng.IntN(2) == 0:
		e.Sources = slices.Delete(e.Sources, i, i+1)
	case i >= 0:
		f := e.Sources[i]
		f.Version++
		f.TextUnits = nil
		for range m.rng.IntN(3) {
			f.TextUnits = append(f.TextUnits, fmt.Sprintf("u%d", m.rng.IntN(4)))
		}
		e.Sources[i] = f
	default:
		f := store.Fragment{DocID: doc, Version: 1, TextUnits: []string{fmt.Sprintf("u%d", m.rng.IntN(4))}}
		if m.rng.IntN(3) == 0 {
			f.Name = m.name()
		}
		e.Sources = append(e.Sources, f)
		slices.SortFunc(e.Sources, func(a, b store.Fragment) int { return cmpString(a.DocID, b.DocID) })
	}
	return e
}

// change changes a few entities at random (added, renamed, re-cited or
// removed) and returns their ids, sorted.
func (m *nameModel) change() []string {
	var ids []string
	for range 1 + m.rng.IntN(6) {
		id := m.ids[m.rng.IntN(len(m.ids))]
		e, ok := m.state[id]
		switch r := m.rng.IntN(6); {
		case ok && r < 2:
			delete(m.state, id)
		case ok && r < 4:
			m.state[id] = m.recite(e)
		default:
			m.state[id] = m.entity(id)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// read is what a patch reads of ids now, numbered seq.
func (m *nameModel) read(ids []string, seq uint64) []nameChange {
	out := make([]nameChange, len(ids))
	for i, id := range ids {
		e, ok := m.state[id]
		out[i] = nameChange{id: id, e: e, found: ok, seq: seq}
	}
	return out
}

func (m *nameModel) rebuilt() *nameIndex {
	es := slices.Collect(maps.Values(m.state))
	slices.SortFunc(es, func(a, b store.Entity) int { return cmpString(a.ID, b.ID) })
	return newNameIndex(es, nameWords)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// patch is Service.patchNames on the model: from (rebased on the
// lineage's last fold) patched for ids as they are now.
func (m *nameModel) patch(from *nameIndex, ids []string) *nameIndex {
	seq := from.folds.next.Add(1)
	return from.rebased(nameWords).patched(m.read(ids, seq), seq, nameWords)
}

// requireSameIndex fails unless every lookup of got answers what want
// (an index built from every entity) answers: the same ids in the same
// order, for every key either has and for every entity id.
func requireSameIndex(t *testing.T, want, got *nameIndex, ids []string, step int) {
	t.Helper()
	for kind := range nKinds {
		keys := map[string]bool{}
		for k := range want.base.lists[kind] {
			keys[k] = true
		}
		for k := range got.base.lists[kind] {
			keys[k] = true
		}
		if got.over != nil {
			for k := range got.over.lists[kind] {
				keys[k] = true
			}
		}
		for k := range keys {
			w, g := want.list(kind, k), got.list(kind, k)
			if len(w) == 0 && len(g) == 0 {
				continue
			}
			require.Equal(t, w, g, "step %d: kind %d key %q", step, kind, k)
			require.Equal(t, w, got.list(kind, k), "step %d: kind %d key %q asked again", step, kind, k)
		}
	}
	for _, id := range ids {
		we, wok := want.entity(id)
		ge, gok := got.entity(id)
		require.Equal(t, wok, gok, "step %d: %s", step, id)
		require.Equal(t, we, ge, "step %d: %s", step, id)
	}
	require.Equal(t, want.closeCandidates([]string{"gateway", "brokers", "cert"}), got.closeCandidates([]string{"gateway", "brokers", "cert"}), "step %d", step)
}

// TestPatchedNameIndexIsRebuilt: a name index patched for random
// sequences of added, changed and removed entities answers every lookup
// (keys, words, deletions, units, types, entities by id) exactly as an
// index built from every entity would, while the changes accumulate
// between patches (events with no request between them), while sibling
// patches (a set dropped by an event while it patched) fold their
// overlays in the lineage, and across folds taken and adopted late (the
// background fold of an older patch, rebased on).
func TestPatchedNameIndexIsRebuilt(t *testing.T) {
	for seed := range uint64(25) {
		m := newNameModel(seed)
		for range 30 {
			m.change()
		}
		ix := m.rebuilt()
		var pending []string
		var folding *nameIndex // a patch whose fold is under way
		for step := range 200 {
			pending = unionSorted(pending, m.change())
			switch r := m.rng.IntN(10); {
			case r < 3:
				continue // another event before any request
			case r == 3 && len(pending) > 1:
				// A sibling: a set patched for part of the changes, then
				// dropped; its fold may still land in the lineage.
				sib := m.patch(ix, pending[:len(pending)/2])
				if folding == nil && sib.folds.start() {
					folding = sib
				}
				continue
			}
			next := m.patch(ix, pending)
			pending = nil
			if folding == nil && m.rng.IntN(4) == 0 && next.folds.start() {
				folding = next
			}
			if folding != nil && m.rng.IntN(3) == 0 {
				folding.folds.finish(folding.fold(), folding)
				folding = nil
			}
			requireSameIndex(t, m.rebuilt(), next, m.ids, step)
			ix = next
			if m.rng.IntN(20) == 0 {
				folded := ix.fold()
				requireSameIndex(t, m.rebuilt(), folded, m.ids, step)
				ix = folded
			}
		}
	}
}

// TestGraphSetSucceeds: the set that follows a graph change keeps the name
// index to patch and the entities changed since it was made, across
// changes with no request between them; a set with no name index, or
// with more changes pending than a build costs, has none to follow it.
func TestGraphSetSucceeds(t *testing.T) {
	ix := newNameIndex([]store.Entity{{ID: "component:api", Type: "component", Name: "api"}}, nameWords)
	g := &graphSet{names: ix}
	next, ok := g.succeed(changeOf("d2", []string{"component:b"}))
	require.True(t, ok)
	require.Same(t, ix, next.from)
	require.Equal(t, changeOf("d2", []string{"component:b"}), next.pending)
	require.True(t, next.nameIndexBuilt(), "a reload past its age builds the index the set was to patch")
	again, ok := next.succeed(changeOf("d1", []string{"component:a", "component:b"}))
	require.True(t, ok)
	require.Same(t, ix, again.from)
	require.Equal(t, namedChange{ids: []string{"component:a", "component:b"}, docs: map[string][]string{"d1": {"component:a", "component:b"}, "d2": {"component:b"}}}, again.pending,
		"the entities and the documents of both changes")
	_, ok = (&graphSet{}).succeed(changeOf("d1", []string{"component:a"}))
	require.False(t, ok, "no name index: dropped")
	// While a request makes the index of the set, the next set waits for
	// it and patches it for its own change only.
	making := &graphSet{from: ix, pending: changeOf("d2", []string{"component:b"}), making: true}
	next, ok = making.succeed(changeOf("d3", []string{"component:c"}))
	require.True(t, ok)
	require.Same(t, making, next.prev)
	require.Equal(t, changeOf("d3", []string{"component:c"}), next.recent)
	require.Equal(t, namedChange{ids: []string{"component:b", "component:c"}, docs: map[string][]string{"d2": {"component:b"}, "d3": {"component:c"}}}, next.pending)
	next, ok = (&graphSet{making: true}).succeed(changeOf("d3", []string{"component:c"}))
	require.True(t, ok, "a build under way is followed too")
	require.Nil(t, next.from)
	require.True(t, next.nameIndexBuilt())
	many := make([]string, minPatchBound+1)
	for i := range many {
		many[i] = fmt.Sprintf("component:e%04d", i)
	}
	_, ok = g.succeed(changeOf("d9", many))
	require.False(t, ok, "more changes than a build costs: dropped")
}

// BenchmarkPatchSharedKeys patches a name index of 100,000 entities with
// new entities that all share a type, a name word and a text unit (one
// document naming many components): the cost of the keys they share.
func BenchmarkPatchSharedKeys(b *testing.B) {
	const base = 100_000
	es := make([]store.Entity, base)
	for i := range es {
		id := fmt.Sprintf("service:svc%06d", i)
		es[i] = store.Entity{ID: id, Type: "service", Name: fmt.Sprintf("svc%06d", i),
			Sources: []store.Fragment{{DocID: fmt.Sprintf("doc-%d", i/10), Name: fmt.Sprintf("svc%06d", i), TextUnits: []string{"u0"}}}}
	}
	ix := newNameIndex(es, nameWords)
	for _, n := range []int{2_000, 8_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			changes := make([]nameChange, n)
			for i := range changes {
				id := fmt.Sprintf("component:relay%06d", i)
				changes[i] = nameChange{id: id, found: true, seq: 1, e: store.Entity{ID: id, Type: "component", Name: fmt.Sprintf("relay %06d", i),
					Sources: []store.Fragment{{DocID: "big-doc", Name: fmt.Sprintf("relay %06d", i), TextUnits: []string{"u0"}}}}}
			}
			for b.Loop() {
				ix.patched(changes, 1, nameWords)
			}
		})
	}
}

// TestRecentNamesServesTheLastBackgroundPatch: a request uses the index a
// set was to be patched from only while the background patched the
// tenant's index less than namesStaleFor ago; the set's own index when it
// has one; nothing when there is neither (the request makes it).
func TestRecentNamesServesTheLastBackgroundPatch(t *testing.T) {
	s := &Service{}
	from := &nameIndex{}
	g := &graphSet{from: from, pending: namedChange{ids: []string{"service:a"}}}
	recent := func(tenant string, g *graphSet) *nameIndex {
		ix, _ := s.recentNames(tenant, g)
		return ix
	}
	require.Nil(t, recent("acme", g), "no background patch yet")
	s.namesKept.Store("acme", time.Now().Add(-2*namesStaleFor))
	require.Nil(t, recent("acme", g), "the last background patch is too old")
	s.namesKept.Store("acme", time.Now())
	ix, pending := s.recentNames("acme", g)
	require.Same(t, from, ix)
	require.Equal(t, []string{"service:a"}, pending, "what changed since")
	require.Nil(t, recent("globex", g), "another tenant's background patch")
	own := &nameIndex{}
	g.names = own
	ix, pending = s.recentNames("acme", g)
	require.Same(t, own, ix)
	require.Empty(t, pending, "the set's own index is exact")
	require.Nil(t, recent("acme", &graphSet{}), "neither: the request makes it")
}
