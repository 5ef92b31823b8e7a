package query

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
)

// wholeReads is an embedded store (its EntityParts too) that records
// which entities were read whole.
type wholeReads struct {
	*embedded.Store
	mu    sync.Mutex
	whole []string
}

func (w *wholeReads) Entities(ctx context.Context, tenant string, ids []string) (map[string]store.Entity, error) {
	w.mu.Lock()
	w.whole = append(w.whole, ids...)
	w.mu.Unlock()
	return w.Store.Entities(ctx, tenant, ids)
}

func (w *wholeReads) taken() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.whole
	w.whole = nil
	return out
}

// TestReadChangedIsTheEntitiesAsStored: after random runs of applies,
// edits and deletions of documents naming a hub and a few other
// entities (spellings, ranks and descriptions varying), the changed
// entities as readChanged makes them from the index before the run, the
// run's documents' fragments and the heads are the entities as stored,
// and the hub, which every document names, is never read whole; when the
// run's documents are not known, every changed entity is read whole, as
// is the hub when the index is older than the changes given.
func TestReadChangedIsTheEntitiesAsStored(t *testing.T) {
	ctx := t.Context()
	db, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	st := &wholeReads{Store: db}
	a, err := auth.New(nil, nil)
	require.NoError(t, err)
	s, err := New(Config{}, st, a, nil, nil)
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(7, 10))
	const hub = "component:hub"
	versions := map[string]int64{}
	// change applies (or deletes) doc and returns what its event names.
	change := func(doc string) namedChange {
		t.Helper()
		var named []string
		if rec, err := db.Source(ctx, "acme", doc); err == nil {
			named = slices.Clone(rec.Entities)
		}
		versions[doc]++
		v := versions[doc]
		var res store.ApplyResult
		if named != nil && rng.IntN(5) == 0 {
			_, err = db.MarkDeleted(ctx, "acme", doc)
			require.NoError(t, err)
			res, err = db.Delete(ctx, "acme", doc, v)
			require.NoError(t, err)
		} else {
			_, err = db.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: v, ACL: provenance.PublicACL()})
			require.NoError(t, err)
			units := []events.TextUnit{{ID: "u0", Text: "text", End: 4}}
			ents := []store.EntityContribution{{ID: hub, Type: "component", Name: []string{"hub", "Hub", "the hub"}[rng.IntN(3)],
				NameRank: 1 + rng.IntN(2), Description: fmt.Sprintf("%s v%d on the hub", doc, v), TextUnits: []string{"u0"}}}
			for _, k := range rng.Perm(6)[:rng.IntN(4)] {
				ents = append(ents, store.EntityContribution{ID: fmt.Sprintf("component:c%d", k), Type: "component",
					Name: fmt.Sprintf("c%d %s", k, doc), NameRank: 2, Description: fmt.Sprintf("%s v%d", doc, v), TextUnits: []string{"u0"}})
			}
			slices.SortFunc(ents, func(a, b store.EntityContribution) int { return cmp.Compare(a.ID, b.ID) })
			res, err = db.Apply(ctx, "acme", doc, v, store.Contributions{Title: doc, DocType: "postmortem", TextUnits: units, Entities: ents})
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
	for i := range 20 {
		change(fmt.Sprintf("INC-%02d", i))
	}
	for round := range 60 {
		all, err := db.EntitiesByType(ctx, "acme", "")
		require.NoError(t, err)
		from := newNameIndex(all, nameWords)
		run := namedChange{docs: map[string][]string{}}
		for range 1 + rng.IntN(3) {
			run = run.then(change(fmt.Sprintf("INC-%02d", rng.IntN(24))))
		}
		st.taken()
		got, err := s.readChanged(ctx, "acme", from, run)
		require.NoError(t, err)
		want, err := db.Entities(ctx, "acme", run.ids)
		require.NoError(t, err)
		require.Equal(t, want, got, "round %d: %v", round, run)
		_, had := from.entity(hub)
		if had {
			require.NotContains(t, st.taken(), hub, "round %d: the hub is read by its changed fragments", round)
		}

		unknown := namedChange{ids: run.ids}
		got, err = s.readChanged(ctx, "acme", from, unknown)
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Equal(t, run.ids, st.taken(), "documents not known: read whole")
	}

	// An index older than the changes given (a change not followed, a
	// new document naming the hub): the hub's fragments then do not
	// number what its head counts, and it is read whole.
	all, err := db.EntitiesByType(ctx, "acme", "")
	require.NoError(t, err)
	from := newNameIndex(all, nameWords)
	change("INC-new")
	run := change("INC-00")
	got, err := s.readChanged(ctx, "acme", from, run)
	require.NoError(t, err)
	want, err := db.Entities(ctx, "acme", []string{hub})
	require.NoError(t, err)
	require.Equal(t, want[hub], got[hub])
	require.Contains(t, st.taken(), hub)
}
