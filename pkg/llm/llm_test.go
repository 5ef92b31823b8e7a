package llm_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
)

var schema = &llm.Schema{Name: "t", Schema: json.RawMessage(`{"type":"object"}`)}

func client(t *testing.T, url string, mut func(*llm.Config)) *llm.Client {
	t.Helper()
	cfg := llm.Config{BaseURL: url, Model: "m", APIKey: "k", MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	if mut != nil {
		mut(&cfg)
	}
	c, err := llm.New(cfg)
	require.NoError(t, err)
	return c
}

func TestCompleteSendsSchema(t *testing.T) {
	srv := llmtest.New(llmtest.Table(map[string]string{"hello": `{"ok":true}`}))
	t.Cleanup(srv.Close)
	srv.SetUsage(llm.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10})

	out, err := client(t, srv.URL(), nil).Complete(t.Context(),
		[]llm.Message{{Role: llm.RoleSystem, Content: "sys"}, {Role: llm.RoleUser, Content: "hello there"}}, schema)
	require.NoError(t, err)
	require.Equal(t, `{"ok":true}`, out.Content)
	require.Equal(t, llm.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}, out.Usage)
	require.Equal(t, 1, out.Attempts)

	calls := srv.Calls()
	require.Len(t, calls, 1)
	require.Equal(t, "hello there", calls[0].Prompt)
	require.Equal(t, "m", calls[0].Request.Model)
	require.JSONEq(t, `{"type":"json_schema","json_schema":{"name":"t","schema":{"type":"object"},"strict":true}}`,
		string(calls[0].Request.ResponseFormat))
}

func TestCompleteRetries(t *testing.T) {
	srv := llmtest.New(llmtest.Table(map[string]string{"": `{}`}))
	t.Cleanup(srv.Close)
	srv.SetRetryAfter("0.2")
	srv.Fail(llmtest.RateLimit, 1)
	srv.Fail(llmtest.ServerError, 1)
	srv.Fail(llmtest.Timeout, 1)

	start := time.Now()
	out, err := client(t, srv.URL(), func(c *llm.Config) { c.Timeout = 300 * time.Millisecond }).
		Complete(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: "x"}}, nil)
	require.NoError(t, err)
	require.Equal(t, 4, out.Attempts)
	// The 429's Retry-After was honoured (backoff alone is milliseconds).
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)

	var statuses []int
	var failures []llmtest.Failure
	for _, c := range srv.Calls() {
		statuses = append(statuses, c.Status)
		failures = append(failures, c.Failure)
	}
	require.Equal(t, []int{429, 500, 504, 200}, statuses)
	require.Equal(t, []llmtest.Failure{llmtest.RateLimit, llmtest.ServerError, llmtest.Timeout, ""}, failures)
}

func TestCompleteGivesUp(t *testing.T) {
	srv := llmtest.New(llmtest.Table(map[string]string{"": `{}`}))
	t.Cleanup(srv.Close)
	srv.Fail(llmtest.ServerError, 5)

	_, err := client(t, srv.URL(), func(c *llm.Config) { c.MaxRetries = 2 }).
		Complete(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: "x"}}, nil)
	require.ErrorIs(t, err, llm.ErrRetriesExhausted)
	var se *llm.StatusError
	require.True(t, errors.As(err, &se))
	require.Equal(t, http.StatusInternalServerError, se.StatusCode)
	require.Contains(t, err.Error(), "injected")
	require.Len(t, srv.Calls(), 3)
}

func TestCompleteClientErrorNotRetried(t *testing.T) {
	srv := llmtest.New(llmtest.Table(map[string]string{"known": `{}`}))
	t.Cleanup(srv.Close)

	_, err := client(t, srv.URL(), nil).Complete(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: "other"}}, nil)
	var se *llm.StatusError
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, http.StatusNotFound, se.StatusCode)
	require.Contains(t, se.Body, "no recorded response")
	require.Len(t, srv.Calls(), 1)
}

func TestConfigValidate(t *testing.T) {
	_, err := llm.New(llm.Config{Model: "m"})
	require.Error(t, err)
	_, err = llm.New(llm.Config{BaseURL: "ftp://x", Model: "m"})
	require.Error(t, err)
	_, err = llm.New(llm.Config{BaseURL: "http://x"})
	require.Error(t, err)
}

func TestExcerpt(t *testing.T) {
	require.Equal(t, "abc", llm.Excerpt(" abc ", 10))
	got := llm.Excerpt("ééééé", 3) // cut inside a rune backs off to its start
	require.Equal(t, "é… (10 bytes)", got)
}
