package query

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
)

// maxRefLen bounds an entity reference taken from a query parameter.
const maxRefLen = 1024

// Hop is one step of a paths query: a relation followed forwards (Out:
// source to target) or backwards (In: target to source, written "~R").
type Hop struct {
	Relation string
	Dir      store.Direction
}

// String renders the hop as it is written in rels.
func (h Hop) String() string {
	if h.Dir == store.In {
		return "~" + h.Relation
	}
	return h.Relation
}

// ParseRels parses a rels parameter ("R1,~R2,...") of at most maxHops hops.
// Relation names must be lower-case snake_case; empty elements are errors,
// not skipped, so a typo cannot silently shorten a traversal. Errors are
// *httpapi.Error with status 400.
func ParseRels(s string, maxHops int) ([]Hop, error) {
	if strings.TrimSpace(s) == "" {
		return nil, httpapi.Errorf(http.StatusBadRequest, "missing_param", "rels is required: a comma-separated list of relations, ~R for backwards")
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxHops {
		return nil, httpapi.Errorf(http.StatusBadRequest, "too_many_hops", "rels has %d hops; at most %d are allowed", len(parts), maxHops)
	}
	hops := make([]Hop, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		h := Hop{Dir: store.Out}
		if rest, ok := strings.CutPrefix(p, "~"); ok {
			h.Dir, p = store.In, strings.TrimSpace(rest)
		}
		if p == "" {
			return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_param", "rels[%d] is empty", i)
		}
		if !validName(p) {
			return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_param", "rels[%d] %q is not a lower-case snake_case relation name", i, truncate(p, maxNameLen))
		}
		h.Relation = p
		hops = append(hops, h)
	}
	return hops, nil
}

// truncate shortens s for an error message so a huge parameter is not
// echoed back whole.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// singleParam returns the one value of a query parameter; a repeated
// parameter is an error rather than a silent choice of one of them.
func singleParam(r *http.Request, name string) (string, error) {
	vs := r.URL.Query()[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	default:
		return "", httpapi.Errorf(http.StatusBadRequest, "invalid_param", "%s is given %d times; give it once", name, len(vs))
	}
}

type candidatesDetail struct {
	Candidates []entityJSON `json:"candidates"`
}

// resolveStart resolves a TYPE:NAME or bare NAME reference to a visible
// entity. TYPE:NAME names one canonical id; a bare NAME matches every
// visible entity with that normalisation key, and several are a 409 listing
// them.
func (v *view) resolveStart(param, ref string) (visibleEntity, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return visibleEntity{}, httpapi.Errorf(http.StatusBadRequest, "missing_param", "%s is required: TYPE:NAME or NAME", param)
	}
	if len(ref) > maxRefLen {
		return visibleEntity{}, httpapi.Errorf(http.StatusBadRequest, "invalid_param", "%s is longer than %d bytes", param, maxRefLen)
	}
	name := ref
	if typ, rest, typed := strings.Cut(ref, ":"); typed {
		if _, err := resolve.ParseRef(ref); err != nil {
			return visibleEntity{}, httpapi.Errorf(http.StatusBadRequest, "invalid_param", "%s: %v", param, err)
		}
		ve, err := v.entity(v.canonicalID(typ, rest))
		if err != nil {
			return visibleEntity{}, err
		}
		if ve.ok {
			return ve, nil
		}
		// Say which other types know the name: a wrong type is the usual
		// mistake, and only entities this caller may see are named.
		cands, err := v.byKey(resolve.Key(rest))
		if err != nil {
			return visibleEntity{}, err
		}
		e := httpapi.Errorf(http.StatusNotFound, "unknown_entity", "no %s named %q", resolve.Type(typ), truncate(strings.TrimSpace(rest), 200))
		if len(cands) > 0 {
			e.Details = candidatesDetail{Candidates: cands}
		}
		return visibleEntity{}, e
	}
	cands, err := v.byKey(resolve.Key(name))
	if err != nil {
		return visibleEntity{}, err
	}
	switch len(cands) {
	case 0:
		return visibleEntity{}, httpapi.Errorf(http.StatusNotFound, "unknown_entity", "no entity named %q", truncate(name, 200))
	case 1:
		return v.entity(cands[0].ID)
	default:
		e := httpapi.Errorf(http.StatusConflict, "ambiguous_entity", "%q names %d entities; use TYPE:NAME", truncate(name, 200), len(cands))
		e.Details = candidatesDetail{Candidates: cands}
		return visibleEntity{}, e
	}
}

