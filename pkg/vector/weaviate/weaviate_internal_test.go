package weaviate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

func TestSlots(t *testing.T) {
	pub := provenance.PublicACL()
	a := provenance.ACL{Groups: []string{"a"}}
	b := provenance.ACL{Groups: []string{"b"}, Principals: []string{"bob"}}
	src := func(doc string, acl provenance.ACL) vector.Source {
		return vector.Source{SourceRef: provenance.SourceRef{DocID: doc, Version: 1}, ACL: acl}
	}
	allPublic := slots([]vector.Source{src("x", pub), src("y", pub)})
	require.Len(t, allPublic, Slots)
	for _, s := range allPublic {
		require.Equal(t, []string{tokPublic}, s)
	}
	// Duplicates collapse, public ones vanish, the rest is padded.
	got := slots([]vector.Source{src("x", a), src("y", pub), src("z", a), src("w", b)})
	require.ElementsMatch(t, [][]string{aclTokens(a), aclTokens(b)}, got[:2])
	for _, s := range got[2:] {
		require.Equal(t, []string{tokPublic}, s)
	}
	// An ACL naming nobody admits nobody.
	require.Equal(t, []string{tokNobody}, slots([]vector.Source{src("x", provenance.ACL{})})[0])
	require.NotContains(t, callerTokens(vector.Filter{}), tokNobody)
	// A principal and a group of the same name are different tokens.
	require.NotEqual(t, aclTokens(provenance.ACL{Principals: []string{"eng"}}), aclTokens(provenance.ACL{Groups: []string{"eng"}}))
	// Folding keeps only the tokens common to the folded ACLs.
	var many []vector.Source
	for i := range Slots + 2 {
		many = append(many, src(fmt.Sprintf("d%d", i), provenance.ACL{Groups: []string{fmt.Sprintf("g%d", i)}}))
	}
	folded := slots(many)
	require.Len(t, folded, Slots)
	require.Equal(t, []string{tokNobody}, folded[Slots-1])
}

func testIndex(t *testing.T) *Index {
	t.Helper()
	cfg := Config{URL: os.Getenv("KG_TEST_WEAVIATE_URL"), GRPCAddr: os.Getenv("KG_TEST_WEAVIATE_GRPC"), StartupTimeout: 10 * time.Second}
	if cfg.URL == "" {
		cfg.URL = "http://127.0.0.1:8090"
	}
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = "127.0.0.1:50051"
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	cfg.Collection = "Kgtest" + hex.EncodeToString(b[:])
	ix, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Weaviate is not reachable at %s: %v. Start it with .ci/weaviate.sh.", cfg.URL, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := ix.Drop(ctx); err != nil {
			t.Errorf("dropping test collections: %v", err)
		}
	})
	return ix
}

func unit(id string, v []float32, doc string) vector.Item {
	return vector.Item{ID: id, Kind: vector.KindTextUnit, Vector: v, Text: id,
		Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: doc, Version: 1}, ACL: provenance.PublicACL()}}}
}

// TestRefusedObjectsRemoved bypasses the dimension pre-check, so Weaviate
// itself refuses an object: the batch names it, and the refused object,
// which Weaviate had kept in its object store, is gone, so filtered
// searches still work.
func TestRefusedObjectsRemoved(t *testing.T) {
	ix := testIndex(t)
	ctx := t.Context()
	require.NoError(t, ix.Upsert(ctx, "acme", []vector.Item{unit("a", []float32{1, 0, 0, 0}, "d")}))
	ix.dims.Clear()
	ix.dims.Store(cacheKey(ix.classes[vector.KindTextUnit], "acme"), 5) // a lie: lets "bad" through
	bad := unit("bad", []float32{1, 0, 0, 0, 1}, "d")
	bad.Vector = vector.Normalize(bad.Vector)
	good := unit("good", vector.Normalize([]float32{1, 1, 0, 0}), "d")
	failed, err := ix.write(ctx, "acme", []vector.Item{good, bad})
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, "bad", failed[0].ID)
	require.Contains(t, failed[0].Error(), "length 5")
	ix.dims.Clear()
	hits, err := ix.Search(ctx, "acme", vector.KindTextUnit, []float32{1, 0, 0, 0}, 10, vector.Filter{})
	require.NoError(t, err, "a refused object must not break filtered searches")
	require.Equal(t, []string{"a", "good"}, []string{hits[0].ID, hits[1].ID})
	require.Len(t, hits, 2)
}

// TestUpdateACLPages revokes a document with more items than one page.
func TestUpdateACLPages(t *testing.T) {
	ix := testIndex(t)
	ix.pageSize = 3
	ctx := t.Context()
	var items []vector.Item
	for i := range 10 {
		items = append(items, unit(fmt.Sprintf("u%d", i), []float32{1, float32(i), 0}, "d"))
	}
	items = append(items, unit("other", []float32{1, 0, 0}, "e"))
	require.NoError(t, ix.Upsert(ctx, "acme", items))
	require.NoError(t, ix.UpdateACL(ctx, "acme", "d", provenance.ACL{Groups: []string{"secret"}}))
	hits, err := ix.Search(ctx, "acme", vector.KindTextUnit, []float32{1, 0, 0}, 100, vector.Filter{})
	require.NoError(t, err)
	require.Equal(t, []string{"other"}, []string{hits[0].ID})
	require.Len(t, hits, 1)
	hits, err = ix.Search(ctx, "acme", vector.KindTextUnit, []float32{1, 0, 0}, 100, vector.Filter{Groups: []string{"secret"}})
	require.NoError(t, err)
	require.Len(t, hits, 11)
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.ID)
	}
	require.True(t, slices.Contains(ids, "u9"))
}

// TestScanSourcesPages lists a document's items, and a tenant's, over
// more than one page.
func TestScanSourcesPages(t *testing.T) {
	ix := testIndex(t)
	ix.pageSize = 3
	ctx := t.Context()
	var items []vector.Item
	for i := range 10 {
		items = append(items, unit(fmt.Sprintf("u%d", i), []float32{1, float32(i), 0}, "d"))
	}
	items = append(items, unit("other", []float32{1, 0, 0}, "e"))
	require.NoError(t, ix.Upsert(ctx, "acme", items))
	count := func(docID string) map[string]int {
		seen := map[string]int{}
		require.NoError(t, ix.ScanSources(ctx, "acme", docID, func(it vector.ItemSources) error {
			seen[it.ID]++
			return nil
		}))
		return seen
	}
	byDoc := count("d")
	require.Len(t, byDoc, 10)
	require.NotContains(t, byDoc, "other")
	all := count("")
	require.Len(t, all, 11)
	for id, n := range all {
		require.Equal(t, 1, n, "%s reported once", id)
	}
}
