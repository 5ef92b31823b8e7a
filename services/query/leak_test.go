package query_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/vector"
	vecembedded "github.com/kgstream/kgstream/pkg/vector/embedded"
	"github.com/kgstream/kgstream/services/query"
)

// leakModel is the test's own record of who may read what: the oracle every
// response is checked against, independent of the service's admission code.
type leakModel struct {
	acl     map[string]provenance.ACL
	deleted map[string]bool
	version map[string]int64 // registry version
}

func (m *leakModel) readable(c provenance.Caller, doc string) bool {
	if c.Tenant != "acme" {
		return c.Tenant == "other" && doc == "X-1" // the other tenant's one public document
	}
	a, ok := m.acl[doc]
	return ok && !m.deleted[doc] && a.Admits(c)
}

// TestNoLeaks: random ACLs over a few hundred documents, thousands of
// queries in every mode and route, revocations, deletions and announced
// edits interleaved; no response may name a document the caller cannot
// read, an entity only such documents support, or a report or community
// built on one (or on a superseded version).
//
// Basic mode searches a vector index holding every document's text unit
// with the ACL it had when indexed; revocations and deletions go to the
// registry ONLY, so the index's pre-filter lags them and only the query's
// re-admission of every hit keeps them out of answers.
func TestNoLeaks(t *testing.T) {
	const (
		docs     = 300
		queries  = 3000
		services = 150
		failures = 8
	)
	seed := uint64(20261201)
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d", seed)
	st := openStore(t)
	ctx := t.Context()
	vix, err := vecembedded.Open(filepath.Join(t.TempDir(), "vectors.db"), vecembedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, vix.Close()) })
	emb := embed.NewHashing(128)
	var vitems []vector.Item
	m := &leakModel{acl: map[string]provenance.ACL{}, deleted: map[string]bool{}, version: map[string]int64{}}
	groups := []string{"g0", "g1", "g2", "g3", "g4"}
	randomACL := func() provenance.ACL {
		// Mostly readable, so that derived artifacts (built on many
		// documents) are often admitted and the version rule is exercised.
		switch n := rng.IntN(10); {
		case n < 6:
			return provenance.ACL{Public: true}
		case n < 7:
			return provenance.ACL{Principals: []string{fmt.Sprintf("p%d", rng.IntN(4))}}
		default:
			return provenance.ACL{Groups: []string{groups[rng.IntN(len(groups))]}}
		}
	}
	svc := func(i int) string { return fmt.Sprintf("service:svc%d", i) }
	fm := func(i int) string { return fmt.Sprintf("failure_mode:fm%d", i) }
	for i := 0; i < docs; i++ {
		doc := fmt.Sprintf("INC-%d", i)
		acl := randomACL()
		_, err := st.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: 1, ACL: acl})
		require.NoError(t, err)
		m.acl[doc], m.version[doc] = acl, 1
		inc := fmt.Sprintf("incident:inc%d", i)
		unit := doc + "-u0"
		ents := []store.EntityContribution{{ID: inc, Type: "incident", Name: doc, NameRank: 2, TextUnits: []string{unit}}}
		var edges []store.EdgeContribution
		seen := map[string]bool{}
		for k := 0; k < 1+rng.IntN(3); k++ {
			s := svc(rng.IntN(services))
			if seen[s] {
				continue
			}
			seen[s] = true
			ents = append(ents, store.EntityContribution{ID: s, Type: "service", Name: strings.TrimPrefix(s, "service:"), NameRank: 2, TextUnits: []string{unit}})
			edges = append(edges, store.EdgeContribution{Source: inc, Relation: "affected", Target: s, Weight: 1, TextUnits: []string{unit}})
		}
		f := fm(rng.IntN(failures))
		ents = append(ents, store.EntityContribution{ID: f, Type: "failure_mode", Name: strings.TrimPrefix(f, "failure_mode:"), NameRank: 2, TextUnits: []string{unit}})
		edges = append(edges, store.EdgeContribution{Source: inc, Relation: "failure", Target: f, Weight: 1, TextUnits: []string{unit}})
		var names []string
		for s := range seen {
			names = append(names, strings.TrimPrefix(s, "service:"))
		}
		sort.Strings(names)
		text := fmt.Sprintf("%s: %s affected by %s", doc, strings.Join(names, " and "), strings.TrimPrefix(f, "failure_mode:"))
		_, err = st.Apply(ctx, "acme", doc, 1, store.Contributions{
			TextUnits: []events.TextUnit{{ID: unit, Text: text}}, Entities: ents, Edges: edges})
		require.NoError(t, err)
		vitems = append(vitems, vector.Item{ID: doc + "#" + unit, Kind: vector.KindTextUnit, Text: text,
			Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: doc, Version: 1, TextUnit: unit}, ACL: acl}}})
	}
	// Another tenant with the same entity names: never visible to acme.
	texts := make([]string, len(vitems))
	for i, it := range vitems {
		texts[i] = it.Text
	}
	vecs, err := emb.Embed(ctx, texts)
	require.NoError(t, err)
	for i := range vitems {
		vitems[i].Vector = vecs[i]
	}
	require.NoError(t, vix.Upsert(ctx, "acme", vitems))
	// The other tenant's passage, with the same words: never acme's.
	xv, err := emb.Embed(ctx, []string{"X-1: svc0 affected by fm0"})
	require.NoError(t, err)
	require.NoError(t, vix.Upsert(ctx, "other", []vector.Item{{ID: "X-1#u0", Kind: vector.KindTextUnit, Text: "X-1: svc0 affected by fm0", Vector: xv[0],
		Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: "X-1", Version: 1, TextUnit: "u0"}, ACL: provenance.PublicACL()}}}}))
	_, err = st.Announce(ctx, "other", store.Announcement{DocID: "X-1", Version: 1, ACL: provenance.PublicACL()})
	require.NoError(t, err)
	_, err = st.Apply(ctx, "other", "X-1", 1, store.Contributions{Entities: []store.EntityContribution{
		{ID: svc(0), Type: "service", Name: "svc0", NameRank: 2}, {ID: "incident:x1", Type: "incident", Name: "X-1", NameRank: 2}},
		Edges: []store.EdgeContribution{{Source: "incident:x1", Relation: "affected", Target: svc(0), Weight: 1}}})
	require.NoError(t, err)

	// Communities and reports as the clusterer and reporter build them: a
	// random partition; sources = every support of a member or of an edge
	// leaving a member.
	g, err := st.Snapshot(ctx, "acme")
	require.NoError(t, err)
	adj := map[string][]store.Edge{}
	for _, e := range g.Edges {
		adj[e.Source] = append(adj[e.Source], e)
	}
	ents := map[string]store.Entity{}
	for _, e := range g.Entities {
		ents[e.ID] = e
	}
	const ncomm = 120
	members := make([][]string, ncomm)
	for _, e := range g.Entities {
		k := rng.IntN(ncomm)
		members[k] = append(members[k], e.ID)
	}
	var comms []store.Community
	for k := range members {
		sort.Strings(members[k])
		set := map[provenance.SourceRef]bool{}
		var findings []store.Finding
		for _, mem := range members[k] {
			for _, f := range ents[mem].Sources {
				set[provenance.SourceRef{DocID: f.DocID, Version: f.Version}] = true
			}
			var cites []provenance.SourceRef
			var eids []string
			for _, e := range adj[mem] {
				eids = append(eids, e.ID)
				for _, s := range e.Supports {
					set[provenance.SourceRef{DocID: s.DocID, Version: s.Version}] = true
					cites = append(cites, provenance.SourceRef{DocID: s.DocID, Version: s.Version})
				}
			}
			if len(eids) > 0 {
				findings = append(findings, store.Finding{Summary: mem + " links", Explanation: "x", Entities: []string{mem}, Edges: eids, Citations: cites})
			}
		}
		var srcs []provenance.SourceRef
		for r := range set {
			srcs = append(srcs, r)
		}
		sort.Slice(srcs, func(i, j int) bool { return srcs[i].DocID < srcs[j].DocID })
		id := fmt.Sprintf("c0-%02d", k)
		comms = append(comms, store.Community{ID: id, Level: 0, Members: members[k], MemberHash: id, Sources: srcs, Run: 1})
		require.NoError(t, st.PutReport(ctx, "acme", store.Report{ID: "r-" + id, Community: id, Level: 0, Title: id,
			Summary: "s", Findings: findings, Rating: 5, Sources: srcs, MemberHash: id, Writer: "test"}))
	}
	require.NoError(t, st.ReplaceCommunities(ctx, "acme", 1, comms))
	reportSources := map[string][]provenance.SourceRef{}
	for _, c := range comms {
		reportSources["r-"+c.ID] = c.Sources
		reportSources[c.ID] = c.Sources
	}
	// Entity support, for the entity oracle.
	support := map[string][]string{}
	for _, e := range g.Entities {
		for _, f := range e.Sources {
			support[e.ID] = append(support[e.ID], f.DocID)
		}
	}

	// Callers.
	var toks []auth.Token
	var callers []provenance.Caller
	for i := 0; i < 6; i++ {
		var gs []string
		for _, gr := range groups {
			if rng.IntN(3) != 0 {
				gs = append(gs, gr)
			}
		}
		c := provenance.Caller{Tenant: "acme", Principal: fmt.Sprintf("p%d", i), Groups: gs}
		callers = append(callers, c)
		toks = append(toks, auth.Token{Token: fmt.Sprintf("tok%d", i), Tenant: c.Tenant, Principal: c.Principal, Groups: gs})
	}
	callers = append(callers, provenance.Caller{Tenant: "other", Principal: "p0", Groups: groups})
	toks = append(toks, auth.Token{Token: "tok6", Tenant: "other", Principal: "p0", Groups: groups})
	a, err := auth.New(toks, nil)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	svcObj, err := query.New(query.Config{Vectors: vix, Embedder: emb}, st, a, nil, reg)
	require.NoError(t, err)
	srv := httptest.NewServer(svcObj.Handler())
	t.Cleanup(srv.Close)

	// check walks a JSON response and verifies every reference in it.
	var checked, refs, derived, basicQueries, basicPassages, driftQueries, driftBranches int
	var check func(c provenance.Caller, what string, v any)
	check = func(c provenance.Caller, what string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if d, ok := x["doc_id"].(string); ok {
				refs++
				require.True(t, m.readable(c, d), "%s: cites %s, which %s may not read", what, d, c.Principal)
			}
			if id, ok := x["id"].(string); ok {
				switch {
				case strings.Contains(id, ":") && !strings.Contains(id, "|"):
					ok := c.Tenant == "other" && (id == "service:svc0" || id == "incident:x1")
					for _, d := range support[id] {
						ok = ok || m.readable(c, d)
					}
					require.True(t, ok, "%s: shows entity %s that no readable document supports", what, id)
				case strings.HasPrefix(id, "r-c0-") || strings.HasPrefix(id, "c0-"):
					derived++
					for _, s := range reportSources[id] {
						require.True(t, m.readable(c, s.DocID) && m.version[s.DocID] == s.Version,
							"%s: shows %s built on %s@%d, not admitted for %s", what, id, s.DocID, s.Version, c.Principal)
					}
				}
			}
			if rid, ok := x["report_id"].(string); ok && rid != "" {
				for _, s := range reportSources[rid] {
					require.True(t, m.readable(c, s.DocID) && m.version[s.DocID] == s.Version, "%s: links report %s", what, rid)
				}
			}
			for _, vv := range x {
				check(c, what, vv)
			}
		case []any:
			for _, vv := range x {
				check(c, what, vv)
			}
		case string:
			// Answers are text: no document id the caller may not read.
			if strings.Contains(x, "INC-") {
				for _, w := range strings.FieldsFunc(x, func(r rune) bool {
					return r == ' ' || r == ',' || r == '[' || r == ']' || r == '\n' || r == '.' || r == ':'
				}) {
					if _, known := m.acl[w]; known && strings.HasPrefix(w, "INC-") {
						require.True(t, m.readable(c, w), "%s: text names %s: %q", what, w, truncateText(x))
					}
				}
			}
		}
	}
	do := func(ci int, method, path string, body any) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, srv.URL+path, rd)
		req.Header.Set("Authorization", "Bearer "+toks[ci].Token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		require.Less(t, resp.StatusCode, 500, "%s %s: %v", method, path, out)
		check(callers[ci], method+" "+path, out)
		checked++
		if o, ok := out.(map[string]any); ok && o["mode"] == "basic" {
			basicQueries++
			b := o["basic"].(map[string]any)
			basicPassages += int(b["used"].(float64))
			require.Equal(t, []string{"used"}, keys(b), "basic stats count admitted material only")
		}
		if o, ok := out.(map[string]any); ok && o["global"] != nil {
			g := o["global"].(map[string]any)
			require.NotContains(t, g, "reports_considered")
			require.NotContains(t, g, "reports_dropped")
		}
		if o, ok := out.(map[string]any); ok && o["mode"] == "drift" {
			driftQueries++
			driftBranches += len(o["drift"].(map[string]any)["follow_ups"].([]any))
		}
	}
	for q := 0; q < queries; q++ {
		if q%50 == 0 && q > 0 {
			// Revoke, delete or announce an edit (without applying it): all
			// must be in force for the very next request.
			doc := fmt.Sprintf("INC-%d", rng.IntN(docs))
			switch rng.IntN(3) {
			case 0:
				acl := randomACL()
				_, err := st.SetACL(ctx, "acme", doc, acl)
				if err == nil {
					m.acl[doc] = acl
				}
			case 1:
				if s, err := st.MarkDeleted(ctx, "acme", doc); err == nil {
					m.deleted[doc], m.version[doc] = true, s.Version
				}
			case 2:
				if !m.deleted[doc] {
					s, err := st.Announce(ctx, "acme", store.Announcement{DocID: doc, ACL: m.acl[doc]})
					require.NoError(t, err)
					m.version[doc] = s.Version
				}
			}
		}
		ci := rng.IntN(len(callers))
		switch rng.IntN(13) {
		case 0:
			do(ci, "GET", fmt.Sprintf("/v1/paths?start=%s&rels=~affected,failure", url.QueryEscape(svc(rng.IntN(services)))), nil)
		case 1:
			do(ci, "GET", "/v1/aggregate?type=incident&rel=failure", nil)
		case 2:
			do(ci, "GET", "/v1/aggregate?type=incident&rel=affected", nil)
		case 3:
			do(ci, "GET", "/v1/entities?q=svc&limit=100", nil)
		case 4:
			do(ci, "GET", "/v1/entities/service/"+fmt.Sprintf("svc%d", rng.IntN(services)), nil)
		case 5:
			do(ci, "GET", "/v1/communities", nil)
		case 6:
			do(ci, "GET", fmt.Sprintf("/v1/reports/r-c0-%02d", rng.IntN(ncomm)), nil)
		case 7:
			do(ci, "POST", "/v1/query", map[string]any{"mode": "local",
				"question": fmt.Sprintf("what happened to svc%d and fm%d", rng.IntN(services), rng.IntN(failures))})
		case 8:
			do(ci, "POST", "/v1/query", map[string]any{"mode": "global", "question": "What are the recurring root causes?"})
		case 9:
			do(ci, "POST", "/v1/query", map[string]any{"mode": "basic",
				"question": fmt.Sprintf("svc%d affected by fm%d", rng.IntN(services), rng.IntN(failures))})
		case 10:
			do(ci, "POST", "/v1/query", map[string]any{"mode": "drift",
				"question": fmt.Sprintf("why was svc%d affected by fm%d", rng.IntN(services), rng.IntN(failures))})
		case 11:
			do(ci, "POST", "/v1/query", map[string]any{"mode": "auto",
				"question": fmt.Sprintf("How many incidents per failure mode involve svc%d?", rng.IntN(services))})
		case 12:
			do(ci, "POST", "/v1/query", map[string]any{"mode": "auto",
				"question": fmt.Sprintf("what went wrong with INC-%d and svc%d", rng.IntN(docs), rng.IntN(services))})
		}
	}
	t.Logf("%d queries checked, %d document references and %d reports or communities shown verified", checked, refs, derived)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	basicDropped := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "kgstream_query_readmission_drops_total" {
			basicDropped = mf.Metric[0].Counter.GetValue()
		}
	}
	t.Logf("%d basic queries: %d passages shown, %.0f hits the index admitted but the registry refused", basicQueries, basicPassages, basicDropped)
	t.Logf("%d DRIFT queries, %d follow-up branches checked", driftQueries, driftBranches)
	require.Equal(t, queries, checked)
	require.Greater(t, refs, queries, "the responses must actually cite documents")
	require.Greater(t, derived, queries/10, "reports and communities must actually be shown, or their rule is not exercised")
	require.Greater(t, basicPassages, basicQueries, "basic answers must actually show passages")
	require.Greater(t, basicDropped, 0.0, "the index's stale ACLs must actually be caught by re-admission")
	require.Greater(t, driftBranches, driftQueries, "DRIFT trees must actually have follow-ups, or their admission is not exercised")
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func truncateText(s string) string {
	if len(s) > 200 {
		return s[:200]
	}
	return s
}
