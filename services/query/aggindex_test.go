package query_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/query"
)

// requireSameAggregates compares, for every caller and every (type,
// relation, direction) the graph has, the groups aggregate computes
// through the relation index with those of the full scan it replaced.
func requireSameAggregates(t *testing.T, st query.Stores, tenant string, callers []provenance.Caller) int {
	t.Helper()
	a, err := newAuth()
	require.NoError(t, err)
	svc, err := query.New(query.Config{}, st, a, nil, nil)
	require.NoError(t, err)
	g, err := st.Snapshot(t.Context(), tenant)
	require.NoError(t, err)
	type q struct {
		typ string
		hop query.Hop
	}
	var qs []q
	for _, e := range g.Edges {
		st, _, _ := cutType(e.Source)
		tt, _, _ := cutType(e.Target)
		for _, x := range []q{{st, query.Hop{Relation: e.Relation, Dir: store.Out}}, {tt, query.Hop{Relation: e.Relation, Dir: store.In}}} {
			if !slices.Contains(qs, x) {
				qs = append(qs, x)
			}
		}
	}
	nonEmpty := 0
	for _, c := range callers {
		for _, x := range qs {
			ix, sc, err := query.AggregateBothWays(t.Context(), svc, c, x.typ, x.hop)
			require.NoError(t, err)
			require.Equal(t, sc, ix, "caller %v, type %s, rel %s", c.Groups, x.typ, x.hop)
			if fmt.Sprint(ix) != "[]" {
				nonEmpty++
			}
		}
	}
	return nonEmpty
}

func cutType(id string) (string, string, bool) {
	for i := range id {
		if id[i] == ':' {
			return id[:i], id[i+1:], true
		}
	}
	return id, "", false
}

// TestAggregateIndexMatchesScanOnGeneratedGraph builds a random graph of
// 40 documents with three ACLs over 90 entities of three types and two
// relations (self-loops and edges supported by several documents
// included), then revokes and deletes some documents.
func TestAggregateIndexMatchesScanOnGeneratedGraph(t *testing.T) {
	st := openStore(t)
	const tenant = "gen"
	r := rand.New(rand.NewPCG(7, 10))
	types := []string{"alpha", "beta", "gamma"}
	rels := []string{"links", "owns"}
	acls := []provenance.ACL{provenance.PublicACL(), {Groups: []string{"g1"}}, {Groups: []string{"g2"}}}
	for d := range 40 {
		doc := fmt.Sprintf("doc-%02d", d)
		c := store.Contributions{Title: doc, DocType: "note"}
		seen := map[string]bool{}
		ent := func() string {
			typ := types[r.IntN(len(types))]
			id := fmt.Sprintf("%s:e%02d", typ, r.IntN(30))
			if !seen[id] {
				seen[id] = true
				c.Entities = append(c.Entities, store.EntityContribution{ID: id, Type: typ, Name: fmt.Sprintf("%s %s", typ, id[len(typ)+1:]), NameRank: 2})
			}
			return id
		}
		edges := map[string]bool{}
		for range 2 + r.IntN(8) {
			src, tgt := ent(), ent()
			if r.IntN(10) == 0 {
				tgt = src
			}
			rel := rels[r.IntN(len(rels))]
			if edges[src+rel+tgt] {
				continue
			}
			edges[src+rel+tgt] = true
			c.Edges = append(c.Edges, store.EdgeContribution{Source: src, Relation: rel, Target: tgt, Weight: 1})
		}
		announceApply(t, st, tenant, doc, 1, acls[d%len(acls)], c)
	}
	callers := []provenance.Caller{
		{Tenant: tenant, Principal: "p"},
		{Tenant: tenant, Principal: "one", Groups: []string{"g1"}},
		{Tenant: tenant, Principal: "two", Groups: []string{"g1", "g2"}},
	}
	require.Positive(t, requireSameAggregates(t, st, tenant, callers))
	for _, d := range []int{3, 4, 11} {
		_, err := st.Announce(t.Context(), tenant, store.Announcement{DocID: fmt.Sprintf("doc-%02d", d), Version: 2, ACL: provenance.ACL{Groups: []string{"g2"}}})
		require.NoError(t, err)
	}
	for _, d := range []int{5, 6} {
		_, err := st.Delete(t.Context(), tenant, fmt.Sprintf("doc-%02d", d), 2)
		require.NoError(t, err)
	}
	require.Positive(t, requireSameAggregates(t, st, tenant, callers))
}

// requireSameMappings compares the question mapping of local search
// through the name index with the scan of every visible entity.
func requireSameMappings(t *testing.T, st query.Stores, callers []provenance.Caller, questions []string) int {
	t.Helper()
	a, err := newAuth()
	require.NoError(t, err)
	svc, err := query.New(query.Config{}, st, a, nil, nil)
	require.NoError(t, err)
	mapped := 0
	for _, c := range callers {
		for _, q := range questions {
			ix, sc, err := query.MapBothWays(t.Context(), svc, c, q)
			require.NoError(t, err)
			require.Equal(t, sc, ix, "caller %v, question %q", c.Groups, q)
			mapped += len(ix)
		}
	}
	return mapped
}

// TestNameIndexMapsAsTheScanOnGeneratedGraph names entities with words
// of a vocabulary holding close spellings (one edit apart, digits
// differing), spelled differently by documents of different ACLs.
func TestNameIndexMapsAsTheScanOnGeneratedGraph(t *testing.T) {
	st := openStore(t)
	const tenant = "gen"
	r := rand.New(rand.NewPCG(3, 5))
	vocab := []string{"kubernetes", "kubernets", "manager", "manger", "certificate", "certificat", "gateway", "gatewya",
		"redis", "cache", "dns", "node", "labvirt1008", "labvirt1009", "pool", "exhaustion", "the", "of"}
	name := func() string {
		n := 1 + r.IntN(3)
		ws := make([]string, n)
		for i := range ws {
			ws[i] = vocab[r.IntN(len(vocab))]
		}
		return strings.Join(ws, " ")
	}
	acls := []provenance.ACL{provenance.PublicACL(), {Groups: []string{"g1"}}}
	for d := range 30 {
		doc := fmt.Sprintf("doc-%02d", d)
		var units []events.TextUnit
		c := store.Contributions{Title: doc, DocType: "note"}
		for u := range 3 {
			text := name() + " failed after " + name() + " restarted."
			units = append(units, events.TextUnit{ID: fmt.Sprintf("u%d", u), Text: text})
		}
		c.TextUnits = units
		seen := map[string]bool{}
		for range 4 {
			key := fmt.Sprintf("e%02d", r.IntN(40))
			id := []string{"component", "service"}[r.IntN(2)] + ":" + key
			if seen[id] {
				continue
			}
			seen[id] = true
			c.Entities = append(c.Entities, store.EntityContribution{ID: id, Type: id[:len(id)-4], Name: name(), NameRank: 1 + r.IntN(2),
				TextUnits: []string{units[r.IntN(len(units))].ID}})
		}
		announceApply(t, st, tenant, doc, 1, acls[d%len(acls)], c)
	}
	callers := []provenance.Caller{{Tenant: tenant, Principal: "p"}, {Tenant: tenant, Principal: "one", Groups: []string{"g1"}}}
	var questions []string
	for range 25 {
		questions = append(questions, "What happened to "+name()+" and "+name()+"?")
	}
	require.Positive(t, requireSameMappings(t, st, callers, questions))
}
