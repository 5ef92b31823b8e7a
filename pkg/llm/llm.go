// Package llm is a small client for OpenAI-compatible chat-completion
// endpoints (OpenAI, vLLM, Ollama, llama.cpp server) with JSON-schema
// structured outputs. It retries what a retry can fix (timeouts, 429 with
// its Retry-After, 5xx) with exponential backoff and reports everything
// else at once with the status and an excerpt of the body.
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/kgstream/kgstream/pkg/httpretry"
)

// Sentinel errors callers branch on.
var (
	// ErrBadResponse means the endpoint answered 200 with a body that is not
	// a chat completion (no choices, not JSON, a refusal).
	ErrBadResponse = httpretry.ErrBadResponse
	// ErrRetriesExhausted wraps the last transient failure once MaxRetries
	// retries have failed too.
	ErrRetriesExhausted = httpretry.ErrRetriesExhausted
)

// Config says which endpoint and model to use.
type Config struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or
	// http://127.0.0.1:8000/v1; "/chat/completions" is appended.
	BaseURL string
	// Model is sent as the request's model.
	Model string
	// APIKey is sent as a bearer token when set (local servers need none).
	APIKey string
	// Timeout bounds one attempt (default 120s).
	Timeout time.Duration
	// MaxRetries is how many times a transient failure is retried after the
	// first attempt (default 3; negative means never).
	MaxRetries int
	// MinBackoff and MaxBackoff bound the exponential backoff between
	// attempts (defaults 500ms and 30s). A Retry-After header takes
	// precedence, capped at MaxRetryAfter (default 60s).
	MinBackoff, MaxBackoff, MaxRetryAfter time.Duration
	// Temperature is sent when non-nil.
	Temperature *float64
	// HTTPClient is used when set (default: a client without its own
	// timeout; Timeout applies per attempt).
	HTTPClient *http.Client
	// MaxConcurrency bounds the requests in flight to the endpoint
	// (KG_LLM_MAX_CONCURRENCY; default 8; negative: no bound).
	MaxConcurrency int
	// TokensPerMinute bounds the tokens sent to the endpoint per minute
	// (KG_LLM_TOKENS_PER_MINUTE; 0: no bound): a request is charged its
	// estimated prompt tokens before it is sent, and the rest of its
	// reported usage after the answer.
	TokensPerMinute int
	// Limiter enforces MaxConcurrency and TokensPerMinute. Every client of
	// one endpoint in a process must share one (see NewLimiter); default:
	// a limiter of this client's own, without registered metrics.
	Limiter *httpretry.Limiter
}

// DefaultMaxConcurrency is the default bound on requests in flight.
const DefaultMaxConcurrency = 8

// ConfigFromEnv reads KG_LLM_BASE_URL, KG_LLM_MODEL, KG_LLM_API_KEY,
// KG_LLM_MAX_CONCURRENCY and KG_LLM_TOKENS_PER_MINUTE. getenv is usually
// os.Getenv.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{BaseURL: getenv("KG_LLM_BASE_URL"), Model: getenv("KG_LLM_MODEL"), APIKey: getenv("KG_LLM_API_KEY")}
	l, err := httpretry.LimitsFromEnv(getenv, "KG_LLM", httpretry.Limits{})
	if err != nil {
		return Config{}, fmt.Errorf("llm: %w", err)
	}
	cfg.MaxConcurrency, cfg.TokensPerMinute = l.MaxConcurrency, l.TokensPerMinute
	return cfg, nil
}

// NewLimiter returns the limiter cfg's MaxConcurrency and TokensPerMinute
// ask for, counting in m (nil: nowhere), for the clients of one endpoint
// to share.
func NewLimiter(cfg Config, m *httpretry.Metrics) (*httpretry.Limiter, error) {
	cfg.setDefaults()
	return httpretry.NewLimiter("llm", httpretry.Limits{MaxConcurrency: cfg.MaxConcurrency, TokensPerMinute: cfg.TokensPerMinute}, m)
}

