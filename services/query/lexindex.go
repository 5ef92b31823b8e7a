package query

import (
	"cmp"
	"container/heap"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// unitCache holds the tokenized text units of applied document versions,
// per tenant, with an inverted index over them. It holds content only:
// who may read it is decided per request through the caller's Admitter,
// and a version is served only while it is both the registry's latest and
// the applied one.
type unitCache struct {
	mu      sync.Mutex
	tenants map[string]*lexTenant
}

// tenant returns the cache of tenant, created on first use.
func (c *unitCache) tenant(tenant string) *lexTenant {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tenants == nil {
		c.tenants = map[string]*lexTenant{}
	}
	t := c.tenants[tenant]
	if t == nil {
		t = &lexTenant{docs: map[string]*lexDoc{}, bySeq: []*lexDoc{nil}, units: map[string][]posting{}, titles: map[string][]uint32{}}
		c.tenants[tenant] = t
	}
	return t
}

// lexTenant is one tenant's cached documents and their inverted index:
// for every word a unit may match a question by (see indexable), the
// units holding it, and the documents whose title holds it.
//
// Each cached version gets a sequence number (lexDoc.seq, 0 = never
// indexed). A dropped version's postings stay until the dead ones
// outnumber the live ones; then the index is rebuilt from the live
// versions, renumbered, and epoch changes, so a request that resolved
// its documents against the old numbering resolves them again.
//
// Memory: 8 bytes per (unit, distinct indexable word of the unit) and
// 4 bytes per (document, indexable title word), times the slices' spare
// capacity (at most 2x), plus one pointer per cached version; at most as
// much again in dead postings before a rebuild.
type lexTenant struct {
	// loadMu is held while documents are read into the cache
	// (Service.loadLexDocs), so two loads never read the same documents.
	loadMu sync.Mutex
	mu     sync.RWMutex
	docs   map[string]*lexDoc   // current cached version by doc id
	bySeq  []*lexDoc            // by seq; nil once dropped
	units  map[string][]posting // word -> units holding it
	titles map[string][]uint32  // word -> seqs of documents whose title holds it
	live   int                  // postings of live versions (units and titles)
	dead   int                  // postings of dropped versions
	epoch  uint64               // counts rebuilds
}

// posting is one unit of one cached version: d.units[unit] of bySeq[seq].
type posting struct{ seq, unit uint32 }

// indexable reports whether w can be a question's content word (see
// contentWords); only those are indexed.
func indexable(w string) bool {
	return !isContentStopword(w) && (len(w) >= 2 || isDigits(w))
}

func (t *lexTenant) lookup(ids []string) []*lexDoc {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]*lexDoc, len(ids))
	for i, id := range ids {
		out[i] = t.docs[id]
	}
	return out
}

func (t *lexTenant) put(id string, d *lexDoc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.docs[id]; old != nil {
		t.unindex(old)
	}
	t.docs[id] = d
	t.index(d)
	t.compact()
}

// drop forgets the cached versions of ids, taking the write lock only
// when one is cached.
func (t *lexTenant) drop(ids []string) {
	t.mu.RLock()
	cached := slices.ContainsFunc(ids, func(id string) bool { return t.docs[id] != nil })
	t.mu.RUnlock()
	if !cached {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if old := t.docs[id]; old != nil {
			t.unindex(old)
			delete(t.docs, id)
		}
	}
	t.compact()
}

// index numbers d and adds its postings.
func (t *lexTenant) index(d *lexDoc) {
	d.seq = uint32(len(t.bySeq))
	t.bySeq = append(t.bySeq, d)
	// A word new to the index is copied out of its set's string, which
	// the index would otherwise keep alive after the document is gone.
	for w := range d.titleWords.all() {
		if indexable(w) {
			ps, ok := t.titles[w]
			if !ok {
				w = strings.Clone(w)
			}
			t.titles[w] = append(ps, d.seq)
			t.live++
		}
	}
	for j, u := range d.units {
		for w := range u.words.all() {
			if indexable(w) {
				ps, ok := t.units[w]
				if !ok {
					w = strings.Clone(w)
				}
				t.units[w] = append(ps, posting{d.seq, uint32(j)})
				t.live++
			}
		}
	}
}

// unindex marks d's postings dead.
func (t *lexTenant) unindex(d *lexDoc) {
	n := 0
	for w := range d.titleWords.all() {
		if indexable(w) {
			n++
		}
	}
	for _, u := range d.units {
		for w := range u.words.all() {
			if indexable(w) {
				n++
			}
		}
	}
	t.bySeq[d.seq] = nil
	t.live -= n
	t.dead += n
}

