//go:build integration

package query_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

type uiSource struct {
	ID      string         `json:"id"`
	Title   string         `json:"title"`
	Version int64          `json:"version"`
	ACL     provenance.ACL `json:"acl"`
	Indexed *struct {
		Version  int64  `json:"version"`
		Text     string `json:"text"`
		Entities []struct {
			ID string `json:"id"`
		} `json:"entities"`
		Edges []struct {
			Relation string `json:"relation"`
		} `json:"edges"`
	} `json:"indexed"`
}

// TestUIRoutesAdmit checks the web UI's read routes against the admission
// rule: a document only bob may read is listed, opened, quoted and its
// entity's spellings shown to bob only; to alice it is the same 404 as an
// absent document and is not counted; a reader sees only its own part of an
// ACL; a cited version that is no longer indexed is refused; and the
// routes fail closed when the registry cannot be read.
func TestUIRoutesAdmit(t *testing.T) {
	f := newFixture(t)
	const doc = "SEC-1"
	text := "SEC-1: Quartz key leak\nThe quartz debug page printed the signing key. Bob rotated the key within an hour."
	units := []events.TextUnit{{ID: "s0", Text: "SEC-1: Quartz key leak", Start: 0, End: 22},
		{ID: "s1", Text: text[23:], Start: 23, End: len(text)}}
	announceApply(t, f.st, tenantAcme, doc, 1, provenance.ACL{Principals: []string{"bob"}}, store.Contributions{
		Title: "SEC-1: Quartz key leak", DocType: "incident", TextUnits: units,
		Entities: []store.EntityContribution{
			{ID: "incident:sec1", Type: "incident", Name: "SEC-1", TextUnits: []string{"s0"}},
			{ID: "tool:quartz", Type: "tool", Name: "Quartz debug page", TextUnits: []string{"s1"}},
		},
		Edges: []store.EdgeContribution{{Source: "incident:sec1", Relation: "involved", Target: "tool:quartz", Weight: 1, TextUnits: []string{"s1"}}},
	})

	var me struct {
		Principal string   `json:"principal"`
		Groups    []string `json:"groups"`
		Build     string   `json:"build"`
	}
	f.get("/v1/me", tokAlice, http.StatusOK, &me)
	require.Equal(t, "alice", me.Principal)
	require.Equal(t, []string{"oncall"}, me.Groups)
	require.NotEmpty(t, me.Build)
	code, _ := f.errorCode(http.MethodGet, "/v1/me", "", nil)
	require.Equal(t, http.StatusUnauthorized, code)

	list := func(token, q string) []string {
		var r struct{ Sources []uiSource }
		f.get("/v1/sources?q="+url.QueryEscape(q), token, http.StatusOK, &r)
		ids := []string{}
		for _, s := range r.Sources {
			ids = append(ids, s.ID)
		}
		return ids
	}
	require.Contains(t, list(tokBob, ""), doc)
	require.NotContains(t, list(tokAlice, ""), doc)
	require.Equal(t, []string{doc}, list(tokBob, "quartz"), "q matches the title")
	require.Empty(t, list(tokAlice, "quartz"), "nothing hidden is counted")
	require.NotContains(t, list(tokCarol, ""), doc, "another tenant's documents are not listed")

	// Pages: in id order, counted whole, only what the caller reads.
	type page struct {
		Sources              []uiSource
		Total, Limit, Offset int
	}
	pageOf := func(token, params string) (ids []string, p page) {
		f.get("/v1/sources?"+params, token, http.StatusOK, &p)
		ids = []string{}
		for _, s := range p.Sources {
			ids = append(ids, s.ID)
		}
		return ids, p
	}
	all, whole := pageOf(tokAlice, "limit=1000")
	require.Greater(t, len(all), 3, "the fixture's documents")
	require.True(t, slices.IsSorted(all))
	require.Equal(t, len(all), whole.Total)
	ids, p := pageOf(tokAlice, "")
	require.Equal(t, all[:min(50, len(all))], ids, "50 by default")
	require.Equal(t, page{Sources: p.Sources, Total: len(all), Limit: 50}, p)
	ids, p = pageOf(tokAlice, "limit=2&offset=1")
	require.Equal(t, all[1:3], ids)
	require.Equal(t, []int{len(all), 2, 1}, []int{p.Total, p.Limit, p.Offset})
	ids, p = pageOf(tokAlice, fmt.Sprintf("offset=%d", len(all)))
	require.Empty(t, ids)
	require.Equal(t, len(all), p.Total, "a page past the end still counts")
	ids, p = pageOf(tokAlice, "limit=0")
	require.Empty(t, ids)
	require.Equal(t, len(all), p.Total, "limit 0 counts only")
	_, p = pageOf(tokBob, "limit=0")
	require.Equal(t, len(list(tokBob, "")), p.Total)
	_, bobSearch := pageOf(tokBob, "q=quartz&limit=0")
	_, aliceSearch := pageOf(tokAlice, "q=quartz&limit=0")
	require.Equal(t, []int{1, 0}, []int{bobSearch.Total, aliceSearch.Total}, "nothing hidden is counted")
	for _, bad := range []string{"limit=1001", "limit=-1", "offset=x", "limit=1&limit=2"} {
		code, ecode := f.errorCode(http.MethodGet, "/v1/sources?"+bad, tokAlice, nil)
		require.Equal(t, []any{http.StatusBadRequest, "invalid_param"}, []any{code, ecode}, bad)
	}

	var s uiSource
	f.get("/v1/source?id="+doc, tokBob, http.StatusOK, &s)
	require.Equal(t, int64(1), s.Indexed.Version)
	require.Equal(t, provenance.ACL{Principals: []string{"bob"}}, s.ACL)
	require.Len(t, s.Indexed.Entities, 2)
	require.Equal(t, "involved", s.Indexed.Edges[0].Relation)
	require.Equal(t, "SEC-1: Quartz key leak "+text[23:], s.Indexed.Text)
	code, ecode := f.errorCode(http.MethodGet, "/v1/source?id="+doc, tokAlice, nil)
	require.Equal(t, []any{http.StatusNotFound, "not_found"}, []any{code, ecode})
	code2, ecode2 := f.errorCode(http.MethodGet, "/v1/source?id=NO-SUCH-DOC", tokAlice, nil)
	require.Equal(t, []any{code, ecode}, []any{code2, ecode2}, "unreadable and absent look the same")

	// A reader sees only its own groups of an ACL.
	var inc uiSource
	incident := list(tokAlice, "")[0]
	f.get("/v1/source?id="+url.QueryEscape(incident), tokAlice, http.StatusOK, &inc)
	if !inc.ACL.Public {
		require.Equal(t, []string{"oncall"}, inc.ACL.Groups, "alice does not see the sre group")
	}

	var tu struct {
		Title     string `json:"title"`
		TextUnit  string `json:"text_unit"`
		Sentences []struct {
			Text string `json:"text"`
		} `json:"sentences"`
		Highlight int `json:"highlight"`
	}
	f.get("/v1/textunit?doc=SEC-1&version=1&unit=s1&claim="+url.QueryEscape("SEC-1 involved the key rotation by Bob"), tokBob, http.StatusOK, &tu)
	require.Equal(t, "SEC-1: Quartz key leak", tu.Title)
	require.Len(t, tu.Sentences, 2)
	require.Equal(t, "Bob rotated the key within an hour.", tu.Sentences[tu.Highlight].Text)
	// Without a unit, the unit that best supports the claim.
	f.get("/v1/textunit?doc=SEC-1&version=1&claim="+url.QueryEscape("quartz debug page printed"), tokBob, http.StatusOK, &tu)
	require.Equal(t, "s1", tu.TextUnit)
	require.Equal(t, 0, tu.Highlight)
	code, _ = f.errorCode(http.MethodGet, "/v1/textunit?doc=SEC-1&version=1&unit=s1", tokAlice, nil)
	require.Equal(t, http.StatusNotFound, code)
	code, ecode = f.errorCode(http.MethodGet, "/v1/textunit?doc=SEC-1&version=2&unit=s1", tokBob, nil)
	require.Equal(t, []any{http.StatusNotFound, "version_not_indexed"}, []any{code, ecode})
	code, ecode = f.errorCode(http.MethodGet, "/v1/textunit?doc=SEC-1&version=x", tokBob, nil)
	require.Equal(t, []any{http.StatusBadRequest, "invalid_param"}, []any{code, ecode})

	var al struct {
		Entity  struct{ Name string } `json:"entity"`
		Aliases []string              `json:"aliases"`
	}
	f.get("/v1/aliases?id=tool:quartz", tokBob, http.StatusOK, &al)
	require.Equal(t, "Quartz debug page", al.Entity.Name)
	code, _ = f.errorCode(http.MethodGet, "/v1/aliases?id=tool:quartz", tokAlice, nil)
	require.Equal(t, http.StatusNotFound, code)

	// Fail closed when the registry cannot be read.
	f.st.fail.Store(true)
	for _, p := range []string{"/v1/source?id=SEC-1", "/v1/textunit?doc=SEC-1&unit=s1", "/v1/aliases?id=tool:quartz"} {
		code, _ := f.errorCode(http.MethodGet, p, tokBob, nil)
		require.Equal(t, http.StatusServiceUnavailable, code, p)
	}
	f.st.fail.Store(false)
}
