package query

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
)

// nameIndex finds, without admitting every entity of a tenant, the
// entities a question can name. It is built from every stored entity,
// unadmitted, and indexes more than any caller can see (every fragment's
// spelling, not only the readable ones): lookups return candidates, which
// the request admits and checks exactly as a scan of every visible entity
// would.
//
// A graph change does not build it again: the index of the next graph
// set is this one patched for the entities the change named (patched),
// an overlay of their records over the same immutable base, whose lookups
// answer exactly what an index built from every entity would. The
// overlay is folded into a new base (fold) once it grows past a bound, in
// the background.
type nameIndex struct {
	base *nameMaps
	// over is nil on a built or folded index.
	over *nameOverlay
	// seq is the number of the last patch the index has (its lineage,
	// one full build and what was patched from it, numbers its patches);
	// folds are the lineage's folds.
	seq   uint64
	folds *nameFolds
	// merged keeps the lists of the keys over changed, by nameKey, each
	// merged once per index.
	merged sync.Map
}

// Kinds of key a name index maps to entity ids.
const (
	// byType: entity type -> ids.
	kindType = iota
	// keys: resolve.Key of the id's key, the display name and every
	// fragment's name -> ids.
	kindKey
	// words: each name word (nameWords of any spelling) -> ids.
	kindWord
	// dels: each one-letter deletion of a name word of five letters or
	// more -> ids (close spellings, one edit apart, share a word or a
	// deletion).
	kindDel
	// units: "doc#unit" -> the id of every entity with a fragment citing
	// it, once per citation.
	kindUnit
	nKinds
)

// nameMaps are the maps of a name index: every entity by id, and per
// kind, key -> ids sorted (with repeats for units). Immutable once made.
type nameMaps struct {
	byID  map[string]store.Entity
	lists [nKinds]map[string][]string
}

// nameOverlay is what patches changed over a base: the current record of
// every changed id (found false: removed) and, per kind, the keys whose
// list a change altered -> how many times each changed id now stands in
// it. A key absent from lists is the base's as it is. Immutable once
// made: a patch copies it (the maps; an override it changes is made
// anew).
type nameOverlay struct {
	ents  map[string]overlayEntity
	lists [nKinds]map[string]keyOverride
}

type overlayEntity struct {
	e     store.Entity
	found bool
	// seq is the patch that read it.
	seq uint64
}

// keyOverride is what patches changed of one key's list: each of ids
// (sorted) stands counts[i] times in it (0: not at all) in place of what
// the base lists of it.
type keyOverride struct {
	ids    []string
	counts []int
}

// apply returns o, in new slices, with each id of d standing d[id] times
// more than it does now: as o says, or else as base (the key's list in
// the base, sorted) has it.
func (o keyOverride) apply(d map[string]int, base []string) keyOverride {
	ids := slices.Sorted(maps.Keys(d))
	out := keyOverride{ids: make([]string, 0, len(o.ids)+len(ids)), counts: make([]int, 0, len(o.ids)+len(ids))}
	add := func(id string, n int) {
		out.ids = append(out.ids, id)
		out.counts = append(out.counts, n)
	}
	i, j := 0, 0
	for i < len(o.ids) || j < len(ids) {
		switch {
		case j == len(ids) || (i < len(o.ids) && o.ids[i] < ids[j]):
			add(o.ids[i], o.counts[i])
			i++
		case i == len(o.ids) || ids[j] < o.ids[i]:
			add(ids[j], baseCount(base, ids[j])+d[ids[j]])
			j++
		default:
			add(ids[j], o.counts[i]+d[ids[j]])
			i++
			j++
		}
	}
	return out
}

