package query

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
)

type entitiesResponse struct {
	Entities []entityJSON `json:"entities"`
	Total    int          `json:"total"`
	Limit    int          `json:"limit"`
	Offset   int          `json:"offset"`
}

// intParam reads an optional non-negative integer parameter no larger than max.
func intParam(r *http.Request, name string, def, max int) (int, error) {
	s, err := singleParam(r, name)
	if err != nil {
		return 0, err
	}
	if s = strings.TrimSpace(s); s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > max {
		return 0, httpapi.Errorf(http.StatusBadRequest, "invalid_param", "%s must be an integer from 0 to %d, got %q", name, max, truncate(s, 32))
	}
	return n, nil
}

// searchParam reads the optional search text q of a listing, at most
// maxRefLen bytes.
func searchParam(r *http.Request) (string, error) {
	q, err := singleParam(r, "q")
	if err != nil {
		return "", err
	}
	if len(q) > maxRefLen {
		return "", httpapi.Errorf(http.StatusBadRequest, "invalid_param", "q is longer than %d bytes", maxRefLen)
	}
	return q, nil
}

// listPage reads a listing's page: limit (DefaultListLimit without it, at
// most MaxListLimit) and offset.
func (s *Service) listPage(r *http.Request) (limit, offset int, err error) {
	if limit, err = intParam(r, "limit", s.cfg.DefaultListLimit, s.cfg.MaxListLimit); err != nil {
		return 0, 0, err
	}
	if offset, err = intParam(r, "offset", 0, math.MaxInt32); err != nil {
		return 0, 0, err
	}
	return limit, offset, nil
}

// entities lists or searches visible entities: q matches a normalisation
// key substring or a case-insensitive display-name substring.
func (s *Service) entities(v *view, _ http.ResponseWriter, r *http.Request) (any, error) {
	q, err := searchParam(r)
	if err != nil {
		return nil, err
	}
	typ, err := typeParam(r, "type", false)
	if err != nil {
		return nil, err
	}
	limit, offset, err := s.listPage(r)
	if err != nil {
		return nil, err
	}

	es, err := s.st.EntitiesByType(v.ctx, v.tenant, typ)
	if err != nil {
		return nil, fmt.Errorf("listing entities: %w", err)
	}
	visible, err := v.admitAll(es)
	if err != nil {
		return nil, err
	}
	q = strings.TrimSpace(q)
	key, lower := resolve.Key(q), strings.ToLower(q)
	resp := entitiesResponse{Entities: []entityJSON{}, Limit: limit, Offset: offset}
	for _, ve := range visible {
		if q != "" {
			_, k, _ := cutID(ve.out.ID)
			if !strings.Contains(k, key) && !strings.Contains(strings.ToLower(ve.out.Name), lower) {
				continue
			}
		}
		if resp.Total >= offset && len(resp.Entities) < limit {
			resp.Entities = append(resp.Entities, ve.out)
		}
		resp.Total++
	}
	return resp, nil
}

type neighborEdge struct {
	edgeJSON
	Neighbor entityJSON `json:"neighbor"`
}

type entityDetail struct {
	entityJSON
	// Citations are the readable fragments that state the entity exists.
	Citations    []citation     `json:"citations"`
	Descriptions []description  `json:"descriptions"`
	Out          []neighborEdge `json:"out"`
	In           []neighborEdge `json:"in"`
	// Truncated says Out or In was capped at MaxEntityEdges.
	Truncated   bool     `json:"truncated"`
	Communities []string `json:"communities"`
}

