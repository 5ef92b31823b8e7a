package clusterer

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// Provisional membership.
//
// Between re-clusterings a new entity joins the communities of its strongest
// neighbour: every community, at every level, that holds the neighbour with
// the heaviest edge to it (weights as for clustering; ties go to the smaller
// id). An entity whose neighbours are all new joins once one of them has
// joined; one with no clustered neighbour at all waits for the re-clustering,
// which is due within MaxDelay anyway.
//
// The grown community keeps its id and its MemberHash: both name the member
// set the last re-clustering computed, which is the member set its report
// was written for. Only Members (so that local search finds the community
// and its report from the new entity) and Sources (so that the community is
// admitted only to callers who may read the new entity's sources too) grow.
// Nothing is announced: the report is still the report of the computed
// member set and stays admissible on its own sources, and rewriting it now
// would be wasted work, since the re-clustering that follows decides the
// real membership. That re-clustering diffs against the computed
// communities, not the grown ones, so:
//   - if the new entity ends up in the community, its member set is new: a
//     new id, announced as changed (the old id as removed);
//   - if it ends up elsewhere, the computed member set is unchanged: same
//     id, not announced, and the report written for it stays current.
//
// Thus "ids are stable for unchanged member sets, and only changed member
// sets are announced" holds across provisional assignments. A grown
// community is recognisable in the store because MemberHash no longer
// hashes Members (isProvisional); after a restart, when the computed
// version is no longer in memory, a re-clustering that computes the same
// member set announces it as refreshed (its report is rebuilt) rather than
// guessing that its sources did not move.

// isProvisional reports whether c was grown by provisional assignment since
// it was computed.
func isProvisional(c store.Community) bool {
	return MemberHash(c.Members) != c.MemberHash
}

