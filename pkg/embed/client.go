package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/httpretry"
)

// Sentinel errors callers branch on.
var (
	// ErrBadResponse means the endpoint answered 2xx with something that is
	// not a usable embeddings response (not JSON, missing or extra vectors,
	// wrong dimensions, non-finite numbers).
	ErrBadResponse = httpretry.ErrBadResponse
	// ErrRetriesExhausted wraps the last transient failure once MaxRetries
	// retries have failed too.
	ErrRetriesExhausted = httpretry.ErrRetriesExhausted
)

// Config says which endpoint and model to use.
type Config struct {
	// BaseURL is the API root including /v1, e.g. https://api.openai.com/v1
	// or http://127.0.0.1:11434/v1; "/embeddings" is appended.
	BaseURL string
	// Model is sent as the request's model.
	Model string
	// APIKey is sent as a bearer token when set.
	APIKey string
	// Dimensions is the expected vector length; an answer of another length
	// is ErrBadResponse. 0 means learnt from the first answer. It is not
	// sent: only some models can shorten their vectors.
	Dimensions int
	// BatchSize bounds the texts of one request (default 64).
	BatchSize int
	// Timeout bounds one attempt (default 60s).
	Timeout time.Duration
	// MaxRetries is how many times a transient failure (429, 408, 5xx,
	// timeout, connection error) is retried after the first attempt
	// (default 4; negative means never).
	MaxRetries int
	// MinBackoff and MaxBackoff bound the exponential backoff between
	// attempts (defaults 500ms and 30s). A Retry-After header takes
	// precedence, capped at MaxRetryAfter (default 60s).
	MinBackoff, MaxBackoff, MaxRetryAfter time.Duration
	// HTTPClient is used when set (Timeout applies per attempt).
	HTTPClient *http.Client
	// Logger receives a warning per retry; nil discards.
	Logger *slog.Logger
	// MaxConcurrency bounds the requests in flight to the endpoint
	// (KG_EMBED_MAX_CONCURRENCY; default 4; negative: no bound).
	MaxConcurrency int
	// TokensPerMinute bounds the tokens sent per minute
	// (KG_EMBED_TOKENS_PER_MINUTE; 0: no bound): a batch is charged its
	// estimated tokens before it is sent, and the rest of its reported
	// usage after the answer.
	TokensPerMinute int
	// Limiter enforces MaxConcurrency and TokensPerMinute. Every client of
	// one endpoint in a process must share one (see NewLimiter); default:
	// a limiter of this client's own, without registered metrics.
	Limiter *httpretry.Limiter
}

// DefaultMaxConcurrency is the default bound on requests in flight.
const DefaultMaxConcurrency = 4

// NewLimiter returns the limiter cfg's MaxConcurrency and TokensPerMinute
// ask for, counting in m (nil: nowhere), for the clients of one endpoint
// to share.
func NewLimiter(cfg Config, m *httpretry.Metrics) (*httpretry.Limiter, error) {
	cfg.setDefaults()
	return httpretry.NewLimiter("embed", httpretry.Limits{MaxConcurrency: cfg.MaxConcurrency, TokensPerMinute: cfg.TokensPerMinute}, m)
}

func (c *Config) setDefaults() {
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.BatchSize == 0 {
		c.BatchSize = 64
	}
	if c.Timeout == 0 {
		c.Timeout = 60 * time.Second
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 4
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
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.MaxConcurrency == 0:
		c.MaxConcurrency = DefaultMaxConcurrency
	case c.MaxConcurrency < 0:
		c.MaxConcurrency = 0
	}
}

// Validate checks the configuration (after defaults).
func (c Config) Validate() error {
	if !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://") {
		return fmt.Errorf("embed: BaseURL %q must be an http(s) URL", c.BaseURL)
	}
	if c.Model == "" {
		return errors.New("embed: Model is required")
	}
	if c.Dimensions < 0 || c.BatchSize < 1 {
		return errors.New("embed: Dimensions must be >= 0 and BatchSize >= 1")
	}
	if c.Timeout < 0 || c.MinBackoff < 0 || c.MaxBackoff < c.MinBackoff || c.MaxRetryAfter < 0 {
		return errors.New("embed: Timeout and backoffs must be positive, MaxBackoff >= MinBackoff")
	}
	if c.TokensPerMinute < 0 {
		return errors.New("embed: TokensPerMinute must not be negative")
	}
	return nil
}

