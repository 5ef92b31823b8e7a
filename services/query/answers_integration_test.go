//go:build integration

package query_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/query"
)

func ask(t *testing.T, f *fixture, token string, body map[string]any) query.QueryResponse {
	t.Helper()
	var r query.QueryResponse
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", token, body, &r))
	return r
}

func mapped(r query.QueryResponse) map[string]string {
	out := map[string]string{}
	for _, m := range r.Mapping {
		out[m.ID] = m.How
	}
	return out
}

// TestLocalMapsQuestionsWithoutExactNames: questions that name no entity
// exactly still reach the right entities and passages: a misspelt name, a
// name with its words in another order, and no name at all (the entities of
// the passages that answer).
func TestLocalMapsQuestionsWithoutExactNames(t *testing.T) {
	f := newFixture(t)

	r := ask(t, f, tokAlice, map[string]any{"mode": "local", "question": "Why did the renewal webhook of the cert manger time out?"})
	require.Equal(t, query.MappedFuzzy, mapped(r)["component:certmanager"], "a close spelling maps: %v", r.Mapping)
	require.Contains(t, r.Answer, "[INC-112 v1 #", "the passage that answers is quoted")
	require.Contains(t, r.Answer, "renewal webhook timed out")

	r = ask(t, f, tokAlice, map[string]any{"mode": "local", "question": "Which incidents had a certificate expired?"})
	require.Equal(t, query.MappedFuzzy, mapped(r)["failure_mode:expiredcertificate"], "word order is free: %v", r.Mapping)
	require.Contains(t, r.Answer, "failed because of expired certificate", "relations read as words")

	r = ask(t, f, tokAlice, map[string]any{"mode": "local", "question": "What timed out so that the internal mTLS certificate expired?"})
	require.NotContains(t, r.Answer, "Nothing")
	require.Equal(t, "INC-112", r.Citations[0].DocID, "the passage that answers is cited first: %s", r.Answer)
	require.True(t, strings.HasPrefix(r.Answer, "INC-112 (Mar 14): the Cert Manager renewal webhook timed out"), r.Answer)
	require.Equal(t, query.MappedPassage, mapped(r)["component:certmanager"], "entities of the answering passage are mapped: %v", r.Mapping)

	// Digits must agree: INC-121 is not INC-112.
	r = ask(t, f, tokAlice, map[string]any{"mode": "local", "question": "What went wrong in INC-121?"})
	require.NotContains(t, mapped(r), "incident:inc112", "%v", r.Mapping)
	require.Contains(t, mapped(r), "incident:inc121")

	// The budget shares are configurable and hold.
	g := f.withConfig(query.Config{LocalShares: query.LocalShares{TextUnits: 1}})
	r = ask(t, g, tokAlice, map[string]any{"mode": "local", "question": "Why did the cert manger webhook time out?", "budget_tokens": 60})
	unitTokens := 0
	for _, it := range r.Context {
		if it.Kind == query.KindTextUnit {
			unitTokens += it.Tokens
		}
	}
	require.Greater(t, 2*unitTokens, r.UsedTokens, "text units hold the budget: %+v", r.Context)
	require.LessOrEqual(t, r.UsedTokens, 60)
	_, err := query.New(query.Config{LocalShares: query.LocalShares{TextUnits: 0.9, Reports: 0.5}}, f.st, mustAuth(t), nil, nil)
	require.ErrorContains(t, err, "LocalShares")
}

func mustAuth(t *testing.T) *auth.Authenticator {
	t.Helper()
	a, err := newAuth()
	require.NoError(t, err)
	return a
}

// TestAutoRoutesAndSaysWhy: counting questions go to exact aggregates,
// corpus-wide ones to global, the rest to local; the response says why,
// and the counts are /v1/aggregate's.
func TestAutoRoutesAndSaysWhy(t *testing.T) {
	f := newFixture(t)
	for q, want := range map[string]string{
		"How many incidents per failure mode?":                 query.ModeAggregate,
		"What is the most common failure?":                     query.ModeAggregate,
		"What are the recurring root causes of our incidents?": query.ModeGlobal,
		"Why did search results go empty?":                     query.ModeLocal,
		"What was caused by the DNS credentials rotation?":     query.ModeLocal,
	} {
		r := ask(t, f, tokAlice, map[string]any{"mode": "auto", "question": q})
		require.Equal(t, want, r.RoutedTo, q)
		require.Equal(t, want, r.Mode, q)
		require.NotEmpty(t, r.Route, "auto says why it chose %s", want)
	}
	r := ask(t, f, tokAlice, map[string]any{"mode": "auto", "question": "How many incidents per failure mode?"})
	require.Contains(t, r.Route, "how many")
	requireCountsEqualAggregate(t, f, tokAlice, r)
	require.Contains(t, r.Answer, "1. expired certificate (failure_mode): 3 documents [INC-101, INC-112, INC-121]")
}

