package embedded

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

// TestBlockedScanEqualsBruteForce: after upserts, overwrites and deletions
// that move entries between blocks, the blocked dimension-major layout
// keeps every vector (vec), and Search ranks as a brute-force float64 scan
// of the vectors written does, for sparse (hashing) and dense queries, on a
// set large enough to be split across CPUs and with an ACL filter.
func TestBlockedScanEqualsBruteForce(t *testing.T) {
	const n = parallelScan + 3*blockSize + 5
	ctx := t.Context()
	ix, err := Open(filepath.Join(t.TempDir(), "v.db"), Options{NoSync: true})
	require.NoError(t, err)
	defer ix.Close()
	rng := rand.New(rand.NewPCG(3, 9))
	emb := embed.NewHashing(embed.DefaultHashingDimensions)
	words := []string{"latency", "certificate", "disk", "deploy", "dns", "kafka", "broker", "timeout", "quota", "network", "expired", "rollback"}
	want := map[string][]float32{}
	public := map[string]bool{}
	item := func(i int, dense bool) vector.Item {
		var v []float32
		if dense {
			v = make([]float32, embed.DefaultHashingDimensions)
			for j := range v {
				v[j] = float32(rng.NormFloat64())
			}
		} else {
			text := ""
			for range 3 + rng.IntN(6) {
				text += words[rng.IntN(len(words))] + " "
			}
			v = emb.Vector(text)
		}
		id := fmt.Sprintf("u%05d", i)
		acl := provenance.PublicACL()
		if i%3 == 0 {
			acl = provenance.ACL{Groups: []string{"payments"}}
		}
		want[id], public[id] = vector.Normalize(v), acl.Public // stored unit-length
		return vector.Item{ID: id, Kind: vector.KindTextUnit, Vector: v, Text: id,
			Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: "d" + id, Version: 1}, ACL: acl}}}
	}
	var items []vector.Item
	for i := range n {
		items = append(items, item(i, i%7 == 0))
	}
	for c := range slices.Chunk(items, 2000) {
		require.NoError(t, ix.Upsert(ctx, "t", c))
	}
	// Overwrite some, delete some (the last entries move into their slots).
	var again []vector.Item
	for i := 0; i < n; i += 97 {
		again = append(again, item(i, i%2 == 0))
	}
	require.NoError(t, ix.Upsert(ctx, "t", again))
	var gone []string
	for i := 5; i < n; i += 41 {
		gone = append(gone, fmt.Sprintf("u%05d", i))
		delete(want, fmt.Sprintf("u%05d", i))
	}
	require.NoError(t, ix.Delete(ctx, "t", gone))

	ki := ix.tenants["t"].kinds[vector.KindTextUnit]
	require.Len(t, ki.entries, len(want))
	require.Len(t, ki.blocks, (len(want)+blockSize-1)/blockSize)
	for b, blk := range ki.blocks[:len(ki.blocks)-1] {
		require.Len(t, blk, blockSize*ki.dims, "block %d is full", b)
	}
	if last := len(want) % blockSize; last > 0 {
		stride := len(ki.blocks[len(ki.blocks)-1]) / ki.dims
		require.True(t, stride >= last && stride < 2*max(last, minBlock), "the last block holds %d in %d", last, stride)
	}
	for i, e := range ki.entries {
		require.Equal(t, want[e.item.ID], ki.vec(i), e.item.ID)
	}

	f := vector.Filter{Principal: "sam", Groups: []string{"sre"}}
	dense := make([]float32, embed.DefaultHashingDimensions)
	for j := range dense {
		dense[j] = float32(rng.NormFloat64())
	}
	for qi, q := range [][]float32{emb.Vector("certificate expired"), emb.Vector("kafka broker timeout after deploy"), dense} {
		const k = 25
		type scored struct {
			id string
			s  float64
		}
		var all []scored
		qn := vector.Normalize(q)
		for id, v := range want {
			if !public[id] {
				continue
			}
			var dot, norm float64
			for j := range v {
				dot += float64(qn[j]) * float64(v[j])
				norm += float64(v[j]) * float64(v[j])
			}
			all = append(all, scored{id, dot / math.Sqrt(norm)})
		}
		slices.SortFunc(all, func(a, b scored) int { return cmp.Or(cmp.Compare(b.s, a.s), cmp.Compare(a.id, b.id)) })
		hits, err := ix.Search(ctx, "t", vector.KindTextUnit, q, k, f)
		require.NoError(t, err)
		require.Len(t, hits, k)
		for i, h := range hits {
			require.InDelta(t, all[i].s, float64(h.Score), 1e-5, "query %d hit %d", qi, i)
			if i+1 < k && all[i].s-all[i+1].s > 1e-5 && (i == 0 || all[i-1].s-all[i].s > 1e-5) {
				require.Equal(t, all[i].id, h.ID, "query %d hit %d", qi, i)
			}
		}
	}
}
