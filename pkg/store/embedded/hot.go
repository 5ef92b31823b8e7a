package embedded

import (
	"sync"

	"github.com/kgstream/kgstream/pkg/store"
)

// hotCache keeps, decoded, the entities and edges with many fragments (a
// hub such as a cloud provider every incident names) as the last committed
// write transaction left them, for the applies of the following ones: an
// apply touching a hub would otherwise decode all its fragments again, so
// that a backfill's cost grew with the hub, i.e. with the graph.
//
// Only write transactions use it. They run one at a time and see exactly
// the committed state, which is what the cache holds: a transaction drops
// an id from the cache when it writes it and, once it has committed, puts
// the written value back (a rolled-back one leaves the id out, which is
// only a miss). Read transactions never consult it, so they cannot see a
// value newer or older than their snapshot.
type hotCache struct {
	mu       sync.Mutex
	entities map[string]*store.Entity // tenant "\x00" id
	edges    map[string]*store.Edge
	frags    int // fragments held, bounded by hotMaxFragments
}

// An entity or edge is kept when it has at least hotMinFragments
// fragments (smaller ones decode quickly); the cache holds at most
// hotMaxFragments fragments in all (about 50 MB) and is emptied when a put
// would exceed that.
const (
	hotMinFragments = 64
	hotMaxFragments = 250_000
)

func newHotCache() *hotCache {
	return &hotCache{entities: map[string]*store.Entity{}, edges: map[string]*store.Edge{}}
}

func hotKey(tenant, id string) string { return tenant + "\x00" + id }

func (h *hotCache) entity(tenant, id string) (store.Entity, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.entities[hotKey(tenant, id)]
	if !ok {
		return store.Entity{}, false
	}
	return *e, true
}

func (h *hotCache) edge(tenant, id string) (store.Edge, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.edges[hotKey(tenant, id)]
	if !ok {
		return store.Edge{}, false
	}
	return *e, true
}

// room makes room for n more fragments, emptying the cache if needed; it
// reports whether n fit at all.
func (h *hotCache) room(n int) bool {
	if n > hotMaxFragments {
		return false
	}
	if h.frags+n > hotMaxFragments {
		clear(h.entities)
		clear(h.edges)
		h.frags = 0
	}
	h.frags += n
	return true
}

func (h *hotCache) putEntity(tenant string, e store.Entity) {
	if len(e.Sources) < hotMinFragments {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropEntityLocked(tenant, e.ID)
	if h.room(len(e.Sources)) {
		h.entities[hotKey(tenant, e.ID)] = &e
	}
}

func (h *hotCache) putEdge(tenant string, e store.Edge) {
	if len(e.Supports) < hotMinFragments {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropEdgeLocked(tenant, e.ID)
	if h.room(len(e.Supports)) {
		h.edges[hotKey(tenant, e.ID)] = &e
	}
}

func (h *hotCache) dropEntity(tenant, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropEntityLocked(tenant, id)
}

func (h *hotCache) dropEdge(tenant, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropEdgeLocked(tenant, id)
}

func (h *hotCache) dropEntityLocked(tenant, id string) {
	k := hotKey(tenant, id)
	if e, ok := h.entities[k]; ok {
		h.frags -= len(e.Sources)
		delete(h.entities, k)
	}
}

func (h *hotCache) dropEdgeLocked(tenant, id string) {
	k := hotKey(tenant, id)
	if e, ok := h.edges[k]; ok {
		h.frags -= len(e.Supports)
		delete(h.edges, k)
	}
}
