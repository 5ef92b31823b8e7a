package query

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
)

// cacheMaxAge bounds how long a cached tenant read is served even when no
// event invalidated it, so a lost event cannot keep stale data forever.
const cacheMaxAge = time.Minute

// tenantCache keeps one value per tenant of what a request would otherwise
// read of the whole tenant, unadmitted: admission stays per request. A
// value is dropped when an event of its kinds names the tenant; nothing is
// cached while the invalidating consumer is not running (live false).
// Each tenant has a generation bumped by every invalidation: a value read
// while an event arrived is not kept, so a put never stores what an event
// already made stale.
//
// A value that outlives cacheMaxAge with no event is loaded again. While
// refresh is set (the consumer runs), that load runs in the background and
// the requests meanwhile still get the old value: at 100,000 documents a
// tenant's name index takes seconds to build, and every local question
// waited for it once a minute. A lost event then keeps stale content at
// most cacheMaxAge and one load; admission is per request either way.
type tenantCache[T any] struct {
	mu   sync.Mutex
	live bool
	gen  map[string]uint64
	vals map[string]cached[T]
	// maxAge is cacheMaxAge unless set (tests).
	maxAge time.Duration
	// refresh runs a reload in the background with the consumer's
	// context (nil: requests reload); refreshing holds the tenants being
	// reloaded so.
	refresh    func(func(context.Context))
	refreshing map[string]bool
	// succeed, when set, makes the value that follows v after a change
	// naming ids (change), false when v has none to follow it: then the
	// change drops v. changes logs, per tenant and while a background
	// reload of it is under way, the generations changes made and their
	// ids (invalidate and the reload's end clear it), so a reload that a
	// change overtook can be followed up rather than thrown away.
	succeed func(v T, ch namedChange) (T, bool)
	changes map[string][]loggedChange
}

// namedChange is what one change, or several in a row, named: the
// entities (ids, sorted) and, per document whose application changed
// them, the entities its changes named (docs: sorted ids; nil when not
// known, as after changes of more than maxChangeDocs documents). Of a
// change that names every entity it altered (events.GraphChanged.NamesAll),
// only the fragments of its document changed: the fragments of an entity
// by other documents are as they were.
type namedChange struct {
	ids  []string
	docs map[string][]string
}

// changeOf is the change of doc naming ids (sorted).
func changeOf(doc string, ids []string) namedChange {
	return namedChange{ids: ids, docs: map[string][]string{doc: ids}}
}

// maxChangeDocs bounds the documents a run of changes keeps: past it
// their documents are not known (docs nil), and a reader of what they
// changed reads the entities whole.
const maxChangeDocs = 256

// then is c followed by next: the union of their ids and of their
// documents' (unknown when either's are, or past maxChangeDocs). Neither
// is modified.
func (c namedChange) then(next namedChange) namedChange {
	return namedChange{ids: unionSorted(c.ids, next.ids), docs: addDocs(maps.Clone(c.docs), next.docs)}
}

// addDocs adds to docs (modified) the documents of more and the entities
// their changes named; nil when either's are not known, or past
// maxChangeDocs.
func addDocs(docs, more map[string][]string) map[string][]string {
	if docs == nil || more == nil {
		return nil
	}
	for doc, ids := range more {
		docs[doc] = unionSorted(docs[doc], ids)
	}
	if len(docs) > maxChangeDocs {
		return nil
	}
	return docs
}

// byEntity is, per entity of c, the documents whose changes named it
// (sorted); nil when c's documents are not known.
func (c namedChange) byEntity() map[string][]string {
	if c.docs == nil {
		return nil
	}
	out := make(map[string][]string, len(c.ids))
	for doc, ids := range c.docs {
		for _, id := range ids {
			out[id] = append(out[id], doc)
		}
	}
	for _, docs := range out {
		slices.Sort(docs)
	}
	return out
}

type loggedChange struct {
	gen uint64
	ch  namedChange
}

// maxLoggedIDs bounds the ids a tenant's change log holds: past it the
// oldest changes are forgotten, and a reload older than what is left is
// thrown away as before there was a log.
const maxLoggedIDs = 100_000

type cached[T any] struct {
	v    T
	gen  uint64
	when time.Time
}

// loader loads a tenant's value; aged is true, with the value it replaces
// as prev, when it reloads one that outlived its age (in the background).
type loader[T any] func(ctx context.Context, prev T, aged bool) (T, error)

func (c *tenantCache[T]) fresh(e cached[T]) bool {
	age := c.maxAge
	if age == 0 {
		age = cacheMaxAge
	}
	return time.Since(e.when) < age
}

