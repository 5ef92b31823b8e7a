package embedded

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/store"
)

// TestEntitiesByTypeReadsNoEdge: listing every entity of a tenant reads
// the entity rows only (the query service's name index lists them all on
// its first local question, and a tenant's edges are several times as
// many, each with its supports): an edge head that cannot be decoded
// fails a snapshot but not the listing.
func TestEntitiesByTypeReadsNoEdge(t *testing.T) {
	ctx := t.Context()
	s, err := Open(filepath.Join(t.TempDir(), "db"), Options{NoSync: true})
	require.NoError(t, err)
	defer s.Close()
	c := store.Contributions{
		Entities: []store.EntityContribution{{ID: "t:b", Type: "t", Name: "b"}, {ID: "t:a", Type: "t", Name: "a"}},
		Edges:    []store.EdgeContribution{{Source: "t:a", Relation: "r", Target: "t:b"}},
	}
	_, err = s.Apply(ctx, "acme", "d", 1, c)
	require.NoError(t, err)
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		g, err := openGraph(tx, "acme", false)
		if err != nil {
			return err
		}
		return g.edgeRows.Put(headKey(store.EdgeID("t:a", "r", "t:b")), []byte("not a head"))
	}))
	_, err = s.Snapshot(ctx, "acme")
	require.Error(t, err, "the corrupted edge head is read by a snapshot")
	es, err := s.EntitiesByType(ctx, "acme", "")
	require.NoError(t, err)
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	require.Equal(t, []string{"t:a", "t:b"}, ids)
}
