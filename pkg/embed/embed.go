// Package embed turns text into vectors for the vector index. Two
// embedders stand behind one interface:
//
//   - Client, for any OpenAI-compatible /v1/embeddings endpoint (OpenAI,
//     vLLM, Ollama, llama.cpp server, text-embeddings-inference), configured
//     by the environment:
//
//     KG_EMBED_BASE_URL    API root including /v1, e.g. http://127.0.0.1:11434/v1
//     KG_EMBED_MODEL       model name, e.g. nomic-embed-text
//     KG_EMBED_API_KEY     bearer token (optional; local servers need none)
//     KG_EMBED_DIMENSIONS  expected vector length (optional; learnt from
//     the first answer when unset)
//     KG_EMBED_MAX_CONCURRENCY    requests in flight at once (default 4)
//     KG_EMBED_TOKENS_PER_MINUTE  token rate (default: no bound)
//
//   - Hashing, the offline embedder used when KG_EMBED_BASE_URL is unset:
//     no model, no network, deterministic (see its doc for what it cannot
//     do).
//
// Vectors of different embedders (or models, or dimensions) are not
// comparable: an index must be filled and queried with the same Name().
package embed

import (
	"context"
	"fmt"
	"strconv"

	"github.com/kgstream/kgstream/pkg/httpretry"
)

// Embedder turns texts into vectors.
type Embedder interface {
	// Embed returns one vector per text, in order, each of Dimensions()
	// components.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Dimensions is the length of the vectors; 0 until a Client whose
	// Config did not say has seen its first answer.
	Dimensions() int
	// Name identifies the embedder, model and dimensions, so an index can
	// refuse vectors of another one.
	Name() string
}

// FromEnv returns the Client the KG_EMBED_* variables configure, or the
// offline Hashing embedder (384 dimensions) when KG_EMBED_BASE_URL is
// unset. getenv is usually os.Getenv.
func FromEnv(getenv func(string) string) (Embedder, error) { return FromEnvMetrics(getenv, nil) }

// FromEnvMetrics is FromEnv with the client's waits, throttles and retries
// counted in m (nil: nowhere).
func FromEnvMetrics(getenv func(string) string, m *httpretry.Metrics) (Embedder, error) {
	cfg, ok, err := ConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	if !ok {
		return NewHashing(DefaultHashingDimensions), nil
	}
	if cfg.Limiter, err = NewLimiter(cfg, m); err != nil {
		return nil, err
	}
	return New(cfg)
}

// ConfigFromEnv reads the KG_EMBED_* variables. ok is false when
// KG_EMBED_BASE_URL is unset.
func ConfigFromEnv(getenv func(string) string) (cfg Config, ok bool, err error) {
	cfg = Config{BaseURL: getenv("KG_EMBED_BASE_URL"), Model: getenv("KG_EMBED_MODEL"), APIKey: getenv("KG_EMBED_API_KEY")}
	if cfg.BaseURL == "" {
		return Config{}, false, nil
	}
	if d := getenv("KG_EMBED_DIMENSIONS"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 {
			return Config{}, false, fmt.Errorf("embed: KG_EMBED_DIMENSIONS=%q is not a positive integer", d)
		}
		cfg.Dimensions = n
	}
	l, err := httpretry.LimitsFromEnv(getenv, "KG_EMBED", httpretry.Limits{})
	if err != nil {
		return Config{}, false, fmt.Errorf("embed: %w", err)
	}
	cfg.MaxConcurrency, cfg.TokensPerMinute = l.MaxConcurrency, l.TokensPerMinute
	return cfg, true, nil
}
