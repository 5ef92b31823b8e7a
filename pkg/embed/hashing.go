package embed

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// DefaultHashingDimensions is the size FromEnv gives the offline embedder.
const DefaultHashingDimensions = 384

// Feature weights: a shared word pair says more than a shared word, which
// says more than a shared character trigram.
const (
	weightUnigram = 1.0
	weightBigram  = 1.5
	weightTrigram = 0.35
)

// Hashing is the offline embedder: feature hashing ("the hashing trick") of
// the text's surface forms into a fixed number of dimensions, L2-normalised.
// The features are the lower-cased, NFKC-normalised words (runs of letters
// and digits), adjacent word pairs, and the character trigrams of each word
// padded with boundary marks ("#ce", "cer", ..., "rt#"); each is hashed to a
// dimension and a sign. Cosine similarity between two vectors then tracks
// how many features the texts share, so texts about "expired certificate"
// land near each other, and trigrams make "certificate" and "certificates"
// or small typos overlap.
//
// What it cannot do: it knows no meaning. Synonyms ("outage" / "incident"),
// paraphrases, translations and related concepts share no surface form and
// score as unrelated; word order beyond adjacent pairs is lost; unrelated
// features can collide in one dimension (more with fewer dimensions), which
// adds noise to every score. It needs no model, no network and is
// deterministic, which is what the offline mode and the tests need; for
// semantic search configure an embedding endpoint (KG_EMBED_*).
type Hashing struct {
	dims int
}

var _ Embedder = (*Hashing)(nil)

// NewHashing returns an offline embedder of dims dimensions (dims < 1 means
// DefaultHashingDimensions).
func NewHashing(dims int) *Hashing {
	if dims < 1 {
		dims = DefaultHashingDimensions
	}
	return &Hashing{dims: dims}
}

// Dimensions returns the vector length.
func (h *Hashing) Dimensions() int { return h.dims }

// Name identifies the embedder and its version of the feature set.
func (h *Hashing) Name() string { return fmt.Sprintf("hashing-v1-%d", h.dims) }

// Embed hashes each text. A text without a word maps to one fixed vector,
// so every vector is non-zero.
func (h *Hashing) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		out[i] = h.Vector(t)
	}
	return out, nil
}

// Vector embeds one text.
func (h *Hashing) Vector(text string) []float32 {
	v := make([]float64, h.dims)
	words := Words(text)
	if len(words) == 0 {
		h.add(v, "\x00empty", 1)
	}
	for i, w := range words {
		h.add(v, "w\x00"+w, weightUnigram)
		if i > 0 {
			h.add(v, "b\x00"+words[i-1]+"\x00"+w, weightBigram)
		}
		r := []rune("#" + w + "#")
		for j := 0; j+3 <= len(r); j++ {
			h.add(v, "c\x00"+string(r[j:j+3]), weightTrigram)
		}
	}
	var sum float64
	for _, x := range v {
		sum += x * x
	}
	inv := 1 / math.Sqrt(sum)
	out := make([]float32, h.dims)
	for i, x := range v {
		out[i] = float32(x * inv)
	}
	return out
}

// add hashes a feature to a dimension and a sign (the sign keeps
// collisions from adding up to a bias).
func (h *Hashing) add(v []float64, feature string, w float64) {
	f := fnv.New64a()
	_, _ = f.Write([]byte(feature))
	s := f.Sum64()
	i := int(s % uint64(h.dims))
	if s>>63 == 1 {
		w = -w
	}
	v[i] += w
}

// Words splits text into lower-cased, NFKC-normalised runs of letters and
// digits: the unit the hashing embedder counts.
func Words(text string) []string {
	text = strings.ToLower(norm.NFKC.String(text))
	return strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
}