// get returns the tenant's value, or load's result (kept when the cache is
// live and no invalidation happened meanwhile). A value past its age that
// no event invalidated is returned as it is while refresh reloads it (see
// tenantCache).
func (c *tenantCache[T]) get(ctx context.Context, tenant string, load loader[T]) (T, error) {
	c.mu.Lock()
	if e, ok := c.vals[tenant]; ok && c.live && e.gen == c.gen[tenant] {
		if c.fresh(e) {
			c.mu.Unlock()
			return e.v, nil
		}
		if c.refresh != nil {
			if !c.refreshing[tenant] {
				if c.refreshing == nil {
					c.refreshing = map[string]bool{}
				}
				c.refreshing[tenant] = true
				c.refresh(func(ctx context.Context) { c.reload(ctx, tenant, e, load) })
			}
			c.mu.Unlock()
			return e.v, nil
		}
	}
	live, gen := c.live, c.gen[tenant]
	c.mu.Unlock()
	var none T
	v, err := load(ctx, none, false)
	if err != nil || !live {
		return v, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live && c.gen[tenant] == gen {
		if e, ok := c.vals[tenant]; ok && e.gen == gen && c.fresh(e) {
			// A concurrent load kept its value first: every caller shares
			// that one (what is built into it later, a name index, is then
			// built once).
			return e.v, nil
		}
		if c.vals == nil {
			c.vals = map[string]cached[T]{}
		}
		c.vals[tenant] = cached[T]{v: v, gen: gen, when: time.Now()}
	}
	return v, nil
}

// reload loads the tenant's value again in place of old, past its age,
// and keeps it unless an event came meanwhile.
func (c *tenantCache[T]) reload(ctx context.Context, tenant string, old cached[T], load loader[T]) {
	v, err := load(ctx, old.v, true)
	c.mu.Lock()
	defer c.mu.Unlock()
	// The change log served this reload only (see change).
	defer delete(c.changes, tenant)
	delete(c.refreshing, tenant)
	if !c.live || c.vals == nil {
		return
	}
	if gen := c.gen[tenant]; gen != old.gen {
		// Changes came meanwhile: the value reloaded is followed up for
		// them when only changes came (no invalidation) and the log still
		// has them all, else thrown away.
		ch, ok := c.since(tenant, old.gen)
		if err != nil {
			// As below: not served on past its age.
			delete(c.vals, tenant)
			return
		}
		if !ok || c.succeed == nil {
			return
		}
		if v, ok = c.succeed(v, ch); ok {
			c.vals[tenant] = cached[T]{v: v, gen: gen, when: time.Now()}
		}
		return
	}
	if err != nil {
		// Not kept past its age: the next request loads it itself and
		// answers with the error, rather than the old value going on.
		delete(c.vals, tenant)
		return
	}
	c.vals[tenant] = cached[T]{v: v, gen: old.gen, when: time.Now()}
}

// since returns what the changes after generation gen named, false
// when an invalidation came after gen or the log no longer holds them
// all; the caller holds c.mu.
func (c *tenantCache[T]) since(tenant string, gen uint64) (namedChange, bool) {
	log := c.changes[tenant]
	i := slices.IndexFunc(log, func(l loggedChange) bool { return l.gen == gen+1 })
	if i < 0 || log[len(log)-1].gen != c.gen[tenant] {
		return namedChange{}, false
	}
	var ids []string
	for _, l := range log[i:] {
		ids = append(ids, l.ch.ids...)
	}
	slices.Sort(ids)
	ch := namedChange{ids: slices.Compact(ids), docs: map[string][]string{}}
	for _, l := range log[i:] {
		if ch.docs = addDocs(ch.docs, l.ch.docs); ch.docs == nil {
			break
		}
	}
	return ch, true
}

// change records a change of tenant naming ids: the tenant's value is
// replaced by what succeed makes of it (keeping its age: the reload past
// it still loads the value whole), or dropped as invalidate drops it
// when there is nothing to follow it. Either way the generation moves
// on, so a value read meanwhile is not kept as it was read.
func (c *tenantCache[T]) change(tenant string, ch namedChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == nil {
		c.gen = map[string]uint64{}
	}
	prev := c.gen[tenant]
	c.gen[tenant]++
	if c.refreshing[tenant] {
		// Logged only while a reload is under way: it is what since
		// follows the reloaded value up with.
		if c.changes == nil {
			c.changes = map[string][]loggedChange{}
		}
		log := append(c.changes[tenant], loggedChange{gen: c.gen[tenant], ch: ch})
		n := 0
		for _, l := range log {
			n += len(l.ch.ids)
		}
		for len(log) > 1 && n > maxLoggedIDs {
			n -= len(log[0].ch.ids)
			log = log[1:]
		}
		c.changes[tenant] = log
	} else {
		delete(c.changes, tenant)
	}
	e, ok := c.vals[tenant]
	if !ok || e.gen != prev || c.succeed == nil {
		delete(c.vals, tenant)
		return
	}
	v, ok := c.succeed(e.v, ch)
	if !ok {
		delete(c.vals, tenant)
		return
	}
	c.vals[tenant] = cached[T]{v: v, gen: c.gen[tenant], when: e.when}
}

// holds reports whether is says tenant's current value (kept, live, of
// the tenant's generation) is the one it looks for.
func (c *tenantCache[T]) holds(tenant string, is func(T) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.vals[tenant]
	return ok && c.live && e.gen == c.gen[tenant] && is(e.v)
}

// inBackground runs f as reloads run (setRefresh) and reports whether it
// could: false when nothing runs in the background (the consumer does
// not run).
func (c *tenantCache[T]) inBackground(f func(context.Context)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refresh == nil {
		return false
	}
	c.refresh(f)
	return true
}

// setRefresh sets (nil: clears) how reloads run in the background; once
// cleared, no reload starts.
func (c *tenantCache[T]) setRefresh(run func(func(context.Context))) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refresh = run
}

// isLive reports whether values are kept (the invalidating consumer runs).
func (c *tenantCache[T]) isLive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}

// invalidate drops the tenant's value ("" drops every tenant's).
func (c *tenantCache[T]) invalidate(tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == nil {
		c.gen = map[string]uint64{}
	}
	if tenant == "" {
		for t := range c.vals {
			c.gen[t]++
		}
		c.vals = nil
		c.changes = nil
		return
	}
	c.gen[tenant]++
	delete(c.vals, tenant)
	delete(c.changes, tenant)
}

// setLive turns caching on or off; turning it off drops every value.
func (c *tenantCache[T]) setLive(live bool) {
	c.mu.Lock()
	c.live = live
	c.mu.Unlock()
	if !live {
		c.invalidate("")
	}
}

// caches are the per-tenant caches of a Service and the event kinds that
// invalidate each.
type caches struct {
	// derived holds every community and every report of a tenant;
	// kg.communities.changed and kg.reports.changed drop it.
	derived tenantCache[*derivedSet]
	// graph holds graph reads (the relation reads of aggregates, the name
	// index of local search); kg.graph.changed replaces it with its
	// successor (graphSet.succeed) or, when the event does not say which
	// entities changed, drops it.
	graph tenantCache[*graphSet]
	// docs, when set, is told when the caches go live or not and of the
	// document of every graph change followed (see DocFollower).
	docs DocFollower
}

// DocFollower keeps what it reads of documents while a Service's caches
// are live, and drops it as the graph changes the Service follows say:
// status's counts (status.Collector).
type DocFollower interface {
	// Following says whether the graph changes are followed from now on.
	Following(live bool)
	// DocChanged says a change of doc of tenant was applied, or, doc "",
	// that any document of tenant may have changed.
	DocChanged(tenant, doc string)
}

func (c *caches) setLive(live bool) {
	c.derived.setLive(live)
	c.graph.setLive(live)
	if c.docs != nil {
		c.docs.Following(live)
	}
}

func (c *caches) setRefresh(run func(func(context.Context))) {
	c.derived.setRefresh(run)
	c.graph.setRefresh(run)
}

