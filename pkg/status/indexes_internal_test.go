package status

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// TestIndexCacheKeepsNothingChangedSinceTheRead: indexes read before a
// change of their document, of every document of their tenant, or before
// the cache went live are not kept; an index is served only at its
// document's announced version.
func TestIndexCacheKeepsNothingChangedSinceTheRead(t *testing.T) {
	var c indexCache
	ix := func(v int64) map[string]store.SourceIndex {
		return map[string]store.SourceIndex{"d1": {Version: v}, "d2": {Version: v}}
	}
	state := func(doc string, v int64) provenance.SourceState {
		return provenance.SourceState{DocID: doc, Version: v}
	}
	from := c.begin()
	c.keep("acme", ix(1), from)
	_, ok := c.get("acme", state("d1", 1))
	require.False(t, ok, "not live: nothing kept")

	c.following(true)
	c.keep("acme", ix(1), from)
	_, ok = c.get("acme", state("d1", 1))
	require.False(t, ok, "read before the cache went live")

	from = c.begin()
	c.changed("acme", "d1") // while the indexes were read
	c.keep("acme", ix(1), from)
	_, ok = c.get("acme", state("d1", 1))
	require.False(t, ok, "changed after the read began")
	_, ok = c.get("acme", state("d2", 1))
	require.True(t, ok)
	_, ok = c.get("acme", state("d2", 2))
	require.False(t, ok, "a newer version announced")
	_, ok = c.get("globex", state("d2", 1))
	require.False(t, ok, "another tenant")

	from = c.begin()
	c.changed("acme", "")
	_, ok = c.get("acme", state("d2", 1))
	require.False(t, ok, "a change naming no document drops the tenant's")
	c.keep("acme", ix(1), from)
	_, ok = c.get("acme", state("d2", 1))
	require.False(t, ok, "read before it")

	c.keep("acme", ix(1), c.begin())
	_, ok = c.get("acme", state("d1", 1))
	require.True(t, ok)
	c.following(false)
	_, ok = c.get("acme", state("d1", 1))
	require.False(t, ok)
}
