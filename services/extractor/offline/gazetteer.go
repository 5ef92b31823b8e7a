package offline

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
)

//go:embed gazetteer.yaml
var gazetteerYAML string

// DefaultGazetteerYAML returns the bundled gazetteer document.
func DefaultGazetteerYAML() []byte { return []byte(gazetteerYAML) }

type gazetteerFile struct {
	Version int `yaml:"version"`
	Groups  []struct {
		Category string   `yaml:"category"`
		Type     string   `yaml:"type"`
		Names    []string `yaml:"names"`
	} `yaml:"groups"`
}

// ParseGazetteer parses a gazetteer document (the form of the bundled
// gazetteer.yaml): groups of "Name | alias | alias" lines with an entity
// type and a category. A spelling prefixed with "~" is an ordinary word
// too and matches only where written as a name.
func ParseGazetteer(data []byte) (StaticGazetteer, error) {
	var f gazetteerFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decoding gazetteer: %w", err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("decoding gazetteer: version %d, want 1", f.Version)
	}
	var out StaticGazetteer
	ids := map[string]string{} // id -> the line that defined it
	for _, g := range f.Groups {
		typ := resolve.Type(g.Type)
		if typ == "" {
			return nil, fmt.Errorf("decoding gazetteer: group %q has no type", g.Category)
		}
		for _, line := range g.Names {
			var spellings []string
			for _, s := range strings.Split(line, "|") {
				if s = strings.TrimSpace(s); s != "" {
					spellings = append(spellings, s)
				}
			}
			if len(spellings) == 0 {
				return nil, fmt.Errorf("decoding gazetteer: empty name in group %q", g.Category)
			}
			name := strings.TrimPrefix(spellings[0], "~")
			id := resolve.ID(typ, name)
			if prev, dup := ids[id]; dup {
				return nil, fmt.Errorf("decoding gazetteer: %q and %q are both %s", prev, line, id)
			}
			ids[id] = line
			_, key := resolve.SplitID(id)
			for _, s := range spellings {
				word := strings.HasPrefix(s, "~")
				out = append(out, Entry{ID: id, Type: typ, Name: strings.TrimPrefix(s, "~"), Key: key,
					Category: g.Category, AsName: word, Display: name})
			}
		}
	}
	return out, nil
}

// DefaultGazetteer parses the bundled gazetteer.
func DefaultGazetteer() (StaticGazetteer, error) { return ParseGazetteer([]byte(gazetteerYAML)) }

// LoadGazetteer reads and parses a gazetteer file.
func LoadGazetteer(path string) (StaticGazetteer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading gazetteer: %w", err)
	}
	g, err := ParseGazetteer(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// LoadGazetteers reads the gazetteer files of a comma-separated list
// (empty: none), in order.
func LoadGazetteers(list string) (StaticGazetteer, error) {
	var out StaticGazetteer
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		g, err := LoadGazetteer(p)
		if err != nil {
			return nil, err
		}
		out = append(out, g...)
	}
	return out, nil
}

// CatalogTypes are the entity types a catalog defines.
func CatalogTypes() []string {
	return []string{"service", "component", "system", "resource", "team", "group", "api", "domain", "datastore"}
}

// catalogRank is the highest name rank of a catalog fragment
// (store.EntityContribution.NameRank: 0 catalog title, 1 catalog name).
const catalogRank = 1

// CatalogGazetteer lists the entities a tenant's service catalog defines,
// read from the graph store: only fragments a catalog made (name rank 0
// or 1) count, so what other documents mention never changes what a
// document extracts. Cached per tenant for TTL (an empty list for a
// second) so that a burst of documents costs one scan; a catalog change
// shows up after at most TTL, or at once for the reads that start after
// Invalidate.
type CatalogGazetteer struct {
	gs    store.GraphStore
	ttl   time.Duration
	types map[string]bool
	now   func() time.Time

	mu    sync.Mutex
	cache map[string]cached
	// gen counts a tenant's invalidations: a scan that began before one
	// is not cached.
	gen map[string]uint64
}

type cached struct {
	entries []Entry
	until   time.Time // kept while now is before it
}

// NewCatalogGazetteer returns a catalog gazetteer over gs (TTL default 30s).
func NewCatalogGazetteer(gs store.GraphStore, ttl time.Duration) *CatalogGazetteer {
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	types := map[string]bool{}
	for _, t := range CatalogTypes() {
		types[t] = true
	}
	return &CatalogGazetteer{gs: gs, ttl: ttl, types: types, now: time.Now, cache: map[string]cached{},
		gen: map[string]uint64{}}
}