func (c *caches) invalidate(kind events.Kind, tenant string) {
	switch kind {
	case events.KindCommunitiesChanged, events.KindReportsChanged:
		c.derived.invalidate(tenant)
	case events.KindGraphChanged:
		c.graph.invalidate(tenant)
	}
}

// graphChanged follows a kg.graph.changed event of tenant (its payload
// data): the tenant's graph reads are succeeded by reads that keep the
// name index patched for the entities the event names, and what does not
// depend on them. An event that cannot be decoded, or names no entity
// (the resolver names every entity whose record, fragments or edges the
// document changed: Touched and Contributed), drops them whole; the
// error says why.
// It returns the event's document when the event says it was applied
// (not deleted), "" otherwise.
func (c *caches) graphChanged(tenant string, data []byte) (string, error) {
	ev, ids, err := changedEntities(tenant, data)
	if err != nil {
		c.graph.invalidate(tenant)
		if c.docs != nil {
			c.docs.DocChanged(tenant, "")
		}
		return "", err
	}
	if c.docs != nil {
		c.docs.DocChanged(tenant, ev.DocID)
	}
	if len(ids) == 0 {
		c.graph.invalidate(tenant)
	} else {
		c.graph.change(tenant, changeOf(ev.DocID, ids))
	}
	if ev.Deleted {
		return "", nil
	}
	return ev.DocID, nil
}

// changedEntities decodes a kg.graph.changed event of tenant and returns
// it and the entities it names, sorted.
func changedEntities(tenant string, data []byte) (*events.GraphChanged, []string, error) {
	var ev events.GraphChanged
	if err := events.Decode(data, &ev); err != nil {
		return nil, nil, err
	}
	if ev.Tenant != tenant {
		return nil, nil, fmt.Errorf("%w: event of tenant %q on a subject of tenant %q", events.ErrInvalidEvent, ev.Tenant, tenant)
	}
	if !ev.NamesAll() {
		// Nothing to go by: a document that contributed nothing before
		// or after names nothing to patch, an older resolver's event
		// names only the entities it touched, not those whose fragments
		// it changed, and a redelivered change's event cannot name what
		// the version before the applied one held.
		return &ev, nil, nil
	}
	ids := slices.Concat(ev.Touched, ev.Contributed)
	slices.Sort(ids)
	return &ev, slices.Compact(ids), nil
}

// derivedSet is a tenant's communities and reports as stored.
type derivedSet struct {
	communities []store.Community
	reports     []store.Report
	// byCommunity is each community's most recently updated report,
	// reportDocs every document a report cites (for one prefetch).
	byCommunity map[string]store.Report
	reportDocs  []string
	// reportTokens is each report's token estimate, by report id.
	reportTokens map[string]int
	// byID is every report by id; memberOf the indexes into communities
	// of the communities holding each entity, ascending.
	byID     map[string]store.Report
	memberOf map[string][]int

	mu sync.Mutex
	// admitted is, per caller and registry generation (aggKey's caller and
	// gen), which communities' reports byCommunity holds are admitted;
	// admittedReps, likewise, the admitted reports by community
	// (view.admittedReports), read-only once kept.
	admitted     map[aggKey]map[string]bool
	admittedReps map[aggKey]map[string]store.Report
	// admissions are, per caller and registry generation, the answers
	// admission gave for the communities and reports requests met
	// (view.keptDerivedAdmissions).
	admissions map[aggKey]*derivedAdmissions

	// words indexes the words of every report (reportWords), made by the
	// first request that needs it (wordsOnce).
	wordsOnce sync.Once
	words     *reportWords
}

// tokens is r's token estimate (computed once for the reports of the set).
func (d *derivedSet) tokens(r store.Report) int {
	if n, ok := d.reportTokens[r.ID]; ok {
		return n
	}
	return reportTokens(r)
}

// admittedByCommunity says, per community of d's byCommunity, whether its
// report is admitted for this request's caller: computed once per caller
// and registry generation and kept with d (dropped with it by
// kg.communities.changed and kg.reports.changed), like the aggregates.
func (v *view) admittedByCommunity(d *derivedSet) (map[string]bool, error) {
	key, keep, err := v.aggregateKey("", Hop{})
	if err != nil {
		return nil, err
	}
	if keep {
		d.mu.Lock()
		m, ok := d.admitted[key]
		d.mu.Unlock()
		if ok {
			return m, nil
		}
	}
	if err := v.adm.Prefetch(d.reportDocs); err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(d.byCommunity))
	for cid, r := range d.byCommunity {
		ok, err := v.adm.Derived(r.Sources)
		if err != nil {
			return nil, err
		}
		m[cid] = ok
	}
	if keep {
		d.mu.Lock()
		d.admitted = keepKeyed(d.admitted, key, m)
		d.mu.Unlock()
	}
	return m, nil
}

// derivedAdmissions are whether one caller may see each community and
// each report of a derived set that requests of that caller met at one
// registry generation (id -> bool), as admissions are for entities: local
// search and entity pages of one caller check the communities of the
// entities they show, a hub's at every level, and their reports, whose
// sources run into the thousands high in the hierarchy.
type derivedAdmissions struct {
	communities, reports sync.Map
}

// communityAnswers and reportAnswers are the kept answers for communities
// and for reports; nil for a nil a (nothing kept).
func (a *derivedAdmissions) communityAnswers() *sync.Map {
	if a == nil {
		return nil
	}
	return &a.communities
}

func (a *derivedAdmissions) reportAnswers() *sync.Map {
	if a == nil {
		return nil
	}
	return &a.reports
}

