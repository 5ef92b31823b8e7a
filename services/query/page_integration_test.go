//go:build integration

package query_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/stream/streamtest"
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

func ptr(n int) *int { return &n }

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
	} {
		status, code := f.errorCode(http.MethodGet, path, tokAlice, nil)
		require.Equal(t, http.StatusBadRequest, status, path)
		require.Equal(t, "invalid_param", code, path)
		require.Empty(t, cs.reset(), path)
	}
}
