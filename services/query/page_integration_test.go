//go:build integration

package query_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/query"
)

// pageResp is the page object of a bounded response.
type pageResp struct {
	Total      int  `json:"total"`
	Offset     int  `json:"offset"`
	Limit      *int `json:"limit"`
	NextOffset *int `json:"next_offset"`
}

// rawAgg is an aggregate response with its groups as sent, so pages are
// compared with the unbounded response byte for byte.
type rawAgg struct {
	Groups []json.RawMessage `json:"groups"`
	Page   *pageResp         `json:"page"`
}

type rawGroup struct {
	Target  json.RawMessage   `json:"target"`
	Count   int               `json:"count"`
	Members []json.RawMessage `json:"members"`
}

func decodeGroup(t *testing.T, raw json.RawMessage) rawGroup {
	t.Helper()
	var g rawGroup
	require.NoError(t, json.Unmarshal(raw, &g))
	return g
}

// followPages gets path&offset=0, then every next_offset until the last
// page, requiring each page to say total and where it is, and returns the
// pages' items (what items picks from each) in order.
func followPages(t *testing.T, f *fixture, path, token string, total int, items func(raw json.RawMessage) ([]json.RawMessage, *pageResp)) []json.RawMessage {
	t.Helper()
	out := []json.RawMessage{}
	offset := 0
	for range total + 2 {
		var raw json.RawMessage
		f.get(fmt.Sprintf("%s&offset=%d", path, offset), token, http.StatusOK, &raw)
		list, p := items(raw)
		require.NotNil(t, p, "%s: a bounded response has a page", path)
		require.Equal(t, total, p.Total, "%s at %d", path, offset)
		require.Equal(t, offset, p.Offset, path)
		if p.Limit != nil {
			require.LessOrEqual(t, len(list), *p.Limit, path)
		}
		out = append(out, list...)
		if p.NextOffset == nil {
			require.Equal(t, total, offset+len(list), "%s: the last page ends the list", path)
			return out
		}
		require.Equal(t, offset+len(list), *p.NextOffset, path)
		offset = *p.NextOffset
	}
	t.Fatalf("%s: more pages than items", path)
	return nil
}

func aggItems(t *testing.T) func(json.RawMessage) ([]json.RawMessage, *pageResp) {
	return func(raw json.RawMessage) ([]json.RawMessage, *pageResp) {
		var a rawAgg
		require.NoError(t, json.Unmarshal(raw, &a))
		return a.Groups, a.Page
	}
}

// TestAggregatePagesConcatenate: for every caller and several
// aggregates, the pages of every size concatenate to the unbounded
// response, the page's total is the exact number of groups, and member
// windows cut each group's sorted member list without changing its count.
func TestAggregatePagesConcatenate(t *testing.T) {
	f := newFixture(t)
	queries := []string{"type=incident&rel=failure", "type=service&rel=~affected", "type=incident&rel=affected", "type=incident&rel=nosuch"}
	for _, q := range queries {
		for _, tok := range []string{tokAlice, tokBob, tokCarol} {
			var whole rawAgg
			f.get("/v1/aggregate?"+q, tok, http.StatusOK, &whole)
			require.Nil(t, whole.Page, "an unbounded response has no page")
			n := len(whole.Groups)
			for _, limit := range []int{1, 2, 3, n + 1} {
				path := fmt.Sprintf("/v1/aggregate?%s&limit=%d", q, limit)
				require.Equal(t, whole.Groups, followPages(t, f, path, tok, n, aggItems(t)), path)
			}

			getAgg := func(path string) rawAgg {
				var a rawAgg
				f.get(path, tok, http.StatusOK, &a)
				require.NotNil(t, a.Page, path)
				return a
			}
			// limit 0 asks for the total alone; an offset past the end
			// gives an empty page, not an error.
			a := getAgg("/v1/aggregate?" + q + "&limit=0")
			require.Empty(t, a.Groups)
			require.Equal(t, pageResp{Total: n, Limit: ptr(0)}, *a.Page)
			a = getAgg(fmt.Sprintf("/v1/aggregate?%s&offset=%d", q, n+5))
			require.Empty(t, a.Groups)
			require.Equal(t, pageResp{Total: n, Offset: n + 5}, *a.Page)

			// Member windows, and members paged through one group at a time.
			for _, members := range []int{0, 1, 2} {
				for _, mo := range []int{0, 1, 5} {
					path := fmt.Sprintf("/v1/aggregate?%s&members=%d&member_offset=%d", q, members, mo)
					a := getAgg(path)
					require.Len(t, a.Groups, n, path)
					require.Equal(t, pageResp{Total: n}, *a.Page, path)
					for i, raw := range a.Groups {
						got, want := decodeGroup(t, raw), decodeGroup(t, whole.Groups[i])
						require.Equal(t, want.Target, got.Target, path)
						require.Equal(t, want.Count, got.Count, "%s: counts stay exact", path)
						require.Equal(t, len(want.Members), want.Count)
						lo, hi := min(mo, want.Count), min(mo+members, want.Count)
						require.Equal(t, want.Members[lo:hi], got.Members, path)
					}
				}
			}
			for i, raw := range whole.Groups {
				want := decodeGroup(t, raw)
				var got []json.RawMessage
				for mo := 0; mo < want.Count; mo += 2 {
					a := getAgg(fmt.Sprintf("/v1/aggregate?%s&limit=1&offset=%d&members=2&member_offset=%d", q, i, mo))
					require.Len(t, a.Groups, 1)
					got = append(got, decodeGroup(t, a.Groups[0]).Members...)
				}
				require.Equal(t, want.Members, got, "%s group %d", q, i)
			}
		}
	}
}

