package query

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/kgstream/kgstream/pkg/errkind"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
)

// errAdmissionUnavailable marks a failed registry lookup: the request must
// fail closed (503), never fall back to showing unchecked data.
var errAdmissionUnavailable = errkind.New(errkind.Unavailable, "source registry unavailable")

// nameRE is the shape of entity types and relation names: lower-case
// snake_case, as package resolve produces them.
var nameRE = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)

// maxNameLen bounds type and relation names taken from query parameters.
const maxNameLen = 64

func validName(s string) bool { return len(s) <= maxNameLen && nameRE.MatchString(s) }

// cutID splits a canonical "type:key" id.
func cutID(id string) (typ, key string, ok bool) { return strings.Cut(id, ":") }

// entityJSON is API.md's entity: {"id","type","name"}.
type entityJSON struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Name string `json:"name"`
}

// citation is API.md's citation: {"doc_id","version","text_unit"?}.
type citation = provenance.SourceRef

// edgeJSON is an edge as responses show it, with its admitted citations.
type edgeJSON struct {
	Source    string     `json:"source"`
	Relation  string     `json:"relation"`
	Target    string     `json:"target"`
	Citations []citation `json:"citations"`
}

// view is one request's window on the stores: the caller's tenant only,
// every fact passed through one Admitter (one consistent registry view per
// request), and small caches so a traversal asks the stores once per entity.
type view struct {
	ctx    context.Context
	s      *Service
	tenant string
	adm    *provenance.Admitter

	// entityCache holds, by id, the entities this request has read and
	// admitted itself (absent or invisible ones as noEntity); those an
	// earlier request of the caller admitted are read from the kept
	// admissions instead (lookup). Its values are shared with the kept
	// admissions and never modified.
	entityCache map[string]*visibleEntity
	edgeCache   map[edgeKey][]store.Edge
	all         []store.Entity
	allLoaded   bool
	names       *nameIndex // the tenant's name index, once per request
	// namesPending are the entities changed since names was patched, when
	// names is the index of the last background patch (recentNames): its
	// entries of those may be older than the graph. stale holds those this
	// request admitted from it (admitStale).
	namesPending []string
	stale        map[string]bool
	docs         []readableDoc // readableDocs, loaded once
	docsLoaded   bool
	// reg is the registry snapshot this request admits against once it
	// has one (regview.go); regGen the generation read at its first need.
	reg        *regView
	regChecked bool
	regGen     uint64
	regGenOK   bool
	// kept is the tenant's kept entity admissions for this caller at this
	// registry generation (keptAdmissions), once looked up.
	kept        *admissions
	keptChecked bool
	// who is the caller's part of the kept values' keys (aggregateKey).
	who string
	lex *lexQuery // readable docs against the unit index, once
}

// canonicalID is the id a TYPE:NAME reference names: resolved through the
// reviewed table (splits and aliases) exactly as the resolver resolves a
// mention, so after an unmerge "Cert Manager" names the split entity.
func (v *view) canonicalID(typ, name string) string {
	t := resolve.Type(typ)
	k, _ := v.s.cfg.Aliases.Current().CanonicalKey(v.tenant, t, name, resolve.Key(name))
	return t + ":" + k
}

type edgeKey struct {
	id  string
	dir store.Direction
}

// visibleEntity is an entity as this caller may see it: out and, for
// what is read of it besides, its fragments as stored (readable or not;
// its id, type and stored name are not kept a second time: every
// request's entity cache and every caller's kept admissions hold one
// per entity).
type visibleEntity struct {
	sources []store.Fragment
	out     entityJSON
	ok      bool
	// descs numbers the descriptions of sources, made with the entity
	// when it has many (see indexedSources); nil: made by each reader.
	descs *descIndex
	// spells groups sources by the name they spell the entity with, made
	// likewise (nil: readers go through sources).
	spells *spellIndex
}

// spellIndex groups an entity's fragments by their names: names are the
// distinct non-empty ones, at[k] the indexes in the fragments of those
// spelling names[k]. A hub's thousands of fragments mostly spell it one
// way; a reader of its readable spellings checks a fragment or two of
// each name instead of every fragment.
type spellIndex struct {
	names []string
	at    [][]int32
}

