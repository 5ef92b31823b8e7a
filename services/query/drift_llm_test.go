package query_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/query"
)

// driftDoc is one postmortem of the DRIFT graph.
type driftDoc struct {
	id, text string
	acl      provenance.ACL
	entities []store.EntityContribution // TextUnits filled from the names
	edges    [][3]string                // source, relation, target
}

// Words only SECRET-9 (readable by sre, not by oncall) holds.
var driftSecrets = []string{"SECRET-9", "zebra", "halted"}

// loadDriftGraph builds a small graph of three postmortems in tenant acme:
// INC-1 and INC-2 readable by oncall and sre, SECRET-9 by sre only, the
// expired-certificate failure mode supported by INC-1 and SECRET-9; one
// community report on INC-1 and INC-2, one on SECRET-9.
func loadDriftGraph(t *testing.T, st query.Stores) {
	t.Helper()
	ent := func(id, typ, name string) store.EntityContribution {
		return store.EntityContribution{ID: id, Type: typ, Name: name, NameRank: 2}
	}
	docs := []driftDoc{
		{id: "INC-1", acl: incidentACL(),
			text: "INC-1: the certificate of checkout expired. The renewal job of cert-manager had failed silently. Checkout answered TLS errors for two hours.",
			entities: []store.EntityContribution{ent("incident:inc-1", "incident", "INC-1"), ent("service:checkout", "service", "checkout"),
				ent("component:cert-manager", "component", "cert-manager"), ent("failure_mode:expired-certificate", "failure_mode", "expired certificate")},
			edges: [][3]string{{"incident:inc-1", "affected", "service:checkout"}, {"incident:inc-1", "involved", "component:cert-manager"},
				{"incident:inc-1", "failure", "failure_mode:expired-certificate"}}},
		{id: "INC-2", acl: incidentACL(),
			text: "INC-2: search answered empty results. A resolver change broke DNS for search. Search recovered when the change was reverted.",
			entities: []store.EntityContribution{ent("incident:inc-2", "incident", "INC-2"), ent("service:search", "service", "search"),
				ent("failure_mode:dns-failure", "failure_mode", "DNS failure")},
			edges: [][3]string{{"incident:inc-2", "affected", "service:search"}, {"incident:inc-2", "failure", "failure_mode:dns-failure"}}},
		{id: "SECRET-9", acl: provenance.ACL{Groups: []string{"sre"}},
			text: "SECRET-9: the vault rotation of payments failed. The zebra credential expired and payments halted. The certificate of payments expired too.",
			entities: []store.EntityContribution{ent("incident:secret-9", "incident", "SECRET-9"), ent("service:payments", "service", "payments"),
				ent("component:vault", "component", "vault"), ent("failure_mode:expired-certificate", "failure_mode", "expired certificate")},
			edges: [][3]string{{"incident:secret-9", "affected", "service:payments"}, {"incident:secret-9", "involved", "component:vault"},
				{"incident:secret-9", "failure", "failure_mode:expired-certificate"}}},
	}
	for _, d := range docs {
		units := sentences(d.text)
		c := store.Contributions{Title: d.id, DocType: "incident", TextUnits: units}
		for _, e := range d.entities {
			e.TextUnits = unitsFor(units, e.Name)
			if e.Type == "incident" || e.Type == "failure_mode" {
				e.TextUnits = []string{units[0].ID, units[1].ID}
			}
			c.Entities = append(c.Entities, e)
		}
		for _, e := range d.edges {
			c.Edges = append(c.Edges, store.EdgeContribution{Source: e[0], Relation: e[1], Target: e[2], Weight: 1,
				TextUnits: []string{units[0].ID, units[1].ID}})
		}
		announceApply(t, st, tenantAcme, d.id, 1, d.acl, c)
	}
	ctx := t.Context()
	comms := []store.Community{
		{ID: "c0-a", Level: 0, MemberHash: "a", Run: 1, Sources: refs("INC-1", "INC-2"), Members: []string{"incident:inc-1",
			"service:checkout", "component:cert-manager", "failure_mode:expired-certificate", "incident:inc-2", "service:search", "failure_mode:dns-failure"}},
		{ID: "c0-b", Level: 0, MemberHash: "b", Run: 1, Sources: refs("SECRET-9"), Members: []string{"incident:secret-9", "service:payments", "component:vault"}},
	}
	require.NoError(t, st.PutReport(ctx, tenantAcme, store.Report{ID: "r-c0-a", Community: "c0-a", Level: 0, Rating: 6, MemberHash: "a",
		Writer: "test", Sources: refs("INC-1", "INC-2"), Title: "Certificates expire and DNS breaks",
		Summary: "Certificates expire when cert-manager renewal fails; a resolver change broke DNS for search.",
		Findings: []store.Finding{
			{Summary: "The checkout certificate expired.", Explanation: "x", Entities: []string{"failure_mode:expired-certificate", "service:checkout"},
				Citations: refs("INC-1")},
			{Summary: "DNS failed for search.", Explanation: "x", Entities: []string{"failure_mode:dns-failure"}, Citations: refs("INC-2")}}}))
	require.NoError(t, st.PutReport(ctx, tenantAcme, store.Report{ID: "r-c0-b", Community: "c0-b", Level: 0, Rating: 9, MemberHash: "b",
		Writer: "test", Sources: refs("SECRET-9"), Title: "Vault rotation: certificates expire",
		Summary: "Certificates expire with the zebra credential when the vault rotation fails; payments halted.",
		Findings: []store.Finding{{Summary: "The zebra credential expired.", Explanation: "x", Entities: []string{"component:vault"},
			Citations: refs("SECRET-9")}}}))
	require.NoError(t, st.ReplaceCommunities(ctx, tenantAcme, 1, comms))
}

