package clusterer

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
)

// The graph kept between runs.
//
// A re-clustering needs the whole graph, but only entities' names and
// sources and edges' ends and supports, and between two runs a few
// documents usually changed it. So the clusterer keeps, per tenant, the
// graph its last run read, reduced to that (graphCache), and patches it
// with what the graph changes since then name instead of reading the
// tenant again (Snapshot): every entity a change touched or that its
// document contributed before or after it (events.GraphChanged Touched and
// Contributed) is read again, with every edge it is an end of. That covers
// all a change can alter: an edge's ends are among the entities of the
// document supporting it (store.Contributions.Validate), so an edge whose
// supports changed has both ends in Contributed, and an entity's name and
// sources change only with its fragments.
//
// The ids are taken before anything is read, so a change whose event is
// handled later is read again by the next run (its event marks the tenant
// dirty); reads that overlap a change are thus corrected by the run after.
// The graph is read whole instead
//   - for a tenant's first run in a clustering session, and after a read
//     of the graph failed (a run failing later keeps the graph it read),
//   - for every full run (Config.FullEvery), so at least that often the
//     kept graph is replaced by a fresh read,
//   - when a change names no contributed entity (a document without
//     entities, or an event of a build before Contributed: the two cannot
//     be told apart) or is a redelivered one (events.GraphChanged
//     Duplicate), and
//   - when more ids are to be read again than a maxPatchShare-th of the
//     kept entities: then one sequential read costs less than many
//     lookups.
//
// The kept graphs live as long as one clustering session (Run, or the
// time a lease is held): a process taking over the lease reads whole.

// A run reads the graph whole rather than re-reading the named entities
// one by one when they are more than 1/maxPatchShare of the kept ones.
const maxPatchShare = 4

// ref is a document version supporting an entity or an edge, with the
// strength an edge's support gives.
type ref struct {
	doc     string
	version int64
	weight  float64
}

// node is an entity as clustering reads it: its name and fragments' refs.
type node struct {
	id, name string
	refs     []ref
}

// link is an edge as clustering reads it: its ends and supports' refs.
type link struct {
	id, source, target string
	refs               []ref
}

// cgraph is a tenant graph as clustering reads it: entities and edges
// sorted by id, as Snapshot returns them.
type cgraph struct {
	nodes []node
	links []link
}

// interner shares one copy of each document and entity id among the refs
// and edge ends that repeat it.
type interner struct{ strs map[string]string }

func (in *interner) intern(s string) string {
	if t, ok := in.strs[s]; ok {
		return t
	}
	if in.strs == nil {
		in.strs = map[string]string{}
	}
	in.strs[s] = s
	return s
}

func (in *interner) refs(fs []store.Fragment) []ref {
	out := make([]ref, len(fs))
	for i, f := range fs {
		out[i] = ref{doc: in.intern(f.DocID), version: f.Version, weight: f.Weight}
	}
	return out
}

func (in *interner) node(e store.Entity) node {
	return node{id: in.intern(e.ID), name: e.Name, refs: in.refs(e.Sources)}
}

func (in *interner) link(e store.Edge) link {
	return link{id: e.ID, source: in.intern(e.Source), target: in.intern(e.Target), refs: in.refs(e.Supports)}
}

// graphCache is a tenant's graph reduced to what clustering reads.
type graphCache struct {
	// in holds the ids the kept graph shares; it keeps those of entities
	// and documents gone since the graph was read whole, until it is
	// again.
	in       interner
	entities map[string]node
	edges    map[string]link
	// incident lists, per entity id (stored or only an edge's end), the
	// ids of the edges it is an end of.
	incident map[string][]string
	// entIDs and edgeIDs are the keys of entities and edges, sorted: a
	// patch merges in what it adds, so a run does not sort them again.
	entIDs, edgeIDs []string
}

// stale is what the graph changes handled since a tenant's last run name:
// ids to read again, or whole when the graph must be read whole.
type stale struct {
	ids   map[string]bool
	whole bool
}

func newGraphCache(g store.Graph) *graphCache {
	c := &graphCache{entities: make(map[string]node, len(g.Entities)),
		edges: make(map[string]link, len(g.Edges)), incident: make(map[string][]string, len(g.Entities))}
	for _, e := range g.Entities {
		n := c.in.node(e)
		c.entities[n.id] = n
	}
	for _, e := range g.Edges {
		c.addEdge(c.in.link(e))
	}
	c.entIDs = slices.Sorted(maps.Keys(c.entities))
	c.edgeIDs = slices.Sorted(maps.Keys(c.edges))
	return c
}

// resort updates a sorted id list: without removed, with added (ids not
// in it, sorted) merged in.
func resort(ids []string, removed map[string]bool, added []string) []string {
	if len(removed) > 0 {
		ids = slices.DeleteFunc(ids, func(id string) bool { return removed[id] })
	}
	if len(added) == 0 {
		return ids
	}
	out := make([]string, 0, len(ids)+len(added))
	i, j := 0, 0
	for i < len(ids) && j < len(added) {
		if ids[i] < added[j] {
			out = append(out, ids[i])
			i++
		} else {
			out = append(out, added[j])
			j++
		}
	}
	out = append(out, ids[i:]...)
	return append(out, added[j:]...)
}