// requireCountsEqualAggregate checks every theme of a global (or counting)
// answer against GET /v1/aggregate for its subject type and relation, and
// that the answer states each count.
func requireCountsEqualAggregate(t *testing.T, f *fixture, token string, r query.QueryResponse) {
	t.Helper()
	require.NotNil(t, r.Global)
	require.NotEmpty(t, r.Global.Themes, r.Answer)
	aggs := map[string]aggResp{}
	for i, th := range r.Global.Themes {
		key := th.SubjectType + "|" + th.Relation
		agg, ok := aggs[key]
		if !ok {
			f.get(fmt.Sprintf("/v1/aggregate?type=%s&rel=%s", th.SubjectType, th.Relation), token, http.StatusOK, &agg)
			aggs[key] = agg
		}
		found := false
		for _, g := range agg.Groups {
			if g.Target.ID == th.Target.ID {
				found = true
				require.Equal(t, g.Count, th.Count, "%s", th.Target.Name)
				var names []string
				for _, m := range g.Members {
					names = append(names, m.Name)
				}
				require.Equal(t, names, th.Members)
			}
		}
		require.True(t, found, "theme %s is no group of /v1/aggregate", th.Target.ID)
		if i < 12 {
			require.Contains(t, r.Answer, fmt.Sprintf("%d. %s (%s): %d document", i+1, th.Target.Name, th.Target.Type, th.Count))
		}
	}
}

// TestGlobalCountsEqualAggregate: every theme the global answer names has
// the exact count /v1/aggregate returns, for each caller (after a
// revocation too), ranked by count, with the coverage line; and the
// response counts no report the caller may not read.
func TestGlobalCountsEqualAggregate(t *testing.T) {
	f := newFixture(t)
	q := map[string]any{"mode": "global", "question": "What are the recurring root causes of our incidents?"}
	r := ask(t, f, tokAlice, q)
	requireCountsEqualAggregate(t, f, tokAlice, r)
	require.Contains(t, r.Answer, "Coverage: 10 of 10 incidents have a detected cause; 0 have none.")
	for i := 1; i < len(r.Global.Themes); i++ {
		require.GreaterOrEqual(t, r.Global.Themes[i-1].Count, r.Global.Themes[i].Count, "ranked by exact count")
	}
	var raw map[string]any
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokAlice, q, &raw))
	require.NotContains(t, raw["global"], "reports_considered")
	require.NotContains(t, raw["global"], "reports_dropped")
	require.Contains(t, raw["global"], "themes")

	_, err := f.st.SetACL(t.Context(), tenantAcme, "INC-101", provenance.ACL{Groups: []string{"sre"}})
	require.NoError(t, err)
	r = ask(t, f, tokAlice, q)
	requireCountsEqualAggregate(t, f, tokAlice, r)
	require.Contains(t, r.Answer, "expired certificate (failure_mode): 2 documents [INC-112, INC-121]")
	require.Contains(t, r.Answer, "Coverage: 9 of 9 incidents")
	require.NotContains(t, r.Answer, "INC-101")
	r = ask(t, f, tokBob, q)
	requireCountsEqualAggregate(t, f, tokBob, r)
	require.Contains(t, r.Answer, "expired certificate (failure_mode): 3 documents")
}

// TestDriftTreeOffline: a DRIFT answer has a primer, follow-ups built from
// its entities and themes, a local search per follow-up with citations,
// and one merged answer; a caller who may not read a document sees none of
// its content anywhere in the tree.
func TestDriftTreeOffline(t *testing.T) {
	f := newFixture(t)
	q := map[string]any{"mode": "drift", "question": "Why do certificates expire and what breaks when they do?"}
	r := ask(t, f, tokAlice, q)
	require.Equal(t, query.ModeDrift, r.Mode)
	require.NotNil(t, r.Drift)
	require.NotEmpty(t, r.Drift.Primer.Reports, "the primer reads community reports")
	require.Equal(t, "offline", r.Drift.FollowUpsBy)
	require.GreaterOrEqual(t, len(r.Drift.FollowUps), 2)
	for _, b := range r.Drift.FollowUps {
		require.NotEmpty(t, b.Citations, "branch %q cites", b.Question)
		require.NotEmpty(t, b.Answer)
		require.NotEmpty(t, b.From)
	}
	require.Contains(t, r.Answer, "expired")
	require.Contains(t, r.Answer, "[INC-")
	require.Contains(t, r.Answer, "Follow-up: ")
	t.Logf("answer:\n%s", r.Answer)
	for _, b := range r.Drift.FollowUps {
		t.Logf("branch %q (from %s): %d citations", b.Question, b.From, len(b.Citations))
	}
	cited := map[string]bool{}
	for _, c := range r.Citations {
		cited[c.DocID] = true
	}
	require.True(t, cited["INC-101"] && cited["INC-112"] && cited["INC-121"], "%v", cited)

	// INC-101 becomes sre-only: alice (oncall) sees nothing of it anywhere
	// in the tree, not its id, not its citations, not its sentences.
	_, err := f.st.SetACL(t.Context(), tenantAcme, "INC-101", provenance.ACL{Groups: []string{"sre"}})
	require.NoError(t, err)
	var raw json.RawMessage
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokAlice, q, &raw))
	body := string(raw)
	for _, secret := range []string{"INC-101", "inc101", "public ingress", "DNS credentials", "checkout-api"} {
		require.NotContains(t, body, secret, "alice's DRIFT tree shows %q of INC-101", secret)
	}
	require.NoError(t, json.Unmarshal(raw, &r))
	require.NotEmpty(t, r.Drift.FollowUps, "the tree is still built from what alice may read")
	// bob (sre) still reads it.
	b := ask(t, f, tokBob, q)
	require.Contains(t, fmt.Sprint(b.Citations), "INC-101")
}