// compact rebuilds the index from the live versions once dead postings
// outnumber live ones.
func (t *lexTenant) compact() {
	if t.dead <= t.live {
		return
	}
	ids := make([]string, 0, len(t.docs))
	for id := range t.docs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	t.bySeq = []*lexDoc{nil}
	t.units, t.titles = map[string][]posting{}, map[string][]uint32{}
	t.live, t.dead = 0, 0
	t.epoch++
	for _, id := range ids {
		t.index(t.docs[id])
	}
}

// lexQuery is a caller's readable documents resolved against its
// tenant's index: base numbers the units of docs densely, and the
// numbering (per index epoch) maps a live version's seq to its position
// in docs and lists the documents the index does not hold at their
// request's version (replaced since, or never cached), which are scanned
// as a whole. A lexQuery is read-only once made, apart from its numbering
// (an immutable value swapped when the index's epoch moves) and the maps
// built once on first use, so requests of one caller at one registry
// generation share it (keptLexQuery).
type lexQuery struct {
	t    *lexTenant
	docs []readableDoc
	base []int // base[i] is the dense number of docs[i].doc.units[0]; base[len(docs)] the total
	// idOrdered: the documents with units are in strictly ascending
	// order of their units' document id (as the registry lists them), so
	// of two units with equal scores, the one of the later document is
	// the later in compare's order.
	idOrdered bool
	num       atomic.Pointer[lexNumbering]
	// titles are the documents' titles by id (docTitles), byID their
	// cached versions (unitAt), each built once.
	titlesOnce sync.Once
	titles     map[string]string
	byIDOnce   sync.Once
	byID       map[string]*lexDoc
}

// lexNumbering is a lexQuery's numbering against one epoch of its index.
type lexNumbering struct {
	epoch uint64
	slot  []int32
	extra []int
	whole []bool // whole[i]: i is in extra
}

func newLexQuery(t *lexTenant, docs []readableDoc) *lexQuery {
	q := &lexQuery{t: t, docs: docs, base: make([]int, len(docs)+1), idOrdered: true}
	n := 0
	last := ""
	for i, d := range docs {
		q.base[i] = n
		n += len(d.doc.units)
		if len(d.doc.units) > 0 {
			id := d.doc.units[0].docID
			if i > 0 && id <= last {
				q.idOrdered = false
			}
			last = id
		}
	}
	q.base[len(docs)] = n
	return q
}

// resolve builds q's numbering for the index's epoch; t.mu is held.
func (q *lexQuery) resolve() *lexNumbering {
	t := q.t
	n := &lexNumbering{epoch: t.epoch, slot: make([]int32, len(t.bySeq)), whole: make([]bool, len(q.docs))}
	for i, d := range q.docs {
		if s := d.doc.seq; s != 0 && int(s) < len(t.bySeq) && t.bySeq[s] == d.doc {
			n.slot[s] = int32(i + 1)
		} else {
			n.extra = append(n.extra, i)
			n.whole[i] = true
		}
	}
	return n
}

// lock read-locks the index and returns q's numbering for its epoch
// (made when the epoch moved; two requests making it at once make the
// same value).
func (q *lexQuery) lock() *lexNumbering {
	q.t.mu.RLock()
	if n := q.num.Load(); n != nil && n.epoch == q.t.epoch {
		return n
	}
	n := q.resolve()
	q.num.Store(n)
	return n
}

// docOf is the position in docs of the version numbered seq, or -1 when
// the request cannot read it.
func (n *lexNumbering) docOf(seq uint32) int {
	if int(seq) < len(n.slot) {
		return int(n.slot[seq]) - 1
	}
	return -1
}

// ranking computes the word weights of newUnitRanking's definition (IDF
// over the units and titles of the readable documents) from the
// postings of the question's words that the request can read.
func (q *lexQuery) ranking(question string) unitRanking {
	r := unitRanking{words: contentWords(question), unitIDF: map[string]float64{}, titleIDF: map[string]float64{}}
	num := q.lock()
	defer q.t.mu.RUnlock()
	units := q.base[len(q.docs)]
	for _, w := range r.words {
		udf, tdf := 0, 0
		for _, p := range q.t.units[w] {
			if num.docOf(p.seq) >= 0 {
				udf++
			}
		}
		for _, s := range q.t.titles[w] {
			if num.docOf(s) >= 0 {
				tdf++
			}
		}
		for _, i := range num.extra {
			d := q.docs[i].doc
			if d.titleWords.has(w) {
				tdf++
			}
			for _, u := range d.units {
				if u.words.has(w) {
					udf++
				}
			}
		}
		if udf > 0 {
			r.unitIDF[w] = math.Log(1 + float64(units)/float64(udf))
			r.unitSum += r.unitIDF[w]
		}
		if tdf > 0 {
			r.titleIDF[w] = math.Log(1 + float64(len(q.docs))/float64(tdf))
			r.titleSum += r.titleIDF[w]
		}
	}
	return r
}

