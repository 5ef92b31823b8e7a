package offline

import (
	"context"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/resolve"
)

// Entry is a known entity the offline extractor looks for.
type Entry struct {
	ID   string // canonical id, type:key
	Type string
	// Name is one spelling of the entity (its display name or another
	// spelling a source used); the text may match it or Key.
	Name string
	// Key is the normalisation key of the id (resolve.Key of the catalog
	// name), the name mentions resolve under.
	Key string
	// Display is the entity's display name when Name is an alias (the
	// bundled gazetteer); empty means Name.
	Display string
	// Category is what kind of thing the entry is ("datastore", "aws").
	Category string
	// AsName marks a spelling that is also an ordinary word: it matches
	// only where the text writes it as a name (capitalised).
	AsName bool
	// Catalog marks an entry of the tenant's service catalog.
	Catalog bool
}

// Gazetteer lists the entities a tenant knows.
type Gazetteer interface {
	Entries(ctx context.Context, tenant string) ([]Entry, error)
}

// StaticGazetteer is a fixed list of entries for every tenant (tests,
// demos, a catalog loaded at start-up, the bundled gazetteer).
type StaticGazetteer []Entry

// Entries implements Gazetteer.
func (g StaticGazetteer) Entries(context.Context, string) ([]Entry, error) { return g, nil }

// matcher finds gazetteer entries in text: longest match first, compared
// by normalisation key over whole words, so "Cert Manager", "cert-manager"
// and "certmanager" all name the component cert-manager, while
// "xcert-manager" or "cert-manager-webhook" name nothing.
type matcher struct {
	byKey    map[string][]Entry // key -> entries (one per id)
	maxWords int
	// fallback is consulted for keys byKey lacks (the bundled gazetteer,
	// built once), without the ids in drop or exclude.
	fallback *matcher
	drop     map[string]bool
	exclude  string
	// prefixes holds every prefix of every key of byKey: a run of words
	// whose leading words' keys are no key's prefix is not looked up.
	prefixes *keyTrie
}

// keyTrie is the trie of a set of keys: its nodes are their prefixes,
// walked a word at a time without hashing the run so far, node 0 the
// empty prefix. Node n's children are labels[first[n]:first[n+1]], in
// byte order, at child[first[n]:first[n+1]]; the root's are also in a
// table by byte (-1: none), every walk starting there, and so are those
// of a node with at least wideNode children (a key's first letters),
// rows[wide[n]:][:256] (wide[n] < 0: none), rather than searched. term
// marks the nodes that are whole keys.
type keyTrie struct {
	first  []int32
	labels []byte
	child  []int32
	root   [256]int32
	wide   []int32
	rows   []int32
	term   []bool
}

// wideNode is the fewest children of a node whose children keyTrie
// holds in a table by byte.
const wideNode = 8

func newKeyTrie(keys []string) *keyTrie {
	kids := []map[byte]int32{{}} // node -> label -> node, while building
	for _, k := range keys {
		n := int32(0)
		for i := 0; i < len(k); i++ {
			c, ok := kids[n][k[i]]
			if !ok {
				c = int32(len(kids))
				kids = append(kids, map[byte]int32{})
				kids[n][k[i]] = c
			}
			n = c
		}
	}
	t := &keyTrie{first: make([]int32, len(kids)+1), term: make([]bool, len(kids))}
	for n, ks := range kids {
		t.first[n] = int32(len(t.labels))
		for _, b := range slices.Sorted(maps.Keys(ks)) {
			t.labels = append(t.labels, b)
			t.child = append(t.child, ks[b])
		}
	}
	t.first[len(kids)] = int32(len(t.labels))
	for b := range t.root {
		t.root[b] = -1
	}
	for b, c := range kids[0] {
		t.root[b] = c
	}
	t.wide = make([]int32, len(kids))
	for n, ks := range kids {
		t.wide[n] = -1
		if n == 0 || len(ks) < wideNode {
			continue
		}
		t.wide[n] = int32(len(t.rows))
		row := len(t.rows)
		for range 256 {
			t.rows = append(t.rows, -1)
		}
		for b, c := range ks {
			t.rows[row+int(b)] = c
		}
	}
	for _, k := range keys {
		t.term[t.walk(0, k)] = true
	}
	return t
}