// keptDerivedAdmissions returns the admissions of d's communities and
// reports kept for this request's caller at its registry generation, made
// when absent; nil when nothing can be kept (no registry generation, or
// it could not be read: the admission that follows then fails on its own).
func (v *view) keptDerivedAdmissions(d *derivedSet) *derivedAdmissions {
	key, keep, err := v.aggregateKey("", Hop{})
	if err != nil || !keep {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return keptOrNew(&d.admissions, key)
}

// keptOrNew returns (*m)[k], made (a new V) and kept there when absent;
// the caller holds the lock that guards *m.
func keptOrNew[V any](m *map[aggKey]*V, k aggKey) *V {
	if v, ok := (*m)[k]; ok {
		return v
	}
	v := new(V)
	*m = keepKeyed(*m, k, v)
	return v
}

// graphSet is what requests have read of a tenant's graph; its maps fill
// as requests need them.
type graphSet struct {
	mu sync.Mutex
	// relations are the edges of a relation aggregates read, per
	// relation and source type (view.edgesByRelation).
	relations map[relKey]relList
	names     *nameIndex
	// from, until names is made, is the name index of the set this one
	// succeeds (succeed), and pending what the changes since named:
	// names is then from patched for them (Service.nameIndexOf).
	from    *nameIndex
	pending namedChange
	// prev, until names is made, is the set g succeeds when a request was
	// making its name index then, and recent what the changes since
	// named: names is then prev's patched for them. making is set
	// while a request makes names.
	prev   *graphSet
	recent namedChange
	making bool
	// namesMu is held while names is built (Service.nameIndexOf).
	namesMu sync.Mutex
	// ents are entities read by id (found false: absent), edges the
	// edges read per entity and direction: unadmitted, as stored.
	ents  map[string]storedEntity
	edges map[edgeKey][]store.Edge
	// staleEdges are edge lists a set this one succeeds read, of entities
	// changes named since: to be patched by their first reader for the
	// entities those changes named (view.storedEdges).
	staleEdges map[edgeKey]staleEdgeList
	// aggs are aggregates computed by earlier requests, per caller and
	// registry generation (aggregateKey); read-only once kept. paths are
	// traversals, likewise (keptTraversal).
	aggs  map[aggKey]*keptAggregate
	paths map[aggKey]*keptPaths
	// plans are global questions' plans (globalPlan), per caller,
	// registry generation, theme types and level.
	plans map[aggKey]*globalPlan
	// admissions are entity admissions per caller and registry generation
	// (the key's type and relation are empty).
	admissions map[aggKey]*admissions
	// counts are counts of visible entities per type (visibleCount), kept
	// likewise (the key's relation is empty).
	counts map[aggKey]int
	// readable are the caller's readable documents (readableDocs)
	// resolved against the unit index, per caller and registry
	// generation (the key's type and relation are empty). Which
	// documents are readable and applied at their latest version depends
	// only on the registry (the generation) and on what was applied (a
	// graph change drops the set).
	readable map[aggKey]*lexQuery

	// strs shares the strings of the entities and edges the set keeps
	// (see interner), guarded by strsMu.
	strsMu sync.Mutex
	strs   interner
}

// interner keeps one copy of each string it is given, and of each
// one-element text unit list. Entities and edges are decoded with every
// string an object of its own, and most of them recur: a document's id
// in each fragment it contributed, the text unit ids, an entity's id at
// each of its edges, relation names and types, spellings. The graph
// cache keeps hundreds of thousands of them for every collection to
// mark; interned, they are one object per distinct value. The standard
// library's unique package (unique.Make(s).Value()) would intern the
// strings too; measured on BenchmarkLocalRequest's warm cache it left
// 998,927 objects in the heap against this map's 932,745 (its handles),
// more for every collection to mark, which is what interning is for.
type interner struct {
	strs  map[string]string
	units map[string][]string
}

func (in *interner) str(s string) string {
	if c, ok := in.strs[s]; ok {
		return c
	}
	if in.strs == nil {
		in.strs = map[string]string{}
	}
	in.strs[s] = s
	return s
}

// fragments interns the document ids, names and text unit ids of fs in
// place (fs is the caller's, just read, not yet shared). A list of one
// text unit is replaced by the shared list of that unit: readers never
// modify them.
func (in *interner) fragments(fs []store.Fragment) {
	for i := range fs {
		f := &fs[i]
		f.DocID, f.Name = in.str(f.DocID), in.str(f.Name)
		if len(f.TextUnits) == 1 {
			tu := f.TextUnits[0]
			l, ok := in.units[tu]
			if !ok {
				if in.units == nil {
					in.units = map[string][]string{}
				}
				l = []string{in.str(tu)}
				in.units[l[0]] = l
			}
			f.TextUnits = l[:1:1]
			continue
		}
		for j, tu := range f.TextUnits {
			f.TextUnits[j] = in.str(tu)
		}
	}
}

// internEntities interns the strings of es (just read, not yet shared)
// when the set is kept (the cache is live): else nothing shares them.
func (g *graphSet) internEntities(live bool, es []store.Entity) {
	if !live {
		return
	}
	g.strsMu.Lock()
	defer g.strsMu.Unlock()
	for i := range es {
		g.strs.entity(&es[i])
	}
}

// internEntityMap is internEntities for entities read by id.
func (g *graphSet) internEntityMap(live bool, m map[string]store.Entity) {
	if !live {
		return
	}
	g.strsMu.Lock()
	defer g.strsMu.Unlock()
	for id, e := range m {
		g.strs.entity(&e)
		m[id] = e
	}
}

func (in *interner) entity(e *store.Entity) {
	e.ID, e.Type, e.Name = in.str(e.ID), in.str(e.Type), in.str(e.Name)
	in.fragments(e.Sources)
}

// internEdges is internEntities for edges.
func (g *graphSet) internEdges(live bool, es []store.Edge) {
	if !live {
		return
	}
	g.strsMu.Lock()
	defer g.strsMu.Unlock()
	for i := range es {
		e := &es[i]
		e.Source, e.Relation, e.Target = g.strs.str(e.Source), g.strs.str(e.Relation), g.strs.str(e.Target)
		g.strs.fragments(e.Supports)
	}
}

func (g *graphSet) lexQuery(k aggKey) *lexQuery {
	q, _ := keptAt(g, &g.readable, k)
	return q
}

// keepLexQuery keeps q under k, or returns what another request kept
// there first.
func (g *graphSet) keepLexQuery(k aggKey, q *lexQuery) *lexQuery {
	return keepFirst(g, &g.readable, k, q)
}

// keptAt returns (*m)[k], read under g's lock.
func keptAt[V any](g *graphSet, m *map[aggKey]V, k aggKey) (V, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := (*m)[k]
	return v, ok
}

// keepFirst keeps v under k in *m (keepKeyed), under g's lock, unless a
// concurrent request kept a value there first: that one is returned.
func keepFirst[V any](g *graphSet, m *map[aggKey]V, k aggKey, v V) V {
	g.mu.Lock()
	defer g.mu.Unlock()
	if kept, ok := (*m)[k]; ok {
		return kept
	}
	*m = keepKeyed(*m, k, v)
	return v
}

// keptDocsKey returns the tenant's graph set and the key of this
// request's readable documents in it; keep is false when nothing can be
// kept (as keptAdmissions).
func (v *view) keptDocsKey() (g *graphSet, key aggKey, keep bool) {
	if !v.s.cache.graph.isLive() {
		return nil, aggKey{}, false
	}
	g, err := v.graphSet()
	if err != nil {
		return nil, aggKey{}, false
	}
	key, keep, err = v.aggregateKey("", Hop{})
	if err != nil || !keep {
		return nil, aggKey{}, false
	}
	return g, key, true
}

// keptAggregate is one kept aggregate: its groups and, once a request
// asked /v1/aggregate for it, that response encoded.
type keptAggregate struct {
	groups  []groupJSON
	once    sync.Once
	encoded httpapi.Encoded
	err     error

	// cores are the groups' global themes (cores[i] of groups[i]), made
	// by the first global question that needs them: a theme lists its
	// thousands of members and their documents, the same for every
	// question of the caller at the generation.
	coresOnce sync.Once
	cores     []themeCore
}

// themeCores returns the groups' theme cores, made once.
func (k *keptAggregate) themeCores() []themeCore {
	k.coresOnce.Do(func() {
		k.cores = make([]themeCore, len(k.groups))
		for i, g := range k.groups {
			k.cores[i] = newThemeCore(g)
		}
	})
	return k.cores
}

// response is the /v1/aggregate body of k, encoded once.
func (k *keptAggregate) response() (httpapi.Encoded, error) {
	k.once.Do(func() { k.encoded, k.err = httpapi.EncodeJSON(aggregateResponse{Groups: k.groups}) })
	return k.encoded, k.err
}

// aggKey names one aggregate as one caller sees it at one registry
// generation.
type aggKey struct {
	typ, rel string
	dir      store.Direction
	gen      uint64
	caller   string
}

// maxKeptAggregates bounds the aggregates kept per tenant: callers and
// registry generations beyond it start the set over.
const maxKeptAggregates = 256

// keepKeyed sets m[k] = v in a map of kept values (made when nil, started
// over when full), dropping the values of older registry generations,
// which no request asks for again; the caller holds the lock guarding m.
func keepKeyed[V any](m map[aggKey]V, k aggKey, v V) map[aggKey]V {
	if m == nil || len(m) >= maxKeptAggregates {
		m = map[aggKey]V{}
	}
	for old := range m {
		if old.gen < k.gen {
			delete(m, old)
		}
	}
	m[k] = v
	return m
}

func (g *graphSet) aggregate(k aggKey) (*keptAggregate, bool) {
	return keptAt(g, &g.aggs, k)
}

// admissions are the entities one caller has been shown at one registry
// generation: admission depends only on the entity (kept while the graph
// reads are) and on the registry (the generation), so a request of that
// caller at that generation admits them again without checking a source.
// A nil *admissions keeps nothing.
//
// Requests read it at every entity they meet and write it once per entity
// (what sync.Map is made for: its reads take no lock), so concurrent
// requests of one caller share one copy of each admission instead of each
// copying what it meets into a map of its own.
type admissions struct {
	m sync.Map // id -> *visibleEntity
}

func (a *admissions) get(id string) (*visibleEntity, bool) {
	if a == nil {
		return nil, false
	}
	ve, ok := a.m.Load(id)
	if !ok {
		return nil, false
	}
	return ve.(*visibleEntity), true
}

func (a *admissions) put(id string, ve *visibleEntity) {
	if a == nil {
		return
	}
	a.m.Store(id, ve)
}

// admissionsFor returns the admissions kept under k, made when absent.
func (g *graphSet) admissionsFor(k aggKey) *admissions {
	g.mu.Lock()
	defer g.mu.Unlock()
	return keptOrNew(&g.admissions, k)
}

// keptAdmissions returns the entity admissions kept for this request's
// caller at its registry generation, nil when nothing can be kept (the
// cache is not live, or the store has no registry generation, or it could
// not be read: the admission that follows then fails on its own).
func (v *view) keptAdmissions() *admissions {
	if v.keptChecked {
		return v.kept
	}
	v.keptChecked = true
	if !v.s.cache.graph.isLive() {
		return nil
	}
	g, err := v.graphSet()
	if err != nil {
		return nil
	}
	key, keep, err := v.aggregateKey("", Hop{})
	if err != nil || !keep {
		return nil
	}
	v.kept = g.admissionsFor(key)
	return v.kept
}

func (g *graphSet) count(k aggKey) (int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, ok := g.counts[k]
	return n, ok
}

func (g *graphSet) keepCount(k aggKey, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.counts = keepKeyed(g.counts, k, n)
}

// keepAggregate keeps groups under k, or returns what another request
// kept there first.
func (g *graphSet) keepAggregate(k aggKey, groups []groupJSON) *keptAggregate {
	return keepFirst(g, &g.aggs, k, &keptAggregate{groups: groups})
}

func (g *graphSet) keptPaths(k aggKey) *keptPaths {
	kp, _ := keptAt(g, &g.paths, k)
	return kp
}

// keepPaths keeps kp under k, or returns the traversal a concurrent
// request kept first.
func (g *graphSet) keepPaths(k aggKey, kp *keptPaths) *keptPaths {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.paths[k]; ok {
		return old
	}
	rows := len(kp.rows)
	if rows > maxKeptPathRows {
		return kp // answered, not kept
	}
	for _, p := range g.paths {
		rows += len(p.rows)
	}
	if rows > maxKeptPathRows {
		g.paths = nil // started over
	}
	g.paths = keepKeyed(g.paths, k, kp)
	return kp
}

// maxKeptPathRows bounds the rows of the traversals a tenant's graph
// reads keep (a hub's mentions are thousands of rows, each a few hundred
// bytes): past it the kept traversals start over.
const maxKeptPathRows = 100_000

// storedEntity is one entity read by id; found is false when absent.
type storedEntity struct {
	e     store.Entity
	found bool
}

// cachedEntities returns the entities among ids the tenant's graph reads
// hold (the name index's when built, else those read by id) and the ids
// they do not hold.
func (g *graphSet) cachedEntities(ids []string) (map[string]storedEntity, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	got := make(map[string]storedEntity, len(ids))
	var missing []string
	for _, id := range ids {
		if g.names != nil {
			e, ok := g.names.entity(id)
			got[id] = storedEntity{e, ok}
			continue
		}
		if se, ok := g.ents[id]; ok {
			got[id] = se
		} else {
			missing = append(missing, id)
		}
	}
	return got, missing
}

// keepEntities records what a read by id gave for ids.
func (g *graphSet) keepEntities(ids []string, read map[string]store.Entity) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ents == nil {
		g.ents = map[string]storedEntity{}
	}
	for _, id := range ids {
		e, ok := read[id]
		g.ents[id] = storedEntity{e, ok}
	}
}

