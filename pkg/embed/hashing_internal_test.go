package embed

import (
	"hash/fnv"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// joinedVector is Vector as its features are defined: each joined into a
// string and hashed with hash/fnv. Vector must return the same vectors,
// bit for bit: items indexed before and after must compare alike.
func joinedVector(h *Hashing, text string) []float32 {
	v := make([]float64, h.dims)
	add := func(feature string, w float64) {
		f := fnv.New64a()
		_, _ = f.Write([]byte(feature))
		h.add(v, f.Sum64(), w)
	}
	words := Words(text)
	if len(words) == 0 {
		add("\x00empty", 1)
	}
	for i, w := range words {
		add("w\x00"+w, weightUnigram)
		if i > 0 {
			add("b\x00"+words[i-1]+"\x00"+w, weightBigram)
		}
		r := []rune("#" + w + "#")
		for j := 0; j+3 <= len(r); j++ {
			add("c\x00"+string(r[j:j+3]), weightTrigram)
		}
	}
	return unit(v)
}

// TestVectorHashesTheJoinedFeatures: hashing each feature's parts in
// place gives the vectors of hashing the joined features, on the corpora
// and on texts with invalid UTF-8, combining marks, wide and astral
// characters.
func TestVectorHashesTheJoinedFeatures(t *testing.T) {
	texts := []string{"", "   ", "a", "ab", "Expired certificate broke login", "東京のデータセンター 🙂x🙂 y",
		"caf\u0065\u0301 ｃｅｒｔ Ǆ ß ﬁle", "bad \xff\xfe bytes\xc3 mid\xe2\x82word", "\uFFFD\uFFFD q", "ÅNGSTRÖM-42 x9"}
	files, err := filepath.Glob("../../../shared/corpora/*/*.md")
	require.NoError(t, err)
	if len(files) == 0 {
		t.Log("no corpus beside the checkout; the fixed texts only")
	}
	for _, f := range files[:min(len(files), 60)] {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		texts = append(texts, string(data))
	}
	for _, dims := range []int{384, 64, 7} {
		h := NewHashing(dims)
		for _, text := range texts {
			require.Equal(t, joinedVector(h, text), h.Vector(text), "%d dimensions, text %.40q", dims, text)
		}
	}
}

// BenchmarkVector embeds corpus documents, one per op.
func BenchmarkVector(b *testing.B) {
	files, err := filepath.Glob("../../../shared/corpora/dfds-postmortems/*.md")
	if err != nil || len(files) == 0 {
		b.Skip("no corpus beside the checkout")
	}
	var texts []string
	var size int
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		texts = append(texts, string(data))
		size += len(data)
	}
	h := NewHashing(DefaultHashingDimensions)
	b.SetBytes(int64(size / len(texts)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.Vector(texts[i%len(texts)])
		i++
	}
}
