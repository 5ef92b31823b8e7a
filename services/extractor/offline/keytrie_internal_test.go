package offline

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestKeyTrieWalksThePrefixesOfItsKeys: walking words down the trie a
// word at a time reaches a node exactly while the lower case of the
// words so far is a prefix of one of the keys, for keys sharing
// prefixes, keys outside ASCII, a key with a capital (which no lower-case
// run names) and the empty key.
func TestKeyTrieWalksThePrefixesOfItsKeys(t *testing.T) {
	keys := []string{"", "a", "ab", "abc", "abd", "b1", "cert", "certmanager", "certificate", "kafka", "k8s",
		"caf\u00e9", "zz9", "Upper", "pubsub", "pub"}
	prefixes := map[string]bool{}
	for _, k := range keys {
		for i := 1; i <= len(k); i++ {
			prefixes[k[:i]] = true
		}
	}
	tr := newKeyTrie(keys)
	words := []string{"a", "A", "b", "B", "c", "C", "d", "1", "9", "Cert", "CERT", "manager", "Manager", "ificate", "kafka",
		"k8s", "K8S", "caf", "zz", "Z", "upper", "Upper", "u", "pub", "Sub", "x", "ab", "AbC"}
	rng := rand.New(rand.NewPCG(9, 10))
	for range 20000 {
		var run strings.Builder
		n := int32(0)
		for range 1 + rng.IntN(4) {
			w := words[rng.IntN(len(words))]
			run.WriteString(strings.ToLower(w))
			n = tr.walkLower(n, w)
			if want := prefixes[run.String()]; (n >= 0) != want {
				t.Fatalf("after %q: node %d, want a prefix: %v", run.String(), n, want)
			}
		}
	}
	if n := newKeyTrie(nil).walkLower(0, "a"); n >= 0 {
		t.Fatalf("a trie without keys walks %q to %d", "a", n)
	}
}
