// Command reporter writes community reports as its own process and, with
// --weaviate (or --vector-dir), keeps the vector index current: text units,
// entity descriptions and reports, embedded by the KG_EMBED_* endpoint or
// the offline hashing embedder.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/services/reporter"
)

func main() {
	f := daemon.Flags{Name: "reporter"}
	fs := flag.NewFlagSet("reporter", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:8085")
	var vf daemon.VectorFlags
	vf.Register(fs)
	reconcileEvery := fs.Duration("reconcile-every", time.Minute, "how often the reports are reconciled with the stored communities, besides at start and after each communities event (negative: never)")
	daemon.MustParse(fs, os.Args[1:])
	err := daemon.Run(f, true, func(ctx context.Context, env *daemon.Env) (func(context.Context) error, http.Handler, error) {
		cfg := reporter.Config{ReconcileEvery: *reconcileEvery}
		if base := os.Getenv("KG_LLM_BASE_URL"); base != "" {
			client, err := newLLM()
			if err != nil {
				return nil, nil, err
			}
			cfg.LLM = reporter.NewLLMWriter(client)
		}
		ix, emb, err := vf.Open(ctx, env.Log)
		if err != nil {
			return nil, nil, err
		}
		cfg.Vectors, cfg.Embedder = ix, emb
		w, err := reporter.New(cfg, env.Bus, env.Stores, env.Log, env.Registry)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context) error {
			if ix != nil {
				defer ix.Close()
			}
			return w.Run(ctx)
		}, nil, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "reporter:", err)
		os.Exit(1)
	}
}

// newLLM is the LLM client KG_LLM_* configures (endpoint, model, key,
// concurrency cap and tokens per minute).
func newLLM() (*llm.Client, error) {
	cfg, err := llm.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	return llm.New(cfg)
}
