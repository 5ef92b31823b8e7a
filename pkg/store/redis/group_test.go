package redis_test

import (
	"crypto/rand"
	"slices"
	"testing"

	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/redis"
)

// groupContrib is a document naming the shared entity and one of its own,
// with an edge between them.
func groupContrib(own string) store.Contributions {
	return store.Contributions{
		Entities: []store.EntityContribution{{ID: "t:shared", Type: "t", Name: "shared"}, {ID: "t:" + own, Type: "t", Name: own}},
		Edges:    []store.EdgeContribution{{Source: "t:" + own, Relation: "uses", Target: "t:shared", Weight: 1}},
	}
}

// TestBatchGroupYieldsToConcurrentWriters: a batch whose group transaction
// another writer keeps aborting (it changes the shared entity between the
// group's read and its EXEC) is applied one change at a time after the
// group's last attempt, with the results the changes alone give, and
// nothing of another writer's changes lost.
func TestBatchGroupYieldsToConcurrentWriters(t *testing.T) {
	ctx := t.Context()
	prefix := "kgtest-" + rand.Text()[:12]
	t.Cleanup(func() { deleteKeys(t, prefix) })
	other := redis.New(newClient(t), prefix)
	var attempts []int
	interfere := 3 // the group's attempts
	s := redis.New(newClient(t), prefix, redis.WithBeforeWrite(func(attempt int) {
		attempts = append(attempts, attempt)
		if len(attempts) > interfere {
			return
		}
		doc := []string{"x1", "x2", "x3"}[len(attempts)-1]
		if _, err := other.Apply(ctx, "acme", doc, 1, groupContrib(doc)); err != nil {
			t.Error(err)
		}
	}))
	changes := []store.Change{
		{DocID: "a", Version: 1, Contributions: groupContrib("a")},
		{DocID: "b", Version: 1, Contributions: groupContrib("b")},
		{DocID: "c", Version: 1, Contributions: groupContrib("c")},
	}
	results, errs, err := s.ApplyBatch(ctx, "acme", changes)
	if err != nil {
		t.Fatal(err)
	}
	// Three group attempts, then one per change (each on its first).
	if want := []int{1, 2, 3, 1, 1, 1}; !slices.Equal(attempts, want) {
		t.Fatalf("attempts %v, want %v", attempts, want)
	}
	for i, r := range results {
		if errs[i] != nil || r.Outcome != store.Applied || r.EntitiesAdded != 1 || r.EdgesAdded != 1 {
			t.Fatalf("change %d: %+v, %v; want applied, one entity and one edge added", i, r, errs[i])
		}
	}
	edges, err := s.Edges(ctx, "acme", "t:shared", store.In)
	if err != nil {
		t.Fatal(err)
	}
	if len(edges) != 6 {
		t.Fatalf("%d edges into the shared entity, want 6 (3 of the batch, 3 of the other writer)", len(edges))
	}
	rep, err := s.Audit(ctx, "acme")
	if err != nil || rep.OrphanEdges+rep.OrphanEntities+rep.IndexMismatches > 0 || rep.Entities != 7 || rep.Edges != 6 {
		t.Fatalf("audit: %+v, %v", rep, err)
	}
}

// TestNoWatchOutlivesAGroup: a group writing nothing (every change a
// duplicate) releases its watches, so another writer's later change of
// those records does not abort the next group on that connection.
func TestNoWatchOutlivesAGroup(t *testing.T) {
	ctx := t.Context()
	s, other, attempts := onePooledConnection(t)
	batch := func(docs ...string) []store.Change {
		var out []store.Change
		for _, d := range docs {
			out = append(out, store.Change{DocID: d, Version: 1, Contributions: groupContrib(d)})
		}
		return out
	}
	if _, _, err := s.ApplyBatch(ctx, "acme", batch("a", "b")); err != nil {
		t.Fatal(err)
	}
	res, _, err := s.ApplyBatch(ctx, "acme", batch("a", "b"))
	if err != nil || res[0].Outcome != store.Duplicate || res[1].Outcome != store.Duplicate {
		t.Fatalf("the batch again: %+v, %v; want duplicates", res, err)
	}
	if _, err := other.Apply(ctx, "acme", "a", 2, groupContrib("a2")); err != nil {
		t.Fatal(err)
	}
	*attempts = nil
	if _, _, err := s.ApplyBatch(ctx, "acme", batch("c", "d")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*attempts, []int{1}) {
		t.Fatalf("the next group took the attempts %v, want [1]: a watch of the duplicates outlived them", *attempts)
	}
}