type relKey struct{ relation, sourceType string }

// follow runs until ctx is done: an ordered consumer of the invalidating
// events, from now on, drives the caches, which are live while it runs.
// A consumer error drops every cached value (an event may have been
// missed).
func (s *Service) follow(ctx context.Context, bus *stream.Bus) error {
	subs := bus.Subjects()
	// One ordered consumer per kind: servers before NATS 2.10 refuse a
	// consumer with several filter subjects.
	var ccs []jetstream.ConsumeContext
	// With the warm-up, what changes from now on is read again in the
	// background too (keepWarm).
	var feed *warmFeed
	if s.cfg.WarmOnStart {
		feed = newWarmFeed()
	}
	defer func() {
		for _, cc := range ccs {
			cc.Stop()
		}
	}()
	for _, kind := range []events.Kind{events.KindGraphChanged, events.KindCommunitiesChanged, events.KindReportsChanged} {
		cons, err := bus.JetStream().OrderedConsumer(ctx, bus.StreamName(), jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subs.All(kind)},
			DeliverPolicy:  jetstream.DeliverNewPolicy,
		})
		if err != nil {
			return fmt.Errorf("following cache invalidations: %w", err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			kind, tenant, err := subs.Parse(m.Subject())
			if err != nil {
				s.cache.setLive(false)
				s.cache.setLive(true)
				return
			}
			if kind == events.KindGraphChanged {
				doc, err := s.cache.graphChanged(tenant, m.Data())
				if err != nil {
					s.log.Warn("graph change not followed: the tenant's graph reads are dropped", "tenant", tenant, "error", err)
				}
				if feed != nil {
					feed.add(tenant, doc)
				}
				return
			}
			s.cache.invalidate(kind, tenant)
			if feed != nil {
				feed.add(tenant, "")
			}
		}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, context.Canceled) {
				s.log.Warn("cache invalidation consumer", "error", err)
			}
			s.cache.setLive(false)
			s.cache.setLive(true)
		}))
		if err != nil {
			return fmt.Errorf("following cache invalidations: %w", err)
		}
		ccs = append(ccs, cc)
	}
	// Values past their age are reloaded in the background while the
	// consumer runs (tenantCache); the reloads are over before Run returns.
	var background sync.WaitGroup
	s.cache.setRefresh(func(reload func(context.Context)) { background.Go(func() { reload(ctx) }) })
	s.cache.setLive(true)
	if s.cfg.WarmOnStart {
		// Once the caches are live: what is warmed is kept, and dropped
		// by the events that follow as any cached read is.
		background.Go(func() { s.warm(ctx) })
		background.Go(func() { s.keepWarm(ctx, feed, bus) })
	}
	<-ctx.Done()
	s.cache.setRefresh(nil)
	background.Wait()
	s.cache.setLive(false)
	return nil
}

