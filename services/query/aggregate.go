package query

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/store"
)

type memberJSON struct {
	entityJSON
	Citations []citation `json:"citations"`
}

type groupJSON struct {
	Target  entityJSON   `json:"target"`
	Count   int          `json:"count"`
	Members []memberJSON `json:"members"`
}

type aggregateResponse struct {
	Groups []groupJSON `json:"groups"`
	// Page is set only in a bounded response (a request that gave a
	// paging parameter), so an unbounded one stays byte for byte what it
	// was before paging existed.
	Page *pageJSON `json:"page,omitempty"`
}

// typeParam reads a required entity type parameter.
func typeParam(r *http.Request, name string, required bool) (string, error) {
	t, err := singleParam(r, name)
	if err != nil {
		return "", err
	}
	t = strings.TrimSpace(t)
	switch {
	case t == "" && required:
		return "", httpapi.Errorf(http.StatusBadRequest, "missing_param", "%s is required", name)
	case t != "" && !validName(t):
		return "", httpapi.Errorf(http.StatusBadRequest, "invalid_param", "%s %q is not a lower-case snake_case type", name, truncate(t, maxNameLen))
	}
	return t, nil
}

// aggregate counts, for the visible entities of a type, the distinct
// members per target of their visible rel edges. Counts are exact: they are
// computed over every admitted edge, never a sample, and nothing is capped.
// rel may be "~R" to group by the sources of incoming R edges instead.
//
// Without paging parameters every group lists every member. limit and
// offset take a window of the groups (ordered by count, then target), and
// members and member_offset a window of each group's sorted members; a
// group's count stays its exact number of distinct members, and the
// response's page gives the exact number of groups and the next offset.
func (s *Service) aggregate(v *view, _ http.ResponseWriter, r *http.Request) (any, error) {
	typ, err := typeParam(r, "type", true)
	if err != nil {
		return nil, err
	}
	relParam, err := singleParam(r, "rel")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(relParam) == "" {
		return nil, httpapi.Errorf(http.StatusBadRequest, "missing_param", "rel is required")
	}
	hops, err := ParseRels(relParam, 1)
	if err != nil {
		return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_param", "rel must be one relation name (or ~name): %q", truncate(relParam, maxNameLen))
	}
	hop := hops[0]
	// Every parameter is checked before anything is counted: a refused
	// request keeps nothing for the next one.
	groupWin, err := windowParams(r, "limit", "offset")
	if err != nil {
		return nil, err
	}
	memberWin, err := windowParams(r, "members", "member_offset")
	if err != nil {
		return nil, err
	}

	groups, kept, err := v.keptGroups(typ, hop)
	if err != nil {
		return nil, err
	}
	if groupWin.given() || memberWin.given() {
		// A page is cut from the kept groups (counted once per caller and
		// registry generation), so paging on costs no recount; pages are
		// small, so they are encoded per request, not kept.
		return pageGroups(groups, groupWin, memberWin), nil
	}
	if kept != nil {
		return kept.response()
	}
	return aggregateResponse{Groups: groups}, nil
}

// pageGroups is the bounded /v1/aggregate body: the groups of groupWin,
// each with the members of memberWin. groups may be kept for other
// requests, so the page is made of new groups over sub-slices of their
// member lists, never by changing them.
func pageGroups(groups []groupJSON, groupWin, memberWin window) aggregateResponse {
	lo, hi := groupWin.bounds(len(groups))
	out := make([]groupJSON, 0, hi-lo)
	for _, g := range groups[lo:hi] {
		mlo, mhi := memberWin.bounds(len(g.Members))
		g.Members = g.Members[mlo:mhi:mhi]
		out = append(out, g)
	}
	return aggregateResponse{Groups: out, Page: groupWin.page(len(groups))}
}

// aggregateGroups groups the visible entities of typ by the far ends of
// their visible hop edges: exact counts of distinct members per target,
// members sorted, groups by count. It reads the hop's relation through
// the store's relation index (only the edges of that relation whose
// subject end has type typ), admits every edge's supports in one registry
// lookup, and loads only the entities at the two ends, so its cost is that
// of the relation, not of the tenant. /v1/aggregate and the theme counts
// of global answers both count with it, so the two always agree.
func (v *view) aggregateGroups(typ string, hop Hop) ([]groupJSON, error) {
	groups, _, err := v.keptGroups(typ, hop)
	return groups, err
}

// keptGroups is aggregateGroups with the kept aggregate it came from (nil
// when nothing is kept): computed by the first request of a caller at a
// registry generation, kept with the tenant's graph reads.
func (v *view) keptGroups(typ string, hop Hop) ([]groupJSON, *keptAggregate, error) {
	g, err := v.graphSet()
	if err != nil {
		return nil, nil, err
	}
	key, keep, err := v.aggregateKey(typ, hop)
	if err != nil {
		return nil, nil, err
	}
	if keep {
		if ka, ok := g.aggregate(key); ok {
			return ka.groups, ka, nil
		}
	}
	groups, err := v.countGroups(typ, hop)
	if err != nil || !keep {
		return groups, nil, err
	}
	ka := g.keepAggregate(key, groups)
	return ka.groups, ka, nil
}