// entity shows one visible entity with its admitted descriptions, its
// visible edges in both directions and the admitted communities it is in.
func (s *Service) entity(v *view, _ http.ResponseWriter, r *http.Request) (any, error) {
	typ, name := r.PathValue("type"), r.PathValue("name")
	if !validName(typ) {
		return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_param", "type %q is not a lower-case snake_case type", truncate(typ, maxNameLen))
	}
	if strings.TrimSpace(name) == "" || len(name) > maxRefLen {
		return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_param", "name must be 1 to %d bytes", maxRefLen)
	}
	id := v.canonicalID(typ, name)
	ve, err := v.entity(id)
	if err != nil {
		return nil, err
	}
	if !ve.ok {
		return nil, httpapi.Errorf(http.StatusNotFound, "unknown_entity", "no %s named %q", typ, truncate(name, 200))
	}
	d := entityDetail{entityJSON: ve.out, Citations: []citation{}, Out: []neighborEdge{}, In: []neighborEdge{}, Communities: []string{}}
	for _, f := range ve.sources {
		ok, err := v.adm.Direct(f.DocID)
		if err != nil {
			return nil, err
		}
		if ok {
			d.Citations = appendFragmentCitations(d.Citations, f)
		}
	}
	if d.Descriptions, err = v.descriptions(ve.sources); err != nil {
		return nil, err
	}
	for _, dir := range []store.Direction{store.Out, store.In} {
		list, truncated, err := s.neighborEdges(v, id, dir, s.cfg.MaxEntityEdges)
		if err != nil {
			return nil, err
		}
		d.Truncated = d.Truncated || truncated
		if dir == store.Out {
			d.Out = list
		} else {
			d.In = list
		}
	}
	cs, err := v.admittedCommunitiesOf([]string{id})
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		if slices.Contains(c.Members, id) {
			d.Communities = append(d.Communities, c.ID)
		}
	}
	return d, nil
}

// neighborEdges returns up to max visible edges of id in dir whose other end
// is visible, with their admitted citations, and whether there were more.
func (s *Service) neighborEdges(v *view, id string, dir store.Direction, max int) ([]neighborEdge, bool, error) {
	vs, more, err := s.visibleEdges(v, id, dir, max)
	if err != nil {
		return nil, false, err
	}
	out := make([]neighborEdge, 0, len(vs))
	for _, ve := range vs {
		c, err := v.citations(*ve.e)
		if err != nil {
			return nil, false, err
		}
		out = append(out, neighborEdge{edgeJSON: edgeJSON{Source: ve.e.Source, Relation: ve.e.Relation, Target: ve.e.Target, Citations: c}, Neighbor: ve.neighbor})
	}
	return out, more, nil
}

// visibleEdge is a visible edge (one of its supports is readable) of the
// request's cached edges, with its other end as the caller sees it. Its
// citations are not built: local search ranks a hub's hundreds of edges
// and shows a few, so it builds the citations of those only.
type visibleEdge struct {
	e        *store.Edge // in the tenant's cached edges: read-only
	neighbor entityJSON
}

// visibleEdges returns up to max visible edges of id in dir whose other
// end is visible, in stored order, and whether there were more.
func (s *Service) visibleEdges(v *view, id string, dir store.Direction, max int) ([]visibleEdge, bool, error) {
	return s.visibleEdgesInto(v, id, dir, max, &edgeScratch{})
}

// edgeScratch is visibleEdgesInto's working memory, reused by a caller
// that asks for the edges of many entities in turn.
type edgeScratch struct {
	out    []visibleEdge
	chunk  []int
	others []string
}

// visibleEdgesInto is visibleEdges in sc's memory: the result is sc's,
// valid until sc is used again.
func (s *Service) visibleEdgesInto(v *view, id string, dir store.Direction, max int, sc *edgeScratch) ([]visibleEdge, bool, error) {
	es, err := v.edges(id, dir)
	if err != nil {
		return nil, false, err
	}
	// The edges are taken a chunk at a time (their supports admitted, their
	// neighbours loaded), only as many as the first max+1 visible ones
	// need: a hub's thousands of edges are not admitted to show a few.
	out := slices.Grow(sc.out[:0], min(len(es), max))
	chunk := slices.Grow(sc.chunk[:0], min(len(es), 2*(max+1))) // indices into es
	others := slices.Grow(sc.others[:0], cap(chunk))
	defer func() {
		clear(others[:cap(others)]) // no ids kept alive by the scratch
		sc.out, sc.chunk, sc.others = out, chunk, others[:0]
	}()
	for i := 0; i < len(es); {
		chunk, others = chunk[:0], others[:0]
		for want := 2 * (max + 1 - len(out)); i < len(es) && len(chunk) < want; i++ {
			ok, err := v.anyReadable(es[i].Supports)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				continue
			}
			other := es[i].Target
			if dir == store.In {
				other = es[i].Source
			}
			chunk = append(chunk, i)
			others = append(others, other)
		}
		if err := v.entities(others); err != nil {
			return nil, false, err
		}
		for k, j := range chunk {
			n := v.known(others[k])
			if !n.ok {
				continue
			}
			if len(out) >= max {
				return out, true, nil
			}
			out = append(out, visibleEdge{e: &es[j], neighbor: n.out})
		}
	}
	return out, false, nil
}
