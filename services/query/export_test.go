package query

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kgstream/kgstream/pkg/resolve"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// AggregateBothWays computes the groups of GET /v1/aggregate?type=typ&rel=hop
// for caller twice: with aggregateGroups (the relation index) and with
// scanGroups (the scan of every entity of the type it replaced), each in
// its own request view.
func AggregateBothWays(ctx context.Context, s *Service, caller provenance.Caller, typ string, hop Hop) (indexed, scanned any, err error) {
	ix, err := newView(ctx, s, caller).aggregateGroups(typ, hop)
	if err != nil {
		return nil, nil, err
	}
	sc, err := newView(ctx, s, caller).scanGroups(typ, hop)
	if err != nil {
		return nil, nil, err
	}
	return ix, sc, nil
}

// scanGroups is the former aggregate: every entity of typ is listed and
// admitted, then each one's edges in the hop's direction are read.
func (v *view) scanGroups(typ string, hop Hop) ([]groupJSON, error) {
	es, err := v.s.st.EntitiesByType(v.ctx, v.tenant, typ)
	if err != nil {
		return nil, fmt.Errorf("listing %s entities: %w", typ, err)
	}
	visible, err := v.admitAll(es)
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
	for _, m := range visible {
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
	byTarget := map[string]*groupJSON{}
	seen := map[string]map[string]int{}
	for _, l := range links {
		t := v.known(l.target)
		if !t.ok {
			continue
		}
		g := byTarget[l.target]
		if g == nil {
			g = &groupJSON{Target: t.out}
			byTarget[l.target] = g
			seen[l.target] = map[string]int{}
		}
		if i, ok := seen[l.target][l.member.ID]; ok {
			g.Members[i].Citations = append(g.Members[i].Citations, l.cites...)
			continue
		}
		seen[l.target][l.member.ID] = len(g.Members)
		g.Members = append(g.Members, memberJSON{entityJSON: l.member, Citations: l.cites})
	}
	out := make([]groupJSON, 0, len(byTarget))
	for _, g := range byTarget {
		g.Count = len(g.Members)
		slices.SortFunc(g.Members, func(a, b memberJSON) int { return compareEntity(a.entityJSON, b.entityJSON) })
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b groupJSON) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), compareEntity(a.Target, b.Target))
	})
	return out, nil
}

// MapBothWays maps question for caller twice, each in its own request
// view: through the name index, and by the scan of every visible entity
// it replaced; top are the ranked passages of the new view (the same for
// both). It returns the mappings (entity id and how).
func MapBothWays(ctx context.Context, s *Service, caller provenance.Caller, question string) (indexed, scanned []MappedEntity, err error) {
	v := newView(ctx, s, caller)
	docs, err := v.readableDocs()
	if err != nil {
		return nil, nil, err
	}
	top := scanUnitRanking(question, docs).scanRank(docs, nil, maxRankedUnits)
	_, indexed, err = s.mapQuestion(v, question, top)
	if err != nil {
		return nil, nil, err
	}
	_, scanned, err = s.scanMapQuestion(newView(ctx, s, caller), question, top)
	return indexed, scanned, err
}

// scanMatchEntities and scanMapQuestion are the former question mapping,
// over every visible entity of the tenant.
func (s *Service) scanMatchEntities(v *view, question string) ([]visibleEntity, error) {
	all, err := v.allEntities()
	if err != nil {
		return nil, err
	}
	index := make(map[string][]visibleEntity)
	for _, ve := range all {
		_, k, _ := cutID(ve.out.ID)
		index[k] = append(index[k], ve)
		if nk := s.names.key(ve.out.Name); nk != k {
			index[nk] = append(index[nk], ve)
		}
	}
	words := questionWords(question)
	seen := make(map[string]bool)
	var seeds []visibleEntity
	for i := 0; i < len(words) && len(seeds) < s.cfg.MaxSeedEntities; {
		matched := 0
		for n := min(maxNgram, len(words)-i); n >= 1; n-- {
			if n == 1 && isStopword(words[i]) {
				continue
			}
			key := resolve.Key(strings.Join(words[i:i+n], " "))
			if len([]rune(key)) < 2 || len(index[key]) == 0 {
				continue
			}
			for _, ve := range index[key] {
				if !seen[ve.out.ID] && len(seeds) < s.cfg.MaxSeedEntities {
					seen[ve.out.ID] = true
					seeds = append(seeds, ve)
				}
			}
			matched = n
			break
		}
		i += max(matched, 1)
	}
	return seeds, nil
}

func (s *Service) scanMapQuestion(v *view, question string, top []rankedUnit) ([]visibleEntity, []MappedEntity, error) {
	exact, err := s.scanMatchEntities(v, question)
	if err != nil {
		return nil, nil, err
	}
	var seeds []visibleEntity
	var how []MappedEntity
	seen := map[string]bool{}
	add := func(ve visibleEntity, h string) {
		if seen[ve.out.ID] || len(seeds) >= s.cfg.MaxSeedEntities {
			return
		}
		seen[ve.out.ID] = true
		seeds = append(seeds, ve)
		how = append(how, MappedEntity{ID: ve.out.ID, How: h})
	}
	for _, ve := range exact {
		add(ve, MappedName)
	}
	all, err := v.allEntities()
	if err != nil {
		return nil, nil, err
	}
	q := wordsOf(question)
	type scored struct {
		ve    visibleEntity
		score float64
	}
	var fuzzy []scored
	for _, ve := range all {
		if seen[ve.out.ID] {
			continue
		}
		best := nameWordsMatch(s.names.words(ve.out.Name), q)
		for _, f := range ve.sources {
			if f.Name == "" || f.Name == ve.out.Name {
				continue
			}
			if ok, err := v.adm.Direct(f.DocID); err != nil {
				return nil, nil, err
			} else if ok {
				best = max(best, nameWordsMatch(s.names.words(f.Name), q))
			}
		}
		if best > 0 {
			fuzzy = append(fuzzy, scored{ve, best})
		}
	}
	slices.SortFunc(fuzzy, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(len(a.ve.sources), len(b.ve.sources)), cmp.Compare(a.ve.out.ID, b.ve.out.ID))
	})
	for i, f := range fuzzy {
		if i == maxFuzzySeeds {
			break
		}
		add(f.ve, MappedFuzzy)
	}
	// The entities of the best passages: whatever their names, they are
	// what the answering text is about.
	if len(top) > 0 {
		byUnit := map[string][]visibleEntity{}
		want := map[string]bool{}
		for i, u := range top {
			if i == passageSeedUnits {
				break
			}
			want[u.docID+"#"+u.unit] = true
		}
		for _, ve := range all {
			for _, f := range ve.sources {
				for _, tu := range f.TextUnits {
					if k := f.DocID + "#" + tu; want[k] {
						byUnit[k] = append(byUnit[k], ve)
					}
				}
			}
		}
		for i, u := range top {
			if i == passageSeedUnits {
				break
			}
			es := byUnit[u.docID+"#"+u.unit]
			// Specific entities first: those few documents mention.
			slices.SortFunc(es, func(a, b visibleEntity) int {
				return cmp.Or(cmp.Compare(len(a.sources), len(b.sources)), cmp.Compare(a.out.ID, b.out.ID))
			})
			for j, ve := range es {
				if j == passageSeedsPerUnit {
					break
				}
				add(ve, MappedPassage)
			}
		}
	}
	return seeds, how, nil
}

// CommunitiesOfKept is the kept derived set's communitiesOf over cs.
func CommunitiesOfKept(cs []store.Community, ids []string) []store.Community {
	return newDerivedSet(cs, nil).communitiesOf(ids)
}
