package embedded

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

// TestSourcesShareTheirACLs: the items' sources hold one copy of each
// distinct ACL, counted, so that an ACL update, a deletion or an overwrite
// leaves no ACL and no document entry behind once no item holds it, and a
// hit's ACL changed by the caller does not reach the index.
func TestSourcesShareTheirACLs(t *testing.T) {
	ctx := t.Context()
	ix, err := Open(filepath.Join(t.TempDir(), "v.db"), Options{NoSync: true})
	require.NoError(t, err)
	defer ix.Close()
	payments := provenance.ACL{Groups: []string{"payments", "oncall"}}
	var items []vector.Item
	for i := range 20 {
		acl := payments
		if i%2 == 0 {
			acl = provenance.ACL{Principals: []string{fmt.Sprintf("user-%d", i%4)}}
		}
		items = append(items, vector.Item{ID: fmt.Sprintf("u%02d", i), Kind: vector.KindTextUnit, Vector: []float32{1, float32(i)}, Text: "t",
			Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: fmt.Sprintf("d%d", i%5), Version: 1, TextUnit: "tu"}, ACL: acl}}})
	}
	require.NoError(t, ix.Upsert(ctx, "t1", items))
	tn := ix.tenants["t1"]
	require.Len(t, tn.acls, 3) // payments, user-0, user-2
	require.Equal(t, 10, tn.acls[aclKey(vector.NormalizeACL(payments))].n)
	require.Len(t, tn.byDoc, 5)

	// Two items of one ACL share it, and of one document its entry.
	e1, e3 := tn.kinds[vector.KindTextUnit].entries[1], tn.kinds[vector.KindTextUnit].entries[3]
	require.Same(t, e1.srcs[0].acl, e3.srcs[0].acl)
	e6 := tn.kinds[vector.KindTextUnit].entries[6]
	require.Same(t, e1.srcs[0].doc, e6.srcs[0].doc)

	// A caller changing a hit's ACL changes nothing in the index.
	hits, err := ix.Search(ctx, "t1", vector.KindTextUnit, []float32{1, 1}, 20, vector.Filter{Principal: "user-0", Groups: []string{"oncall"}})
	require.NoError(t, err)
	require.NotEmpty(t, hits)
	for _, h := range hits {
		for i := range h.Sources {
			if len(h.Sources[i].ACL.Groups) > 0 {
				h.Sources[i].ACL.Groups[0] = "everyone"
			}
		}
	}
	require.Equal(t, "oncall", e1.srcs[0].acl.acl.Groups[0]) // sorted: oncall, payments

	// Re-permissioning d1 (items 1, 6, 11, 16) moves them to a new ACL.
	require.NoError(t, ix.UpdateACL(ctx, "t1", "d1", provenance.PublicACL()))
	require.Equal(t, 4, tn.acls[aclKey(vector.NormalizeACL(provenance.PublicACL()))].n)
	total := 0
	for _, sa := range tn.acls {
		total += sa.n
	}
	require.Equal(t, 20, total)

	// Overwriting and deleting everything leaves nothing shared behind.
	require.NoError(t, ix.Upsert(ctx, "t1", items[:5]))
	require.NoError(t, ix.Delete(ctx, "t1", []string{"u00", "u01", "u02", "u03", "u04"}))
	for d := range 5 {
		require.NoError(t, ix.DeleteByDoc(ctx, "t1", fmt.Sprintf("d%d", d)))
	}
	require.Empty(t, tn.acls)
	require.Empty(t, tn.byDoc)
}
