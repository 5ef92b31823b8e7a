package query

import (
	"context"
	"fmt"
	"slices"

	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
)

// nameIndex finds, without admitting every entity of a tenant, the
// entities a question can name. It is built from every stored entity,
// unadmitted, and indexes more than any caller can see (every fragment's
// spelling, not only the readable ones): lookups return candidates, which
// the request admits and checks exactly as a scan of every visible entity
// would.
type nameIndex struct {
	byID map[string]store.Entity
	// byType: entity type -> ids, sorted.
	byType map[string][]string
	// keys: resolve.Key of the id's key, the display name and every
	// fragment's name -> entity ids, sorted.
	keys map[string][]string
	// words: each name word (nameWords of any spelling) -> ids; dels: each
	// one-letter deletion of a name word of five letters or more -> ids
	// (close spellings, one edit apart, share a word or a deletion).
	words, dels map[string][]string
	// units: "doc#unit" -> the id of every entity with a fragment citing
	// it, once per citation.
	units map[string][]string
}

func newNameIndex(es []store.Entity, words func(string) []string) *nameIndex {
	ix := &nameIndex{byID: make(map[string]store.Entity, len(es)), byType: map[string][]string{}, keys: map[string][]string{},
		words: map[string][]string{}, dels: map[string][]string{}, units: map[string][]string{}}
	addTo := func(m map[string][]string, k, id string) {
		if l := m[k]; len(l) == 0 || l[len(l)-1] != id {
			m[k] = append(l, id)
		}
	}
	for _, e := range es { // sorted by id, so every list is too
		ix.byID[e.ID] = e
		ix.byType[e.Type] = append(ix.byType[e.Type], e.ID)
		_, k, _ := cutID(e.ID)
		names := []string{e.Name}
		for _, f := range e.Sources {
			if f.Name != "" {
				names = append(names, f.Name)
			}
		}
		keys := []string{k}
		for _, n := range names {
			keys = append(keys, resolve.Key(n))
		}
		slices.Sort(keys)
		for _, k := range slices.Compact(keys) {
			addTo(ix.keys, k, e.ID)
		}
		var ws []string
		for _, n := range names {
			ws = append(ws, words(n)...)
		}
		slices.Sort(ws)
		var ds []string
		for _, w := range slices.Compact(ws) {
			addTo(ix.words, w, e.ID)
			ds = append(ds, deletions(w)...)
		}
		slices.Sort(ds)
		for _, d := range slices.Compact(ds) {
			addTo(ix.dels, d, e.ID)
		}
		for _, f := range e.Sources {
			for _, tu := range f.TextUnits {
				k := f.DocID + "#" + tu
				ix.units[k] = append(ix.units[k], e.ID)
			}
		}
	}
	return ix
}

// deletions are the one-rune deletions of w when w is long enough for a
// close spelling (closeSpelling needs five runes on both sides).
func deletions(w string) []string {
	rs := []rune(w)
	if len(rs) < 5 {
		return nil
	}
	out := make([]string, 0, len(rs))
	for i := range rs {
		out = append(out, string(rs[:i])+string(rs[i+1:]))
	}
	return out
}

// closeCandidates returns the ids of entities with a name word equal to,
// or one edit from, one of the question words q, sorted.
func (ix *nameIndex) closeCandidates(q []string) []string {
	var out []string
	for _, w := range q {
		out = append(out, ix.words[w]...)
		if len([]rune(w)) < 5 {
			continue
		}
		out = append(out, ix.dels[w]...) // a name word with one letter more
		for _, d := range deletions(w) {
			out = append(out, ix.words[d]...) // one letter less
			out = append(out, ix.dels[d]...)  // one letter changed
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// nameIndex returns the tenant's name index (cached while events keep the
// graph cache live).
func (v *view) nameIndex() (*nameIndex, error) {
	if v.names != nil {
		return v.names, nil
	}
	g, err := v.graphSet()
	if err != nil {
		return nil, err
	}
	ix, err := v.s.nameIndexOf(v.ctx, v.tenant, g)
	if err != nil {
		return nil, err
	}
	v.names = ix
	return ix, nil
}

// nameIndexOf returns the name index g keeps for tenant, built when g has
// none. One build at a time per set: requests arriving while another (or
// the warm-up, warm.go) builds it wait for that index instead of each
// reading every entity of the tenant again.
func (s *Service) nameIndexOf(ctx context.Context, tenant string, g *graphSet) (*nameIndex, error) {
	g.mu.Lock()
	ix := g.names
	g.mu.Unlock()
	if ix != nil {
		return ix, nil
	}
	g.namesMu.Lock()
	defer g.namesMu.Unlock()
	g.mu.Lock()
	ix = g.names
	g.mu.Unlock()
	if ix != nil {
		return ix, nil
	}
	es, err := s.st.EntitiesByType(ctx, tenant, "")
	if err != nil {
		return nil, fmt.Errorf("listing entities: %w", err)
	}
	g.internEntities(s.cache.graph.isLive(), es)
	ix = newNameIndex(es, s.names.words)
	g.mu.Lock()
	g.names = ix
	g.mu.Unlock()
	return ix, nil
}

// admitIDs admits the entities of ix with ids, in order, and keeps the
// visible ones.
func (v *view) admitIDs(ix *nameIndex, ids []string) ([]visibleEntity, error) {
	es := make([]store.Entity, 0, len(ids))
	for _, id := range ids {
		if e, ok := ix.byID[id]; ok {
			es = append(es, e)
		}
	}
	return v.admitAll(es)
}

// builtNameIndex returns the tenant's cached name index when the graph
// cache is live and a request has built it since the last graph change,
// else nil: readers that need only some entities use it when it is there
// but never build it (that reads every entity).
func (v *view) builtNameIndex() (*nameIndex, error) {
	if v.names != nil || !v.s.cache.graph.isLive() {
		return v.names, nil
	}
	g, err := v.graphSet()
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.names, nil
}

// loadEntities admits ids into the request's entity cache like
// v.entities, from the tenant's cached entities when the name index is
// built (no store read), else from the store.
func (v *view) loadEntities(ids []string) error {
	ix, err := v.builtNameIndex()
	if err != nil {
		return err
	}
	if ix == nil {
		return v.entities(ids)
	}
	var es []store.Entity
	for _, id := range ids {
		if _, hit := v.lookup(id); hit {
			continue
		}
		if e, ok := ix.byID[id]; ok {
			es = append(es, e)
		} else {
			v.entityCache[id] = noEntity
		}
	}
	_, err = v.admitAll(es)
	return err
}

// entitiesOfType returns the visible entities of typ, sorted by id: from
// the tenant's cached entities when the name index is built, else listed
// from the store.
func (v *view) entitiesOfType(typ string) ([]visibleEntity, error) {
	ix, err := v.builtNameIndex()
	if err != nil {
		return nil, err
	}
	if ix == nil {
		es, err := v.s.st.EntitiesByType(v.ctx, v.tenant, typ)
		if err != nil {
			return nil, fmt.Errorf("listing %s entities: %w", typ, err)
		}
		return v.admitAll(es)
	}
	return v.admitIDs(ix, ix.byType[typ])
}
