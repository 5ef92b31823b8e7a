package reporter

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVectorMemoIsBounded: the memo keeps the texts of two generations of
// memoBytes at most, the latest ones, and a text of the older generation
// read again moves to the current one.
func TestVectorMemoIsBounded(t *testing.T) {
	var m vectorMemo
	v := make([]float32, 384)
	text := func(i int) string { return fmt.Sprintf("text %06d", i) }
	per := len(text(0)) + 4*len(v)
	n := 3 * memoBytes / per
	for i := range n {
		m.put(text(i), v)
		if i == 10 {
			_, ok := m.get(text(0))
			require.True(t, ok)
		}
	}
	require.LessOrEqual(t, len(m.cur)+len(m.prev), 2*memoBytes/per+2)
	_, ok := m.get(text(n - 1))
	require.True(t, ok, "the latest text")
	_, ok = m.get(text(1))
	require.False(t, ok, "an early text")
}
