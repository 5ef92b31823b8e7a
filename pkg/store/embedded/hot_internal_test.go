package embedded

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
)

// hubDoc is document i's contribution: its incident, naming the hub and a
// second hub (their edge gathers a support per document), in a name of the
// hub that changes with the version.
func hubDoc(i int, version int64) store.Contributions {
	inc := fmt.Sprintf("incident:%03d", i)
	u := []string{"u"}
	return store.Contributions{
		TextUnits: []events.TextUnit{{ID: "u", Text: "t"}},
		Entities: []store.EntityContribution{
			{ID: inc, Type: "incident", Name: inc, NameRank: 2, TextUnits: u},
			{ID: "service:hub", Type: "service", Name: fmt.Sprintf("Hub v%d", version), NameRank: 2 + i%3, TextUnits: u,
				Description: fmt.Sprintf("seen by %d at %d", i, version)},
			{ID: "service:hub2", Type: "service", Name: "Hub two", NameRank: 2, TextUnits: u},
		},
		Edges: []store.EdgeContribution{
			{Source: inc, Relation: "affected", Target: "service:hub", Weight: 1, TextUnits: u},
			{Source: "service:hub", Relation: "calls", Target: "service:hub2", Weight: float64(version), TextUnits: u},
		},
	}
}

// TestHotCacheKeepsAppliesExact: a store whose applies read large entities
// and edges from the cache ends, after every step, with the graph of a
// store without it: single applies, batches, a batch rolled back after it
// wrote the hubs, edits and deletions. Then the cache holds the hubs as
// stored.
func TestHotCacheKeepsAppliesExact(t *testing.T) {
	ctx := t.Context()
	open := func(hot bool) *Store {
		s, err := Open(filepath.Join(t.TempDir(), "db"), Options{NoSync: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		if !hot {
			s.hot = nil
		}
		return s
	}
	cached, plain := open(true), open(false)
	same := func(step string) {
		t.Helper()
		a, err := cached.Snapshot(ctx, "acme")
		require.NoError(t, err)
		b, err := plain.Snapshot(ctx, "acme")
		require.NoError(t, err)
		require.Equal(t, b, a, step)
	}
	both := func(f func(s *Store) error) {
		t.Helper()
		require.NoError(t, f(cached))
		require.NoError(t, f(plain))
	}
	for i := range 80 {
		both(func(s *Store) error {
			_, err := s.Apply(ctx, "acme", fmt.Sprintf("d%03d", i), 1, hubDoc(i, 1))
			return err
		})
	}
	same("single applies")
	var batch []store.Change
	for i := 80; i < 150; i++ {
		batch = append(batch, store.Change{DocID: fmt.Sprintf("d%03d", i), Version: 1, Contributions: hubDoc(i, 1)})
	}
	both(func(s *Store) error { _, _, err := s.ApplyBatch(ctx, "acme", batch); return err })
	same("a batch")
	require.Greater(t, len(cached.hot.entities), 0, "the hub is cached")

	// Edits that change the hub, then a change whose type conflicts: the
	// whole batch is rolled back, on both.
	bad := hubDoc(5, 3)
	bad.Entities[1].Type = "team"
	rolled := []store.Change{
		{DocID: "d001", Version: 2, Contributions: hubDoc(1, 2)},
		{DocID: "d002", Version: 2, Contributions: hubDoc(2, 2)},
		{DocID: "d005", Version: 3, Contributions: bad},
	}
	for _, s := range []*Store{cached, plain} {
		_, _, err := s.ApplyBatch(ctx, "acme", rolled)
		require.ErrorIs(t, err, store.ErrInvalid)
	}
	same("a rolled-back batch")
	both(func(s *Store) error { _, err := s.Apply(ctx, "acme", "d003", 2, hubDoc(3, 2)); return err })
	same("an edit after the rollback")
	both(func(s *Store) error { _, _, err := s.ApplyBatch(ctx, "acme", rolled[:2]); return err })
	same("the rolled-back edits applied")
	for i := 0; i < 150; i += 10 {
		both(func(s *Store) error { _, err := s.Delete(ctx, "acme", fmt.Sprintf("d%03d", i), 5); return err })
	}
	same("deletions")
	var dels []store.Change
	for i := 1; i < 150; i += 10 {
		dels = append(dels, store.Change{DocID: fmt.Sprintf("d%03d", i), Version: 5, Delete: true})
	}
	both(func(s *Store) error { _, _, err := s.ApplyBatch(ctx, "acme", dels); return err })
	same("a batch of deletions")

	for _, id := range []string{"service:hub", "service:hub2"} {
		want, err := cached.Entity(ctx, "acme", id)
		require.NoError(t, err)
		got, ok := cached.hot.entity("acme", id)
		require.True(t, ok, id)
		require.Equal(t, want, got, "the cache holds %s as stored", id)
	}
	e, err := cached.Edges(ctx, "acme", "service:hub", store.Out)
	require.NoError(t, err)
	require.Len(t, e, 1)
	got, ok := cached.hot.edge("acme", e[0].ID)
	require.True(t, ok)
	require.Equal(t, e[0], got)

	// A batch leaving the hubs too few fragments to keep drops them from
	// the cache: the next apply reads what is stored, not the hubs of
	// before the batch.
	var most []store.Change
	for i := 10; i < 150; i++ {
		most = append(most, store.Change{DocID: fmt.Sprintf("d%03d", i), Version: 6, Delete: true})
	}
	both(func(s *Store) error { _, _, err := s.ApplyBatch(ctx, "acme", most); return err })
	_, ok = cached.hot.entity("acme", "service:hub")
	require.False(t, ok, "a hub of few fragments is not kept")
	both(func(s *Store) error { _, err := s.Apply(ctx, "acme", "d200", 1, hubDoc(200, 1)); return err })
	same("an apply after the hubs shrank")
}