// TestAggregatePagesAreCutFromTheKeptCount: with the caches live, paging
// through an aggregate reads no edge and no entity after the first
// request: every page is cut from the groups counted once.
func TestAggregatePagesAreCutFromTheKeptCount(t *testing.T) {
	f, cs, _ := newCachingFixture(t)
	const q = "/v1/aggregate?type=service&rel=~affected"
	streamtest.Eventually(t, 10*time.Second, func() error {
		cs.reset()
		f.get(q, tokAlice, http.StatusOK, nil)
		f.get(q, tokAlice, http.StatusOK, nil)
		if n := cs.reset()["EdgesByRelation"]; n > 1 {
			return fmt.Errorf("%d relation reads for two requests", n)
		}
		return nil
	})
	var whole rawAgg
	f.get(q, tokAlice, http.StatusOK, &whole)
	cs.reset()
	got := followPages(t, f, q+"&limit=3&members=1", tokAlice, len(whole.Groups), aggItems(t))
	require.Len(t, got, len(whole.Groups))
	calls := cs.reset()
	require.Zero(t, calls["EdgesByRelation"], "%v", calls)
	require.Zero(t, calls["Entities"], "%v", calls)
}

// TestRefusedPageReadsNothing: a paging parameter is checked before
// anything is read or counted, so a refused request changes nothing.
func TestRefusedPageReadsNothing(t *testing.T) {
	f, cs := newCountingFixture(t)
	for _, path := range []string{
		"/v1/aggregate?type=incident&rel=failure&limit=-1",
		"/v1/aggregate?type=incident&rel=failure&members=x",
		"/v1/aggregate?type=incident&rel=failure&member_offset=1&member_offset=2",
		"/v1/paths?start=component:cert-manager&rels=~involved&limit=-1",
		"/v1/paths?start=component:cert-manager&rels=~involved&offset=1e3",
	} {
		status, code := f.errorCode(http.MethodGet, path, tokAlice, nil)
		require.Equal(t, http.StatusBadRequest, status, path)
		require.Equal(t, "invalid_param", code, path)
		require.Empty(t, cs.reset(), path)
	}
}

// rawPaths is a paths response with its terminals and rows as sent.
type rawPaths struct {
	Start     json.RawMessage   `json:"start"`
	Terminals []json.RawMessage `json:"terminals"`
	Rows      []json.RawMessage `json:"rows"`
	Truncated bool              `json:"truncated"`
	Page      *pageResp         `json:"page"`
}