func newSpellIndex(fs []store.Fragment) *spellIndex {
	x := &spellIndex{}
	num := map[string]int{}
	for i, f := range fs {
		if f.Name == "" {
			continue
		}
		k, ok := num[f.Name]
		if !ok {
			k = len(x.names)
			num[f.Name] = k
			x.names = append(x.names, f.Name)
			x.at = append(x.at, nil)
		}
		x.at[k] = append(x.at[k], int32(i))
	}
	return x
}

// readableSpellings calls fn with the names, other than skip, that a
// readable fragment of ve gives it (a name maybe more than once).
func (v *view) readableSpellings(ve visibleEntity, skip string, fn func(name string)) error {
	if ve.spells == nil {
		for _, f := range ve.sources {
			if f.Name == "" || f.Name == skip {
				continue
			}
			ok, err := v.adm.Direct(f.DocID)
			if err != nil {
				return err
			}
			if ok {
				fn(f.Name)
			}
		}
		return nil
	}
	for k, name := range ve.spells.names {
		if name == skip {
			continue
		}
		for _, i := range ve.spells.at[k] {
			ok, err := v.adm.Direct(ve.sources[i].DocID)
			if err != nil {
				return err
			}
			if ok {
				fn(name)
				break
			}
		}
	}
	return nil
}

// descIndex numbers the distinct descriptions of an entity's fragments:
// of[i] is the number of fragment i's description (-1 when it has none),
// words[k] the word count of description k. A hub's thousands of
// fragments mostly repeat a few descriptions; an entity item reads them
// by number instead of hashing each, and stops once every description
// has all the citations it may show.
type descIndex struct {
	of    []int32
	words []int
}

// indexedSources is how many fragments an entity has before admission
// numbers its descriptions once for every later request of the caller.
const indexedSources = 32

func newDescIndex(fs []store.Fragment) *descIndex {
	d := &descIndex{of: make([]int32, len(fs))}
	num := map[string]int32{}
	for i, f := range fs {
		if f.Description == "" {
			d.of[i] = -1
			continue
		}
		k, ok := num[f.Description]
		if !ok {
			k = int32(len(d.words))
			num[f.Description] = k
			d.words = append(d.words, countFields(f.Description))
		}
		d.of[i] = k
	}
	return d
}

func newView(ctx context.Context, s *Service, caller provenance.Caller) *view {
	tenant := caller.Tenant
	v := &view{
		ctx:         ctx,
		s:           s,
		tenant:      tenant,
		entityCache: make(map[string]*visibleEntity),
		edgeCache:   make(map[edgeKey][]store.Edge),
	}
	v.adm = provenance.NewAdmitter(caller, v.lookupSources)
	// The registry generation is read before the first admission, so a
	// kept registry view answers every lookup of the request.
	v.adm.BeforeFirstUse(v.checkRegistry)
	return v
}

// prefetchEntities asks the registry once for every source of es.
func (v *view) prefetchEntities(es []store.Entity) error {
	return v.adm.PrefetchSeq(docsOf(es, func(e store.Entity) []store.Fragment { return e.Sources }, fragmentDoc))
}

// prefetchEdges asks the registry once for every support of es.
func (v *view) prefetchEdges(es []store.Edge) error {
	return v.adm.PrefetchSeq(docsOf(es, func(e store.Edge) []store.Fragment { return e.Supports }, fragmentDoc))
}

// docsOf yields the document of every ref of every x (a document once per
// ref: Prefetch drops repeats); PrefetchSeq gathers them only when the
// registry must be asked.
func docsOf[X, R any](xs []X, refs func(X) []R, doc func(R) string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, x := range xs {
			for _, r := range refs(x) {
				if !yield(doc(r)) {
					return
				}
			}
		}
	}
}

func fragmentDoc(f store.Fragment) string { return f.DocID }
func refDoc(r citation) string            { return r.DocID }