// newDerivedSet indexes a tenant's communities and reports.
func newDerivedSet(cs []store.Community, rs []store.Report) *derivedSet {
	d := &derivedSet{communities: cs, reports: rs, byCommunity: make(map[string]store.Report, len(rs)), reportTokens: make(map[string]int, len(rs)),
		byID: make(map[string]store.Report, len(rs)), memberOf: map[string][]int{}}
	for i, c := range cs {
		for _, m := range c.Members {
			d.memberOf[m] = append(d.memberOf[m], i)
		}
	}
	seen := map[string]bool{}
	for _, r := range rs {
		if prev, ok := d.byCommunity[r.Community]; !ok || r.UpdatedAt.After(prev.UpdatedAt) {
			d.byCommunity[r.Community] = r
		}
		d.reportTokens[r.ID] = reportTokens(r)
		d.byID[r.ID] = r
		for _, ref := range r.Sources {
			if !seen[ref.DocID] {
				seen[ref.DocID] = true
				d.reportDocs = append(d.reportDocs, ref.DocID)
			}
		}
	}
	return d
}

// internDerived interns the strings of cs and rs in place (just read, not
// yet shared), when the set is kept: the members and citations of every
// community and report repeat entity, document and text unit ids, each
// decoded as an object of its own (at 10,000 documents, 640,000 objects
// in a cache of 1,300,000 for every collection to mark).
func internDerived(cs []store.Community, rs []store.Report) {
	var in interner
	refs := func(refs []citation) {
		for i := range refs {
			refs[i].DocID, refs[i].TextUnit = in.str(refs[i].DocID), in.str(refs[i].TextUnit)
		}
	}
	strs := func(ss []string) {
		for i := range ss {
			ss[i] = in.str(ss[i])
		}
	}
	for i := range cs {
		c := &cs[i]
		c.ID, c.Parent = in.str(c.ID), in.str(c.Parent)
		strs(c.Children)
		strs(c.Members)
		refs(c.Sources)
	}
	for i := range rs {
		r := &rs[i]
		r.ID, r.Community, r.Writer = in.str(r.ID), in.str(r.Community), in.str(r.Writer)
		refs(r.Sources)
		for j := range r.Findings {
			f := &r.Findings[j]
			strs(f.Entities)
			strs(f.Edges)
			refs(f.Citations)
		}
	}
}

// keptDerived returns the tenant's derived set while events keep the
// cache live (loading it when no request has since the last change), else
// nil: then readers of a few communities read them through the store's
// member index instead, as loading every community and report for one
// request would cost more than it saves.
func (v *view) keptDerived() (*derivedSet, error) {
	if !v.s.cache.derived.isLive() {
		return nil, nil
	}
	return v.derived()
}