// step returns the child of node n (>= 0) labelled c, or -1.
func (t *keyTrie) step(n int32, c byte) int32 {
	if n == 0 {
		return t.root[c]
	}
	if w := t.wide[n]; w >= 0 {
		return t.rows[w+int32(c)]
	}
	for e := t.first[n]; e < t.first[n+1]; e++ {
		if t.labels[e] == c {
			return t.child[e]
		}
	}
	return -1
}

// walk returns the node reached from node n by s, or -1.
func (t *keyTrie) walk(n int32, s string) int32 {
	for i := 0; i < len(s) && n >= 0; i++ {
		n = t.step(n, s[i])
	}
	return n
}

// endsKey reports whether, from node n (n < 0: none), the ASCII lower
// case of the word w can end a key as resolve.Key folds a name's last
// word: whole, or less its last one or two bytes, or its last three
// bytes made "y" (singular's forms). It may report a form that singular
// would not make, never miss one that it does.
func (t *keyTrie) endsKey(n int32, w string) bool {
	// at[d] is the node after all of w but its last 3-d bytes (-1: none).
	at := [4]int32{-1, -1, -1, -1}
	for i := 0; i <= len(w) && n >= 0; i++ {
		if d := i - (len(w) - 3); d >= 0 {
			at[d] = n
		}
		if i == len(w) {
			break
		}
		c := w[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		n = t.step(n, c)
	}
	for _, x := range at[1:] {
		if x >= 0 && t.term[x] {
			return true
		}
	}
	if at[0] >= 0 {
		if y := t.step(at[0], 'y'); y >= 0 && t.term[y] {
			return true
		}
	}
	return false
}

// walkLower returns the node reached from node n by the ASCII lower case
// of w, or -1 when no key begins so (n < 0: none does already).
func (t *keyTrie) walkLower(n int32, w string) int32 {
	for i := 0; i < len(w) && n >= 0; i++ {
		c := w[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		n = t.step(n, c)
	}
	return n
}

// lookup returns the entries of key k.
func (m *matcher) lookup(k string) []Entry {
	if es, ok := m.byKey[k]; ok || m.fallback == nil {
		return es
	}
	es := m.fallback.byKey[k]
	if len(es) == 0 {
		return nil
	}
	out := es[:0:0]
	for _, e := range es {
		if !m.drop[e.ID] && e.ID != m.exclude {
			out = append(out, e)
		}
	}
	return out
}

// withFallback returns a matcher of entries (the catalog's) that falls
// back to bundled, whose ids with a spelling the catalog uses are left out.
func withFallback(entries []Entry, bundled *matcher, exclude string, minKey, maxWords int) *matcher {
	m := newMatcher(entries, exclude, minKey, maxWords)
	if bundled == nil {
		return m
	}
	m.fallback, m.exclude = bundled, exclude
	m.maxWords = max(m.maxWords, bundled.maxWords)
	if len(entries) > 0 {
		m.drop = map[string]bool{}
		for k := range m.byKey {
			for _, e := range bundled.byKey[k] {
				m.drop[e.ID] = true
			}
		}
	}
	return m
}

func newMatcher(entries []Entry, exclude string, minKey, maxWords int) *matcher {
	m := &matcher{byKey: map[string][]Entry{}, maxWords: maxWords}
	ids := map[string]map[string]bool{} // key -> ids already listed
	add := func(k string, e Entry) {
		if utf8.RuneCountInString(k) < minKey {
			return
		}
		if ids[k] == nil {
			ids[k] = map[string]bool{}
		}
		if ids[k][e.ID] {
			return
		}
		ids[k][e.ID] = true
		m.byKey[k] = append(m.byKey[k], e)
	}
	defer func() { m.prefixes = newKeyTrie(slices.Sorted(maps.Keys(m.byKey))) }()
	for _, e := range entries {
		if e.ID == exclude || e.ID == "" {
			continue
		}
		if e.Key == "" {
			_, e.Key = resolve.SplitID(e.ID)
		}
		if e.Type == "" {
			e.Type, _ = resolve.SplitID(e.ID)
		}
		if e.Name != "" {
			add(resolve.Key(e.Name), e)
		}
		// A bundled entry matches its spellings only (each says whether it
		// is an ordinary word); a catalog entry also matches its id's key.
		if e.Display == "" {
			add(resolve.Key(e.Key), e)
		}
	}
	return m
}

type word struct{ start, end int }

// appendNonASCIIBefore returns, written over out's storage, for each i
// in [0, len(ws)], how many of the words ws[:i] of text hold a byte
// outside ASCII: the words ws[i:j] are ASCII when the counts at i and j
// are equal.
func appendNonASCIIBefore(out []int, text string, ws []word) []int {
	out = slices.Grow(out[:0], len(ws)+1)[:len(ws)+1]
	out[0] = 0
	for k, w := range ws {
		out[k+1] = out[k]
		for i := w.start; i < w.end; i++ {
			if text[i] >= utf8.RuneSelf {
				out[k+1]++
				break
			}
		}
	}
	return out
}

type hit struct {
	start, end int // byte offsets of text in the searched string
	text       string
	entries    []Entry
}

// words splits text into maximal runs of letters and digits.
func words(text string) []word {
	return appendWords(make([]word, 0, len(text)/6+1), text) // about one word in six bytes of prose
}

// appendWords appends the words of text to ws.
func appendWords(ws []word, text string) []word {
	start := -1
	for i, r := range text {
		var wordy bool
		if r < utf8.RuneSelf {
			wordy = 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
		} else {
			wordy = unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
		}
		switch {
		case wordy && start < 0:
			start = i
		case !wordy && start >= 0:
			ws = append(ws, word{start, i})
			start = -1
		}
	}
	if start >= 0 {
		ws = append(ws, word{start, len(text)})
	}
	return ws
}

// joiner reports whether the gap between two words keeps them one name:
// a single space, hyphen, underscore, dot or slash (Pub/Sub).
func joiner(gap string) bool {
	return gap == " " || gap == "-" || gap == "_" || gap == "." || gap == "/"
}

// glued reports whether the gap glues two words into one identifier
// ("cert-manager-webhook"): a mention must not end or start inside one.
func glued(gap string) bool { return gap == "-" || gap == "_" || gap == "." }

// admit keeps the entries that text[start:end] names: an ordinary word
// only where written as a name, a team only where the text speaks of a
// team ("the Payments team", "team Payments").
func (m *matcher) admit(es []Entry, text string, start, end int) []Entry {
	if len(es) == 0 {
		return nil
	}
	var out []Entry
	for _, e := range es {
		if e.AsName && !writtenAsName(text[start:end]) {
			continue
		}
		if (e.Type == "team" || e.Type == "group") && !teamContext(text, start, end) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// writtenAsName reports whether every word of s starts with a capital
// letter or a digit ("Flux", "Azure Functions"), so "flux" or "pages" in
// prose are words, not names.
func writtenAsName(s string) bool {
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		r, _ := utf8.DecodeRuneInString(w)
		if unicode.IsLower(r) {
			return false
		}
	}
	return true
}

// teamWord reports whether w names a group of people.
func teamWord(w string) bool {
	switch strings.ToLower(w) {
	case "team", "teams", "squad", "group", "tribe", "crew", "oncall":
		return true
	}
	return false
}

// teamContext reports whether the name at text[start:end] is spoken of as
// a team: a team word right after it, or right before it.
func teamContext(text string, start, end int) bool {
	after := strings.TrimLeft(text[end:], " '’s")
	i := 0
	for i < len(after) && isWordByte(after[i]) {
		i++
	}
	before := strings.TrimRight(text[:start], " ")
	j := len(before)
	for j > 0 && isWordByte(before[j-1]) {
		j--
	}
	return teamWord(after[:i]) || teamWord(before[j:])
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-'
}

func (m *matcher) find(text string) []hit {
	var sc matchScratch
	return m.findWith(&sc, text)
}

// matchScratch holds what find computes of one text and forgets: a
// document's units are searched one after another in the same storage.
type matchScratch struct {
	ws       []word
	nonASCII []int
	owns     []int32
	fbs      []int32
}

// findWith is find, its working storage in sc.
func (m *matcher) findWith(sc *matchScratch, text string) []hit {
	if len(m.byKey) == 0 && (m.fallback == nil || len(m.fallback.byKey) == 0) {
		return nil
	}
	if sc.ws == nil {
		sc.ws = make([]word, 0, len(text)/6+1) // about one word in six bytes of prose
	}
	sc.ws = appendWords(sc.ws[:0], text)
	sc.nonASCII = appendNonASCIIBefore(sc.nonASCII, text, sc.ws)
	ws, nonASCII := sc.ws, sc.nonASCII
	var hits []hit
	// The tries' nodes after each count of a run's leading words.
	sc.owns, sc.fbs = slices.Grow(sc.owns[:0], m.maxWords+1)[:m.maxWords+1], slices.Grow(sc.fbs[:0], m.maxWords+1)[:m.maxWords+1]
	owns, fbs := sc.owns, sc.fbs
	for i := 0; i < len(ws); {
		// The longest run of words from i joined into one name.
		n := 1
		for n < m.maxWords && i+n < len(ws) && joiner(text[ws[i+n-1].end:ws[i+n].start]) {
			n++
		}
		if i > 0 && glued(text[ws[i-1].end:ws[i].start]) {
			// i continues an identifier begun before it.
			i++
			continue
		}
		// Only runs of words whose leading words key to a key prefix can
		// name an entry (ASCII words key to their lower case; the last word
		// of several may fold to its singular, so it is not checked).
		limit := n
		ascii := nonASCII[i+n] == nonASCII[i]
		if ascii {
			// The words' lower case is walked down the tries of m and of
			// its fallback: a prefix of a key of either may go on.
			own, fb := int32(0), int32(-1)
			if m.fallback != nil {
				fb = 0
			}
			owns[0], fbs[0] = own, fb
			j := 0
			for j < n {
				w := text[ws[i+j].start:ws[i+j].end]
				own = m.prefixes.walkLower(own, w)
				if fb >= 0 {
					fb = m.fallback.prefixes.walkLower(fb, w)
				}
				if own < 0 && fb < 0 {
					break
				}
				j++
				owns[j], fbs[j] = own, fb
			}
			if j == 0 {
				i++
				continue
			}
			limit = min(n, j+1)
		}
		matched := 0
		for k := limit; k >= 1; k-- {
			last := i + k - 1
			if last+1 < len(ws) && glued(text[ws[last].end:ws[last+1].start]) {
				continue // would end inside an identifier
			}
			// The key of ASCII words is their lower case, the last word
			// maybe made singular: a key of neither trie is no entry's.
			if lw := text[ws[last].start:ws[last].end]; ascii && !m.prefixes.endsKey(owns[k-1], lw) &&
				(m.fallback == nil || !m.fallback.prefixes.endsKey(fbs[k-1], lw)) {
				continue
			}
			span := text[ws[i].start:ws[last].end]
			if es := m.admit(m.lookup(resolve.Key(span)), text, ws[i].start, ws[last].end); len(es) > 0 {
				hits = append(hits, hit{start: ws[i].start, end: ws[last].end, text: span, entries: es})
				matched = k
				break
			}
		}
		if matched == 0 {
			matched = 1
		}
		i += matched
	}
	return hits
}
