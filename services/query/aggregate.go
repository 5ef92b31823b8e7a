package query

import (
	"cmp"
	"fmt"
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

	es, err := s.st.EntitiesByType(v.ctx, v.tenant, typ)
	if err != nil {
		return nil, fmt.Errorf("listing %s entities: %w", typ, err)
	}
	subjects, err := v.admitAll(es)
	if err != nil {
		return nil, err
	}
	type link struct {
		member entityJSON
		target string
		cites  []citation
	}
	var links []link
	var targets []string
	for _, m := range subjects {
		edges, err := v.edges(m.out.ID, hop.Dir)
		if err != nil {
			return nil, err
		}
		for _, e := range edges {
			if e.Relation != hop.Relation {
				continue
			}
			c, err := v.citations(e)
			if err != nil {
				return nil, err
			}
			if len(c) == 0 {
				continue
			}
			t := e.Target
			if hop.Dir == store.In {
				t = e.Source
			}
			links = append(links, link{member: m.out, target: t, cites: c})
			targets = append(targets, t)
		}
	}
	if err := v.entities(targets); err != nil {
		return nil, err
	}

	type group struct {
		target  entityJSON
		members map[string]*memberJSON
	}
	groups := make(map[string]*group)
	for _, l := range links {
		t := v.entityCache[l.target]
		if !t.ok {
			continue
		}
		g := groups[l.target]
		if g == nil {
			g = &group{target: t.out, members: make(map[string]*memberJSON)}
			groups[l.target] = g
		}
		// A member with two edges to one target (e.g. a self-loop seen from
		// both ends) counts once, with both edges' citations.
		if m := g.members[l.member.ID]; m != nil {
			m.Citations = append(m.Citations, l.cites...)
		} else {
			g.members[l.member.ID] = &memberJSON{entityJSON: l.member, Citations: l.cites}
		}
	}
	resp := aggregateResponse{Groups: make([]groupJSON, 0, len(groups))}
	for _, g := range groups {
		gj := groupJSON{Target: g.target, Count: len(g.members), Members: make([]memberJSON, 0, len(g.members))}
		for _, m := range g.members {
			gj.Members = append(gj.Members, *m)
		}
		slices.SortFunc(gj.Members, func(a, b memberJSON) int { return compareEntity(a.entityJSON, b.entityJSON) })
		resp.Groups = append(resp.Groups, gj)
	}
	slices.SortFunc(resp.Groups, func(a, b groupJSON) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), compareEntity(a.Target, b.Target))
	})
	return resp, nil
}
