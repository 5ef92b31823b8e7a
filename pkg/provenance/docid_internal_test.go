package provenance

import (
	"math/rand/v2"
	"testing"
)

// TestASCIIDocIDAsTheRunes: on ASCII ids (printable, control characters,
// spaces at either end), the fast path accepts exactly what the rune by
// rune check accepts.
func TestASCIIDocIDAsTheRunes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	alphabet := []byte("aZ09-_./: \t\n\x00\x1f\x7f")
	for range 20000 {
		b := make([]byte, 1+rng.IntN(8))
		for i := range b {
			if rng.IntN(2) == 0 {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[i] = byte(rng.IntN(0x80))
			}
		}
		id := string(b)
		if fast, slow := asciiDocID(id), checkDocIDRunes(id) == nil; fast != slow {
			t.Fatalf("%q: fast path %v, rune by rune %v", id, fast, slow)
		}
	}
}
