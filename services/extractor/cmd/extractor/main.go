// Command extractor chunks changed documents and extracts their entities
// and relationships as its own process. KG_LLM_BASE_URL, KG_LLM_MODEL and
// KG_LLM_API_KEY select the LLM extractor; without them it runs offline,
// finding the graph's catalog entities (read from --redis) in the text.
package main

import (
	"context"
	"flag"
	"os"
	"time"

	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/service"
	"github.com/kgstream/kgstream/services/extractor"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

func main() { daemon.Main("extractor", run) }

func run(ctx context.Context, args []string) error {
	f := daemon.Flags{Name: "extractor"}
	fs := flag.NewFlagSet("extractor", flag.ContinueOnError)
	f.Register(fs, "127.0.0.1:8086")
	var cfg extractor.ServiceConfig
	fs.IntVar(&cfg.ChunkTokens, "chunk-tokens", chunk.DefaultTokens, "text unit size in cl100k_base tokens")
	fs.IntVar(&cfg.ChunkOverlap, "chunk-overlap", chunk.DefaultOverlap, "tokens shared by consecutive text units (negative: none)")
	fs.IntVar(&cfg.MaxDeliver, "max-deliver", 5, "deliveries before an event is dead-lettered")
	fs.IntVar(&cfg.Concurrency, "concurrency", 0, "events extracted at once (0: one per CPU offline, 1 with an LLM)")
	fs.IntVar(&cfg.Gleanings, "llm-gleanings", 1, "\"entities were missed\" passes per text unit (negative: none)")
	llmTimeout := fs.Duration("llm-timeout", 120*time.Second, "timeout of one LLM request")
	llmRetries := fs.Int("llm-retries", 3, "retries of a timed-out, rate-limited or 5xx LLM request (negative: none)")
	fs.DurationVar(&cfg.GazetteerTTL, "gazetteer-ttl", 30*time.Second, "how long the offline extractor caches the catalog's entities")
	gazetteerFiles := fs.String("gazetteer", os.Getenv("KG_GAZETTEER"), "comma-separated gazetteer YAML files the offline extractor looks for besides the bundled one (env KG_GAZETTEER)")
	if err := daemon.Parse(fs, args); err != nil {
		return &daemon.UsageError{Err: err}
	}
	// Checked before connecting anything: a bad gazetteer or LLM config is
	// the operator's to fix, not a NATS problem.
	var err error
	if cfg.Extra, err = offline.LoadGazetteers(*gazetteerFiles); err != nil {
		return &daemon.UsageError{Err: err}
	}
	client, err := daemon.LLMFromEnv(func(c *llm.Config) { c.Timeout, c.MaxRetries = *llmTimeout, *llmRetries })
	if err != nil {
		return &daemon.UsageError{Err: err}
	}
	// The offline extractor's gazetteer and the catalog re-extraction read
	// the shared graph store, so it is only opened when it is shared
	// (Redis): the embedded store belongs to the single process that owns
	// its file.
	needStores := f.RedisURL != ""
	return daemon.RunContext(ctx, f, needStores, daemon.ServiceBody(func(_ context.Context, env *daemon.Env) (service.Service, error) {
		d := env.Deps()
		d.LLM = client
		return extractor.NewService(cfg, d)
	}))
}