// driftLLMServer answers the DRIFT steps by their structured-output name:
// follow-up questions (blanks, a duplicate and more than asked for among
// them), and answers that cite item 1, an unknown item and nothing.
type driftLLMServer struct {
	*llmtest.Server
	garbageAnswers atomic.Bool // answer steps reply JSON of another shape
	mu             sync.Mutex
	steps          []string // the schema name of every answered request
}

// driftFollowUps is what the server proposes; the service keeps the first
// three distinct non-blank ones.
var driftFollowUps = []string{"  Why did the certificate of checkout expire?  ", "", "What failed in the vault rotation of payments?",
	"why did the certificate of checkout expire?", "How did DNS break for search?", "Why did cert-manager fail?"}

var wantBranches = []string{"Why did the certificate of checkout expire?", "What failed in the vault rotation of payments?",
	"How did DNS break for search?"}

func newDriftLLMServer(t *testing.T) *driftLLMServer {
	d := &driftLLMServer{}
	d.Server = llmtest.New(func(req llmtest.Request) (string, bool) {
		var rf struct {
			JSONSchema struct {
				Name string `json:"name"`
			} `json:"json_schema"`
		}
		if json.Unmarshal(req.ResponseFormat, &rf) != nil {
			return "", false
		}
		d.mu.Lock()
		d.steps = append(d.steps, rf.JSONSchema.Name)
		d.mu.Unlock()
		switch rf.JSONSchema.Name {
		case "drift_follow_ups":
			b, _ := json.Marshal(map[string][]string{"follow_ups": driftFollowUps})
			return string(b), true
		case "local_answer", "drift_answer":
			if d.garbageAnswers.Load() {
				return `{"sentences":"not a list"}`, true
			}
			return `{"sentences":[
			 {"text":"Item one answers it.","citations":[1]},
			 {"text":"An invented cause.","citations":[999]},
			 {"text":"An uncited claim.","citations":[]}]}`, true
		}
		return "", false
	})
	t.Cleanup(d.Close)
	return d
}

// Steps returns the schema name of every answered request, in order.
func (d *driftLLMServer) Steps() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.steps...)
}

// itemOneDoc is the document the prompt names for context item 1.
var itemOneDoc = regexp.MustCompile(`\n\[1\] \([a-z ]+ from ([A-Z0-9-]+)\)`)

// requireNoGoroutineLeak registers a check, run after every later cleanup
// (servers, stores), that the goroutines are back to what they were.
func requireNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
}