// merge returns base (sorted) with o applied, in id order; nil when
// empty.
func (o keyOverride) merge(base []string) []string {
	out := make([]string, 0, len(base)+len(o.ids))
	emit := func(i int) {
		for range o.counts[i] {
			out = append(out, o.ids[i])
		}
	}
	i := 0
	for _, id := range base {
		for i < len(o.ids) && o.ids[i] < id {
			emit(i)
			i++
		}
		if i < len(o.ids) && o.ids[i] == id {
			continue // o says how many times it stands, emitted past it
		}
		out = append(out, id)
	}
	for ; i < len(o.ids); i++ {
		emit(i)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// baseCount is how many times id stands in l (sorted).
func baseCount(l []string, id string) int {
	i, _ := slices.BinarySearch(l, id)
	n := 0
	for i+n < len(l) && l[i+n] == id {
		n++
	}
	return n
}

type nameKey struct {
	kind int
	key  string
}

// spellings are e's display name and fragment names, each once.
func spellings(e store.Entity) []string {
	names := []string{e.Name}
	for _, f := range e.Sources {
		if f.Name != "" && f.Name != e.Name {
			names = append(names, f.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// entityKeys are the keys e has in each kind, as newNameIndex indexes
// them: sorted and distinct but for units (one per citation).
func entityKeys(e store.Entity, words func(string) []string) *[nKinds][]string {
	var out [nKinds][]string
	out[kindType] = []string{e.Type}
	nameKeys(&out, e, words)
	for _, f := range e.Sources {
		for _, tu := range f.TextUnits {
			out[kindUnit] = append(out[kindUnit], f.DocID+"#"+tu)
		}
	}
	return &out
}

// nameKeys sets the kinds of out that e's spellings make (keys, words,
// deletions).
func nameKeys(out *[nKinds][]string, e store.Entity, words func(string) []string) {
	names := spellings(e)
	_, k, _ := cutID(e.ID)
	keys := []string{k}
	for _, n := range names {
		keys = append(keys, resolve.Key(n))
	}
	slices.Sort(keys)
	out[kindKey] = slices.Compact(keys)
	var ws []string
	for _, n := range names {
		ws = append(ws, words(n)...)
	}
	slices.Sort(ws)
	ws = slices.Compact(ws)
	out[kindWord] = ws
	var ds []string
	for _, w := range ws {
		ds = append(ds, deletions(w)...)
	}
	slices.Sort(ds)
	out[kindDel] = slices.Compact(ds)
}

// keyDelta is, per kind, by how much the times an entity stands in each
// key's list change from its record old (had false: absent) to new
// (has false: absent). Between two records it looks only at what
// differs: the type, the spellings when they differ, and the text units
// of the fragments that differ; a hub entity changed by one document
// costs a walk over its fragments, not its every key.
func keyDelta(old store.Entity, had bool, new store.Entity, has bool, words func(string) []string) [nKinds]map[string]int {
	var d [nKinds]map[string]int
	for kind := range d {
		d[kind] = map[string]int{}
	}
	add := func(keys *[nKinds][]string, sign int, kinds ...int) {
		for _, kind := range kinds {
			for _, k := range keys[kind] {
				d[kind][k] += sign
			}
		}
	}
	all := []int{kindType, kindKey, kindWord, kindDel, kindUnit}
	switch {
	case !had && !has:
	case !had:
		add(entityKeys(new, words), 1, all...)
	case !has:
		add(entityKeys(old, words), -1, all...)
	default:
		if old.Type != new.Type {
			d[kindType][old.Type]--
			d[kindType][new.Type]++
		}
		if !slices.Equal(spellings(old), spellings(new)) {
			var ko, kn [nKinds][]string
			nameKeys(&ko, old, words)
			nameKeys(&kn, new, words)
			add(&ko, -1, kindKey, kindWord, kindDel)
			add(&kn, 1, kindKey, kindWord, kindDel)
		}
		units := func(f store.Fragment, sign int) {
			for _, tu := range f.TextUnits {
				d[kindUnit][f.DocID+"#"+tu] += sign
			}
		}
		// Fragments are sorted by document; whatever the order, a pair
		// taken out and put back nets to the difference.
		a, b := old.Sources, new.Sources
		for i, j := 0, 0; i < len(a) || j < len(b); {
			switch {
			case j == len(b) || i < len(a) && a[i].DocID < b[j].DocID:
				units(a[i], -1)
				i++
			case i == len(a) || b[j].DocID < a[i].DocID:
				units(b[j], 1)
				j++
			default:
				if !slices.Equal(a[i].TextUnits, b[j].TextUnits) {
					units(a[i], -1)
					units(b[j], 1)
				}
				i++
				j++
			}
		}
	}
	return d
}

func newNameIndex(es []store.Entity, words func(string) []string) *nameIndex {
	b := &nameMaps{byID: make(map[string]store.Entity, len(es))}
	for i := range b.lists {
		b.lists[i] = map[string][]string{}
	}
	for _, e := range es { // sorted by id, so every list is too
		b.byID[e.ID] = e
		for kind, keys := range entityKeys(e, words) {
			m := b.lists[kind]
			for _, k := range keys {
				m[k] = append(m[k], e.ID)
			}
		}
	}
	return &nameIndex{base: b, folds: &nameFolds{}}
}

// entity returns the entity with id.
func (ix *nameIndex) entity(id string) (store.Entity, bool) {
	if ix.over != nil {
		if oe, ok := ix.over.ents[id]; ok {
			return oe.e, oe.found
		}
	}
	e, ok := ix.base.byID[id]
	return e, ok
}

// list returns the ids of kind with key, sorted (callers must not modify
// it): the base's unless a patch changed it, then the base's with the
// overlay's override applied (made once per index).
func (ix *nameIndex) list(kind int, key string) []string {
	b := ix.base.lists[kind][key]
	if ix.over == nil {
		return b
	}
	o, changed := ix.over.lists[kind][key]
	if !changed {
		return b
	}
	nk := nameKey{kind, key}
	if l, ok := ix.merged.Load(nk); ok {
		return l.([]string)
	}
	l := o.merge(b)
	ix.merged.Store(nk, l)
	return l
}

// nameChange is one entity's record as a patch read it.
type nameChange struct {
	id    string
	e     store.Entity
	found bool
	seq   uint64
}

// patched returns ix with changes (distinct ids) applied: their
// entities' records replaced, added or, not found, removed; the index
// is at seq. ix is not modified. The cost is the overlay's size and what
// changed in the changed entities' keys, not the index's size.
func (ix *nameIndex) patched(changes []nameChange, seq uint64, words func(string) []string) *nameIndex {
	o := &nameOverlay{ents: map[string]overlayEntity{}}
	for kind := range o.lists {
		o.lists[kind] = map[string]keyOverride{}
	}
	if ix.over != nil {
		maps.Copy(o.ents, ix.over.ents)
		for kind := range o.lists {
			maps.Copy(o.lists[kind], ix.over.lists[kind])
		}
	}
	// The deltas of every change are gathered per key first, then each
	// key's override is made once: a key many changed entities share (a
	// type, a common word, a document's unit) costs one merge, not one
	// copy of its override per entity.
	var deltas [nKinds]map[string]map[string]int
	for _, ch := range changes {
		prev, had := ix.entity(ch.id)
		for kind, delta := range keyDelta(prev, had, ch.e, ch.found, words) {
			for k, n := range delta {
				if n == 0 {
					continue
				}
				if deltas[kind] == nil {
					deltas[kind] = map[string]map[string]int{}
				}
				d := deltas[kind][k]
				if d == nil {
					d = map[string]int{}
					deltas[kind][k] = d
				}
				d[ch.id] += n
			}
		}
		o.ents[ch.id] = overlayEntity{e: ch.e, found: ch.found, seq: ch.seq}
	}
	for kind, keys := range deltas {
		for k, d := range keys {
			o.lists[kind][k] = o.lists[kind][k].apply(d, ix.base.lists[kind][k])
		}
	}
	return &nameIndex{base: ix.base, over: o, seq: seq, folds: ix.folds}
}

// overlaySize is how many entities patches changed over the base.
func (ix *nameIndex) overlaySize() int {
	if ix.over == nil {
		return 0
	}
	return len(ix.over.ents)
}

// fold returns ix as a new base without overlay: the base's maps copied
// with what the overlay changed (the cost is the index's size, which is
// why it runs in the background).
func (ix *nameIndex) fold() *nameIndex {
	if ix.over == nil {
		return ix
	}
	b := &nameMaps{byID: maps.Clone(ix.base.byID)}
	for id, oe := range ix.over.ents {
		if oe.found {
			b.byID[id] = oe.e
		} else {
			delete(b.byID, id)
		}
	}
	for kind := range b.lists {
		m := maps.Clone(ix.base.lists[kind])
		if m == nil {
			m = map[string][]string{}
		}
		for k, o := range ix.over.lists[kind] {
			if l := o.merge(ix.base.lists[kind][k]); l != nil {
				m[k] = l
			} else {
				delete(m, k)
			}
		}
		b.lists[kind] = m
	}
	return &nameIndex{base: b, seq: ix.seq, folds: ix.folds}
}

// nameFolds are the folds of one lineage of name indexes (one full build
// and its patches): at most one runs at a time; done is the last one
// made, of src. next numbers the lineage's patches.
type nameFolds struct {
	next    atomic.Uint64
	mu      sync.Mutex
	running bool
	done    *nameIndex
	src     *nameIndex
}

// start reports whether a fold may start (none runs); the caller then
// calls finish.
func (f *nameFolds) start() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running {
		return false
	}
	f.running = true
	return true
}

// finish records folded, the fold of src (nil: none was made).
func (f *nameFolds) finish(folded, src *nameIndex) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = false
	if folded != nil {
		f.done, f.src = folded, src
	}
}

// rebased returns ix on the lineage's last fold when that fold is of an
// index over ix's base: the fold patched with the records ix read after
// the fold's source did (a record of a later patch is read later, so it
// is at least as new; one the source has and ix not is newer than ix's
// base). Else ix.
func (ix *nameIndex) rebased(words func(string) []string) *nameIndex {
	if ix.over == nil {
		return ix
	}
	ix.folds.mu.Lock()
	done, src := ix.folds.done, ix.folds.src
	ix.folds.mu.Unlock()
	if done == nil || src.base != ix.base {
		return ix
	}
	var since []nameChange
	for id, oe := range ix.over.ents {
		if se, ok := src.over.ents[id]; ok && se.seq >= oe.seq {
			continue
		}
		since = append(since, nameChange{id: id, e: oe.e, found: oe.found, seq: oe.seq})
	}
	if len(since) == 0 {
		return &nameIndex{base: done.base, over: done.over, seq: ix.seq, folds: ix.folds}
	}
	slices.SortFunc(since, func(a, b nameChange) int { return strings.Compare(a.id, b.id) })
	return done.patched(since, ix.seq, words)
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
		out = append(out, ix.list(kindWord, w)...)
		if len([]rune(w)) < 5 {
			continue
		}
		out = append(out, ix.list(kindDel, w)...) // a name word with one letter more
		for _, d := range deletions(w) {
			out = append(out, ix.list(kindWord, d)...) // one letter less
			out = append(out, ix.list(kindDel, d)...)  // one letter changed
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// noteNamesAsked records that a request used tenant's name index now
// (keepNamesWarmFor), writing the shared map at most once a second per
// tenant rather than on every question.
func (s *Service) noteNamesAsked(tenant string) {
	now := time.Now()
	if at, ok := s.namesAsked.Load(tenant); ok && now.Sub(at.(time.Time)) < time.Second {
		return
	}
	s.namesAsked.Store(tenant, now)
}

// nameIndex returns the tenant's name index (cached while events keep the
// graph cache live).
func (v *view) nameIndex() (*nameIndex, error) {
	if v.names != nil {
		return v.names, nil
	}
	v.s.noteNamesAsked(v.tenant)
	// The caller's kept admissions are those of this set or of one before
	// it, never of a later one: what is admitted from the index is kept
	// only with graph reads no newer than the index (admitStale).
	v.keptAdmissions()
	g, err := v.graphSet()
	if err != nil {
		return nil, err
	}
	if ix, pending := v.s.recentNames(v.tenant, g); ix != nil {
		v.names, v.namesPending = ix, pending
		return ix, nil
	}
	ix, err := v.s.nameIndexOf(v.ctx, v.tenant, g)
	if err != nil {
		return nil, err
	}
	v.names = ix
	return ix, nil
}

// namesStaleFor bounds how old the last background patch of a tenant's
// name index may be for requests to use the index it made (recentNames).
const namesStaleFor = 3 * keepWarmEvery

// recentNames returns the name index g was to be patched from and the
// entities changed since (pending: the index's entries of those may be
// older than the graph), when
// keepWarm patches this tenant's index in the background and did so less
// than namesStaleFor ago; nil otherwise (the request patches it, as
// nameIndexOf does). While documents are applied every set has changes
// pending, and patching them on the request path re-read every changed
// entity (a hub named by every document, whole) on every question; in
// the background it is read once a second. The index lags the graph by
// at most about namesStaleFor for the entities it finds; what it finds
// is still admitted per request against the registry, so a revocation or
// a deletion counts at once.
func (s *Service) recentNames(tenant string, g *graphSet) (ix *nameIndex, pending []string) {
	at, ok := s.namesKept.Load(tenant)
	if !ok || time.Since(at.(time.Time)) > namesStaleFor {
		return nil, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.names != nil {
		return g.names, nil
	}
	return g.from, g.pending.ids
}

// nameIndexOf returns the name index g keeps for tenant, made when g has
// none: patched from the index of the set g succeeds when a request was
// making that one as g took its place (waiting for it, then patching it
// for the entities changed since), else from the index g was to patch
// for every entity changed since it was made (patchNames), else built
// from every entity. One at a time per set: requests arriving while
// another (or the warm-up, warm.go) makes it wait for that index instead
// of each reading the entities again.
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
	ix, from, pending, prev, recent := g.names, g.from, g.pending, g.prev, g.recent
	if ix == nil {
		g.making = true
	}
	g.mu.Unlock()
	if ix != nil {
		return ix, nil
	}
	defer func() {
		g.mu.Lock()
		g.making = false
		g.mu.Unlock()
	}()
	var err error
	if prev != nil {
		// Its index has every change but the recent ones: one read of
		// those, rather than another of every change since from.
		var pix *nameIndex
		if pix, err = s.nameIndexOf(ctx, tenant, prev); err == nil {
			ix, err = s.patchNames(ctx, tenant, g, pix, recent)
		}
	}
	switch {
	case ix != nil:
	case from != nil:
		if ix, err = s.patchNames(ctx, tenant, g, from, pending); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		es, err := s.st.EntitiesByType(ctx, tenant, "")
		if err != nil {
			return nil, fmt.Errorf("listing entities: %w", err)
		}
		g.internEntities(s.cache.graph.isLive(), es)
		ix = newNameIndex(es, s.names.words)
	}
	g.mu.Lock()
	g.names, g.from, g.pending, g.prev, g.recent = ix, nil, namedChange{}, nil, namedChange{}
	g.mu.Unlock()
	return ix, nil
}

// patchNames returns from patched for what ch names, the entities
// ch.ids read again in one read (readChanged). Their strings are not
// interned: the set's interner
// holds none of the strings the index shares, and interning a hub
// entity's fragments at every change costs more than it saves. When the
// patches' overlay has grown past its bound (foldBound), a fold of it
// starts in the background: a later patch starts from it (rebased).
//
// The index is g's. A record read by parts (readChanged) is as stored
// for the changes g follows, not for later ones: when g is no longer
// the tenant's current set once the patch is numbered (a request that
// took g before a change came), a set after it may have patched with a
// lower number, and a record of g's, numbered later, would then be
// taken for the newer one when indexes are rebased on a fold (rebased).
// Then the changed entities are read whole, as stored at the read, later
// than the number says, as every whole read is.
func (s *Service) patchNames(ctx context.Context, tenant string, g *graphSet, from *nameIndex, ch namedChange) (*nameIndex, error) {
	// Numbered before the read: a later number is a later read.
	seq := from.folds.next.Add(1)
	if !s.cache.graph.holds(tenant, func(cur *graphSet) bool { return cur == g }) {
		ch.docs = nil
	}
	read, err := s.readChanged(ctx, tenant, from, ch)
	if err != nil {
		return nil, fmt.Errorf("reading changed entities: %w", err)
	}
	changes := make([]nameChange, len(ch.ids))
	for i, id := range ch.ids {
		e, ok := read[id]
		changes[i] = nameChange{id: id, e: e, found: ok, seq: seq}
	}
	ix := from.rebased(s.names.words).patched(changes, seq, s.names.words)
	if ix.overlaySize() > foldBound(ix) && ix.folds.start() {
		if !s.cache.graph.inBackground(func(context.Context) { ix.folds.finish(ix.fold(), ix) }) {
			ix.folds.finish(nil, nil)
		}
	}
	return ix, nil
}

// readChanged returns the entities ch.ids as stored now (those absent
// left out). When the documents that changed them are known and the
// store reads parts of entities (store.EntityParts), an entity from
// holds is not decoded whole: its head and its fragments by the
// documents whose changes named it are read, and its other fragments
// taken from from's record of it, as only the fragments of a change's
// document change (namedChange). An entity whose fragments do not then
// number what its head counts (one from had not, a change not yet
// followed) is read whole. A hub thousands of documents name, named by
// a quarter of the changes while documents are applied, then costs a
// few fragments, not thousands.
func (s *Service) readChanged(ctx context.Context, tenant string, from *nameIndex, ch namedChange) (map[string]store.Entity, error) {
	ep, ok := s.st.(store.EntityParts)
	docs := ch.byEntity()
	if !ok || docs == nil {
		return s.st.Entities(ctx, tenant, ch.ids)
	}
	parts, err := ep.EntityParts(ctx, tenant, ch.ids, 0, docs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.Entity, len(parts))
	var whole []string
	for _, id := range ch.ids {
		p, ok := parts[id]
		if !ok {
			continue // absent now
		}
		prev, _ := from.entity(id)
		if e, ok := entityFromPart(prev, p, docs[id]); ok {
			out[id] = e
		} else {
			whole = append(whole, id)
		}
	}
	if len(whole) == 0 {
		return out, nil
	}
	read, err := s.st.Entities(ctx, tenant, whole)
	if err != nil {
		return nil, err
	}
	maps.Copy(out, read)
	return out, nil
}

// entityFromPart is the entity p is part of: its head, its fragments by
// docs (sorted) from p, the others from prev (the entity as it was
// before documents docs changed it; zero when it did not exist). False
// when those do not number the fragments p's head counts.
func entityFromPart(prev store.Entity, p store.EntityPart, docs []string) (store.Entity, bool) {
	srcs := make([]store.Fragment, 0, p.Fragments)
	for _, f := range prev.Sources {
		if _, changed := slices.BinarySearch(docs, f.DocID); !changed {
			srcs = append(srcs, f)
		}
	}
	if len(srcs)+len(p.Of) != p.Fragments {
		return store.Entity{}, false
	}
	for _, f := range p.Of {
		srcs = append(srcs, f)
	}
	slices.SortFunc(srcs, func(a, b store.Fragment) int { return cmp.Compare(a.DocID, b.DocID) })
	return store.Entity{ID: p.ID, Type: p.Type, Name: p.Name, Sources: srcs}, true
}

// foldBound is the overlay size past which an index's patches are folded
// into a new base: a patch copies the overlay, a fold the whole index.
func foldBound(ix *nameIndex) int {
	return max(minPatchBound, len(ix.base.byID)/16)
}

// admitIDs admits the entities of ix with ids, in order, and keeps the
// visible ones. When ix is this request's index of the last background
// patch (recentNames), its entries of the entities changed since are
// admitted for this request only (admitStale).
func (v *view) admitIDs(ix *nameIndex, ids []string) ([]visibleEntity, error) {
	es := make([]store.Entity, 0, len(ids))
	for _, id := range ids {
		if e, ok := ix.entity(id); ok {
			es = append(es, e)
		}
	}
	if ix != v.names || len(v.namesPending) == 0 {
		return v.admitAll(es)
	}
	return v.admitStale(es, func(id string) bool {
		_, found := slices.BinarySearch(v.namesPending, id)
		return found
	})
}

// exactNameIndex returns the name index of this request's graph reads,
// exact for them: the set's own, or the one it was to patch, patched now
// for the graph changes since (the few entities they name read by id),
// or, when build is set and there is neither, built from every entity;
// nil when the graph cache is not live, or when build is not set and no
// request has built one (readers that need only some entities, as
// loadEntities, use the index when it is there but never build it: that
// reads every entity). Readers that count (aggregates, the entities of
// a type) take this one, never the index a background patch left
// (recentNames), which local search may take and which lacks the latest
// changes.
func (v *view) exactNameIndex(build bool) (*nameIndex, error) {
	if !v.s.cache.graph.isLive() {
		return nil, nil
	}
	g, err := v.graphSet()
	if err != nil {
		return nil, err
	}
	if !build && !g.nameIndexBuilt() {
		return nil, nil
	}
	return v.s.nameIndexOf(v.ctx, v.tenant, g)
}

// loadEntities admits ids into the request's entity cache like
// v.entities, from the tenant's cached entities when the name index is
// built (no store read), else from the store.
func (v *view) loadEntities(ids []string) error {
	ix, err := v.exactNameIndex(false)
	if err != nil {
		return err
	}
	if ix == nil {
		return v.entities(ids)
	}
	var es []store.Entity
	// Each id once: an aggregate names a target at every edge to it.
	seen := make(map[string]struct{}, len(ids)/2)
	for _, id := range ids {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		if _, hit := v.exactLookup(id); hit {
			continue
		}
		if e, ok := ix.entity(id); ok {
			es = append(es, e)
		} else {
			v.entityCache[id] = noEntity
			delete(v.stale, id)
		}
	}
	_, err = v.admitAll(es)
	return err
}

// entitiesOfType returns the visible entities of typ, sorted by id: from
// the tenant's name index when the graph cache is live (built by the
// first such request: a type is most of a tenant's entities, and a list
// of them read again after every graph change costs what the index's
// build does once; the index is then patched for each change), else
// listed from the store.
func (v *view) entitiesOfType(typ string) ([]visibleEntity, error) {
	ix, err := v.exactNameIndex(true)
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
	return v.admitIDs(ix, ix.list(kindType, typ))
}
