package offline

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kgstream/kgstream/pkg/resolve"
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

// TestEndsKeyNeverMissesAKey: endsKey holds wherever the key of a run of
// ASCII words (resolve.Key: lower case, the last of several words made
// singular unless the run has a digit) is one of the trie's keys, and
// exactly where the lower case of the words, with the last word whole,
// less one or two bytes, or less three and then "y", is one.
func TestEndsKeyNeverMissesAKey(t *testing.T) {
	keys := []string{"policy", "pubsubqueue", "pubsubqueu", "cert", "certmanager", "class", "redis",
		"box", "boxe", "status", "node", "nodes", "s3bucket", "s3buckets", "db", "dbs", "watch", "a", "ab"}
	set := map[string]bool{}
	for _, k := range keys {
		set[k] = true
	}
	tr := newKeyTrie(keys)
	words := []string{"Policies", "policies", "policy", "polic", "Pub", "sub", "Queues", "queue", "Cert", "manager", "Managers",
		"classes", "class", "Redis", "boxes", "status", "Nodes", "node", "s3", "Buckets", "db", "DBs", "watches",
		"Watch", "a", "ab", "abs", "x", "IES", "ies"}
	joins := []string{" ", "-", "_", ".", "/"}
	rng := rand.New(rand.NewPCG(15, 16))
	for range 30000 {
		n := 1 + rng.IntN(3)
		ws := make([]string, n)
		var span strings.Builder
		for i := range ws {
			ws[i] = words[rng.IntN(len(words))]
			if i > 0 {
				span.WriteString(joins[rng.IntN(len(joins))])
			}
			span.WriteString(ws[i])
		}
		prefix := strings.ToLower(strings.Join(ws[:n-1], ""))
		node := tr.walk(0, prefix)
		last := ws[n-1]
		got := tr.endsKey(node, last)
		if set[resolve.Key(span.String())] && !got {
			t.Fatalf("%q keys to %q, a key, but endsKey is false", span.String(), resolve.Key(span.String()))
		}
		r := prefix + strings.ToLower(last)
		want := set[r] || len(last) >= 1 && set[r[:len(r)-1]] || len(last) >= 2 && set[r[:len(r)-2]] ||
			len(last) >= 3 && set[r[:len(r)-3]+"y"]
		if got != want {
			t.Fatalf("endsKey after %q of %q = %v, want %v", prefix, last, got, want)
		}
	}
}

// TestKeyTrieWideNodesStepAsTheirLabels: a node with a table by byte
// (wideNode children or more) steps to the child its sorted labels give,
// and to none for every other byte, for the bundled gazetteer's keys and
// for keys whose nodes have just fewer and just more children than that.
func TestKeyTrieWideNodesStepAsTheirLabels(t *testing.T) {
	x, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"caf\u00e9", "caf\u00e8"}
	for i := range wideNode + 1 {
		keys = append(keys, "x"+string(rune('a'+i)), "y"+string(rune('0'+i%10))+string(rune('a'+i)))
	}
	for i := range wideNode - 1 {
		keys = append(keys, "z"+string(rune('a'+i)))
	}
	for _, tr := range []*keyTrie{x.bundledMatcher.prefixes, newKeyTrie(keys)} {
		wide := 0
		for n := int32(1); n < int32(len(tr.term)); n++ {
			if tr.wide[n] >= 0 {
				wide++
			}
			for c := range 256 {
				want := int32(-1)
				for e := tr.first[n]; e < tr.first[n+1]; e++ {
					if tr.labels[e] == byte(c) {
						want = tr.child[e]
					}
				}
				if got := tr.step(n, byte(c)); got != want {
					t.Fatalf("node %d (wide %v) steps by %q to %d, its labels to %d", n, tr.wide[n] >= 0, byte(c), got, want)
				}
			}
		}
		if wide == 0 {
			t.Fatal("no node has a table")
		}
	}
}