// visibleCount counts the visible entities of typ, kept like an aggregate
// (per caller and registry generation, with the tenant's graph reads).
func (v *view) visibleCount(typ string) (int, error) {
	g, err := v.graphSet()
	if err != nil {
		return 0, err
	}
	key, keep, err := v.aggregateKey(typ, Hop{})
	if err != nil {
		return 0, err
	}
	if keep {
		if n, ok := g.count(key); ok {
			return n, nil
		}
	}
	visible, err := v.entitiesOfType(typ)
	if err != nil {
		return 0, err
	}
	if keep {
		g.keepCount(key, len(visible))
	}
	return len(visible), nil
}

// aggregateKey is the key under which the tenant's graph reads keep an
// aggregate for this caller: the groups depend only on the graph (the
// graph reads are dropped by kg.graph.changed), on the registry (its
// generation, which every registry write raises) and on what the caller's
// identity admits (tenant, principal, groups). keep is false when the
// store has no registry generation: then nothing is kept.
func (v *view) aggregateKey(typ string, hop Hop) (aggKey, bool, error) {
	if err := v.checkRegistry(); err != nil {
		return aggKey{}, false, err
	}
	if !v.regGenOK {
		return aggKey{}, false, nil
	}
	return aggKey{typ: typ, rel: hop.Relation, dir: hop.Dir, gen: v.regGen, caller: v.callerKey()}, true, nil
}

// callerKey is the caller's identity as admission sees it (tenant,
// principal, groups: what Readable reads), computed once per request.
func (v *view) callerKey() string {
	if v.who == "" {
		v.who = v.adm.Caller().ReadKey()
	}
	return v.who
}

// countGroups is aggregateGroups without the kept results.
func (v *view) countGroups(typ string, hop Hop) ([]groupJSON, error) {
	srcType := ""
	if hop.Dir == store.Out {
		srcType = typ
	}
	all, err := v.edgesByRelation(hop.Relation, srcType)
	if err != nil {
		return nil, err
	}
	// ends gives an edge's subject (the entity of typ) and far end.
	ends := func(e store.Edge) (subj, far string) {
		if hop.Dir == store.In {
			return e.Target, e.Source
		}
		return e.Source, e.Target
	}
	edges := all[:0:0]
	for _, e := range all {
		if subj, _ := ends(e); hasType(subj, typ) {
			edges = append(edges, e)
		}
	}
	if err := v.prefetchEdges(edges); err != nil {
		return nil, err
	}
	type link struct {
		member, target string
		cites          []citation
	}
	var links []link
	ids := make([]string, 0, 2*len(edges))
	for _, e := range edges {
		c, err := v.citations(e)
		if err != nil {
			return nil, err
		}
		if len(c) == 0 {
			continue
		}
		subj, far := ends(e)
		links = append(links, link{member: subj, target: far, cites: c})
		ids = append(ids, subj, far)
	}
	if err := v.loadEntities(ids); err != nil {
		return nil, err
	}

	type group struct {
		target  entityJSON
		members map[string]*memberJSON
	}
	byTarget := make(map[string]*group)
	for _, l := range links {
		m, t := v.known(l.member), v.known(l.target)
		if !m.ok || m.out.Type != typ || !t.ok {
			continue
		}
		g := byTarget[l.target]
		if g == nil {
			g = &group{target: t.out, members: make(map[string]*memberJSON)}
			byTarget[l.target] = g
		}
		// A member with two edges to one target counts once, with both
		// edges' citations.
		if mj := g.members[l.member]; mj != nil {
			mj.Citations = append(mj.Citations, l.cites...)
		} else {
			g.members[l.member] = &memberJSON{entityJSON: m.out, Citations: l.cites}
		}
	}
	groups := make([]groupJSON, 0, len(byTarget))
	for _, g := range byTarget {
		gj := groupJSON{Target: g.target, Count: len(g.members), Members: make([]memberJSON, 0, len(g.members))}
		for _, m := range g.members {
			gj.Members = append(gj.Members, *m)
		}
		slices.SortFunc(gj.Members, func(a, b memberJSON) int { return compareEntity(a.entityJSON, b.entityJSON) })
		groups = append(groups, gj)
	}
	slices.SortFunc(groups, func(a, b groupJSON) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), compareEntity(a.Target, b.Target))
	})
	return groups, nil
}

// hasType reports whether the canonical id "type:key" has type typ.
func hasType(id, typ string) bool {
	t, _, ok := cutID(id)
	return ok && t == typ
}
