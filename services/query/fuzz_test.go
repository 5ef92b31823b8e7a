package query_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/services/query"
)

// FuzzParseRels checks that any rels parameter either parses into at most
// max valid hops that round-trip through their written form, or is refused.
func FuzzParseRels(f *testing.F) {
	for _, s := range []string{
		"affected", "~involved,affected,owned_by", "a,,b", "~", "~~a", " a , ~ b ", "A", "a_b_c",
		"a,b,c,d,e,f,g", "owned by", "a\x00b", "é", ",", "_a", "a_", strings.Repeat("a", 65),
	} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = 1 + abs(max)%query.HardMaxHops
		hops, err := query.ParseRels(s, max)
		if err != nil {
			require.Nil(t, hops)
			return
		}
		require.NotEmpty(t, hops)
		require.LessOrEqual(t, len(hops), max)
		written := make([]string, len(hops))
		for i, h := range hops {
			require.Regexp(t, `^[a-z0-9]+(_[a-z0-9]+)*$`, h.Relation)
			require.LessOrEqual(t, len(h.Relation), 64)
			written[i] = h.String()
		}
		again, err := query.ParseRels(strings.Join(written, ","), max)
		require.NoError(t, err)
		require.Equal(t, hops, again)
	})
}

func abs(n int) int {
	if n < 0 {
		if n == -n { // math.MinInt
			return 0
		}
		return -n
	}
	return n
}