// communitiesOf is store.CommunitiesOf from the set: the communities
// holding any of ids, sorted by level then id.
func (d *derivedSet) communitiesOf(ids []string) []store.Community {
	var at []int
	for _, id := range ids {
		at = append(at, d.memberOf[id]...)
	}
	slices.Sort(at)
	at = slices.Compact(at)
	out := make([]store.Community, len(at))
	for i, j := range at {
		out[i] = d.communities[j]
	}
	return out
}

// derived returns the tenant's communities and reports (cached while
// events keep the cache live).
func (v *view) derived() (*derivedSet, error) {
	return v.s.derived(v.ctx, v.tenant)
}

// derived returns tenant's communities and reports (cached while events
// keep the cache live).
func (s *Service) derived(ctx context.Context, tenant string) (*derivedSet, error) {
	return s.cache.derived.get(ctx, tenant, func(ctx context.Context, _ *derivedSet, _ bool) (*derivedSet, error) {
		cs, err := s.st.Communities(ctx, tenant)
		if err != nil {
			return nil, fmt.Errorf("reading communities: %w", err)
		}
		rs, err := s.st.Reports(ctx, tenant)
		if err != nil {
			return nil, fmt.Errorf("reading reports: %w", err)
		}
		if s.cache.derived.isLive() {
			internDerived(cs, rs)
		}
		return newDerivedSet(cs, rs), nil
	})
}

// edgesByRelation returns the edges of relation (of sourceType sources
// when not ""), unadmitted, cached per tenant while events keep the cache
// live, then without their ids and their supports' descriptions, names
// and weights (relationEdge). Callers must not modify the result.
func (v *view) edgesByRelation(relation, sourceType string) ([]store.Edge, error) {
	g, err := v.graphSet()
	if err != nil {
		return nil, err
	}
	k := relKey{relation, sourceType}
	g.mu.Lock()
	l, ok := g.relations[k]
	g.mu.Unlock()
	if ok && len(l.stale) == 0 {
		return l.edges, nil
	}
	live := v.s.cache.graph.isLive()
	var es []store.Edge
	if ok {
		if es, err = v.patchRelation(g, k, l); err != nil {
			return nil, err
		}
	} else {
		if es, err = v.s.st.EdgesByRelation(v.ctx, v.tenant, relation, sourceType); err != nil {
			return nil, fmt.Errorf("reading %s edges: %w", relation, err)
		}
		// Kept for every caller: their strings are shared like the edges
		// read per entity (a relation's edges repeat entity, document and
		// unit ids), and what aggregates do not read is dropped
		// (relationEdge).
		if live {
			for i := range es {
				relationEdge(&es[i])
			}
		}
		g.internEdges(live, es)
	}
	g.mu.Lock()
	if g.relations == nil {
		g.relations = map[relKey]relList{}
	}
	g.relations[k] = relList{edges: es}
	g.mu.Unlock()
	return es, nil
}

// relList is what a set keeps of a relation: its edges as aggregates read
// them (relationEdge), in no particular order, and, when the list was
// taken over from the set this one succeeds, the entities the changes
// since then named (stale, sorted): the list holds no edge leaving one of
// those until they are read again (patchRelation).
type relList struct {
	edges []store.Edge
	stale []string
}

// maxStaleRelation bounds the entities a kept relation list is patched
// for: the patch reads each one's outgoing edges, and past this many a
// read of the whole relation costs less.
const maxStaleRelation = 128

// patchRelation returns the edges of the relation k after the changes
// that named l.stale: l's edges but those leaving a stale entity, and the
// stored outgoing edges of k's relation of each stale entity of k's
// source type, read through g's edge lists. An edge's ends are both among
// the entities of the document that contributes it, so a change names
// the source of every edge it adds, removes or re-supports
// (events.GraphChanged.NamesAll): every other edge of l is as stored.
// Aggregates, the lists' only readers, do not depend on their order.
func (v *view) patchRelation(g *graphSet, k relKey, l relList) ([]store.Edge, error) {
	stale := func(id string) bool {
		_, found := slices.BinarySearch(l.stale, id)
		return found
	}
	es := make([]store.Edge, 0, len(l.edges))
	for _, e := range l.edges {
		if !stale(e.Source) {
			es = append(es, e)
		}
	}
	live := v.s.cache.graph.isLive()
	for _, id := range l.stale {
		if k.sourceType != "" && !strings.HasPrefix(id, k.sourceType+":") {
			continue
		}
		out, err := v.storedEdges(g, edgeKey{id, store.Out})
		if err != nil {
			return nil, err
		}
		for _, e := range out {
			if e.Relation != k.relation {
				continue
			}
			// The edge list is shared: the relation's copy is stripped.
			e.Supports = slices.Clone(e.Supports)
			if live {
				relationEdge(&e)
			}
			es = append(es, e)
		}
	}
	return es, nil
}

// relationEdge drops from a relation's edge what aggregates (countGroups,
// their only reader) never read: its id and its supports' descriptions,
// names and weights, one object each for every collection to mark.
func relationEdge(e *store.Edge) {
	e.ID = ""
	for j := range e.Supports {
		f := &e.Supports[j]
		f.Description, f.Name, f.NameRank, f.Weight = "", "", 0, 0
	}
}

// graphSet returns the tenant's graph reads (a new empty set when the
// cache is not live or was dropped).
func (v *view) graphSet() (*graphSet, error) {
	return v.s.graphSet(v.ctx, v.tenant)
}

// graphSet returns tenant's graph reads (a new empty set when the cache is
// not live or was dropped). The set that replaces one past its age (in
// the background, see tenantCache) gets its name index built first, from
// every entity, when the old one had one (or was to patch one): the
// requests meanwhile use the old one, and a rebuild repairs whatever a
// patch could have missed.
func (s *Service) graphSet(ctx context.Context, tenant string) (*graphSet, error) {
	return s.cache.graph.get(ctx, tenant, func(ctx context.Context, prev *graphSet, aged bool) (*graphSet, error) {
		g := &graphSet{}
		if aged && prev.nameIndexBuilt() {
			if _, err := s.nameIndexOf(ctx, tenant, g); err != nil {
				return nil, err
			}
		}
		return g, nil
	})
}

