package embedded

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/store"
)

// TestAuditSeesStorage corrupts buckets behind the adapter's back: the audit
// must notice a broken adjacency index, a missing endpoint and a drifted
// counter.
func TestAuditSeesStorage(t *testing.T) {
	ctx := t.Context()
	s, err := Open(filepath.Join(t.TempDir(), "db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := store.Contributions{
		Entities: []store.EntityContribution{{ID: "t:a", Type: "t", Name: "a"}, {ID: "t:b", Type: "t", Name: "b"}},
		Edges:    []store.EdgeContribution{{Source: "t:a", Relation: "r", Target: "t:b"}},
	}
	if _, err := s.Apply(ctx, "acme", "d", 1, c); err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		g, err := openGraph(tx, "acme", false)
		if err != nil {
			return err
		}
		if err := g.out.Delete(pair("t:a", store.EdgeID("t:a", "r", "t:b"))); err != nil {
			return err
		}
		return g.entityRows.Delete(headKey("t:b"))
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Audit(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	// Mismatches: the record lists t:b, the out index, the type index, the
	// entity counter, the fragment of t:b without its head.
	if rep.OrphanEdges != 1 || rep.IndexMismatches < 5 {
		t.Fatalf("got %+v, want 1 orphan edge and at least 5 index mismatches", rep)
	}
}

func TestOpenRefusesOtherLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte(bucketMeta)).Put([]byte(keyLayout), []byte("99")) })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); err == nil {
		t.Fatal("opened a file of another layout")
	}
}
