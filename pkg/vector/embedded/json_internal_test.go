package embedded

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

// randomString draws a string of the characters JSON treats apart: quotes,
// backslashes, control characters, HTML characters, U+2028 and U+2029,
// multi-byte runes, bytes of invalid UTF-8, and plain ones.
func randomString(rng *rand.Rand) string {
	parts := []string{"a", "Z", "0", " ", "\"", "\\", "/", "\b", "\f", "\n", "\r", "\t", "\x00", "\x01", "\x1f", "\x7f",
		"<", ">", "&", "\u2028", "\u2029", "é", "日本", "😀", "\xff", "\xc3", "\xe2\x80", "\ufffd", "'", "%"}
	var b strings.Builder
	for range rng.IntN(12) {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	return b.String()
}

// TestJSONIsMarshal: the records' and rows' JSON is json.Marshal's, byte
// for byte, on random items and sources, ACLs with and without writers.
func TestJSONIsMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	strs := func() []string {
		var out []string
		for range rng.IntN(3) {
			out = append(out, randomString(rng))
		}
		if out == nil && rng.IntN(2) == 0 {
			out = []string{}
		}
		return out
	}
	for range 5000 {
		s := vector.Source{SourceRef: provenance.SourceRef{DocID: randomString(rng), Version: rng.Int64N(1<<40) - 1<<20, TextUnit: randomString(rng)},
			ACL: provenance.ACL{Public: rng.IntN(2) == 0, Groups: strs(), Principals: strs(),
				Writers: provenance.Writers{Groups: strs(), Principals: strs()}}}
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendSourceJSON(nil, s)))

		it := vector.Item{ID: randomString(rng), Kind: vector.Kind(randomString(rng)), Text: randomString(rng), Vector: []float32{1}}
		if n := rng.IntN(4); n > 0 || rng.IntN(2) == 0 {
			it.Metadata = map[string]string{}
			for range n {
				it.Metadata[randomString(rng)] = randomString(rng)
			}
		}
		want, err = json.Marshal(it)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendItemJSON(nil, it)))
	}
}