func newDriftLLMFixture(t *testing.T, srv *llmtest.Server, cfg llm.Config) *fixture {
	st := openStore(t)
	loadDriftGraph(t, st)
	cfg.BaseURL, cfg.Model = srv.URL(), "test"
	client, err := llm.New(cfg)
	require.NoError(t, err)
	base := &fixture{t: t, st: &failingStores{Stores: st}}
	return base.withConfig(query.Config{LLM: client})
}

// askDrift posts a query and requires 200.
func askDrift(t *testing.T, f *fixture, token string, body map[string]any) query.QueryResponse {
	t.Helper()
	var r query.QueryResponse
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", token, body, &r))
	return r
}

const driftQuestion = "Why do certificates expire?"

// TestDriftLLMFollowUpsAdmittedAndCited: with an LLM, DRIFT asks it for
// follow-up questions from the admitted primer reports and searches
// exactly the questions it returned (trimmed, blanks and duplicates
// dropped, at most DriftFollowUps); every branch's answer and the merged
// one are the LLM's, keeping only sentences that cite a context item, and
// the response cites only the cited items. Nothing of a document the
// caller cannot read reaches any prompt, though the LLM asks about it;
// a caller who may read it does see it in the prompts.
func TestDriftLLMFollowUpsAdmittedAndCited(t *testing.T) {
	requireNoGoroutineLeak(t)
	srv := newDriftLLMServer(t)
	f := newDriftLLMFixture(t, srv.Server, llm.Config{MaxRetries: -1})
	q := map[string]any{"mode": "drift", "question": driftQuestion}
	var raw json.RawMessage
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokAlice, q, &raw))
	var r query.QueryResponse
	require.NoError(t, json.Unmarshal(raw, &r))
	t.Logf("answer:\n%s", r.Answer)

	// (a) The primer asks for follow-ups; the branches are its questions.
	calls := srv.Calls()
	require.Equal(t, []string{"drift_follow_ups", "local_answer", "local_answer", "local_answer", "drift_answer"}, srv.Steps(),
		"one follow-up call, one answer per branch, one merge (the question's own search asks nothing)")
	fu := calls[0]
	require.Contains(t, fu.Request.Messages[0].Content, "follow-up questions")
	require.Contains(t, fu.Prompt, "Question: "+driftQuestion)
	require.Contains(t, fu.Prompt, "[r-c0-a] Certificates expire and DNS breaks")
	require.Contains(t, fu.Prompt, "Write at most 3 follow-up questions.")
	require.Equal(t, []string{"r-c0-a"}, r.Drift.Primer.Reports)
	require.Equal(t, "llm:test", r.Drift.FollowUpsBy)
	require.False(t, r.Drift.LLMFallback)
	var got []string
	for _, b := range r.Drift.FollowUps {
		got = append(got, b.Question)
		require.Equal(t, "llm", b.From)
	}
	require.Equal(t, wantBranches, got)

	// (b) Admission: no prompt and no part of the response holds SECRET-9.
	for i, c := range calls {
		for _, m := range c.Request.Messages {
			for _, s := range driftSecrets {
				require.NotContains(t, m.Content, s, "prompt %d (%s) holds %q", i, srv.Steps()[i], s)
			}
		}
	}
	for _, s := range driftSecrets {
		require.NotContains(t, string(raw), s)
	}
	for i, b := range r.Drift.FollowUps {
		require.Contains(t, calls[i+1].Prompt, "Question: "+b.Question, "branch %d's prompt", i+1)
	}

	// (c) Every answer keeps only the sentences citing a context item and
	// cites only what those items cite.
	for i, b := range r.Drift.FollowUps {
		m := itemOneDoc.FindStringSubmatch(calls[i+1].Prompt)
		if m == nil {
			require.Empty(t, b.Citations, "branch %q has no context", b.Question)
			continue
		}
		require.Contains(t, b.Answer, "Item one answers it. [", "branch %q", b.Question)
		require.Contains(t, fmt.Sprint(b.Citations), m[1], "branch %q cites item 1's document", b.Question)
		for _, c := range b.Citations {
			require.Contains(t, []string{"INC-1", "INC-2"}, c.DocID, "branch %q", b.Question)
		}
	}
	require.Equal(t, "llm:test", r.AnswerBy)
	require.NotEmpty(t, r.Context)
	require.Contains(t, calls[4].Prompt, "[1] (text unit from "+r.Context[0].Citations[0].DocID+") "+r.Context[0].Text)
	require.Equal(t, r.Context[0].Citations, r.Citations, "the merged answer cites item 1 only")
	require.Contains(t, r.Answer, "Item one answers it. [")
	for _, a := range append([]string{r.Answer}, r.Drift.FollowUps[0].Answer, r.Drift.FollowUps[2].Answer) {
		require.NotContains(t, a, "invented")
		require.NotContains(t, a, "uncited")
	}

	// The oracle can fail: bob (sre) may read SECRET-9, and its report
	// reaches his prompts.
	srv.ResetCalls()
	b := askDrift(t, f, tokBob, q)
	require.Contains(t, b.Drift.Primer.Reports, "r-c0-b")
	reached := false
	for _, c := range srv.Calls() {
		reached = reached || strings.Contains(c.Prompt, "zebra")
	}
	require.True(t, reached, "bob's prompts hold SECRET-9's report")
}

