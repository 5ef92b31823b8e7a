package embedded_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
	"github.com/kgstream/kgstream/pkg/vector/embedded"
	"github.com/kgstream/kgstream/pkg/vector/vectortest"
)

func open(t *testing.T, path string) *embedded.Index {
	t.Helper()
	ix, err := embedded.Open(path, embedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ix.Close() })
	return ix
}

func TestConformance(t *testing.T) {
	vectortest.Run(t, func(t *testing.T) vector.Index {
		return open(t, filepath.Join(t.TempDir(), "vectors.db"))
	})
}

// TestReopen checks that every write is on disk: a reopened index answers
// as the one that wrote.
func TestReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "vectors.db")
	ix := open(t, path)
	secret := provenance.ACL{Groups: []string{"secret"}}
	items := []vector.Item{
		{ID: "a", Kind: vector.KindTextUnit, Vector: []float32{1, 0, 0}, Text: "a", Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: "d1", Version: 1}, ACL: provenance.PublicACL()}}},
		{ID: "b", Kind: vector.KindTextUnit, Vector: []float32{3, 1, 0}, Text: "b", Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: "d2", Version: 1}, ACL: provenance.PublicACL()}}},
		{ID: "c", Kind: vector.KindTextUnit, Vector: []float32{1, 1, 0}, Text: "c", Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: "d3", Version: 1}, ACL: provenance.PublicACL()}}},
		{ID: "r", Kind: vector.KindReport, Vector: []float32{0, 1}, Text: "r", Metadata: map[string]string{"level": "0"}, Sources: []vector.Source{
			{SourceRef: provenance.SourceRef{DocID: "d1", Version: 1}, ACL: provenance.PublicACL()},
			{SourceRef: provenance.SourceRef{DocID: "d2", Version: 1}, ACL: provenance.PublicACL()},
		}},
	}
	require.NoError(t, ix.Upsert(ctx, "acme", items))
	require.NoError(t, ix.Delete(ctx, "acme", []string{"c"}))
	require.NoError(t, ix.UpdateACL(ctx, "acme", "d2", secret))
	search := func(ix vector.Index, kind vector.Kind, q []float32, f vector.Filter) []vector.Hit {
		hits, err := ix.Search(ctx, "acme", kind, q, 10, f)
		require.NoError(t, err)
		return hits
	}
	insider := vector.Filter{Groups: []string{"secret"}}
	wantUnits := search(ix, vector.KindTextUnit, []float32{1, 0, 0}, insider)
	wantReports := search(ix, vector.KindReport, []float32{0, 1}, insider)
	require.Len(t, wantUnits, 2)
	require.Len(t, wantReports, 1)
	require.NoError(t, ix.Close())

	re := open(t, path)
	require.Equal(t, wantUnits, search(re, vector.KindTextUnit, []float32{1, 0, 0}, insider))
	require.Equal(t, wantReports, search(re, vector.KindReport, []float32{0, 1}, insider))
	require.Len(t, search(re, vector.KindTextUnit, []float32{1, 0, 0}, vector.Filter{}), 1, "d2's revocation survived")
	// The indexes kept by document survived too.
	require.NoError(t, re.DeleteByDoc(ctx, "acme", "d1"))
	require.Empty(t, search(re, vector.KindReport, []float32{0, 1}, insider))
	// Dimensions are known again after the reload.
	err := re.Upsert(ctx, "acme", []vector.Item{{ID: "x", Kind: vector.KindTextUnit, Vector: []float32{1, 0}, Sources: items[0].Sources}})
	require.True(t, vector.Failed(err, vector.KindTextUnit, "x"), "got %v", err)
}

func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vectors.db")
	open(t, path)
	_, err := embedded.Open(path, embedded.Options{Timeout: 50e6})
	require.Error(t, err, "a second opener must not share the file")
}

// TestCompactKeepsTheIndex: a compacted index (after many deletions)
// answers as before, from a smaller file; an open index is not compacted.
func TestCompactKeepsTheIndex(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "vectors.db")
	ix, err := embedded.Open(path, embedded.Options{NoSync: true})
	require.NoError(t, err)
	var items []vector.Item
	var gone []string
	for i := range 2000 {
		id := fmt.Sprintf("u%04d", i)
		items = append(items, vector.Item{ID: id, Kind: vector.KindTextUnit, Vector: []float32{float32(math.Cos(float64(i))), float32(math.Sin(float64(i))), float32(i) / 2000},
			Text: strings.Repeat("text ", 40), Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: fmt.Sprintf("d%d", i%50), Version: 1}, ACL: provenance.PublicACL()}}})
		if i%4 != 0 {
			gone = append(gone, id)
		}
	}
	require.NoError(t, ix.Upsert(ctx, "acme", items))
	require.NoError(t, ix.Delete(ctx, "acme", gone))
	want, err := ix.Search(ctx, "acme", vector.KindTextUnit, []float32{1, 1, 1}, 20, vector.Filter{})
	require.NoError(t, err)
	_, _, err = embedded.Compact(path)
	require.Error(t, err, "compacted an open index")
	require.NoError(t, ix.Close())

	before, after, err := embedded.Compact(path)
	require.NoError(t, err)
	require.Less(t, after, before)
	re := open(t, path)
	got, err := re.Search(ctx, "acme", vector.KindTextUnit, []float32{1, 1, 1}, 20, vector.Filter{})
	require.NoError(t, err)
	require.Equal(t, want, got)
}