// TestLLMAnswerCitesItsContext: with an LLM configured, the LLM writes the
// local answer from the context; a sentence citing nothing or only numbers
// outside the context is dropped; an unusable answer falls back to the
// extractive one.
func TestLLMAnswerCitesItsContext(t *testing.T) {
	base := newFixture(t)
	var prompts []string
	srv := llmtest.New(func(req llmtest.Request) (string, bool) {
		if !strings.Contains(string(req.ResponseFormat), "local_answer") {
			return "", false
		}
		prompts = append(prompts, req.Prompt())
		return `{"sentences":[
		 {"text":"The renewal webhook timed out, so the certificate of search-api expired.","citations":[1,2]},
		 {"text":"An invented cause.","citations":[999]},
		 {"text":"An uncited claim.","citations":[]}]}`, true
	})
	t.Cleanup(srv.Close)
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "test", MaxRetries: -1})
	require.NoError(t, err)
	f := base.withConfig(query.Config{LLM: client})
	q := map[string]any{"mode": "local", "question": "Why did the certificate of search-api expire?"}
	r := ask(t, f, tokAlice, q)
	require.Equal(t, "llm:test", r.AnswerBy)
	require.Contains(t, r.Answer, "The renewal webhook timed out, so the certificate of search-api expired. [")
	require.NotContains(t, r.Answer, "invented")
	require.NotContains(t, r.Answer, "uncited")
	require.NotEmpty(t, r.Citations)
	allowed := map[provenance.SourceRef]bool{}
	for _, it := range r.Context[:2] {
		for _, c := range it.Citations {
			allowed[c] = true
		}
	}
	for _, c := range r.Citations {
		require.True(t, allowed[c], "citation %v is not of the cited items", c)
	}
	require.Len(t, prompts, 1)
	require.Contains(t, prompts[0], "[1] ")

	srv.Fail(llmtest.InvalidSchema, 1)
	r = ask(t, f, tokAlice, q)
	require.Contains(t, r.AnswerBy, "offline")
	require.Contains(t, r.Answer, "[INC-112 v1 #")
}

// TestGlobalAnswerIsStable: the same question by the same caller over the
// same graph gets the same global answer, down to the reports each theme
// names as evidence (they were picked in a map's order): with several
// reports finding one theme, the best rated come first.
func TestGlobalAnswerIsStable(t *testing.T) {
	f := newFixture(t)
	q := map[string]any{"mode": "global", "question": "What are the recurring root causes of our incidents?"}
	first := ask(t, f, tokAlice, q)
	require.NotEmpty(t, first.Global.Themes)
	th := first.Global.Themes[0]
	var agg struct {
		Groups []struct {
			Target  struct{ ID string } `json:"target"`
			Members []struct {
				ID        string                 `json:"id"`
				Citations []provenance.SourceRef `json:"citations"`
			} `json:"members"`
		} `json:"groups"`
	}
	f.get(fmt.Sprintf("/v1/aggregate?type=%s&rel=%s", th.SubjectType, th.Relation), tokAlice, http.StatusOK, &agg)
	var edge string
	var cites []provenance.SourceRef
	for _, g := range agg.Groups {
		if g.Target.ID == th.Target.ID {
			edge, cites = store.EdgeID(g.Members[0].ID, th.Relation, th.Target.ID), g.Members[0].Citations
		}
	}
	require.NotEmpty(t, edge)
	// Six more reports find the theme, rated 1 to 6.
	for i := range 6 {
		id := fmt.Sprintf("extra-%d", i)
		require.NoError(t, f.st.PutReport(t.Context(), tenantAcme, store.Report{ID: "r-" + id, Community: id, Level: 9,
			Title: "Extra " + id, Summary: "Another view.", Rating: float64(1 + i), Sources: cites, Writer: "test",
			Findings: []store.Finding{{Summary: "The theme again.", Explanation: "Stated.", Edges: []string{edge}, Citations: cites}}}))
	}
	first = ask(t, f, tokAlice, q)
	var named []string
	for _, th2 := range first.Global.Themes {
		if th2.Target.ID == th.Target.ID {
			named = th2.Reports
		}
	}
	require.Len(t, named, 3)
	for range 20 {
		r := ask(t, f, tokAlice, q)
		require.Equal(t, first.Answer, r.Answer)
		require.Equal(t, first.Global.Themes, r.Global.Themes)
	}
}
