package taxonomy

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// naiveScan is automaton.scan by comparing each pattern at each offset of
// the text with ASCII capitals lowered: whether and where each pattern
// first occurs, every occurrence sorted.
func naiveScan(patterns []string, text string, mask []uint32) ([]bool, []int32, []occurrence) {
	lower := []byte(text)
	for i, c := range lower {
		if 'A' <= c && c <= 'Z' {
			lower[i] = c + 'a' - 'A'
		}
	}
	found := make([]bool, len(patterns))
	first := make([]int32, len(patterns))
	var occ []occurrence
	for id, p := range patterns {
		for i := 0; i+len(p) <= len(lower); i++ {
			if string(lower[i:i+len(p)]) == p {
				if !found[id] {
					first[id] = int32(i)
				}
				found[id] = true
				if mask[id] != 0 {
					occ = append(occ, occurrence{start: int32(i), end: int32(i + len(p)), mask: mask[id]})
				}
			}
		}
	}
	return found, first, sortOcc(occ)
}

func sortOcc(occ []occurrence) []occurrence {
	slices.SortFunc(occ, func(a, b occurrence) int {
		if a.end != b.end {
			return int(a.end - b.end)
		}
		if a.start != b.start {
			return int(a.start - b.start)
		}
		return int(a.mask) - int(b.mask)
	})
	return occ
}

// TestAutomatonFindsEveryOccurrence: the compacted automaton reports what
// a search for each pattern reports, capitals read as lower case, on
// texts of the patterns' bytes, capitals, bytes outside ASCII and bytes
// no pattern holds; and on the default taxonomy's patterns.
func TestAutomatonFindsEveryOccurrence(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	sets := [][]string{
		{"he", "she", "his", "hers", "h", "e", "s-e", "a b", "x.y", "\u00e9t\u00e9", "hershey"},
		{"cert", "certificate", "expired", "expir", "renew", "t ", "0x"},
	}
	tx, err := Default()
	require.NoError(t, err)
	sets = append(sets, defaultPatterns(tx))
	alphabet := []string{"h", "e", "s", "r", "H", "E", "S", "R", "-", " ", ".", "x", "y", "X", "a", "b", "\u00e9", "\u00c9", "t",
		"\u212a", "\u017f", "c", "C", "0", "q", "Q", "\n", "\xff", "cert", "CERTIFICATE", "Expired", "renew"}
	for _, patterns := range sets {
		a := newAutomaton(patterns)
		require.LessOrEqual(t, int(a.nc), 256)
		mask := make([]uint32, len(patterns))
		for i := range mask {
			mask[i] = uint32(rng.IntN(3))
		}
		for range 2000 {
			var b strings.Builder
			for range rng.IntN(40) {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			text := b.String()
			found, first := make([]bool, len(patterns)), make([]int32, len(patterns))
			occ := a.scan(text, found, first, mask, nil)
			wantFound, wantFirst, wantOcc := naiveScan(patterns, text, mask)
			require.Equal(t, wantFound, found, "%q", text)
			for id := range found {
				if found[id] {
					require.Equal(t, wantFirst[id], first[id], "%q in %q", patterns[id], text)
				}
			}
			require.Equal(t, wantOcc, sortOcc(occ), "%q", text)
		}
	}
}

// defaultPatterns are the keywords and cue literals of tx.
func defaultPatterns(tx *Taxonomy) []string {
	var out []string
	for _, m := range tx.Modes {
		out = append(out, m.Keywords...)
		for _, c := range m.Cues {
			for _, set := range LiteralSets(c.Pattern) {
				out = append(out, set...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