func (c *Config) setDefaults() {
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Timeout == 0 {
		c.Timeout = 120 * time.Second
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 3
	}
	if c.MaxRetries < 0 {
		c.MaxRetries = 0
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = 500 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.MaxRetryAfter == 0 {
		c.MaxRetryAfter = 60 * time.Second
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	switch {
	case c.MaxConcurrency == 0:
		c.MaxConcurrency = DefaultMaxConcurrency
	case c.MaxConcurrency < 0:
		c.MaxConcurrency = 0
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.BaseURL == "" {
		return errors.New("llm: BaseURL is required")
	}
	if !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://") {
		return fmt.Errorf("llm: BaseURL %q must be an http(s) URL", c.BaseURL)
	}
	if c.Model == "" {
		return errors.New("llm: Model is required")
	}
	if c.Timeout < 0 || c.MinBackoff < 0 || c.MaxBackoff < c.MinBackoff {
		return errors.New("llm: Timeout and backoffs must be positive, MaxBackoff >= MinBackoff")
	}
	if c.TokensPerMinute < 0 {
		return errors.New("llm: TokensPerMinute must not be negative")
	}
	return nil
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"` // system, user or assistant
	Content string `json:"content"`
}

// Roles of chat messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Schema is a JSON schema the reply must follow (structured outputs).
type Schema struct {
	// Name identifies the schema to the endpoint ([a-zA-Z0-9_-]).
	Name string
	// Schema is the JSON schema document.
	Schema json.RawMessage
}

// Usage is the token accounting of one completion.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Completion is a model's reply.
type Completion struct {
	Content      string
	FinishReason string
	Model        string // as reported by the endpoint
	Usage        Usage
	// Attempts counts the HTTP requests made, retries included.
	Attempts int
}

// StatusError is a non-2xx answer.
type StatusError = httpretry.StatusError

// Client talks to one endpoint and model. It is safe for concurrent use.
type Client struct {
	cfg Config
	url string
	lim *httpretry.Limiter
}

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lim := cfg.Limiter
	if lim == nil {
		var err error
		if lim, err = NewLimiter(cfg, nil); err != nil {
			return nil, err
		}
	}
	return &Client{cfg: cfg, url: cfg.BaseURL + "/chat/completions", lim: lim}, nil
}

// Model returns the configured model name (for metrics labels).
func (c *Client) Model() string { return c.cfg.Model }

type responseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *jsonSchema `json:"json_schema,omitempty"`
}

type jsonSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

type request struct {
	Model          string          `json:"model"`
	Messages       []Message       `json:"messages"`
	ResponseFormat *responseFormat `json:"response_format,omitempty"`
	Temperature    *float64        `json:"temperature,omitempty"`
}

type response struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
			Refusal string  `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage Usage `json:"usage"`
}

// Complete sends messages and returns the first choice. With a schema the
// reply is constrained to it (response_format json_schema, strict).
func (c *Client) Complete(ctx context.Context, messages []Message, schema *Schema) (Completion, error) {
	req := request{Model: c.cfg.Model, Messages: messages, Temperature: c.cfg.Temperature}
	if schema != nil {
		req.ResponseFormat = &responseFormat{Type: "json_schema",
			JSONSchema: &jsonSchema{Name: schema.Name, Schema: schema.Schema, Strict: true}}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Completion{}, fmt.Errorf("encoding chat request: %w", err)
	}
	var out Completion
	est := EstimateTokens(messages)
	n, err := c.policy().Do(ctx, c.url, func(int) error {
		release, err := c.lim.Acquire(ctx, est)
		if err != nil {
			return err
		}
		out, err = c.attempt(ctx, body)
		release(out.Usage.TotalTokens)
		return err
	})
	if err != nil {
		return Completion{}, err
	}
	out.Attempts = n
	return out, nil
}

func (c *Client) attempt(ctx context.Context, body []byte) (Completion, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return Completion{}, fmt.Errorf("building request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.cfg.HTTPClient.Do(hreq)
	if err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return Completion{}, httpretry.Timeout(err)
		}
		return Completion{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return Completion{}, httpretry.Timeout(err)
		}
		return Completion{}, fmt.Errorf("reading response: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return Completion{}, httpretry.NewStatusError("llm", resp, data)
	}
	var r response
	if err := json.Unmarshal(data, &r); err != nil {
		return Completion{}, fmt.Errorf("%w: decoding body: %w: %s", ErrBadResponse, err, Excerpt(string(data), 512))
	}
	if len(r.Choices) == 0 {
		return Completion{}, fmt.Errorf("%w: no choices: %s", ErrBadResponse, Excerpt(string(data), 512))
	}
	ch := r.Choices[0]
	if ch.Message.Refusal != "" {
		return Completion{}, fmt.Errorf("%w: model refused: %s", ErrBadResponse, Excerpt(ch.Message.Refusal, 512))
	}
	if ch.Message.Content == nil {
		return Completion{}, fmt.Errorf("%w: no message content: %s", ErrBadResponse, Excerpt(string(data), 512))
	}
	return Completion{Content: *ch.Message.Content, FinishReason: ch.FinishReason, Model: r.Model, Usage: r.Usage}, nil
}

// Excerpt shortens s to at most n bytes (on a rune boundary) for error
// messages, marking the cut.
func Excerpt(s string, n int) string { return httpretry.Excerpt(s, n) }

func (c *Client) policy() httpretry.Policy {
	return httpretry.Policy{MaxRetries: c.cfg.MaxRetries, MinBackoff: c.cfg.MinBackoff,
		MaxBackoff: c.cfg.MaxBackoff, MaxRetryAfter: c.cfg.MaxRetryAfter, Limiter: c.lim}
}

// EstimateTokens is the token estimate a request for messages is charged
// before it is sent: four bytes a token, plus four per message.
func EstimateTokens(messages []Message) int {
	n := 0
	for _, m := range messages {
		n += httpretry.EstimateTokens(m.Content) + 4
	}
	return n
}
