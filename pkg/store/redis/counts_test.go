package redis_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// TestCountsOfAnOlderRegistry: a registry written before the counts were
// kept (no counts hash, or one that writes since then incremented without
// the documents before them) is counted once, on the first CountSources,
// and writes after that keep the counts.
func TestCountsOfAnOlderRegistry(t *testing.T) {
	ctx := t.Context()
	s, c, prefix := freshStore(t)
	for i := range 5 {
		_, err := s.Announce(ctx, "acme", store.Announcement{DocID: fmt.Sprintf("d%d", i), ACL: provenance.PublicACL()})
		require.NoError(t, err)
	}
	_, err := s.MarkDeleted(ctx, "acme", "d0")
	require.NoError(t, err)
	counts := prefix + ":{acme}:reg-count"
	for name, older := range map[string]func(){
		"no counts":      func() { require.NoError(t, c.Del(ctx, counts).Err()) },
		"partial counts": func() { require.NoError(t, c.HSet(ctx, counts, "live", 1, "counted", 0).Err()) },
	} {
		older()
		got, err := s.CountSources(ctx, "acme")
		require.NoError(t, err, name)
		require.Equal(t, store.SourceCounts{Live: 4, Deleted: 1}, got, name)
	}
	_, err = s.MarkDeleted(ctx, "acme", "d1")
	require.NoError(t, err)
	got, err := s.CountSources(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, store.SourceCounts{Live: 3, Deleted: 2}, got)
}
