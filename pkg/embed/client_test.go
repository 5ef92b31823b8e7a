package embed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/embed"
)

// server is a fake /v1/embeddings endpoint: each text "t<i>" embeds to
// [i+1, 1, 0]. fail, when set, answers the n-th request (1-based) instead.
type server struct {
	t        *testing.T
	requests atomic.Int64
	fail     func(n int64, w http.ResponseWriter) bool
	reverse  bool // answer data in reverse order (index still correct)
	dims     int
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.requests.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.Error(w, "wrong endpoint "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		http.Error(w, "bad auth "+got, http.StatusUnauthorized)
		return
	}
	if s.fail != nil && s.fail(n, w) {
		return
	}
	var req struct {
		Model          string   `json:"model"`
		Input          []string `json:"input"`
		EncodingFormat string   `json:"encoding_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "test-model" || req.EncodingFormat != "float" {
		http.Error(w, fmt.Sprintf("bad request %+v %v", req, err), http.StatusBadRequest)
		return
	}
	type datum struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	data := make([]datum, len(req.Input))
	for i, in := range req.Input {
		var k int
		_, _ = fmt.Sscanf(in, "t%d", &k)
		v := make([]float64, s.dims)
		v[0], v[1] = float64(k+1), 1
		data[i] = datum{"embedding", i, v}
	}
	if s.reverse {
		for i, j := 0, len(data)-1; i < j; i, j = i+1, j-1 {
			data[i], data[j] = data[j], data[i]
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
}

func newClient(t *testing.T, s *server, mod func(*embed.Config)) *embed.Client {
	t.Helper()
	s.t = t
	if s.dims == 0 {
		s.dims = 3
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	cfg := embed.Config{BaseURL: ts.URL + "/v1/", Model: "test-model", APIKey: "sk-test",
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	c, err := embed.New(cfg)
	require.NoError(t, err)
	return c
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("t%d", i)
	}
	return out
}

func requireVectors(t *testing.T, n int, got [][]float32) {
	t.Helper()
	require.Len(t, got, n)
	for i, v := range got {
		require.Equal(t, []float32{float32(i + 1), 1, 0}, v, "vector %d", i)
	}
}

func TestClientEmbedsInBatchesInOrder(t *testing.T) {
	s := &server{reverse: true}
	c := newClient(t, s, func(c *embed.Config) { c.BatchSize = 64 })
	require.Equal(t, 0, c.Dimensions(), "unknown before the first answer")
	got, err := c.Embed(t.Context(), texts(150))
	require.NoError(t, err)
	requireVectors(t, 150, got)
	require.Equal(t, int64(3), s.requests.Load(), "150 texts in batches of 64")
	require.Equal(t, 3, c.Dimensions())
	require.Equal(t, "openai:test-model:3", c.Name())

	got, err = c.Embed(t.Context(), nil)
	require.NoError(t, err)
	require.Empty(t, got)
	require.Equal(t, int64(3), s.requests.Load(), "no request for no text")
}

func TestClientRetries(t *testing.T) {
	cases := map[string]func(w http.ResponseWriter){
		"429 with Retry-After": func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error":{"message":"rate limited"}}`, http.StatusTooManyRequests)
		},
		"500": func(w http.ResponseWriter) { http.Error(w, "boom", http.StatusInternalServerError) },
		"503": func(w http.ResponseWriter) { http.Error(w, "loading model", http.StatusServiceUnavailable) },
		"closed connection": func(w http.ResponseWriter) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		},
	}
	for name, fail := range cases {
		t.Run(name, func(t *testing.T) {
			s := &server{fail: func(n int64, w http.ResponseWriter) bool {
				if n <= 2 {
					fail(w)
					return true
				}
				return false
			}}
			c := newClient(t, s, nil)
			got, err := c.Embed(t.Context(), texts(5))
			require.NoError(t, err)
			requireVectors(t, 5, got)
			require.Equal(t, int64(3), s.requests.Load(), "two failures, then success")
		})
	}
}

func TestClientRetriesExhausted(t *testing.T) {
	s := &server{fail: func(_ int64, w http.ResponseWriter) bool {
		http.Error(w, "down", http.StatusBadGateway)
		return true
	}}
	c := newClient(t, s, func(c *embed.Config) { c.MaxRetries = 2 })
	_, err := c.Embed(t.Context(), texts(1))
	require.ErrorIs(t, err, embed.ErrRetriesExhausted)
	var se *embed.StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusBadGateway, se.StatusCode)
	require.Equal(t, int64(3), s.requests.Load())
}

