package embed

import (
	"context"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

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
		h.add(v, fnvString(fnvOffset, "\x00empty"), 1)
	}
	// The features are hashed in place (FNV-1a over their parts, as over
	// the joined feature): a text has thousands, and joining each into a
	// string of its own cost more than the hashing.
	var buf [64]rune
	padded := buf[:0]
	var enc [3 * utf8.UTFMax]byte
	for i, w := range words {
		h.add(v, fnvString(fnvString(fnvOffset, "w\x00"), w), weightUnigram)
		if i > 0 {
			f := fnvString(fnvString(fnvOffset, "b\x00"), words[i-1])
			h.add(v, fnvString(fnvString(f, "\x00"), w), weightBigram)
		}
		// A trigram is three runes of "#" + w + "#", as string(runes)
		// encodes them.
		padded = append(padded[:0], '#')
		for _, r := range w {
			padded = append(padded, r)
		}
		padded = append(padded, '#')
		c := fnvString(fnvOffset, "c\x00")
		for j := 0; j+3 <= len(padded); j++ {
			n := utf8.EncodeRune(enc[:], padded[j])
			n += utf8.EncodeRune(enc[n:], padded[j+1])
			n += utf8.EncodeRune(enc[n:], padded[j+2])
			h.add(v, fnvBytes(c, enc[:n]), weightTrigram)
		}
	}
	return unit(v)
}

// unit returns v scaled to length 1, as float32s.
func unit(v []float64) []float32 {
	var sum float64
	for _, x := range v {
		sum += x * x
	}
	inv := 1 / math.Sqrt(sum)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x * inv)
	}
	return out
}

// add adds a feature of hash s (64-bit FNV-1a) to a dimension with a sign
// (the sign keeps collisions from adding up to a bias).
func (h *Hashing) add(v []float64, s uint64, w float64) {
	i := int(s % uint64(h.dims))
	if s>>63 == 1 {
		w = -w
	}
	v[i] += w
}

// 64-bit FNV-1a, as hash/fnv's New64a computes it.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnvString continues the FNV-1a hash h over s.
func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// fnvBytes continues the FNV-1a hash h over b.
func fnvBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

// Words splits text into lower-cased, NFKC-normalised runs of letters and
// digits: the unit the hashing embedder counts.
func Words(text string) []string {
	text = strings.ToLower(norm.NFKC.String(text))
	return strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
}
