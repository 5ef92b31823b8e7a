package status

import (
	"sync"
	"time"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// indexCache keeps the contribution indexes of documents (what each
// supports) for the counts of callers who may read only some documents
// (readableReport), while the process follows the graph changes
// (Collector.Following): those counts are computed again after every
// graph or registry change, and under live ingestion that read and
// decoded every readable document's index again after every document
// applied, where only the documents applied since need reading.
//
// An entry is used only while its version is the document's announced
// one (a new version, a deletion included, is announced before it is
// applied), and it is dropped by every applied change the process follows
// (Collector.DocChanged): a document resolved again at the same version
// changes its index too. An entry read before such a change and kept
// after it would hold the index before the change: keep drops what was
// changed after the read began (the epochs). Between a change's commit
// and its event, the counts may take the index before it; counts kept
// (countCache) are kept at the tenant's generation here too, so the
// event makes them computed again. An entry is used for maxIndexAge at
// most: an event lost (a resolver that committed and never published)
// cannot keep an index wrong for longer, as the query caches' age limit
// bounds theirs.
type indexCache struct {
	mu    sync.Mutex
	live  bool
	epoch uint64
	// since is the epoch at which the cache last went live: reads begun
	// before it are not kept.
	since   uint64
	tenants map[string]*tenantIndexes
	n       int
	now     func() time.Time // time.Now when nil
}

type tenantIndexes struct {
	ixs map[string]keptIndex
	// changed holds, per document, the epoch of its last change followed.
	changed map[string]uint64
	// all is the epoch of the last change that named no document: reads
	// begun before it keep nothing of the tenant. last is the epoch of
	// the tenant's last change of any kind.
	all, last uint64
}

type keptIndex struct {
	ix store.SourceIndex
	at time.Time
}

// maxIndexAge is how long a kept index is used.
const maxIndexAge = time.Minute

func (c *indexCache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// generation changes whenever what the cache holds of tenant may have
// been dropped: a change of one of its documents, or the cache going live
// or not.
func (c *indexCache) generation(tenant string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.since
	if t := c.tenants[tenant]; t != nil {
		g = max(g, t.last)
	}
	return g
}

// maxKeptIndexes bounds the indexes an indexCache keeps; past it the
// cache starts over.
const maxKeptIndexes = 200_000

// begin returns the epoch a read of indexes starts at (for keep).
func (c *indexCache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// get returns the index kept of s's document when the cache is live and
// the index is of s's version.
func (c *indexCache) get(tenant string, s provenance.SourceState) (store.SourceIndex, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tenants[tenant]
	if !c.live || t == nil {
		return store.SourceIndex{}, false
	}
	k, ok := t.ixs[s.DocID]
	if !ok || k.ix.Version != s.Version || c.clock().Sub(k.at) > maxIndexAge {
		return store.SourceIndex{}, false
	}
	return k.ix, true
}

// keep keeps ixs, read from epoch from on, but those of documents changed
// since from (and all of them when the cache went live, or the tenant
// was dropped, after from).
func (c *indexCache) keep(tenant string, ixs map[string]store.SourceIndex, from uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || from < c.since || len(ixs) > maxKeptIndexes {
		return
	}
	t := c.tenant(tenant)
	if from < t.all {
		return
	}
	if c.n+len(ixs) > maxKeptIndexes {
		for _, t := range c.tenants {
			clear(t.ixs)
		}
		c.n = 0
	}
	at := c.clock()
	for doc, ix := range ixs {
		if t.changed[doc] > from {
			continue
		}
		if _, ok := t.ixs[doc]; !ok {
			c.n++
		}
		t.ixs[doc] = keptIndex{ix, at}
	}
}

func (c *indexCache) tenant(tenant string) *tenantIndexes {
	t := c.tenants[tenant]
	if t == nil {
		if c.tenants == nil {
			c.tenants = map[string]*tenantIndexes{}
		}
		t = &tenantIndexes{ixs: map[string]keptIndex{}, changed: map[string]uint64{}}
		c.tenants[tenant] = t
	}
	return t
}

// changed drops what is kept of doc of tenant, or of every document of
// tenant when doc is "".
func (c *indexCache) changed(tenant, doc string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	t := c.tenant(tenant)
	t.last = c.epoch
	if doc == "" {
		c.n -= len(t.ixs)
		clear(t.ixs)
		clear(t.changed)
		t.all = c.epoch
		return
	}
	if _, ok := t.ixs[doc]; ok {
		delete(t.ixs, doc)
		c.n--
	}
	t.changed[doc] = c.epoch
}

// following turns the cache on or off; either way it starts empty.
func (c *indexCache) following(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.live, c.since, c.tenants, c.n = live, c.epoch, nil, 0
}

// Following tells the collector whether its process follows every graph
// change (kg.graph.changed) and reports each to DocChanged: while it
// does, the indexes of documents are kept for the counts of callers who
// may read only some documents (see indexCache). Each call starts the
// kept indexes over.
func (c *Collector) Following(live bool) { c.indexes.following(live) }

// DocChanged tells the collector that a change of doc of tenant was
// applied (or deleted), or, doc "", that any document of tenant may have
// changed.
func (c *Collector) DocChanged(tenant, doc string) { c.indexes.changed(tenant, doc) }
