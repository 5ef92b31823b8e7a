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
// the committed state, which is what the cache holds: once a transaction
// has committed, what it wrote replaces the cached values (a rolled-back
// one changes nothing), and within it, what it wrote is read from its own
// buckets, never from the cache. Read transactions never consult it, so
// they cannot see a value newer or older than their snapshot.
type hotCache struct {
	mu       sync.Mutex
	entities map[string]*store.Entity // tenant "\x00" id
	edges    map[string]*store.Edge
	frags    int // fragments held, bounded by hotMaxFragments
}

// An entity or edge is kept when it has at least hotMinFragments
// fragments (smaller ones decode quickly); the cache holds at most
// hotMaxFragments fragments in all and is emptied when a put would exceed
// that.
const (
	hotMinFragments = 64
	hotMaxFragments = 250_000
)

func newHotCache() *hotCache {
	return &hotCache{entities: map[string]*store.Entity{}, edges: map[string]*store.Edge{}}
}

func hotKey(tenant, id string) string { return tenant + "\x00" + id }

func (h *hotCache) entity(tenant, id string) (store.Entity, bool) {
	return hotGet(h, h.entities, tenant, id)
}

func (h *hotCache) edge(tenant, id string) (store.Edge, bool) { return hotGet(h, h.edges, tenant, id) }

// setEntity makes e the cached value of id: nil, or an entity too small to
// keep, drops it.
func (h *hotCache) setEntity(tenant, id string, e *store.Entity) {
	n := 0
	if e != nil {
		n = len(e.Sources)
	}
	hotSet(h, h.entities, tenant, id, e, n, func(e *store.Entity) int { return len(e.Sources) })
}

// setEdge makes e the cached value of id, as setEntity does.
func (h *hotCache) setEdge(tenant, id string, e *store.Edge) {
	n := 0
	if e != nil {
		n = len(e.Supports)
	}
	hotSet(h, h.edges, tenant, id, e, n, func(e *store.Edge) int { return len(e.Supports) })
}

func hotGet[T any](h *hotCache, m map[string]*T, tenant, id string) (T, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := m[hotKey(tenant, id)]
	if !ok {
		var zero T
		return zero, false
	}
	return *v, true
}

// hotSet replaces m's entry for id by v of n fragments (size gives the
// fragments of a stored value), keeping v only when it is large enough and
// fits.
func hotSet[T any](h *hotCache, m map[string]*T, tenant, id string, v *T, n int, size func(*T) int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := hotKey(tenant, id)
	if old, ok := m[k]; ok {
		h.frags -= size(old)
		delete(m, k)
	}
	if v == nil || n < hotMinFragments || n > hotMaxFragments {
		return
	}
	if h.frags+n > hotMaxFragments {
		clear(h.entities)
		clear(h.edges)
		h.frags = 0
	}
	h.frags += n
	m[k] = v
}