// admit decides whether e is visible (one of its fragments is readable) and
// picks a display name from readable fragments only, so a name seen only in
// a document the caller may not read is not revealed through it.
func (v *view) admit(e store.Entity) (visibleEntity, error) {
	// One pass: the first readable fragment carrying the stored display
	// name settles it (the rest need not be checked: a hub entity has
	// thousands); else the best-ranked readable spelling.
	named, visible, exact := false, false, false
	best := -1
	for i, f := range e.Sources {
		if f.Name != "" {
			named = true
		}
		ok, err := v.adm.Direct(f.DocID)
		if err != nil {
			return visibleEntity{}, err
		}
		if !ok {
			continue
		}
		visible = true
		if f.Name == e.Name {
			best, exact = i, true
			break
		}
		if f.Name != "" && (best < 0 || f.NameRank < e.Sources[best].NameRank) {
			best = i
		}
	}
	if !visible {
		return visibleEntity{sources: e.Sources}, nil
	}
	// The stored display name is shown only when a readable fragment
	// carries it; otherwise the best readable spelling, else the id's key
	// (never a name that only an unreadable document supplied).
	_, name, _ := cutID(e.ID)
	switch {
	case exact:
		name = e.Name
	case best >= 0:
		name = e.Sources[best].Name
	case !named:
		name = e.Name // fragments record no names at all (older data): the stored name is all there is
	}
	typ := e.Type
	if typ == "" {
		typ, _, _ = cutID(e.ID)
	}
	ve := visibleEntity{sources: e.Sources, out: entityJSON{ID: e.ID, Type: typ, Name: name}, ok: true}
	if len(e.Sources) >= indexedSources {
		ve.descs = newDescIndex(e.Sources)
		ve.spells = newSpellIndex(e.Sources)
	}
	return ve, nil
}

// entity returns the entity with id as this caller sees it (ok=false when
// absent or not visible: the two are indistinguishable on purpose).
func (v *view) entity(id string) (visibleEntity, error) {
	if ve, hit := v.lookup(id); hit {
		return *ve, nil
	}
	if err := v.entities([]string{id}); err != nil {
		return visibleEntity{}, err
	}
	return v.known(id), nil
}

// noEntity is what entityCache holds for an absent or invisible entity.
var noEntity = &visibleEntity{}

// known returns the entity the request has read and admitted as id, the
// zero value (ok false) when it is absent, invisible or not read.
func (v *view) known(id string) visibleEntity {
	if ve, ok := v.lookup(id); ok {
		return *ve
	}
	return visibleEntity{}
}

// exactLookup is lookup but for the entities this request admitted from
// an index older than the graph (admitStale): readers that count take
// those as they are stored now (loadEntities with a name index,
// entitiesOfType); local search and paths take them as admitted, as the
// index they matched.
func (v *view) exactLookup(id string) (*visibleEntity, bool) {
	if v.stale[id] {
		return nil, false
	}
	return v.lookup(id)
}

// lookup returns what this request knows of id: read and admitted by the
// request itself (entityCache), or by an earlier request of its caller at
// its registry generation (keptAdmissions), which is not copied.
func (v *view) lookup(id string) (*visibleEntity, bool) {
	if ve, ok := v.entityCache[id]; ok {
		return ve, true
	}
	return v.keptAdmissions().get(id)
}