// unitSet is a set of dense unit numbers.
type unitSet []uint64

func (s unitSet) add(i int) { s[i>>6] |= 1 << (i & 63) }

func (s unitSet) has(i int) bool { return s[i>>6]&(1<<(i&63)) != 0 }

func (s unitSet) addRange(from, to int) {
	for i := from; i < to; i++ {
		s.add(i)
	}
}

// scored is a candidate unit: docs[doc].doc.units[unit], its score and
// title share.
type scored struct {
	doc, unit int
	score, ts float64
}

// rank scores the units that can pass the filter of the full scan's
// definition (see rankedUnits), adds priors (by "doc#unit"), and
// returns the relevant ones, best first, at most maxUnitsPerDoc per
// document and limit in all. The result is the full scan's: no other
// unit can pass the filter (a unit without a question word has no word
// share, one of a document without a title word no title share), each
// word share sums the same weights in the same order, and keeping each
// document's best maxUnitsPerDoc before taking the best limit keeps
// what sorting all and skipping a document's extra units keeps.
func (q *lexQuery) rank(r unitRanking, priors map[string]float64, limit int) []rankedUnit {
	if limit <= 0 {
		return nil
	}
	num := q.lock()
	sc := rankScratchPool.Get().(*rankScratch)
	defer rankScratchPool.Put(sc)
	set, got, titleShares, priorAt := q.candidates(num, r, priors, sc)
	q.t.mu.RUnlock()
	// The best limit so far: each document's best units enter as the
	// document ends, so no list of every candidate is built.
	best := newBestScored(limit, q.compare)
	perDoc := make([]scored, 0, maxUnitsPerDoc+1)
	i := 0
	flush := func() {
		for _, c := range perDoc {
			best.add(c)
		}
		perDoc = perDoc[:0]
	}
	for wi, word := range set {
		for word != 0 {
			n := wi<<6 + bits.TrailingZeros64(word)
			word &= word - 1
			if n >= q.base[i+1] {
				flush()
				for n >= q.base[i+1] {
					i++
				}
			}
			c, ok := q.score(num, r, priors, priorAt, i, n-q.base[i], got, titleShares)
			if ok && !best.excludes(c, q.idOrdered) {
				perDoc = keepBest(perDoc, c, q.less)
			}
		}
	}
	flush()
	top := best.sorted()
	out := make([]rankedUnit, 0, len(top))
	for _, c := range top {
		d := q.docs[c.doc]
		out = append(out, rankedUnit{lexUnit: d.doc.units[c.unit], title: d.title, titleShare: c.ts, score: c.score})
	}
	return out
}

// score scores unit j of docs[i] as the full scan does; ok is false when
// it is not relevant. An indexed document's unit is scored from the
// dense arrays alone (got, priorAt, titleShares): reading the unit itself
// for each of hundreds of thousands of candidates, and building its
// "doc#unit" key to look up a prior, was most of a ranking's time.
func (q *lexQuery) score(num *lexNumbering, r unitRanking, priors map[string]float64, priorAt map[int]float64, i, j int, got []float64, titleShares []float64) (scored, bool) {
	var s, p float64
	if num.whole[i] {
		u := &q.docs[i].doc.units[j]
		s = r.share(u.words.has)
		if len(priors) > 0 {
			p = priors[u.docID+"#"+u.unit]
		}
	} else {
		if r.unitSum != 0 {
			s = got[q.base[i]+j] / r.unitSum
		}
		p = priorAt[q.base[i]+j]
	}
	ts := titleShares[i]
	if s < minUnitShare && p == 0 && ts < 0.5 {
		return scored{}, false
	}
	return scored{doc: i, unit: j, score: s + titleWeight*ts*ts + priorWeight*p, ts: ts}, true
}

// compare is the full scan's order: score, then doc id, then unit id.
// The units are read only to break a tie (most comparisons of a ranking
// are settled by the score, and reading two units each time was most of
// its cost at 100,000 documents).
func (q *lexQuery) compare(a, b scored) int {
	if c := cmp.Compare(b.score, a.score); c != 0 {
		return c
	}
	ua, ub := &q.docs[a.doc].doc.units[a.unit], &q.docs[b.doc].doc.units[b.unit]
	return cmp.Or(cmp.Compare(ua.docID, ub.docID), cmp.Compare(ua.unit, ub.unit))
}

