//go:build integration

package llmtest_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
)

const recording = "../../../../shared/corpora/seed-postmortems/recorded-llm-extraction.json"

func TestSeedReplay(t *testing.T) {
	r, err := llmtest.SeedReplay(recording)
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
	first := llm.Message{Role: llm.RoleUser, Content: "Document: INC-101 (title)\nText: ..."}
	ex := ask(first)
	require.Len(t, ex.Relationships, 5)
	require.Len(t, ex.Entities, 6)
	require.Equal(t, llmtest.Entity{Name: "INC-101", Type: "incident", Description: "incident INC-101"}, ex.Entities[0])
	require.Equal(t, "expired certificate", ex.Relationships[4].Target)

	// Gleaning: a follow-up gets nothing more.
	ex = ask(first, llm.Message{Role: llm.RoleAssistant, Content: "{}"}, llm.Message{Role: llm.RoleUser, Content: "MANY entities were missed"})
	require.Empty(t, ex.Entities)
	require.Empty(t, ex.Relationships)

	// Override a document.
	r.Override("INC-121", []llmtest.Relationship{{Source: "INC-121", SourceType: "incident", Relation: "failure",
		Target: "bad upgrade", TargetType: "failure_mode"}})
	ex = ask(llm.Message{Role: llm.RoleUser, Content: "Document: INC-121"})
	require.Len(t, ex.Relationships, 1)
	require.Equal(t, "bad upgrade", ex.Relationships[0].Target)

	// Unknown documents and ids embedded in longer tokens are not matched.
	_, err = c.Complete(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: "Document: INC-1011"}}, nil)
	require.Error(t, err)
	require.Len(t, r.Calls(), 4)
	require.Equal(t, 404, r.Calls()[3].Status)
}