// entities loads and admits ids in one store call, filling the cache.
// Entities the tenant's graph reads hold (graphSet, dropped by
// kg.graph.changed) are not read again; admission is this request's.
func (v *view) entities(ids []string) error {
	var missing []string
	var asked map[string]bool
	kept := v.keptAdmissions()
	for _, id := range ids {
		if _, hit := v.lookup(id); hit {
			continue
		}
		if asked == nil {
			asked = make(map[string]bool)
		}
		if !asked[id] {
			// Each id once: an aggregate names a hub at every edge, and
			// the store decodes an entity for every time it is asked.
			asked[id] = true
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if n := len(v.entityCache); len(missing) > 256 && len(missing) > n {
		// Many at once (a hub's neighbours, read for the first time):
		// the map grows once, not by doubling through every size.
		grown := make(map[string]*visibleEntity, n+len(missing))
		maps.Copy(grown, v.entityCache)
		v.entityCache = grown
	}
	g, err := v.graphSet()
	if err != nil {
		return err
	}
	got, unread := g.cachedEntities(missing)
	if len(unread) > 0 {
		read, err := v.s.st.Entities(v.ctx, v.tenant, unread)
		if err != nil {
			return fmt.Errorf("reading entities: %w", err)
		}
		g.internEntityMap(v.s.cache.graph.isLive(), read)
		g.keepEntities(unread, read)
		for _, id := range unread {
			e, ok := read[id]
			got[id] = storedEntity{e, ok}
		}
	}
	es := make([]store.Entity, 0, len(got))
	for _, se := range got {
		if se.found {
			es = append(es, se.e)
		}
	}
	if err := v.prefetchEntities(es); err != nil {
		return err
	}
	for _, id := range missing {
		if _, hit := v.entityCache[id]; hit {
			continue // a duplicate id
		}
		se := got[id]
		if !se.found {
			v.entityCache[id] = noEntity
			kept.put(id, noEntity)
			continue
		}
		ve, err := v.admit(se.e)
		if err != nil {
			return err
		}
		v.entityCache[id] = &ve
		kept.put(id, &ve)
	}
	return nil
}

// allEntities returns every visible entity of the tenant, sorted by id,
// loaded once per request.
func (v *view) allEntities() ([]visibleEntity, error) {
	if !v.allLoaded {
		es, err := v.s.st.EntitiesByType(v.ctx, v.tenant, "")
		if err != nil {
			return nil, fmt.Errorf("listing entities: %w", err)
		}
		v.all, v.allLoaded = es, true
	}
	return v.admitAll(v.all)
}

// admitAll admits es (prefetching their sources) and keeps the visible ones.
func (v *view) admitAll(es []store.Entity) ([]visibleEntity, error) {
	return v.admitStale(es, nil)
}

// admitStale is admitAll of es, of which those stale says may be older
// than the graph (read from the index of the last background patch) are
// admitted for this request only: not kept for its caller's later
// requests, and marked so that readers that count read them again
// (exactLookup).
func (v *view) admitStale(es []store.Entity, stale func(id string) bool) ([]visibleEntity, error) {
	if err := v.prefetchEntities(es); err != nil {
		return nil, err
	}
	out := make([]visibleEntity, 0, len(es))
	kept := v.keptAdmissions()
	for _, e := range es {
		old := stale != nil && stale(e.ID)
		var ve *visibleEntity
		var hit bool
		if old {
			ve, hit = v.lookup(e.ID)
		} else {
			ve, hit = v.exactLookup(e.ID)
		}
		if !hit {
			admitted, err := v.admit(e)
			if err != nil {
				return nil, err
			}
			ve = &admitted
			v.entityCache[e.ID] = ve
			if old {
				if v.stale == nil {
					v.stale = map[string]bool{}
				}
				v.stale[e.ID] = true
			} else {
				kept.put(e.ID, ve)
				delete(v.stale, e.ID)
			}
		}
		if ve.ok {
			out = append(out, *ve)
		}
	}
	return out, nil
}

// edges returns the stored edges of id in dir (not yet admitted), cached.
func (v *view) edges(id string, dir store.Direction) ([]store.Edge, error) {
	k := edgeKey{id, dir}
	if es, hit := v.edgeCache[k]; hit {
		return es, nil
	}
	g, err := v.graphSet()
	if err != nil {
		return nil, err
	}
	es, err := v.storedEdges(g, k)
	if err != nil {
		return nil, err
	}
	if err := v.prefetchEdges(es); err != nil {
		return nil, err
	}
	v.edgeCache[k] = es
	return es, nil
}

// storedEdges returns the stored edges of k from the tenant's graph reads
// g, read and kept there when g has not read them yet: patched when g
// holds them as read before changes naming k's entity (staleEdges), else
// read whole.
func (v *view) storedEdges(g *graphSet, k edgeKey) ([]store.Edge, error) {
	g.mu.Lock()
	es, hit := g.edges[k]
	stale, patch := g.staleEdges[k]
	g.mu.Unlock()
	if hit {
		return es, nil
	}
	var err error
	if patch {
		es, err = v.patchedEdges(g, k, stale)
	} else if es, err = v.s.st.Edges(v.ctx, v.tenant, k.id, k.dir); err == nil {
		g.internEdges(v.s.cache.graph.isLive(), es)
	}
	if err != nil {
		return nil, fmt.Errorf("reading edges of %q: %w", k.id, err)
	}
	g.mu.Lock()
	if g.edges == nil {
		g.edges = map[edgeKey][]store.Edge{}
	}
	g.edges[k] = es
	delete(g.staleEdges, k)
	g.mu.Unlock()
	return es, nil
}

// patchedEdges is the edge list l as stored now: its edges whose other
// end is not among l.stale, as read, and those that are, read again
// (store.EdgesAmong: a hub's thousands of edges are not decoded again
// for the few that a change named; a store without it reads the list
// whole). Sorted by id, as the store lists them. Only what it reads is
// interned into g: the edges as read are shared with other lists.
func (v *view) patchedEdges(g *graphSet, k edgeKey, l staleEdgeList) ([]store.Edge, error) {
	live := v.s.cache.graph.isLive()
	ea, ok := v.s.st.(store.EdgesAmong)
	if !ok {
		es, err := v.s.st.Edges(v.ctx, v.tenant, k.id, k.dir)
		if err == nil {
			g.internEdges(live, es)
		}
		return es, err
	}
	among, err := ea.EdgesAmong(v.ctx, v.tenant, k.id, k.dir, l.stale)
	if err != nil {
		return nil, err
	}
	g.internEdges(live, among)
	out := make([]store.Edge, 0, len(l.edges)+len(among))
	for _, e := range l.edges {
		if _, named := slices.BinarySearch(l.stale, store.FarEnd(e, k.dir)); !named {
			out = append(out, e)
		}
	}
	out = append(out, among...)
	slices.SortFunc(out, func(a, b store.Edge) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// citations returns the citations of e's readable supports, one per text
// unit (one without text unit for a support that names none). An empty
// result means the edge is not visible to this caller.
func (v *view) citations(e store.Edge) ([]citation, error) {
	c, _, err := v.someCitations(e, math.MaxInt)
	return c, err
}

// anyReadable reports whether one of fs is readable: whether an edge
// with supports fs is visible (its citations, v.citations, are not empty).
func (v *view) anyReadable(fs []store.Fragment) (bool, error) {
	for _, f := range fs {
		if ok, err := v.adm.Direct(f.DocID); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// someCitations is citations(e) of the first limit readable supports
// only, with the number of readable supports. The citations are counted
// first, then made in one array: a hub's edge has thousands of supports
// (admission is a lookup, a slice's growth garbage).
func (v *view) someCitations(e store.Edge, limit int) ([]citation, int, error) {
	n, docs := 0, 0
	for _, f := range e.Supports {
		ok, err := v.adm.Direct(f.DocID)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			if docs < limit {
				n += max(len(f.TextUnits), 1)
			}
			docs++
		}
	}
	if n == 0 {
		return nil, docs, nil
	}
	out := make([]citation, 0, n)
	cited := 0
	for _, f := range e.Supports {
		if cited == limit {
			break
		}
		if ok, _ := v.adm.Direct(f.DocID); ok { // answered above
			out = appendFragmentCitations(out, f)
			cited++
		}
	}
	return out, docs, nil
}

func appendFragmentCitations(out []citation, f store.Fragment) []citation {
	if len(f.TextUnits) == 0 {
		return append(out, citation{DocID: f.DocID, Version: f.Version})
	}
	for _, tu := range f.TextUnits {
		out = append(out, citation{DocID: f.DocID, Version: f.Version, TextUnit: tu})
	}
	return out
}

// description is one readable fragment's description of an entity.
type description struct {
	Text      string     `json:"text"`
	Citations []citation `json:"citations"`
}

// descriptions returns the descriptions of the readable fragments of fs.
func (v *view) descriptions(fs []store.Fragment) ([]description, error) {
	out := []description{}
	for _, f := range fs {
		if f.Description == "" {
			continue
		}
		ok, err := v.adm.Direct(f.DocID)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, description{Text: f.Description, Citations: appendFragmentCitations(nil, f)})
		}
	}
	return out, nil
}

// admittedCommunities returns the communities this caller may see: those
// whose every source is readable at the version they were computed from.
func (v *view) admittedCommunities() ([]store.Community, error) {
	d, err := v.derived()
	if err != nil {
		return nil, err
	}
	return v.admitCommunities(d.communities, nil)
}

// admitCommunities keeps the communities of cs whose every source is
// readable at its version, with one registry lookup for all of them.
// kept, when not nil, holds the answers known for this caller at this
// registry generation (derivedAdmissions) and takes the new ones.
func (v *view) admitCommunities(cs []store.Community, kept *derivedAdmissions) ([]store.Community, error) {
	return admitDerived(v, cs, func(c store.Community) string { return c.ID }, func(c store.Community) []citation { return c.Sources }, kept.communityAnswers())
}

// admitDerived keeps the items of xs (communities or reports) whose every
// source is readable at its version: each answer kept in kept (id -> bool;
// nil: none kept) is taken from there, the others are decided with one
// registry lookup for all of them and kept there. An answer depends only
// on the item, which a derived set holds unchanged, and on the caller and
// the registry, which kept's key names.
func admitDerived[X any](v *view, xs []X, id func(X) string, sources func(X) []citation, kept *sync.Map) ([]X, error) {
	out := make([]X, 0, len(xs))
	todo := xs
	if kept != nil {
		todo = make([]X, 0, len(xs))
		for _, x := range xs {
			switch ok, known := kept.Load(id(x)); {
			case !known:
				todo = append(todo, x)
			case ok.(bool):
				out = append(out, x)
			}
		}
		if len(todo) == 0 {
			return out, nil
		}
	}
	if err := v.adm.PrefetchSeq(docsOf(todo, sources, refDoc)); err != nil {
		return nil, err
	}
	for _, x := range todo {
		ok, err := v.adm.Derived(sources(x))
		if err != nil {
			return nil, err
		}
		if kept != nil {
			kept.Store(id(x), ok)
		}
		if ok {
			out = append(out, x)
		}
	}
	return out, nil
}

// admittedCommunitiesOf returns the admitted communities holding any of
// entityIDs, read through the member index.
func (v *view) admittedCommunitiesOf(entityIDs []string) ([]store.Community, error) {
	if len(entityIDs) == 0 {
		return nil, nil
	}
	d, err := v.keptDerived()
	if err != nil {
		return nil, err
	}
	if d != nil {
		return v.admitCommunities(d.communitiesOf(entityIDs), v.keptDerivedAdmissions(d))
	}
	cs, err := v.s.st.CommunitiesOf(v.ctx, v.tenant, entityIDs)
	if err != nil {
		return nil, fmt.Errorf("reading communities of entities: %w", err)
	}
	return v.admitCommunities(cs, nil)
}

// reportIDOf is the id of a community's report, as the reporter names it.
func reportIDOf(communityID string) string { return "r-" + communityID }

// admittedReportsOf returns the admitted reports of cs by community id,
// reading those reports only.
func (v *view) admittedReportsOf(cs []store.Community) (map[string]store.Report, error) {
	if len(cs) == 0 {
		return map[string]store.Report{}, nil
	}
	ids := make([]string, 0, len(cs))
	for _, c := range cs {
		ids = append(ids, reportIDOf(c.ID))
	}
	d, err := v.keptDerived()
	if err != nil {
		return nil, err
	}
	var got map[string]store.Report
	var kept *derivedAdmissions
	if d != nil {
		kept = v.keptDerivedAdmissions(d)
		got = make(map[string]store.Report, len(ids))
		for _, id := range ids {
			if r, ok := d.byID[id]; ok {
				got[id] = r
			}
		}
	} else {
		if got, err = v.s.st.ReportsByID(v.ctx, v.tenant, ids); err != nil {
			return nil, fmt.Errorf("reading reports: %w", err)
		}
	}
	rs := make([]store.Report, 0, len(got))
	for _, r := range got {
		rs = append(rs, r)
	}
	return v.admitReports(rs, kept)
}

// admittedReports returns the admitted reports by community id. When a
// community has several, the most recently updated admitted one wins.
// The result is kept with the tenant's reports per caller and registry
// generation, as admittedByCommunity is: callers must not modify it.
func (v *view) admittedReports() (map[string]store.Report, error) {
	d, err := v.derived()
	if err != nil {
		return nil, err
	}
	return v.admittedReportsIn(d)
}

// admittedReportsIn is admittedReports of the reports of d.
func (v *view) admittedReportsIn(d *derivedSet) (map[string]store.Report, error) {
	key, keep, err := v.aggregateKey("", Hop{})
	if err != nil {
		return nil, err
	}
	if keep {
		d.mu.Lock()
		m, ok := d.admittedReps[key]
		d.mu.Unlock()
		if ok {
			return m, nil
		}
	}
	m, err := v.admitReports(d.reports, nil)
	if err != nil {
		return nil, err
	}
	if keep {
		d.mu.Lock()
		d.admittedReps = keepKeyed(d.admittedReps, key, m)
		d.mu.Unlock()
	}
	return m, nil
}

// admitReports keeps the admitted reports of rs by community id (one
// registry lookup for all, answers kept in kept as admitCommunities
// does); when a community has several, the most recently updated admitted
// one wins.
func (v *view) admitReports(rs []store.Report, kept *derivedAdmissions) (map[string]store.Report, error) {
	rs, err := admitDerived(v, rs, func(r store.Report) string { return r.ID }, func(r store.Report) []citation { return r.Sources }, kept.reportAnswers())
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.Report)
	for _, r := range rs {
		if prev, dup := out[r.Community]; !dup || r.UpdatedAt.After(prev.UpdatedAt) {
			out[r.Community] = r
		}
	}
	return out, nil
}