// rowTerminal is the id of a row's last node.
func rowTerminal(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		Nodes []entity `json:"nodes"`
	}
	require.NoError(t, json.Unmarshal(raw, &r))
	return r.Nodes[len(r.Nodes)-1].ID
}

func terminalIDs(t *testing.T, raws []json.RawMessage) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, raw := range raws {
		var e entity
		require.NoError(t, json.Unmarshal(raw, &e))
		out[e.ID] = true
	}
	return out
}

// TestPathsPagesConcatenate: the terminal pages of every size concatenate
// to the unbounded response's terminals (with their exact path counts),
// each page carries exactly the rows that end at its terminals, and the
// rows of all pages are the unbounded response's, in its order.
func TestPathsPagesConcatenate(t *testing.T) {
	f := newFixture(t)
	queries := []string{
		"start=component:cert-manager&rels=~involved,affected,owned_by",
		"start=component:cert-manager&rels=~involved,affected",
		"start=component:cert-manager&rels=~involved",
		"start=component:cert-manager&rels=nosuch",
	}
	for _, q := range queries {
		for _, tok := range []string{tokAlice, tokBob} {
			var whole rawPaths
			f.get("/v1/paths?"+q, tok, http.StatusOK, &whole)
			require.Nil(t, whole.Page, "an unbounded response has no page")
			require.False(t, whole.Truncated)
			n := len(whole.Terminals)
			pos := map[string]int{}
			for i, r := range whole.Rows {
				pos[string(r)] = i
			}
			for _, limit := range []int{1, 2, 3, n + 1} {
				path := fmt.Sprintf("/v1/paths?%s&limit=%d", q, limit)
				var rows []json.RawMessage
				terms := followPages(t, f, path, tok, n, func(raw json.RawMessage) ([]json.RawMessage, *pageResp) {
					var p rawPaths
					require.NoError(t, json.Unmarshal(raw, &p))
					require.Equal(t, whole.Start, p.Start)
					require.False(t, p.Truncated)
					mine := terminalIDs(t, p.Terminals)
					for i, r := range p.Rows {
						require.True(t, mine[rowTerminal(t, r)], "%s: a row ends at another page's terminal", path)
						if i > 0 {
							require.Less(t, pos[string(p.Rows[i-1])], pos[string(r)], "%s: a page keeps the rows' order", path)
						}
					}
					rows = append(rows, p.Rows...)
					return p.Terminals, p.Page
				})
				require.Equal(t, whole.Terminals, terms, path)
				// The pages partition the rows by terminal.
				require.ElementsMatch(t, whole.Rows, rows, path)
			}
		}
	}
}

// TestPathsPageKeepsTheRowsCap: a page's rows are capped at MaxPathRows,
// and truncated says so, while its terminals' path counts stay exact.
func TestPathsPageKeepsTheRowsCap(t *testing.T) {
	f := newFixture(t)
	var whole rawPaths
	f.get(certPaths, tokAlice, http.StatusOK, &whole)
	capped := f.withConfig(query.Config{MaxPathRows: 1})
	var p rawPaths
	capped.get(certPaths+"&limit=2", tokAlice, http.StatusOK, &p)
	require.True(t, p.Truncated)
	require.Len(t, p.Rows, 1)
	require.Equal(t, whole.Terminals[:2], p.Terminals, "path counts cover every path, not the rows shown")
	require.Equal(t, pageResp{Total: len(whole.Terminals), Limit: ptr(2), NextOffset: ptr(2)}, *p.Page)
}

func ptr(n int) *int { return &n }

// pagingModel is the test's own record of who may read which incident.
type pagingModel struct {
	acl     map[string]provenance.ACL
	deleted map[string]bool
}

func (m *pagingModel) readable(c provenance.Caller, doc string) bool {
	a, ok := m.acl[doc]
	return ok && !m.deleted[doc] && a.Admits(c)
}

