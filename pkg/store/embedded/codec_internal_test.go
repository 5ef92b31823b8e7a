package embedded

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/store/storetest"
)

// TestValuesAreStoredCompressed: see storetest.ValueEncoding.
func TestValuesAreStoredCompressed(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "db"), Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	get := func(sub func(*graphBuckets) *bolt.Bucket) func(string) []byte {
		return func(key string) []byte {
			var out []byte
			require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
				g, err := openGraph(tx, "acme", false)
				require.NoError(t, err)
				out = bytes.Clone(sub(g).Get([]byte(key)))
				return nil
			}))
			return out
		}
	}
	storetest.ValueEncoding(t, s, storetest.RawValues{
		Source: get(func(g *graphBuckets) *bolt.Bucket { return g.sources }),
		PutSource: func(id string, data []byte) {
			require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
				g, err := openGraph(tx, "acme", false)
				require.NoError(t, err)
				return g.sources.Put([]byte(id), data)
			}))
		},
	})
}