func (q *lexQuery) less(a, b scored) bool { return q.compare(a, b) < 0 }

// keepBest inserts c into best (sorted by less, at most maxUnitsPerDoc).
func keepBest(best []scored, c scored, less func(a, b scored) bool) []scored {
	at := len(best)
	for at > 0 && less(c, best[at-1]) {
		at--
	}
	if at == maxUnitsPerDoc {
		return best
	}
	best = slices.Insert(best, at, c)
	if len(best) > maxUnitsPerDoc {
		best = best[:maxUnitsPerDoc]
	}
	return best
}

// candidates returns the set of units that can pass rank's filter:
// those holding a question word, those of documents whose title holds
// one, those with a prior, and all units of extra documents; got, the
// IDF sum of the question words each indexed unit holds, added in the
// question's word order as unitRanking.share adds them; the title
// share of the documents that have one; and the prior of each indexed
// unit that has one, by dense number. t.mu is held. The dense arrays are
// sc's, valid until sc is used again.
func (q *lexQuery) candidates(num *lexNumbering, r unitRanking, priors map[string]float64, sc *rankScratch) (set unitSet, got []float64, titleShares []float64, priorAt map[int]float64) {
	n := q.base[len(q.docs)]
	sc.set = zeroed(sc.set, (n+63)/64)
	sc.got = zeroed(sc.got, n)
	set, got = sc.set, sc.got
	for _, w := range r.words {
		idf, ok := r.unitIDF[w]
		if !ok {
			continue
		}
		for _, p := range q.t.units[w] {
			if i := num.docOf(p.seq); i >= 0 {
				k := q.base[i] + int(p.unit)
				set.add(k)
				got[k] += idf
			}
		}
	}
	// Title shares from the postings, each document's added in the
	// question's word order as unitRanking.titleShare adds them (every
	// question word is indexable, so the postings hold every title that
	// has one).
	sc.titleShares = zeroed(sc.titleShares, len(q.docs))
	sc.titled = zeroed(sc.titled, (len(q.docs)+63)/64)
	titleShares, titled := sc.titleShares, sc.titled
	for _, w := range r.words {
		idf, ok := r.titleIDF[w]
		if !ok {
			continue
		}
		for _, s := range q.t.titles[w] {
			if i := num.docOf(s); i >= 0 {
				titleShares[i] += idf
				if !titled.has(i) {
					titled.add(i)
					set.addRange(q.base[i], q.base[i+1])
				}
			}
		}
	}
	for wi, word := range titled {
		for word != 0 {
			i := wi<<6 + bits.TrailingZeros64(word)
			word &= word - 1
			titleShares[i] /= r.titleSum
		}
	}
	for _, i := range num.extra {
		if ts := r.titleShare(q.docs[i].doc); ts != 0 {
			titleShares[i] = ts
		}
		set.addRange(q.base[i], q.base[i+1])
	}
	if len(priors) > 0 {
		priorAt = make(map[int]float64, len(priors))
	}
	for key, p := range priors {
		q.addPrior(num, set, priorAt, key, p)
	}
	return set, got, titleShares, priorAt
}

// rankScratch holds the dense arrays of one ranking (candidates) between
// requests: at 10,000 documents they are some 300 KB per question, all
// garbage once the best units are picked.
type rankScratch struct {
	set, titled      unitSet
	got, titleShares []float64
}

var rankScratchPool = sync.Pool{New: func() any { return new(rankScratch) }}