// TestPagingAdmits: random ACLs over incidents, callers with random
// groups, revocations and deletions between rounds. Paged through, every
// caller's aggregate and paths responses give exactly what the test's own
// model of readability says (groups, exact counts, members, terminals and
// their path counts), and no page cites a document the caller may not
// read.
func TestPagingAdmits(t *testing.T) {
	const (
		docs     = 80
		services = 10
		failures = 5
		rounds   = 3
	)
	rng := rand.New(rand.NewPCG(20261203, 1))
	st := openStore(t)
	ctx := t.Context()
	groups := []string{"g0", "g1", "g2"}
	randomACL := func() provenance.ACL {
		switch n := rng.IntN(6); {
		case n < 2:
			return provenance.PublicACL()
		case n < 3:
			return provenance.ACL{Principals: []string{fmt.Sprintf("p%d", rng.IntN(3))}}
		default:
			return provenance.ACL{Groups: []string{groups[rng.IntN(len(groups))]}}
		}
	}
	type incident struct {
		doc, name, fm string
		svcs          []string
	}
	m := &pagingModel{acl: map[string]provenance.ACL{}, deleted: map[string]bool{}}
	var incs []incident
	for i := range docs {
		inc := incident{doc: fmt.Sprintf("INC-%d", i), name: fmt.Sprintf("INC-%d", i), fm: fmt.Sprintf("fm%d", rng.IntN(failures))}
		for s := range services {
			if rng.IntN(4) == 0 {
				inc.svcs = append(inc.svcs, fmt.Sprintf("svc%d", s))
			}
		}
		unit := "u0"
		id := fmt.Sprintf("incident:inc%d", i)
		ents := []store.EntityContribution{
			{ID: id, Type: "incident", Name: inc.name, NameRank: 2, TextUnits: []string{unit}},
			{ID: "failure_mode:" + inc.fm, Type: "failure_mode", Name: inc.fm, NameRank: 2, TextUnits: []string{unit}},
		}
		edges := []store.EdgeContribution{{Source: id, Relation: "failure", Target: "failure_mode:" + inc.fm, Weight: 1, TextUnits: []string{unit}}}
		for _, s := range inc.svcs {
			ents = append(ents, store.EntityContribution{ID: "service:" + s, Type: "service", Name: s, NameRank: 2, TextUnits: []string{unit}})
			edges = append(edges, store.EdgeContribution{Source: id, Relation: "affected", Target: "service:" + s, Weight: 1, TextUnits: []string{unit}})
		}
		acl := randomACL()
		m.acl[inc.doc] = acl
		announceApply(t, st, "acme", inc.doc, 1, acl, store.Contributions{
			TextUnits: []events.TextUnit{{ID: unit, Text: inc.name + " hit " + strings.Join(inc.svcs, " ") + " by " + inc.fm}},
			Entities:  ents, Edges: edges})
		incs = append(incs, inc)
	}

	var toks []auth.Token
	for i := range 4 {
		var gs []string
		for _, g := range groups {
			if rng.IntN(2) == 0 {
				gs = append(gs, g)
			}
		}
		toks = append(toks, auth.Token{Token: fmt.Sprintf("tok%d", i), Tenant: "acme", Principal: fmt.Sprintf("p%d", i), Groups: gs})
	}
	a, err := auth.New(toks, nil)
	require.NoError(t, err)
	svc, err := query.New(query.Config{}, st, a, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	f := &fixture{t: t, srv: srv}

	type member struct {
		entity
		Citations []provenance.SourceRef `json:"citations"`
	}
	type group struct {
		Target  entity   `json:"target"`
		Count   int      `json:"count"`
		Members []member `json:"members"`
	}
	checked := 0
	for round := range rounds {
		for _, tok := range toks {
			c := provenance.Caller{Tenant: tok.Tenant, Principal: tok.Principal, Groups: tok.Groups}
			// The model's answer: failure modes by their readable
			// incidents, largest first, members by name.
			byFM := map[string][]string{}
			for _, inc := range incs {
				if m.readable(c, inc.doc) {
					byFM[inc.fm] = append(byFM[inc.fm], inc.name)
				}
			}
			var fms []string
			for fm, ms := range byFM {
				slices.Sort(ms)
				fms = append(fms, fm)
			}
			slices.SortFunc(fms, func(x, y string) int { return cmp.Or(cmp.Compare(len(byFM[y]), len(byFM[x])), cmp.Compare(x, y)) })
			most := 0
			for _, ms := range byFM {
				most = max(most, len(ms))
			}

			// Groups two at a time, members three at a time.
			got := map[string][]string{}
			var order []string
			for mo := 0; mo == 0 || mo < most; mo += 3 {
				path := fmt.Sprintf("/v1/aggregate?type=incident&rel=failure&limit=2&members=3&member_offset=%d", mo)
				pages := followPages(t, f, path, tok.Token, len(fms), aggItems(t))
				var targets []string
				for _, raw := range pages {
					var g group
					require.NoError(t, json.Unmarshal(raw, &g))
					require.Equal(t, len(byFM[g.Target.Name]), g.Count, "round %d %s: %s counts the readable incidents", round, tok.Principal, g.Target.Name)
					targets = append(targets, g.Target.Name)
					for _, mem := range g.Members {
						got[g.Target.Name] = append(got[g.Target.Name], mem.Name)
						for _, cite := range mem.Citations {
							require.True(t, m.readable(c, cite.DocID), "round %d %s: cites %s", round, tok.Principal, cite.DocID)
						}
					}
				}
				if order == nil {
					order = targets
				}
				require.Equal(t, order, targets, "pages are stable")
			}
			require.Equal(t, fms, append([]string{}, order...), "round %d %s: the groups and their order", round, tok.Principal)
			for _, fm := range fms {
				require.Equal(t, byFM[fm], got[fm], "round %d %s: the members of %s", round, tok.Principal, fm)
			}

			// Paths from each service to its failure modes, one terminal a page.
			for s := range services {
				name := fmt.Sprintf("svc%d", s)
				want := map[string]int{}
				for _, inc := range incs {
					if m.readable(c, inc.doc) && slices.Contains(inc.svcs, name) {
						want[inc.fm]++
					}
				}
				path := "/v1/paths?start=service:" + name + "&rels=~affected,failure&limit=1"
				if len(want) == 0 {
					status, code := f.errorCode(http.MethodGet, path+"&offset=0", tok.Token, nil)
					require.Equal(t, http.StatusNotFound, status, "%s may see no incident of %s", tok.Principal, name)
					require.Equal(t, "unknown_entity", code)
					continue
				}
				wantNames := slices.Sorted(maps.Keys(want))
				var rows int
				terms := followPages(t, f, path, tok.Token, len(want), func(raw json.RawMessage) ([]json.RawMessage, *pageResp) {
					var p pathsResp
					var pg struct {
						Terminals []json.RawMessage `json:"terminals"`
						Page      *pageResp         `json:"page"`
					}
					require.NoError(t, json.Unmarshal(raw, &p))
					require.NoError(t, json.Unmarshal(raw, &pg))
					for _, d := range p.docs() {
						require.True(t, m.readable(c, d), "round %d %s: paths cite %s", round, tok.Principal, d)
					}
					for _, term := range p.Terminals {
						require.Equal(t, want[term.Name], term.Paths, "round %d %s: paths from %s to %s", round, tok.Principal, name, term.Name)
					}
					rows += len(p.Rows)
					return pg.Terminals, pg.Page
				})
				var names []string
				for _, raw := range terms {
					var e entity
					require.NoError(t, json.Unmarshal(raw, &e))
					names = append(names, e.Name)
				}
				require.Equal(t, wantNames, names)
				total := 0
				for _, n := range want {
					total += n
				}
				require.Equal(t, total, rows, "every readable path is on the page of its terminal")
				checked++
			}
		}
		// Revoke, re-grant and delete between rounds: in force for the
		// next round's first page.
		for range 12 {
			doc := incs[rng.IntN(docs)].doc
			if rng.IntN(4) == 0 {
				_, err := st.MarkDeleted(ctx, "acme", doc)
				require.NoError(t, err)
				m.deleted[doc] = true
				continue
			}
			acl := randomACL()
			if _, err := st.SetACL(ctx, "acme", doc, acl); err == nil {
				m.acl[doc] = acl
			}
		}
	}
	require.Greater(t, checked, rounds*len(toks), "paths must actually be paged")
}