// TestDriftLLMFailureDegradesOffline: an LLM answering 500s (retries
// exhausted), then malformed JSON, then answers of another shape: DRIFT
// still answers 200 with the offline tree and merged answer, says which
// step failed, asks the failing LLM nothing after the failure, counts one
// fallback per answer and leaves no goroutine behind.
func TestDriftLLMFailureDegradesOffline(t *testing.T) {
	requireNoGoroutineLeak(t)
	srv := newDriftLLMServer(t)
	f := newDriftLLMFixture(t, srv.Server, llm.Config{MaxRetries: 2, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	q := map[string]any{"mode": "drift", "question": driftQuestion}
	requireOffline := func(r query.QueryResponse, failedAt string) {
		t.Helper()
		require.Equal(t, "offline (LLM unusable)", r.AnswerBy)
		require.True(t, r.Drift.LLMFallback)
		require.Equal(t, failedAt, r.Drift.LLMFailedAt)
		require.NotEmpty(t, r.Drift.FollowUps)
		require.Contains(t, r.Answer, "[INC-1 v1 #")
		require.Contains(t, r.Answer, "Follow-up: ")
		require.NotContains(t, r.Answer, "Item one answers it.")
	}

	srv.Fail(llmtest.ServerError, 3)
	r := askDrift(t, f, tokAlice, q)
	requireOffline(r, "follow_ups")
	require.Equal(t, "offline", r.Drift.FollowUpsBy)
	for _, b := range r.Drift.FollowUps {
		require.NotEqual(t, "llm", b.From)
	}
	require.Len(t, srv.Calls(), 3, "the first attempt and two retries, then nothing more")
	for _, c := range srv.Calls() {
		require.Equal(t, http.StatusInternalServerError, c.Status)
	}

	srv.ResetCalls()
	srv.Fail(llmtest.MalformedJSON, 1)
	r = askDrift(t, f, tokAlice, q)
	requireOffline(r, "follow_ups")
	require.Len(t, srv.Calls(), 1)

	// Follow-ups come, the first branch's answer is of another shape: the
	// branches are the LLM's, their answers and the merge offline.
	srv.ResetCalls()
	srv.garbageAnswers.Store(true)
	r = askDrift(t, f, tokAlice, q)
	requireOffline(r, "follow_up 1")
	require.Equal(t, "llm:test", r.Drift.FollowUpsBy)
	require.Len(t, r.Drift.FollowUps, 3)
	require.Len(t, srv.Calls(), 2, "the follow-ups and the first branch's answer, then nothing more")

	mfs, err := f.reg.Gather()
	require.NoError(t, err)
	fallbacks := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "kgstream_query_llm_fallbacks_total" {
			fallbacks = mf.Metric[0].Counter.GetValue()
		}
	}
	require.Equal(t, 3.0, fallbacks, "one fallback per answer")
}
