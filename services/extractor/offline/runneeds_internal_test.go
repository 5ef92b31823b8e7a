package offline

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestRunNeedsAsTheStringFunctions: the byte loops deciding which runs
// the identifier and host expressions search agree with the string
// functions they stand for, on runs of ASCII and non-ASCII letters and
// digits (a fullwidth or Arabic-Indic digit is no digit, "é" no lower-case
// letter) and of the separators.
func TestRunNeedsAsTheStringFunctions(t *testing.T) {
	pieces := []string{"a", "z", "A", "Z", "0", "9", "-", "_", ".", "é", "ａ", "٣", "１", "\xff", "ab", "db", "1005", "`", "/", "{"}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		run := b.String()
		if got, want := hasDashOrUnderscore(run), strings.ContainsAny(run, "-_"); got != want {
			t.Fatalf("hasDashOrUnderscore(%q) = %v, want %v", run, got, want)
		}
		want := strings.ContainsAny(run, "0123456789") && strings.IndexFunc(run, func(r rune) bool { return r >= 'a' && r <= 'z' }) >= 0
		if got := hasDigitAndLower(run); got != want {
			t.Fatalf("hasDigitAndLower(%q) = %v, want %v", run, got, want)
		}
	}
}
