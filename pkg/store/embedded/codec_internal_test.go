package embedded

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	json "github.com/segmentio/encoding/json"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
)

// TestValuesAreStoredCompressed: a hub entity and its edge (many like
// fragments) and a source record holding a document's text are written
// compressed, smaller than their JSON, and read back whole; a value
// written as plain JSON (as every value was before compression) still
// reads.
func TestValuesAreStoredCompressed(t *testing.T) {
	ctx := t.Context()
	s, err := Open(filepath.Join(t.TempDir(), "db"), Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	for i := range 40 {
		c := hubDoc(i, 1)
		c.TextUnits = []events.TextUnit{{ID: "u", Text: strings.Repeat(fmt.Sprintf("The broker of doc %d restarted. ", i), 20)}}
		_, err := s.Apply(ctx, "acme", fmt.Sprintf("doc-%03d", i), 1, c)
		require.NoError(t, err)
	}
	hub, err := s.Entity(ctx, "acme", "service:hub")
	require.NoError(t, err)
	require.Len(t, hub.Sources, 40)
	rec, err := s.Source(ctx, "acme", "doc-007")
	require.NoError(t, err)

	raw := func(sub, key string) []byte {
		var out []byte
		require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
			g, err := openGraph(tx, "acme", false)
			require.NoError(t, err)
			b := map[string]*bolt.Bucket{subEntities: g.entities, subEdges: g.edges, subSources: g.sources}[sub]
			out = append(out, b.Get([]byte(key))...)
			return nil
		}))
		return out
	}
	for _, v := range []struct {
		sub, key string
		value    any
	}{
		{subEntities, "service:hub", hub},
		{subSources, "doc-007", rec},
	} {
		stored := raw(v.sub, v.key)
		plain, err := json.Marshal(v.value)
		require.NoError(t, err)
		require.False(t, json.Valid(stored), "%s %s is stored as plain JSON", v.sub, v.key)
		require.Less(t, 2*len(stored), len(plain), "%s %s: %d bytes stored for %d of JSON", v.sub, v.key, len(stored), len(plain))
		back, err := store.DecompressValue(stored)
		require.NoError(t, err)
		require.JSONEq(t, string(plain), string(back))
	}

	// A plain JSON value, as an older store holds it.
	old := hub
	old.Name = "Hub as stored before"
	plain, err := json.Marshal(old)
	require.NoError(t, err)
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		g, err := openGraph(tx, "acme", false)
		require.NoError(t, err)
		return g.entities.Put([]byte("service:hub"), plain)
	}))
	got, err := s.Entity(ctx, "acme", "service:hub")
	require.NoError(t, err)
	require.Equal(t, old, got)
}