// StatusError is a non-2xx answer.
type StatusError = httpretry.StatusError

// Client embeds with an OpenAI-compatible endpoint. It is safe for
// concurrent use.
type Client struct {
	cfg  Config
	url  string
	dims atomic.Int64
	lim  *httpretry.Limiter
}

var _ Embedder = (*Client)(nil)

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, url: cfg.BaseURL + "/embeddings", lim: cfg.Limiter}
	if c.lim == nil {
		var err error
		if c.lim, err = NewLimiter(cfg, nil); err != nil {
			return nil, err
		}
	}
	c.dims.Store(int64(cfg.Dimensions))
	return c, nil
}

// Dimensions returns the configured length, else the length of the first
// answer (0 before it).
func (c *Client) Dimensions() int { return int(c.dims.Load()) }

// Name is "openai:<model>:<dimensions>".
func (c *Client) Name() string { return fmt.Sprintf("openai:%s:%d", c.cfg.Model, c.Dimensions()) }

type request struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
}

type response struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
	Usage struct {
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
}

// Embed embeds texts in batches of BatchSize, retrying transient failures.
// Empty input returns an empty result without a request.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for i := 0; i < len(texts); i += c.cfg.BatchSize {
		batch := texts[i:min(i+c.cfg.BatchSize, len(texts))]
		vecs, err := c.embedBatch(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("embedding texts %d to %d of %d with %s: %w", i, i+len(batch)-1, len(texts), c.cfg.Model, err)
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func (c *Client) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	for i, t := range texts {
		if !utf8.ValidString(t) {
			return nil, fmt.Errorf("text %d is not UTF-8", i)
		}
	}
	body, err := json.Marshal(request{Model: c.cfg.Model, Input: texts, EncodingFormat: "float"})
	if err != nil {
		return nil, fmt.Errorf("encoding request: %w", err)
	}
	est := 0
	for _, t := range texts {
		est += httpretry.EstimateTokens(t)
	}
	var vecs [][]float32
	_, err = httpretry.Policy{MaxRetries: c.cfg.MaxRetries, MinBackoff: c.cfg.MinBackoff, MaxBackoff: c.cfg.MaxBackoff,
		MaxRetryAfter: c.cfg.MaxRetryAfter, Logger: c.cfg.Logger, Limiter: c.lim}.Do(ctx, c.url, func(int) error {
		release, err := c.lim.Acquire(ctx, est)
		if err != nil {
			return err
		}
		var used int
		vecs, used, err = c.attempt(ctx, body, len(texts))
		release(used)
		return err
	})
	return vecs, err
}

func (c *Client) attempt(ctx context.Context, body []byte, n int) ([][]float32, int, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return nil, 0, httpretry.Timeout(err)
		}
		return nil, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return nil, 0, httpretry.Timeout(err)
		}
		return nil, 0, fmt.Errorf("reading response: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, 0, httpretry.NewStatusError("embed", resp, data)
	}
	var r response
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, 0, fmt.Errorf("%w: decoding body: %w: %s", ErrBadResponse, err, httpretry.Excerpt(string(data), 512))
	}
	if len(r.Data) != n {
		return nil, 0, fmt.Errorf("%w: %d embeddings for %d texts", ErrBadResponse, len(r.Data), n)
	}
	out := make([][]float32, n)
	for _, d := range r.Data {
		if d.Index < 0 || d.Index >= n || out[d.Index] != nil {
			return nil, 0, fmt.Errorf("%w: embedding index %d out of range or repeated", ErrBadResponse, d.Index)
		}
		v := make([]float32, len(d.Embedding))
		zero := true
		for i, x := range d.Embedding {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, 0, fmt.Errorf("%w: embedding %d has a non-finite component", ErrBadResponse, d.Index)
			}
			v[i] = float32(x)
			zero = zero && x == 0
		}
		if len(v) == 0 || zero {
			return nil, 0, fmt.Errorf("%w: embedding %d is empty or zero", ErrBadResponse, d.Index)
		}
		if want := c.dims.Load(); want == 0 {
			c.dims.CompareAndSwap(0, int64(len(v)))
		}
		if want := int(c.dims.Load()); len(v) != want {
			return nil, 0, fmt.Errorf("%w: embedding %d has %d dimensions, want %d", ErrBadResponse, d.Index, len(v), want)
		}
		out[d.Index] = v
	}
	return out, r.Usage.TotalTokens, nil
}
