package offline

import (
	"regexp"
	"testing"
)

// camelExpr is the expression camelCase states by hand.
var camelExpr = regexp.MustCompile(`^[A-Z][a-z0-9]+(?:[A-Z]+[a-z0-9]+)+$`)

// camelCases are words and near misses of every shape the expression
// tells apart.
var camelCases = []string{"", "A", "Ab", "AbC", "AbCd", "CertManager", "DynamoDb", "ABc", "AbCD", "AbCDe", "aBcD",
	"Ab_Cd", "Ab-Cd", "AbCd_", "A1B2", "A1Bc", "Ab1C2", "AbCDEf9", "Abcd", "ABCD", "AbcdEfgH", "Ab Cd", "AbÇd", "Ab\u212aCd",
	"AbCdEfGhIjKl", "Zz9Zz9", "@bCd", "AbC9", "Ab9Z", "K8sCluster", "IPv6Address", "GraphQL", "PagerDuty", "macOS",
	"Kubernetesclusters", "Abcdefghijklmnop1", "AbcdefghijklmN", "AbcdefghijklmnoP9x_"}

// TestCamelCaseIsTheExpression: camelCase holds exactly where its
// expression matches, on the cases and on every word of up to 4 bytes
// over a few of each class of byte.
func TestCamelCaseIsTheExpression(t *testing.T) {
	for _, w := range camelCases {
		if got, want := camelCase(w), camelExpr.MatchString(w); got != want {
			t.Fatalf("camelCase(%q) = %v, the expression %v", w, got, want)
		}
	}
	alphabet := "AZaz09_-é"
	var all func(prefix string, n int)
	all = func(prefix string, n int) {
		if got, want := camelCase(prefix), camelExpr.MatchString(prefix); got != want {
			t.Fatalf("camelCase(%q) = %v, the expression %v", prefix, got, want)
		}
		if n == 0 {
			return
		}
		for _, r := range alphabet {
			all(prefix+string(r), n-1)
		}
	}
	all("", 5)
}

// FuzzCamelCase compares camelCase with its expression.
func FuzzCamelCase(f *testing.F) {
	for _, w := range camelCases {
		f.Add(w)
	}
	f.Fuzz(func(t *testing.T, w string) {
		if got, want := camelCase(w), camelExpr.MatchString(w); got != want {
			t.Fatalf("camelCase(%q) = %v, the expression %v", w, got, want)
		}
	})
}
