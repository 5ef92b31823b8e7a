package extractor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
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
}

// Gazetteer lists the entities a tenant knows.
type Gazetteer interface {
	Entries(ctx context.Context, tenant string) ([]Entry, error)
}

// StaticGazetteer is a fixed list of entries for every tenant (tests,
// demos, a catalog loaded at start-up).
type StaticGazetteer []Entry

// Entries implements Gazetteer.
func (g StaticGazetteer) Entries(context.Context, string) ([]Entry, error) { return g, nil }

// CatalogTypes are the entity types the store gazetteer keeps: things a
// service catalog defines, whose names are specific enough to look for.
var CatalogTypes = []string{"service", "component", "system", "resource", "team", "group", "api", "domain", "datastore"}

// StoreGazetteer lists the catalog-ish entities of a graph store, cached
// per tenant for TTL so that a burst of documents costs one scan. An entity
// added to the store shows up after at most TTL; a tenant with none is
// asked again every time.
type StoreGazetteer struct {
	gs    store.GraphStore
	ttl   time.Duration
	types map[string]bool
	now   func() time.Time

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	entries []Entry
	at      time.Time
}

// NewStoreGazetteer returns a gazetteer over gs (TTL default 30s).
func NewStoreGazetteer(gs store.GraphStore, ttl time.Duration) *StoreGazetteer {
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	types := make(map[string]bool, len(CatalogTypes))
	for _, t := range CatalogTypes {
		types[t] = true
	}
	return &StoreGazetteer{gs: gs, ttl: ttl, types: types, now: time.Now, cache: map[string]cached{}}
}

// Entries implements Gazetteer.
func (g *StoreGazetteer) Entries(ctx context.Context, tenant string) ([]Entry, error) {
	g.mu.Lock()
	c, ok := g.cache[tenant]
	g.mu.Unlock()
	if ok && g.now().Sub(c.at) < g.ttl {
		return c.entries, nil
	}
	ents, err := g.gs.EntitiesByType(ctx, tenant, "")
	if err != nil {
		return nil, fmt.Errorf("listing entities of tenant %s: %w", tenant, err)
	}
	var out []Entry
	for _, e := range ents {
		if !g.types[e.Type] {
			continue
		}
		_, key := resolve.SplitID(e.ID)
		seen := map[string]bool{}
		add := func(name string) {
			if name = strings.TrimSpace(name); name == "" || seen[name] {
				return
			}
			seen[name] = true
			out = append(out, Entry{ID: e.ID, Type: e.Type, Name: name, Key: key})
		}
		add(e.Name)
		for _, f := range e.Sources {
			add(f.Name)
		}
	}
	// An empty list is not cached: it is what a tenant looks like just
	// before its catalog import is applied, and caching it would hide the
	// catalog from every document of the next TTL.
	if len(out) > 0 {
		g.mu.Lock()
		g.cache[tenant] = cached{entries: out, at: g.now()}
		g.mu.Unlock()
	}
	return out, nil
}

// matcher finds gazetteer entries in text: longest match first, compared
// by normalisation key over whole words, so "Cert Manager", "cert-manager"
// and "certmanager" all name the component cert-manager, while
// "xcert-manager" or "cert-manager-webhook" name nothing.
type matcher struct {
	byKey    map[string][]Entry // key -> entries (one per id)
	maxWords int
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
		add(resolve.Key(e.Key), e)
		if e.Name != "" {
			add(resolve.Key(e.Name), e)
		}
	}
	return m
}

type word struct{ start, end int }

type hit struct {
	start, end int // byte offsets of text in the searched string
	text       string
	entries    []Entry
}

// words splits text into maximal runs of letters and digits.
func words(text string) []word {
	var ws []word
	start := -1
	for i, r := range text {
		wordy := unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
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
// a single space, hyphen, underscore or dot.
func joiner(gap string) bool {
	return gap == " " || gap == "-" || gap == "_" || gap == "."
}

// glued reports whether the gap glues two words into one identifier
// ("cert-manager-webhook"): a mention must not end or start inside one.
func glued(gap string) bool { return gap == "-" || gap == "_" || gap == "." }

func (m *matcher) find(text string) []hit {
	if len(m.byKey) == 0 {
		return nil
	}
	ws := words(text)
	var hits []hit
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
		matched := 0
		for k := n; k >= 1; k-- {
			last := i + k - 1
			if last+1 < len(ws) && glued(text[ws[last].end:ws[last+1].start]) {
				continue // would end inside an identifier
			}
			span := text[ws[i].start:ws[last].end]
			if es, ok := m.byKey[resolve.Key(span)]; ok {
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