func TestClientDoesNotRetryClientErrors(t *testing.T) {
	s := &server{fail: func(_ int64, w http.ResponseWriter) bool {
		http.Error(w, `{"error":{"message":"model not found"}}`, http.StatusBadRequest)
		return true
	}}
	c := newClient(t, s, nil)
	_, err := c.Embed(t.Context(), texts(1))
	var se *embed.StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusBadRequest, se.StatusCode)
	require.Contains(t, err.Error(), "model not found")
	require.Equal(t, int64(1), s.requests.Load())
}

func TestClientAttemptTimeoutIsRetried(t *testing.T) {
	s := &server{fail: func(n int64, w http.ResponseWriter) bool {
		if n == 1 {
			time.Sleep(300 * time.Millisecond)
		}
		return false
	}}
	c := newClient(t, s, func(c *embed.Config) { c.Timeout = 100 * time.Millisecond })
	got, err := c.Embed(t.Context(), texts(2))
	require.NoError(t, err)
	requireVectors(t, 2, got)
	require.Equal(t, int64(2), s.requests.Load())
}

func TestClientCancelledDuringBackoff(t *testing.T) {
	s := &server{fail: func(_ int64, w http.ResponseWriter) bool {
		w.Header().Set("Retry-After", "30")
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return true
	}}
	c := newClient(t, s, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Embed(ctx, texts(1))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 10*time.Second, "did not wait out Retry-After")
}

func TestClientBadResponses(t *testing.T) {
	cases := map[string]string{
		"not json":        `<html>`,
		"too few":         `{"data":[{"index":0,"embedding":[1,2,3]}]}`,
		"repeated index":  `{"data":[{"index":0,"embedding":[1,2,3]},{"index":0,"embedding":[1,2,3]}]}`,
		"index too large": `{"data":[{"index":0,"embedding":[1,2,3]},{"index":2,"embedding":[1,2,3]}]}`,
		"zero vector":     `{"data":[{"index":0,"embedding":[0,0,0]},{"index":1,"embedding":[1,2,3]}]}`,
		"other dims":      `{"data":[{"index":0,"embedding":[1,2,3]},{"index":1,"embedding":[1,2]}]}`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			s := &server{fail: func(_ int64, w http.ResponseWriter) bool {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(body))
				return true
			}}
			c := newClient(t, s, nil)
			_, err := c.Embed(t.Context(), texts(2))
			require.ErrorIs(t, err, embed.ErrBadResponse)
			require.Equal(t, int64(1), s.requests.Load(), "not retried")
		})
	}
}

func TestClientConfiguredDimensions(t *testing.T) {
	c := newClient(t, &server{dims: 3}, func(c *embed.Config) { c.Dimensions = 4 })
	require.Equal(t, 4, c.Dimensions())
	_, err := c.Embed(t.Context(), texts(1))
	require.ErrorIs(t, err, embed.ErrBadResponse)
	require.Contains(t, err.Error(), "want 4")
}

func TestConfig(t *testing.T) {
	for name, cfg := range map[string]embed.Config{
		"no url":    {Model: "m"},
		"bad url":   {BaseURL: "localhost:8000/v1", Model: "m"},
		"no model":  {BaseURL: "http://x/v1"},
		"neg dims":  {BaseURL: "http://x/v1", Model: "m", Dimensions: -1},
		"neg batch": {BaseURL: "http://x/v1", Model: "m", BatchSize: -1},
	} {
		_, err := embed.New(cfg)
		require.Error(t, err, name)
	}
}

func TestFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	e, err := embed.FromEnv(env(nil))
	require.NoError(t, err)
	require.Equal(t, "hashing-v1-384", e.Name(), "offline without KG_EMBED_BASE_URL")
	require.Equal(t, 384, e.Dimensions())

	e, err = embed.FromEnv(env(map[string]string{"KG_EMBED_BASE_URL": "http://127.0.0.1:11434/v1",
		"KG_EMBED_MODEL": "nomic-embed-text", "KG_EMBED_API_KEY": "k", "KG_EMBED_DIMENSIONS": "768"}))
	require.NoError(t, err)
	require.Equal(t, "openai:nomic-embed-text:768", e.Name())

	_, err = embed.FromEnv(env(map[string]string{"KG_EMBED_BASE_URL": "http://x/v1", "KG_EMBED_MODEL": "m", "KG_EMBED_DIMENSIONS": "many"}))
	require.Error(t, err)
	_, err = embed.FromEnv(env(map[string]string{"KG_EMBED_BASE_URL": "http://x/v1"}))
	require.Error(t, err, "a model is required")
	require.False(t, errors.Is(err, embed.ErrBadResponse))
}
