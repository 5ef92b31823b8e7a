package query

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKeptTraversalsAreBounded: a tenant's graph reads keep at most
// maxKeptPathRows rows of traversals: one larger is answered and not
// kept, and one that would pass the bound starts the kept set over; a
// traversal kept first wins over a concurrent one.
func TestKeptTraversalsAreBounded(t *testing.T) {
	var g graphSet
	rows := func(n int) *keptPaths { return &keptPaths{rows: make([]rowJSON, n)} }
	key := func(start string) aggKey { return aggKey{typ: "paths\x00" + start, gen: 1, caller: "alice"} }

	big := rows(maxKeptPathRows + 1)
	require.Same(t, big, g.keepPaths(key("hub"), big))
	require.Nil(t, g.keptPaths(key("hub")), "larger than the bound: not kept")

	a, b := rows(maxKeptPathRows/2+1), rows(maxKeptPathRows/2)
	require.Same(t, a, g.keepPaths(key("a"), a))
	require.Same(t, a, g.keepPaths(key("a"), rows(3)), "the first kept wins")
	require.Same(t, b, g.keepPaths(key("b"), b))
	require.Nil(t, g.keptPaths(key("a")), "a and b together pass the bound: started over")
	require.Same(t, b, g.keptPaths(key("b")))

	c := rows(10)
	g.keepPaths(key("c"), c)
	require.Same(t, b, g.keptPaths(key("b")), "within the bound: both kept")
	require.Same(t, c, g.keptPaths(key("c")))
}
