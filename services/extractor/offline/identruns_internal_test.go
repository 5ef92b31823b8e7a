package offline

import (
	"reflect"
	"testing"
)

// identRunCases are texts of identifiers, hosts and prose, with every
// class of identifier byte at a run's start, inside it and at its end.
var identRunCases = []string{"", "-", "_", "a", "1", "A", "a1", "1a", "A1", "-a1", "a1-", "_x", "x_", "a.b", "..",
	"cert-manager cert_manager certManager", "db1005 mw1234.eqiad.wmnet cr2-esams asw-d2-sdtpa ip-10-0-32-54",
	"us-east-1 v1.2.3 x86_64 CVE-2021-44228 -- --flag __init__ a--b a__b", "The DNS resolver (kube-dns) failed.",
	"caf\u00e9-bar na\u00efve_x \u00fcber1 \xff-a1", "PROBLEM - Disk space on host1 is CRITICAL", "A-B C_D E1-F2 g-H3", "zz123 xyz-9z z_9"}

// checkIdentRuns fails unless the classes of text's identifier runs tell
// the runs the functions keep, and findInRunsHolding finds what
// findInRunsIf does with them.
func checkIdentRuns(t *testing.T, f *componentFinder, text string) {
	t.Helper()
	runs := appendIdentRuns(nil, text)
	plain := appendRuns(nil, text, identBytes)
	if len(runs) != len(plain) {
		t.Fatalf("%q: %d runs, byteRuns %d", text, len(runs), len(plain))
	}
	for k, r := range runs {
		w := text[r.start:r.end]
		if r.run != plain[k] {
			t.Fatalf("%q: run %d is %v, byteRuns %v", text, k, r.run, plain[k])
		}
		if got, want := r.holds&dashOrUnderscore != 0, hasDashOrUnderscore(w); got != want {
			t.Fatalf("%q: holds a dash or underscore: %v, hasDashOrUnderscore %v", w, got, want)
		}
		if got, want := r.holds&(asciiDigit|asciiLower) == asciiDigit|asciiLower, hasDigitAndLower(w); got != want {
			t.Fatalf("%q: holds a digit and a lower-case letter: %v, hasDigitAndLower %v", w, got, want)
		}
	}
	if got, want := findInRunsHolding(f.ident, text, runs, dashOrUnderscore), findInRunsIf(f.ident, text, hasDashOrUnderscore); !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: identifiers %v, findInRunsIf %v", text, got, want)
	}
	if got, want := findInRunsHolding(f.host, text, runs, asciiDigit|asciiLower), findInRuns(f.host, text); !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: hosts %v, findInRuns %v", text, got, want)
	}
}

// TestIdentRunsHoldTheirClasses: on the cases and on every text of up to
// four bytes over bytes of each class (both ends of the ranges) and
// separators.
func TestIdentRunsHoldTheirClasses(t *testing.T) {
	f := newComponentFinder(nil, nil)
	for _, s := range identRunCases {
		checkIdentRuns(t, f, s)
	}
	alphabet := "-_.azZ59 "
	var all func(prefix string, n int)
	all = func(prefix string, n int) {
		checkIdentRuns(t, f, prefix)
		if n == 0 {
			return
		}
		for i := range len(alphabet) {
			all(prefix+alphabet[i:i+1], n-1)
		}
	}
	all("", 4)
}

// FuzzIdentRuns compares the classes of identifier runs with the
// functions they stand for.
func FuzzIdentRuns(f *testing.F) {
	for _, s := range identRunCases {
		f.Add(s)
	}
	cf := newComponentFinder(nil, nil)
	f.Fuzz(func(t *testing.T, s string) { checkIdentRuns(t, cf, s) })
}