func (c *graphCache) addEdge(e link) {
	if _, ok := c.edges[e.id]; ok {
		return
	}
	c.edges[e.id] = e
	c.incident[e.source] = append(c.incident[e.source], e.id)
	if e.target != e.source {
		c.incident[e.target] = append(c.incident[e.target], e.id)
	}
}

// dropEdgesOf removes every edge id is an end of, noting each in dropped.
func (c *graphCache) dropEdgesOf(id string, dropped map[string]bool) {
	for _, eid := range c.incident[id] {
		e, ok := c.edges[eid]
		if !ok {
			continue
		}
		delete(c.edges, eid)
		dropped[eid] = true
		other := e.target
		if other == id {
			other = e.source
		}
		if other == id {
			continue
		}
		rest := slices.DeleteFunc(c.incident[other], func(x string) bool { return x == eid })
		if len(rest) == 0 {
			delete(c.incident, other)
		} else {
			c.incident[other] = rest
		}
	}
	delete(c.incident, id)
}

// graph returns the kept graph, entities and edges sorted by id.
func (c *graphCache) graph() cgraph {
	g := cgraph{nodes: make([]node, len(c.entIDs)), links: make([]link, len(c.edgeIDs))}
	for i, id := range c.entIDs {
		g.nodes[i] = c.entities[id]
	}
	for i, id := range c.edgeIDs {
		g.links[i] = c.edges[id]
	}
	return g
}

// noteChanged records what a graph change makes to read again.
func (w *Worker) noteChanged(ev *events.GraphChanged) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stale[ev.Tenant]
	if s == nil {
		s = &stale{ids: map[string]bool{}}
		w.stale[ev.Tenant] = s
	}
	if !ev.NamesAll() {
		// What changed is not named: a document without entities before
		// and after, an event of a build before Contributed (reading
		// whole is right for both), or a redelivered change, whose event
		// cannot name what the version before the applied one held.
		s.whole = true
	}
	if s.whole {
		return
	}
	for _, l := range [][]string{ev.Touched, ev.Contributed} {
		for _, id := range l {
			s.ids[id] = true
		}
	}
}

// takeStale returns and forgets what is to be read again for tenant.
func (w *Worker) takeStale(tenant string) stale {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stale[tenant]
	delete(w.stale, tenant)
	if s == nil {
		return stale{}
	}
	return *s
}

// graphOf returns tenant's graph for a run: the kept graph patched with
// what changed since the last run, or read whole (see above) when whole
// is set or patching does not apply. The caller holds commMu. On an error
// the kept graph is dropped, so the next run reads whole.
func (w *Worker) graphOf(ctx context.Context, tenant string, whole bool) (cgraph, error) {
	s := w.takeStale(tenant)
	c := w.graphs[tenant]
	if whole || s.whole || c == nil || len(s.ids)*maxPatchShare > len(c.entities) {
		delete(w.graphs, tenant)
		g, err := w.st.Snapshot(ctx, tenant)
		if err != nil {
			return cgraph{}, err
		}
		c = newGraphCache(g)
		w.graphs[tenant] = c
		w.graphReads.WithLabelValues("whole").Inc()
		return c.graph(), nil
	}
	if err := w.patch(ctx, tenant, c, s.ids); err != nil {
		delete(w.graphs, tenant)
		return cgraph{}, err
	}
	w.graphReads.WithLabelValues("patched").Inc()
	return c.graph(), nil
}

// patch reads ids again, with every edge each is an end of, into c.
func (w *Worker) patch(ctx context.Context, tenant string, c *graphCache, ids map[string]bool) error {
	list := make([]string, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	slices.Sort(list)
	ents, err := w.st.Entities(ctx, tenant, list)
	if err != nil {
		return fmt.Errorf("reading changed entities: %w", err)
	}
	var edges []store.Edge
	for _, id := range list {
		for _, dir := range []store.Direction{store.Out, store.In} {
			es, err := w.st.Edges(ctx, tenant, id, dir)
			if err != nil {
				return fmt.Errorf("reading edges of changed entities: %w", err)
			}
			edges = append(edges, es...)
		}
	}
	dropped := map[string]bool{}
	var entAdded []string
	entRemoved := map[string]bool{}
	for _, id := range list {
		c.dropEdgesOf(id, dropped)
		_, had := c.entities[id]
		if e, ok := ents[id]; ok {
			n := c.in.node(e)
			c.entities[n.id] = n
			if !had {
				entAdded = append(entAdded, id)
			}
		} else if had {
			delete(c.entities, id)
			entRemoved[id] = true
		}
	}
	var edgeAdded []string
	for _, e := range edges {
		if _, ok := c.edges[e.ID]; ok {
			continue // read twice: an end of two ids read again
		}
		c.addEdge(c.in.link(e))
		if !dropped[e.ID] {
			edgeAdded = append(edgeAdded, e.ID)
		}
	}
	for id := range dropped {
		if _, ok := c.edges[id]; ok {
			delete(dropped, id) // read again: still there
		}
	}
	// entAdded follows list, sorted.
	slices.Sort(edgeAdded)
	c.entIDs = resort(c.entIDs, entRemoved, entAdded)
	c.edgeIDs = resort(c.edgeIDs, dropped, slices.Compact(edgeAdded))
	return nil
}