// byKey returns the visible entities, of any type, whose normalisation key
// is key, sorted by id.
func (v *view) byKey(key string) ([]entityJSON, error) {
	ix, err := v.nameIndex()
	if err != nil {
		return nil, err
	}
	cands, err := v.admitIDs(ix, ix.list(kindKey, key))
	if err != nil {
		return nil, err
	}
	var out []entityJSON
	for _, ve := range cands {
		_, k, _ := cutID(ve.out.ID)
		if k == key || resolve.Key(ve.out.Name) == key {
			out = append(out, ve.out)
		}
	}
	return out, nil
}

type terminalJSON struct {
	entityJSON
	Paths int `json:"paths"`
}

type rowJSON struct {
	Nodes []entityJSON `json:"nodes"`
	Edges []edgeJSON   `json:"edges"`
}

type pathsResponse struct {
	Start     entityJSON     `json:"start"`
	Terminals []terminalJSON `json:"terminals"`
	Rows      []rowJSON      `json:"rows"`
	Truncated bool           `json:"truncated"`
	// Page is set only in a bounded response (a request that gave limit
	// or offset), so an unbounded one stays what it was before paging.
	Page *pageJSON `json:"page,omitempty"`
}

// partial is a path under construction: node ids and the edges between them.
type partial struct {
	nodes []string
	edges []edgeJSON
}

// paths follows rels hop by hop from start over the edges the caller may
// read. The response lists every terminal with its exact number of paths
// and the rows of the paths (at most MaxPathRows; truncated says more
// existed). limit and offset take a window of the terminals (ordered by
// name, then id): the page then carries the rows that end at its
// terminals, so a client pages through both, and the page's total is the
// exact number of terminals.
func (s *Service) paths(v *view, _ http.ResponseWriter, r *http.Request) (any, error) {
	startRef, err := singleParam(r, "start")
	if err != nil {
		return nil, err
	}
	rels, err := singleParam(r, "rels")
	if err != nil {
		return nil, err
	}
	hops, err := ParseRels(rels, s.cfg.MaxHops)
	if err != nil {
		return nil, err
	}
	win, err := windowParams(r, "limit", "offset")
	if err != nil {
		return nil, err
	}
	start, err := v.resolveStart("start", startRef)
	if err != nil {
		return nil, err
	}
	kp, err := s.keptTraversal(v, start, hops)
	if err != nil {
		return nil, err
	}
	if !win.given() {
		return kp.response(s.cfg.MaxPathRows)
	}
	return kp.page(win, s.cfg.MaxPathRows), nil
}

// keptPaths is one traversal as one caller sees it at one registry
// generation: every path's row, in order, and the terminals with their
// exact counts. It is kept with the tenant's graph reads (dropped by
// kg.graph.changed), so a page, and the same question again, costs a
// window of it rather than the walk: a hub's mentions are thousands of
// paths, each edge admitted and each node read.
type keptPaths struct {
	start     entityJSON
	rows      []rowJSON      // every path, ordered by node names
	terminals []terminalJSON // sorted by name, then id
	// truncated says the walk stopped at MaxFrontier.
	truncated bool

	once    sync.Once
	encoded httpapi.Encoded
	err     error
}

// keptTraversal returns the traversal of hops from start, kept per
// caller, registry generation, start and hops while the graph reads are.
func (s *Service) keptTraversal(v *view, start visibleEntity, hops []Hop) (*keptPaths, error) {
	g, err := v.graphSet()
	if err != nil {
		return nil, err
	}
	rels := make([]string, len(hops))
	for i, h := range hops {
		rels[i] = h.String()
	}
	// The caller and generation part of an aggregate's key, with the
	// start and the hops in place of its type and relation.
	key, keep, err := v.aggregateKey("paths\x00"+start.out.ID, Hop{Relation: strings.Join(rels, ",")})
	if err != nil {
		return nil, err
	}
	if keep {
		if kp := g.keptPaths(key); kp != nil {
			return kp, nil
		}
	}
	kp, err := s.traverse(v, start, hops)
	if err != nil || !keep {
		return kp, err
	}
	return g.keepPaths(key, kp), nil
}