// zeroed returns s with n zero elements, in s's array when it is large
// enough.
func zeroed[S ~[]E, E any](s S, n int) S {
	if cap(s) < n {
		return make(S, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// addPrior adds the units a prior key ("doc#unit") names, and records
// its prior p under their dense numbers. A doc id may itself hold '#', so
// every split is tried; the split that names a unit is the one its
// "doc#unit" key is (the index's documents are keyed by the id their
// units carry). A document the request cannot read through the index is
// extra and already in the set; score looks its priors up by key.
func (q *lexQuery) addPrior(num *lexNumbering, set unitSet, priorAt map[int]float64, key string, p float64) {
	for at := strings.IndexByte(key, '#'); at >= 0; {
		doc, unit := key[:at], key[at+1:]
		if d := q.t.docs[doc]; d != nil {
			if i := num.docOf(d.seq); i >= 0 && q.docs[i].doc == d {
				for j, u := range d.units {
					if u.unit == unit {
						set.add(q.base[i] + j)
						if u.docID == doc {
							priorAt[q.base[i]+j] = p
						}
					}
				}
			}
		}
		next := strings.IndexByte(key[at+1:], '#')
		if next < 0 {
			break
		}
		at += 1 + next
	}
}

// lexQuery returns the request's readable documents resolved against the
// tenant's index: the one kept for the caller at this registry generation
// when there is one (readableDocs), else made once per request.
func (v *view) lexQuery() (*lexQuery, error) {
	if v.lex != nil {
		return v.lex, nil
	}
	docs, err := v.readableDocs()
	if err != nil {
		return nil, err
	}
	if v.lex == nil {
		v.lex = newLexQuery(v.s.units.tenant(v.tenant), docs)
	}
	return v.lex, nil
}

// unitRanking weighs the question's words over the documents the caller
// may read (see unitRanking).
func (v *view) unitRanking(question string) (unitRanking, error) {
	q, err := v.lexQuery()
	if err != nil {
		return unitRanking{}, err
	}
	return q.ranking(question), nil
}

// rankUnits ranks the caller's readable units against r (see lexQuery.rank).
func (v *view) rankUnits(r unitRanking, priors map[string]float64, limit int) ([]rankedUnit, error) {
	q, err := v.lexQuery()
	if err != nil {
		return nil, err
	}
	return q.rank(r, priors, limit), nil
}

// docTitles returns the titles of the caller's readable documents by id,
// built once (callers only read it).
func (v *view) docTitles() (map[string]string, error) {
	q, err := v.lexQuery()
	if err != nil {
		return nil, err
	}
	q.titlesOnce.Do(func() {
		q.titles = make(map[string]string, len(q.docs))
		for _, d := range q.docs {
			q.titles[d.id] = d.title
		}
	})
	return q.titles, nil
}

// docVersions returns the cached versions of the caller's readable
// documents by id, built once (callers only read it).
func (v *view) docVersions() (map[string]*lexDoc, error) {
	q, err := v.lexQuery()
	if err != nil {
		return nil, err
	}
	q.byIDOnce.Do(func() {
		q.byID = make(map[string]*lexDoc, len(q.docs))
		for _, d := range q.docs {
			q.byID[d.id] = d.doc
		}
	})
	return q.byID, nil
}

// bestScored keeps the best limit (> 0) of the scored it is given, by
// cmp (worst on top of a heap).
type bestScored struct {
	h     worstFirst
	limit int
}

func newBestScored(limit int, cmp func(a, b scored) int) *bestScored {
	return &bestScored{h: worstFirst{cmp: cmp, s: make([]scored, 0, limit)}, limit: limit}
}

// excludes reports, without comparing units, that c (of a document
// after those of every unit kept so far) can never be kept: the best are
// limit already and c scores less than the worst of them, or as much
// when idOrdered (then c's document id is the greater, see
// lexQuery.idOrdered). A hub's thousands of passages score alike and
// mostly end here, before a document's best are picked (keepBest): c
// could only push out of them units worse than itself, which would be
// excluded as well, as the worst kept only gets better.
func (b *bestScored) excludes(c scored, idOrdered bool) bool {
	if len(b.h.s) < b.limit {
		return false
	}
	w := b.h.s[0].score
	return c.score < w || idOrdered && c.score == w
}

func (b *bestScored) add(c scored) {
	switch {
	case len(b.h.s) < b.limit:
		heap.Push(&b.h, c)
	case b.h.cmp(c, b.h.s[0]) < 0:
		b.h.s[0] = c
		heap.Fix(&b.h, 0)
	}
}

// sorted returns what is kept, best first.
func (b *bestScored) sorted() []scored {
	slices.SortFunc(b.h.s, b.h.cmp)
	return b.h.s
}

// worstFirst is a heap whose top is the last of its items in cmp's order.
type worstFirst struct {
	s   []scored
	cmp func(a, b scored) int
}

func (h *worstFirst) Len() int           { return len(h.s) }
func (h *worstFirst) Less(i, j int) bool { return h.cmp(h.s[i], h.s[j]) > 0 }
func (h *worstFirst) Swap(i, j int)      { h.s[i], h.s[j] = h.s[j], h.s[i] }
func (h *worstFirst) Push(x any)         { h.s = append(h.s, x.(scored)) }
func (h *worstFirst) Pop() any {
	x := h.s[len(h.s)-1]
	h.s = h.s[:len(h.s)-1]
	return x
}
