package resolve

import (
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"
)

// keyByWords is Key as first written: split into words, fold the last.
func keyByWords(name string) string {
	s := name
	if !ascii(s) {
		s = norm.NFKC.String(s)
	}
	words := strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if len(words) == 0 {
		return strings.ToLower(strings.TrimSpace(s))
	}
	code := strings.IndexFunc(s, unicode.IsDigit) >= 0
	var b strings.Builder
	for i, w := range words {
		if i == len(words)-1 && i > 0 && !code {
			w = singular(w)
		}
		b.WriteString(strings.ToLower(w))
	}
	return b.String()
}

// TestKeyFastPathKeysAsBefore: the one-pass key of ASCII names equals the
// word-splitting key for every name built from these pieces.
func TestKeyFastPathKeysAsBefore(t *testing.T) {
	pieces := []string{"Kafka", "brokers", "broker", "EBS", "IOPS", "cert", "manager", "Statuses", "classes", "db1005",
		"cr2", "esams", "Pub", "Sub", "policies", "boxes", "caches", "Kubernetes", "x", "", " ", "-", "_", ".", "/",
		"  ", "--", "!!", "Ünïcode", "ﬁle", "Ⅻ", "queues", "APIs", "DNSes", "ies", "TIES"}
	seps := []string{" ", "-", "", "_", ".", " / ", "  "}
	n := 0
	for _, a := range pieces {
		for _, sep := range seps {
			for _, b := range pieces {
				for _, c := range []string{"", " proxies", "-worker", " 2"} {
					name := a + sep + b + c
					require.Equal(t, keyByWords(name), Key(name), "%q", name)
					n++
				}
			}
		}
	}
	require.Greater(t, n, 1000)
}