// traverse follows hops from start over the edges the caller may read.
func (s *Service) traverse(v *view, start visibleEntity, hops []Hop) (*keptPaths, error) {
	truncated := false
	frontier := []partial{{nodes: []string{start.out.ID}}}
	for _, h := range hops {
		type step struct {
			from  int
			other string
			edge  edgeJSON
		}
		var steps []step
		var others []string
	collect:
		for i, p := range frontier {
			last := p.nodes[len(p.nodes)-1]
			es, err := v.edges(last, h.Dir)
			if err != nil {
				return nil, err
			}
			for _, e := range es {
				if e.Relation != h.Relation {
					continue
				}
				other := e.Target
				if h.Dir == store.In {
					other = e.Source
				}
				// Simple paths only: a cycle adds no new fact and would let
				// two nodes bounce a traversal up to the hop limit.
				if s.stepExcluded(other) || slices.Contains(p.nodes, other) {
					continue
				}
				// Admitted where met: the admitter keeps each document's
				// answer for the request, and an edge recurs only under
				// several prefixes, so a map of every edge's citations
				// would cost more than it saves.
				c, err := v.citations(e)
				if err != nil {
					return nil, err
				}
				if len(c) == 0 {
					continue
				}
				if len(steps) >= s.cfg.MaxFrontier {
					truncated = true
					break collect
				}
				steps = append(steps, step{from: i, other: other, edge: edgeJSON{Source: e.Source, Relation: e.Relation, Target: e.Target, Citations: c}})
				others = append(others, other)
			}
		}
		if err := v.entities(others); err != nil {
			return nil, err
		}
		next := make([]partial, 0, len(steps))
		for _, st := range steps {
			if !v.known(st.other).ok {
				continue
			}
			p := frontier[st.from]
			// Clip makes each append copy: sibling paths never share an array.
			next = append(next, partial{
				nodes: append(slices.Clip(p.nodes), st.other),
				edges: append(slices.Clip(p.edges), st.edge),
			})
		}
		frontier = next
	}

	rows := make([][]entityJSON, len(frontier))
	for i, p := range frontier {
		rows[i] = make([]entityJSON, len(p.nodes))
		for j, id := range p.nodes {
			rows[i][j] = v.known(id).out
		}
	}
	// Rows are ordered by their node names, so a response does not depend on
	// the order a store returns edges in.
	order := make([]int, len(frontier))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return slices.CompareFunc(rows[a], rows[b], compareEntity)
	})

	// Every path counts for its terminal, shown or not: the counts are
	// exact whatever the rows cap and the page leave out.
	counts := make(map[string]int)
	var terminals []terminalJSON
	for _, i := range order {
		last := rows[i][len(rows[i])-1]
		if counts[last.ID] == 0 {
			terminals = append(terminals, terminalJSON{entityJSON: last})
		}
		counts[last.ID]++
	}
	for i := range terminals {
		terminals[i].Paths = counts[terminals[i].ID]
	}
	slices.SortFunc(terminals, func(a, b terminalJSON) int { return compareEntity(a.entityJSON, b.entityJSON) })

	kp := &keptPaths{start: start.out, truncated: truncated, rows: make([]rowJSON, len(order))}
	for k, i := range order {
		kp.rows[k] = rowJSON{Nodes: rows[i], Edges: frontier[i].edges}
	}
	kp.terminals = terminals
	return kp, nil
}

// response is the unbounded response, at most maxRows rows, encoded once.
func (kp *keptPaths) response(maxRows int) (httpapi.Encoded, error) {
	kp.once.Do(func() { kp.encoded, kp.err = httpapi.EncodeJSON(kp.page(window{offset: -1, limit: -1}, maxRows)) })
	return kp.encoded, kp.err
}

// page is the response for a window of the terminals (every terminal when
// win is not given): the rows ending at them, at most maxRows.
func (kp *keptPaths) page(win window, maxRows int) pathsResponse {
	resp := pathsResponse{Start: kp.start, Terminals: []terminalJSON{}, Rows: []rowJSON{}, Truncated: kp.truncated}
	terminals := kp.terminals
	// onPage is nil when every terminal is shown, else the terminals of
	// the window: a page carries the rows that end at them.
	var onPage map[string]bool
	if win.given() {
		resp.Page = win.page(len(terminals))
		lo, hi := win.bounds(len(terminals))
		terminals = terminals[lo:hi:hi]
		onPage = make(map[string]bool, len(terminals))
		for _, t := range terminals {
			onPage[t.ID] = true
		}
	}
	for _, row := range kp.rows {
		if onPage != nil && !onPage[row.Nodes[len(row.Nodes)-1].ID] {
			continue
		}
		if len(resp.Rows) >= maxRows {
			resp.Truncated = true
			break
		}
		resp.Rows = append(resp.Rows, row)
	}
	if len(terminals) > 0 {
		resp.Terminals = terminals
	}
	return resp
}

// stepExcluded reports whether traversals may not step onto id.
func (s *Service) stepExcluded(id string) bool {
	if s.excluded[id] {
		return true
	}
	typ, _, _ := cutID(id)
	return s.exTypes[typ]
}

// compareEntity orders entities by display name, then id.
func compareEntity(a, b entityJSON) int {
	return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
}
