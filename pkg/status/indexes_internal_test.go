package status

import (
	"testing"
	"time"

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

	now := time.Now()
	c.now = func() time.Time { return now }
	c.keep("acme", ix(1), c.begin())
	_, ok = c.get("acme", state("d1", 1))
	require.True(t, ok)
	now = now.Add(maxIndexAge + time.Second)
	_, ok = c.get("acme", state("d1", 1))
	require.False(t, ok, "past its age: read again, in case an event was lost")
	c.keep("acme", ix(1), c.begin())
	_, ok = c.get("acme", state("d1", 1))
	require.True(t, ok)

	// The generation moves with every change of the tenant and with the
	// cache going live or not, and not with another tenant's change.
	g := c.generation("acme")
	c.changed("globex", "d9")
	require.Equal(t, g, c.generation("acme"))
	c.changed("acme", "d2")
	require.Greater(t, c.generation("acme"), g)
	g = c.generation("acme")
	c.following(false)
	_, ok = c.get("acme", state("d1", 1))
	require.False(t, ok)
	require.Greater(t, c.generation("acme"), g)
}