// Assign gives the entities among ids that belong to no community of the
// tenant their strongest neighbour's communities, and stores the result
// without announcing it (see the package's provisional membership notes).
// Entities that are absent, already clustered, or without a clustered
// neighbour are left alone; a tenant never clustered is left alone too.
func (w *Worker) Assign(ctx context.Context, tenant string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	w.commMu.Lock()
	defer w.commMu.Unlock()
	run, err := w.st.LastRun(ctx, tenant)
	if err != nil {
		return fmt.Errorf("reading last run: %w", err)
	}
	if run == 0 {
		return nil
	}
	// Only the communities of the entities and of their neighbours are
	// read (through the member index) and only the grown ones written.
	// Which entities are clustered comes from the member index alone (a
	// hub among ids would otherwise have its communities read whole).
	clustered, err := w.st.Clustered(ctx, tenant, ids)
	if err != nil {
		return fmt.Errorf("reading the membership of %d entities: %w", len(ids), err)
	}
	var fresh []string
	for _, id := range ids {
		if !clustered[id] {
			fresh = append(fresh, id)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	ents, err := w.st.Entities(ctx, tenant, fresh)
	if err != nil {
		return fmt.Errorf("reading entities: %w", err)
	}
	var cands []*cand
	for _, id := range fresh {
		e, ok := ents[id]
		if !ok {
			continue // removed since
		}
		c := &cand{ent: e}
		for _, dir := range []store.Direction{store.Out, store.In} {
			es, err := w.st.Edges(ctx, tenant, id, dir)
			if err != nil {
				return fmt.Errorf("reading edges of %q: %w", id, err)
			}
			c.edges = append(c.edges, es...)
		}
		cands = append(cands, c)
	}
	var neighbours []string
	for _, c := range cands {
		for _, e := range c.edges {
			neighbours = append(neighbours, e.Source, e.Target)
		}
	}
	slices.Sort(neighbours)
	comms, err := w.st.CommunitiesOf(ctx, tenant, slices.Compact(neighbours))
	if err != nil {
		return fmt.Errorf("reading the communities of %d neighbours: %w", len(neighbours), err)
	}
	in := map[string][]int{} // entity -> indexes of the communities holding it
	for i, c := range comms {
		for _, m := range c.Members {
			in[m] = append(in[m], i)
		}
	}

	// Rounds: an entity joins when a neighbour is clustered at the start of
	// the round, so the outcome does not depend on the order of ids.
	grown := map[int]bool{}
	added := map[int][]*cand{} // community index -> the entities joining it
	assigned := 0
	for {
		type join struct {
			c       *cand
			targets []int
		}
		var joins []join
		var rest []*cand
		for _, c := range cands {
			n := strongest(c.ent.ID, c.edges, func(id string) bool { return len(in[id]) > 0 }, w.cfg.WeightBy == "strength")
			if n == "" {
				rest = append(rest, c)
				continue
			}
			joins = append(joins, join{c, in[n]})
		}
		if len(joins) == 0 {
			break
		}
		for _, j := range joins {
			for _, ci := range j.targets {
				if !grown[ci] {
					grown[ci] = true
					if _, ok := w.computed[tenant][comms[ci].ID]; !ok && !isProvisional(comms[ci]) {
						if w.computed[tenant] == nil {
							w.computed[tenant] = map[string]store.Community{}
						}
						w.computed[tenant][comms[ci].ID] = cloneCommunity(comms[ci])
					}
				}
				added[ci] = append(added[ci], j.c)
				in[j.c.ent.ID] = append(in[j.c.ent.ID], ci)
			}
			assigned++
		}
		cands = rest
	}
	w.provisional.WithLabelValues("assigned").Add(float64(assigned))
	w.provisional.WithLabelValues("waiting").Add(float64(len(cands)))
	if assigned == 0 {
		return nil
	}
	// Each grown community is rebuilt once with all who joined it (a
	// batch's new entities mostly join the same few large communities).
	changed := make([]store.Community, 0, len(grown))
	for i := range comms {
		if grown[i] {
			comms[i] = withMembers(comms[i], added[i])
			changed = append(changed, comms[i])
		}
	}
	if err := w.st.UpdateCommunities(ctx, tenant, run, changed); err != nil {
		return fmt.Errorf("storing %d provisional communities: %w", len(changed), err)
	}
	w.log.Info("new entities joined their strongest neighbour's communities", "tenant", tenant,
		"assigned", assigned, "waiting", len(cands), "communities_grown", len(grown))
	return nil
}

// strongest returns the neighbour of id, among those clustered, with the
// heaviest undirected edge to id, or "" if there is none. Ties go to the
// smallest id.
func strongest(id string, edges []store.Edge, clustered func(string) bool, byStrength bool) string {
	by := map[string]*weigher{}
	for _, e := range edges {
		other := e.Target
		if other == id {
			other = e.Source
		}
		if other == id || !clustered(other) {
			continue
		}
		if by[other] == nil {
			by[other] = &weigher{byStrength: byStrength}
		}
		by[other].addEdge(e)
	}
	best, bestW := "", 0.0
	for n, wt := range by {
		v := wt.weight()
		if best == "" || v > bestW || (v == bestW && n < best) {
			best, bestW = n, v
		}
	}
	return best
}

// cand is a new entity to place, with every edge of it, both directions.
type cand struct {
	ent   store.Entity
	edges []store.Edge
}

// withMembers returns c with the entities of joined added to its members,
// and their sources plus the supports of their edges into the grown
// member set added to its sources. Id and MemberHash are kept: they name
// the computed member set.
func withMembers(c store.Community, joined []*cand) store.Community {
	// Members and sources are made anew below.
	c.Children = slices.Clone(c.Children)
	ids := make([]string, len(joined))
	for i, j := range joined {
		ids[i] = j.ent.ID
	}
	if slices.IsSorted(c.Members) {
		// Computed members are sorted: the few who join are merged in.
		slices.Sort(ids)
		members := make([]string, 0, len(c.Members)+len(ids))
		i := 0
		for _, id := range ids {
			k, _ := slices.BinarySearch(c.Members[i:], id)
			members = append(append(members, c.Members[i:i+k]...), id)
			i += k
		}
		c.Members = append(members, c.Members[i:]...)
	} else {
		c.Members = append(slices.Clone(c.Members), ids...)
		sort.Strings(c.Members)
	}
	var more []provenance.SourceRef
	for _, j := range joined {
		for _, f := range j.ent.Sources {
			more = append(more, provenance.SourceRef{DocID: f.DocID, Version: f.Version})
		}
		for _, ed := range j.edges {
			other := ed.Target
			if other == j.ent.ID {
				other = ed.Source
			}
			if k := sort.SearchStrings(c.Members, other); k < len(c.Members) && c.Members[k] == other {
				for _, s := range ed.Supports {
					more = append(more, provenance.SourceRef{DocID: s.DocID, Version: s.Version})
				}
			}
		}
	}
	c.Sources = mergeRefs(c.Sources, more)
	return c
}

// mergeRefs returns the distinct refs of have and more, sorted as
// sortRefs sorts them. have is mostly a large community's sources, sorted
// and distinct already (sourcesOf and mergeRefs leave them so), and more
// a few: those are sorted and merged in, not the whole set hashed and
// sorted again.
func mergeRefs(have, more []provenance.SourceRef) []provenance.SourceRef {
	if !slices.IsSortedFunc(have, compareRefs) || !distinctRefs(have) {
		set := make(map[provenance.SourceRef]bool, len(have)+len(more))
		for _, s := range have {
			set[s] = true
		}
		for _, s := range more {
			set[s] = true
		}
		out := make([]provenance.SourceRef, 0, len(set))
		for s := range set {
			out = append(out, s)
		}
		sortRefs(out)
		return out
	}
	slices.SortFunc(more, compareRefs)
	more = slices.Compact(more)
	out := make([]provenance.SourceRef, 0, len(have)+len(more))
	i, j := 0, 0
	for i < len(have) || j < len(more) {
		switch {
		case j == len(more):
			out = append(out, have[i])
			i++
		case i == len(have):
			out = append(out, more[j])
			j++
		default:
			switch c := compareRefs(have[i], more[j]); {
			case c < 0:
				out = append(out, have[i])
				i++
			case c > 0:
				out = append(out, more[j])
				j++
			default:
				out = append(out, have[i])
				i++
				j++
			}
		}
	}
	return out
}

// compareRefs orders refs by document, version and text unit.
func compareRefs(a, b provenance.SourceRef) int {
	if c := strings.Compare(a.DocID, b.DocID); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Version, b.Version); c != 0 {
		return c
	}
	return strings.Compare(a.TextUnit, b.TextUnit)
}

// distinctRefs reports whether refs, sorted by compareRefs, holds no ref
// twice.
func distinctRefs(refs []provenance.SourceRef) bool {
	for i := 1; i < len(refs); i++ {
		if refs[i] == refs[i-1] {
			return false
		}
	}
	return true
}

func cloneCommunity(c store.Community) store.Community {
	c.Members = append([]string(nil), c.Members...)
	c.Children = append([]string(nil), c.Children...)
	c.Sources = append([]provenance.SourceRef(nil), c.Sources...)
	return c
}

// sortRefs sorts refs by compareRefs.
func sortRefs(refs []provenance.SourceRef) { slices.SortFunc(refs, compareRefs) }
