package store

import (
	"fmt"
	"slices"
)

// MaxAuditProblems caps AuditReport.Problems: the counts tell how bad it is,
// the first few examples tell where to look.
const MaxAuditProblems = 20

// Indexes are an adapter's secondary indexes as read back from storage, for
// Audit to compare with what the graph implies. Adapters without such an
// index leave its map nil; it is then not checked.
type Indexes struct {
	// ByType maps an entity type to the ids indexed under it.
	ByType map[string][]string
	// Out and In map an entity id to the ids of the edges indexed as
	// leaving and entering it.
	Out, In map[string][]string
}

// AddIndexMismatch counts one index mismatch and keeps its description if
// the report has room. Adapters call it for the checks only they can make
// (their own counters and id sets).
func (r *AuditReport) AddIndexMismatch(format string, args ...any) {
	r.IndexMismatches++
	r.problem(format, args...)
}

func (r *AuditReport) problem(format string, args ...any) {
	if len(r.Problems) < MaxAuditProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Audit checks a tenant graph against its source records (tombstones
// included) and, when idx is not nil, against the adapter's indexes. It is
// the one audit every adapter runs, over a consistent read of its storage.
//
// An entity is orphaned when no fragment matches a live source at its
// applied version; a fragment that does not match counts as an index
// mismatch. An edge is orphaned when any support does not match a live
// source at its applied version, or an endpoint entity is missing. A source
// record that lists an entity or edge without a matching fragment, or a
// fragment of a source whose record does not list it, is an index mismatch.
func Audit(g Graph, sources []SourceRecord, idx *Indexes) AuditReport {
	var r AuditReport
	recs := make(map[string]*SourceRecord, len(sources))
	for i := range sources {
		s := &sources[i]
		recs[s.DocID] = s
		if !s.Deleted {
			r.Sources++
		}
	}
	r.Entities, r.Edges = len(g.Entities), len(g.Edges)

	// live reports whether frag matches its source's applied version and the
	// source lists id in its index.
	live := func(kind, id string, f Fragment, listed func(*SourceRecord) []string) bool {
		s, ok := recs[f.DocID]
		switch {
		case !ok:
			r.problem("%s %q: fragment of %s@%d, a source with no record", kind, id, f.DocID, f.Version)
		case s.Deleted:
			r.problem("%s %q: fragment of %s@%d, deleted at %d", kind, id, f.DocID, f.Version, s.Version)
		case s.Version != f.Version:
			r.problem("%s %q: fragment of %s@%d, applied version is %d", kind, id, f.DocID, f.Version, s.Version)
		case !contains(listed(s), id):
			r.AddIndexMismatch("%s %q: fragment of %s@%d, whose record does not list it", kind, id, f.DocID, f.Version)
			return true // the fragment is live; only the index is wrong
		default:
			return true
		}
		return false
	}
	sortedFrags := func(kind, id string, fs []Fragment) {
		if !slices.IsSortedFunc(fs, byDocID) || len(slices.CompactFunc(slices.Clone(fs), func(a, b Fragment) bool { return a.DocID == b.DocID })) != len(fs) {
			r.AddIndexMismatch("%s %q: fragments not sorted by doc id or not one per doc", kind, id)
		}
	}

	entities := make(map[string]*Entity, len(g.Entities))
	for i := range g.Entities {
		e := &g.Entities[i]
		entities[e.ID] = e
		sortedFrags("entity", e.ID, e.Sources)
		n := 0
		for _, f := range e.Sources {
			if live("entity", e.ID, f, func(s *SourceRecord) []string { return s.Entities }) {
				n++
			} else {
				r.IndexMismatches++ // counted here; problem() above described it
			}
		}
		if n == 0 {
			r.OrphanEntities++
			r.problem("entity %q: no live source", e.ID)
		}
	}
	edges := make(map[string]*Edge, len(g.Edges))
	for i := range g.Edges {
		e := &g.Edges[i]
		edges[e.ID] = e
		sortedFrags("edge", e.ID, e.Supports)
		if e.ID != EdgeID(e.Source, e.Relation, e.Target) {
			r.AddIndexMismatch("edge %q: id does not match %q", e.ID, EdgeID(e.Source, e.Relation, e.Target))
		}
		orphan := len(e.Supports) == 0
		for _, f := range e.Supports {
			if !live("edge", e.ID, f, func(s *SourceRecord) []string { return s.Edges }) {
				orphan = true
			}
		}
		for _, end := range []string{e.Source, e.Target} {
			if entities[end] == nil {
				orphan = true
				r.problem("edge %q: endpoint %q does not exist", e.ID, end)
			}
		}
		if orphan {
			r.OrphanEdges++
		}
	}

	// The other direction: what each record claims must be on the graph.
	for _, s := range sources {
		if s.Deleted && (len(s.Entities) > 0 || len(s.Edges) > 0) {
			r.AddIndexMismatch("source %q: deleted at %d but lists %d entities and %d edges",
				s.DocID, s.Version, len(s.Entities), len(s.Edges))
			continue
		}
		if !slices.IsSorted(s.Entities) || !slices.IsSorted(s.Edges) {
			r.AddIndexMismatch("source %q: contribution index not sorted", s.DocID)
		}
		for _, id := range s.Entities {
			if e := entities[id]; e == nil || !hasDoc(e.Sources, s.DocID) {
				r.AddIndexMismatch("source %q lists entity %q, which has no fragment of it", s.DocID, id)
			}
		}
		for _, id := range s.Edges {
			if e := edges[id]; e == nil || !hasDoc(e.Supports, s.DocID) {
				r.AddIndexMismatch("source %q lists edge %q, which has no support of it", s.DocID, id)
			}
		}
	}

	if idx != nil {
		auditIndexes(&r, g, idx)
	}
	return r
}

func auditIndexes(r *AuditReport, g Graph, idx *Indexes) {
	byType, out, in := map[string][]string{}, map[string][]string{}, map[string][]string{}
	for _, e := range g.Entities {
		byType[e.Type] = append(byType[e.Type], e.ID)
	}
	for _, e := range g.Edges {
		out[e.Source] = append(out[e.Source], e.ID)
		in[e.Target] = append(in[e.Target], e.ID)
	}
	compare := func(name string, want, got map[string][]string) {
		if got == nil {
			return
		}
		keys := map[string]bool{}
		for k := range want {
			keys[k] = true
		}
		for k := range got {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			w, g := slices.Sorted(slices.Values(want[k])), slices.Sorted(slices.Values(got[k]))
			if !slices.Equal(w, g) {
				r.AddIndexMismatch("%s index of %q: has %d ids, the graph implies %d", name, k, len(g), len(w))
			}
		}
	}
	compare("type", byType, idx.ByType)
	compare("out-edge", out, idx.Out)
	compare("in-edge", in, idx.In)
}

func contains(sorted []string, id string) bool {
	_, ok := slices.BinarySearch(sorted, id)
	return ok
}

func hasDoc(frags []Fragment, docID string) bool {
	return slices.ContainsFunc(frags, func(f Fragment) bool { return f.DocID == docID })
}