// Invalidate drops the tenant's cached entries: every Entries call that
// starts afterwards reads the graph store.
func (g *CatalogGazetteer) Invalidate(tenant string) {
	g.mu.Lock()
	delete(g.cache, tenant)
	g.gen[tenant]++
	g.mu.Unlock()
}

// Entries implements Gazetteer.
func (g *CatalogGazetteer) Entries(ctx context.Context, tenant string) ([]Entry, error) {
	g.mu.Lock()
	c, ok := g.cache[tenant]
	gen := g.gen[tenant]
	g.mu.Unlock()
	if ok && g.now().Before(c.until) {
		return c.entries, nil
	}
	start := g.now()
	out, err := g.read(ctx, tenant)
	if err != nil {
		return nil, err
	}
	// An empty list is what a tenant looks like just before its catalog
	// import is applied: it is kept for emptyTTL only (not at all would
	// make every document of a tenant without a catalog read the whole
	// graph: a backfill quadratic in its size), or emptyKeep times as long
	// as reading it took when that is longer, so that a large tenant
	// without a catalog spends at most about 1/emptyKeep of a core
	// looking for one.
	ttl := g.ttl
	if len(out) == 0 {
		ttl = min(ttl, max(emptyTTL, emptyKeep*g.now().Sub(start)))
	}
	g.mu.Lock()
	if g.gen[tenant] == gen {
		g.cache[tenant] = cached{entries: out, until: g.now().Add(ttl)}
	}
	g.mu.Unlock()
	return out, nil
}

// read lists the catalog entries of a tenant's graph: for every entity
// of a catalog type, in id order, each distinct spelling a catalog
// fragment gave it. A store that lists entity heads (store.EntityHeads)
// is asked for those alone: the spellings by rank are in the head's tally,
// so no fragment is read and a service thousands of documents mention
// costs one value. Another store's entities are read whole, and tallied.
func (g *CatalogGazetteer) read(ctx context.Context, tenant string) ([]Entry, error) {
	var heads []store.EntityHead
	for _, t := range slices.Sorted(maps.Keys(g.types)) {
		h, err := store.HeadsByType(ctx, g.gs, tenant, t)
		if err != nil {
			return nil, fmt.Errorf("listing the %s entities of tenant %s: %w", t, tenant, err)
		}
		heads = append(heads, h...)
	}
	// In id order, as one listing of every type gives them.
	slices.SortFunc(heads, func(a, b store.EntityHead) int { return strings.Compare(a.ID, b.ID) })
	var out []Entry
	for _, h := range heads {
		_, key := resolve.SplitID(h.ID)
		var names []string
		for _, v := range h.Names {
			if name := strings.TrimSpace(v.Name); v.Rank <= catalogRank && name != "" {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range slices.Compact(names) {
			out = append(out, CatalogEntry(h.ID, h.Type, name, key))
		}
	}
	return out, nil
}

// emptyTTL is how long a tenant's empty catalog list is kept, at least;
// emptyKeep times the time reading it took, when longer.
const (
	emptyTTL  = time.Second
	emptyKeep = 20
)

// CatalogEntry is the gazetteer entry of a catalog entity's name: a name
// that is also an ordinary word ("Issues", "Pages") matches only where
// written as a name.
func CatalogEntry(id, typ, name, key string) Entry {
	return Entry{ID: id, Type: typ, Name: name, Key: key, Catalog: true, AsName: OrdinaryWord(name)}
}

// OrdinaryWord reports whether name is a single ordinary English word of
// postmortem prose ("Issues", "Pages", "Search"): a catalog title like it
// links only where written as a name.
func OrdinaryWord(name string) bool {
	w := strings.ToLower(strings.TrimSpace(name))
	if w == "" || strings.IndexFunc(w, func(r rune) bool { return r < 'a' || r > 'z' }) >= 0 {
		return false
	}
	return ordinaryWord(w) || ordinaryWord(strings.TrimSuffix(w, "s"))
}

//go:embed words.txt
var wordsTxt string

// ordinaryWord reports whether w (lower case) is a word of words.txt.
func ordinaryWord(w string) bool { return ordinaryWordSet()(w) }

// ordinaryWordSet is the membership test of words.txt, parsed once; the
// set itself is out of reach, so nothing can change it.
var ordinaryWordSet = sync.OnceValue(func() func(string) bool {
	set := map[string]bool{}
	for _, line := range strings.Split(wordsTxt, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, w := range strings.Fields(line) {
			set[w] = true
		}
	}
	return func(w string) bool { return set[w] }
})
