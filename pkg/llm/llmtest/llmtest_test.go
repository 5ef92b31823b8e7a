package llmtest_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
)

// TestReplayRecording replays a small recording: the first recorded
// document id in the prompt picks the answer, gleaning gets nothing more,
// overrides replace an answer and unknown documents are a 404.
func TestReplayRecording(t *testing.T) {
	r, err := llmtest.SeedReplay("testdata/recording.json")
	require.NoError(t, err)
	t.Cleanup(r.Close)
	c, err := llm.New(llm.Config{BaseURL: r.URL(), Model: "replay"})
	require.NoError(t, err)
	ask := func(msgs ...llm.Message) llmtest.Extraction {
		t.Helper()
		out, err := c.Complete(t.Context(), msgs, nil)
		require.NoError(t, err)
		var ex llmtest.Extraction
		require.NoError(t, json.Unmarshal([]byte(out.Content), &ex))
		return ex
	}
	first := llm.Message{Role: llm.RoleUser, Content: "Document: PM-1 (ledger)\nText: PM-2 is mentioned later."}
	ex := ask(first)
	require.Equal(t, []llmtest.Entity{
		{Name: "PM-1", Type: "incident", Description: "incident PM-1"},
		{Name: "ledger-api", Type: "service", Description: "service ledger-api"},
		{Name: "log-rotation", Type: "component", Description: "component log-rotation"},
		{Name: "disk full", Type: "failure_mode", Description: "failure_mode disk full"},
	}, ex.Entities)
	require.Len(t, ex.Relationships, 3)
	// Missing descriptions and strengths are filled in; recorded ones kept.
	require.Equal(t, llmtest.Relationship{Source: "PM-1", SourceType: "incident", Relation: "affected", Target: "ledger-api",
		TargetType: "service", Description: "PM-1 affected ledger-api", Strength: 8}, ex.Relationships[0])
	require.Equal(t, "the ledger volume ran out of space", ex.Relationships[2].Description)
	require.EqualValues(t, 6, ex.Relationships[2].Strength)

	ex = ask(first, llm.Message{Role: llm.RoleAssistant, Content: "{}"}, llm.Message{Role: llm.RoleUser, Content: "anything missed?"})
	require.Empty(t, ex.Entities)
	require.Empty(t, ex.Relationships)

	r.Override("PM-2", []llmtest.Relationship{{Source: "PM-2", SourceType: "incident", Relation: "failure",
		Target: "queue overflow", TargetType: "failure_mode"}})
	ex = ask(llm.Message{Role: llm.RoleUser, Content: "Document: PM-2"})
	require.Len(t, ex.Relationships, 1)
	require.Equal(t, "queue overflow", ex.Relationships[0].Target)
	require.Equal(t, "queue overflow", r.Relationships("PM-2")[0].Target)

	_, err = c.Complete(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: "Document: PM-12"}}, nil)
	require.Error(t, err)
	require.Len(t, r.Calls(), 4)
	require.Equal(t, 404, r.Calls()[3].Status)

	_, err = llmtest.SeedReplay("testdata/missing.json")
	require.ErrorContains(t, err, "reading recording testdata/missing.json")
}

func TestInjectedSchemaFailures(t *testing.T) {
	s := llmtest.New(func(llmtest.Request) (string, bool) { return `{"entities":[],"relationships":[]}`, true })
	t.Cleanup(s.Close)
	s.Fail(llmtest.InvalidSchema, 1)
	s.Fail(llmtest.MalformedJSON, 1)
	c, err := llm.New(llm.Config{BaseURL: s.URL(), Model: "m"})
	require.NoError(t, err)
	for _, want := range []string{llmtest.InvalidSchemaContent, llmtest.MalformedJSONContent, `{"entities":[],"relationships":[]}`} {
		out, err := c.Complete(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: "x"}}, nil)
		require.NoError(t, err)
		require.Equal(t, want, out.Content)
	}
}