// succeed returns the graph reads that follow g after a change of the
// entities ids (sorted): the name index g has (or the one g was to
// patch) to be patched for ids, by the first request that needs it
// (Service.nameIndexOf), and, when a request is making g's index, g
// itself: that request's index then only needs the patch for ids.
// The entities and edges read by id go on too, but for those of ids
// (unchangedReads), and the relation lists, to be patched for ids
// (staleRelations). Everything else starts over, as when the set is
// dropped: it depends on the whole graph (aggregates,
// traversals, plans, counts, readable documents) or on entities that may
// have changed (admissions). The edge lists of ids go on too, to be
// patched for ids (staleEdges). False when g has nothing to follow: no name
// index, no read by id and no relation list; the index to patch is left out when so many
// changes are pending that a build costs less than the patch.
func (g *graphSet) succeed(ch namedChange) (*graphSet, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := ch.ids
	next := &graphSet{}
	next.ents, next.edges, next.staleEdges = g.unchangedReads(ids)
	next.relations = g.staleRelations(ids)
	switch {
	case g.names != nil:
		next.from, next.pending = g.names, ch
	case g.from != nil:
		next.from = g.from
		next.pending = g.pending.then(ch)
	}
	if next.from != nil && len(next.pending.ids) > max(minPatchBound, len(next.from.base.byID)/4) {
		next.from, next.pending = nil, namedChange{}
	}
	// The index a request is making gets the patch for ids only while
	// that costs less than a build (as for pending above; the size of a
	// full build under way is not known: the bound is then minPatchBound).
	recentMax := minPatchBound
	if g.from != nil {
		recentMax = max(minPatchBound, len(g.from.base.byID)/4)
	}
	if g.names == nil && g.making && len(ids) <= recentMax {
		next.prev, next.recent = g, ch
	}
	return next, next.from != nil || next.prev != nil || len(next.ents) > 0 || len(next.edges) > 0 || len(next.staleEdges) > 0 ||
		len(next.relations) > 0
}

// staleRelations returns g's relation lists for its successor after a
// change naming ids (sorted): each with ids added to its stale entities,
// to be patched by the first request that reads it (patchRelation);
// those that would then be patched for more than maxStaleRelation
// entities are left out (read again whole). The caller holds g.mu.
func (g *graphSet) staleRelations(ids []string) map[relKey]relList {
	var out map[relKey]relList
	for k, l := range g.relations {
		stale := unionSorted(l.stale, ids)
		if len(stale) > maxStaleRelation {
			continue
		}
		if out == nil {
			out = make(map[relKey]relList, len(g.relations))
		}
		out[k] = relList{edges: l.edges, stale: stale}
	}
	return out
}

// unionSorted returns the ids of a and b (each sorted), sorted, each once;
// b itself when a is empty.
func unionSorted(a, b []string) []string {
	if len(a) == 0 {
		return b
	}
	return slices.Compact(slices.Sorted(slices.Values(slices.Concat(a, b))))
}

// maxInheritedReads bounds the entities and edge lists read by id that a
// set's successor takes over (unchangedReads): the copy is made at every
// change, under the lock of every tenant's graph reads (tenantCache.mu),
// so past this bound the set starts over instead. A map of this many is
// cloned in a few milliseconds; an aggregate over every incident of a
// 10,000-document tenant reads some 11,000 entities.
const maxInheritedReads = 50_000

// staleEdgeList is an entity's edge list in one direction as read
// before changes that named the entity, and the entities those changes
// named (sorted): of its edges, those whose other end is not among them
// are as stored still (see unchangedReads).
type staleEdgeList struct {
	edges []store.Edge
	stale []string
}

// unchangedReads returns copies of g's entities read by id and edge lists
// read per entity and direction, but for the entities ids (sorted), and,
// apart, the edge lists of those (stale, to be patched for ids). The
// others are as stored still after the change that named ids: an edge's
// ends are among its document's entities, so a change names both ends of
// every edge it adds, removes or re-supports, and an entity changes only
// with its own fragments, which name it too
// (events.GraphChanged.NamesAll). For the same reason, of a named
// entity's edges, those whose other end the change does not name are as
// stored still. Under live ingestion a hub's edge list, thousands of
// edges, would otherwise be read again after every document applied
// anywhere, and whole after every one naming it. A list named by changes
// naming more than maxStaleRelation entities since it was read is left
// out (read again whole). The caller holds g.mu.
func (g *graphSet) unchangedReads(ids []string) (map[string]storedEntity, map[edgeKey][]store.Edge, map[edgeKey]staleEdgeList) {
	if n := len(g.ents) + len(g.edges) + len(g.staleEdges); n == 0 || n > maxInheritedReads {
		return nil, nil, nil
	}
	// A clone, then the few named entries deleted: cloning copies the
	// map's tables whole, several times faster than inserting each entry.
	var ents map[string]storedEntity
	if len(g.ents) > 0 {
		ents = maps.Clone(g.ents)
		for _, id := range ids {
			delete(ents, id)
		}
	}
	var edges map[edgeKey][]store.Edge
	var stale map[edgeKey]staleEdgeList
	if len(g.staleEdges) > 0 {
		stale = maps.Clone(g.staleEdges)
	}
	named := func(k edgeKey, l staleEdgeList) {
		if l.stale = unionSorted(l.stale, ids); len(l.stale) > maxStaleRelation {
			delete(stale, k)
			return
		}
		if stale == nil {
			stale = map[edgeKey]staleEdgeList{}
		}
		stale[k] = l
	}
	if len(g.edges) > 0 {
		edges = maps.Clone(g.edges)
		for _, id := range ids {
			for _, dir := range []store.Direction{store.Out, store.In} {
				k := edgeKey{id, dir}
				if es, ok := edges[k]; ok {
					delete(edges, k)
					named(k, staleEdgeList{edges: es})
				}
			}
		}
	}
	for _, id := range ids {
		for _, dir := range []store.Direction{store.Out, store.In} {
			k := edgeKey{id, dir}
			if l, ok := g.staleEdges[k]; ok {
				named(k, l)
			}
		}
	}
	return ents, edges, stale
}

// minPatchBound is the least number of changed entities a name index is
// patched for (below, a build is never cheaper), and of its overlay
// before a fold.
const minPatchBound = 512

// nameIndexBuilt reports whether g holds its name index, or one to
// patch into it.
func (g *graphSet) nameIndexBuilt() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.names != nil || g.from != nil || g.prev != nil
}
