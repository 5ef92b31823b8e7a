// Command extractor chunks changed documents and extracts their entities
// and relationships as its own process. KG_LLM_BASE_URL, KG_LLM_MODEL and
// KG_LLM_API_KEY select the LLM extractor; without them it runs offline,
// finding the graph's catalog entities (read from --redis) in the text.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/services/extractor"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/llmx"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

func main() {
	f := daemon.Flags{Name: "extractor"}
	fs := flag.NewFlagSet("extractor", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:8086")
	chunkTokens := fs.Int("chunk-tokens", chunk.DefaultTokens, "text unit size in cl100k_base tokens")
	chunkOverlap := fs.Int("chunk-overlap", chunk.DefaultOverlap, "tokens shared by consecutive text units (negative: none)")
	maxDeliver := fs.Int("max-deliver", 5, "deliveries before an event is dead-lettered")
	gleanings := fs.Int("llm-gleanings", 1, "\"entities were missed\" passes per text unit (negative: none)")
	llmTimeout := fs.Duration("llm-timeout", 120*time.Second, "timeout of one LLM request")
	llmRetries := fs.Int("llm-retries", 3, "retries of a timed-out, rate-limited or 5xx LLM request (negative: none)")
	gazetteerTTL := fs.Duration("gazetteer-ttl", 30*time.Second, "how long the offline extractor caches the catalog's entities")
	gazetteerFiles := fs.String("gazetteer", os.Getenv("KG_GAZETTEER"), "comma-separated gazetteer YAML files the offline extractor looks for besides the bundled one (env KG_GAZETTEER)")
	daemon.MustParse(fs, os.Args[1:])
	extra, err := offline.LoadGazetteers(*gazetteerFiles)
	if err != nil {
		fmt.Fprintln(os.Stderr, "extractor:", err)
		os.Exit(2)
	}

	lc, err := llm.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "extractor:", err)
		os.Exit(2)
	}
	lc.Timeout, lc.MaxRetries = *llmTimeout, *llmRetries
	useLLM := lc.BaseURL != ""
	// The offline extractor's gazetteer and the catalog re-extraction read
	// the shared graph store, so it is only opened when it is shared
	// (Redis): the embedded store belongs to the single process that owns
	// its file.
	needStores := f.RedisURL != ""
	var client *llm.Client
	if useLLM {
		// Checked before connecting anything: a bad LLM config is the
		// operator's to fix, not a NATS problem.
		var err error
		if client, err = llm.New(lc); err != nil {
			fmt.Fprintln(os.Stderr, "extractor:", err)
			os.Exit(2)
		}
	}

	err = daemon.Run(f, needStores, func(_ context.Context, env *daemon.Env) (func(context.Context) error, http.Handler, error) {
		var ext extractor.Extractor
		if useLLM {
			x, err := llmx.New(llmx.Config{Gleanings: *gleanings}, client, env.Log, env.Registry)
			if err != nil {
				return nil, nil, err
			}
			ext = x
			env.Log.Info("extracting with an LLM", "base_url", lc.BaseURL, "model", lc.Model)
		} else {
			oc := offline.Config{Extra: extra}
			if env.Stores != nil {
				oc.Gazetteer = offline.NewCatalogGazetteer(env.Stores, *gazetteerTTL)
			} else {
				env.Log.Warn("offline extraction without --redis: only document entities, no catalog mentions")
			}
			x, err := offline.New(oc)
			if err != nil {
				return nil, nil, err
			}
			ext = x
		}
		w, err := extractor.New(extractor.Config{ChunkTokens: *chunkTokens, ChunkOverlap: *chunkOverlap,
			MaxDeliver: *maxDeliver}, env.Bus, ext, env.Log, env.Registry)
		if err != nil {
			return nil, nil, err
		}
		if env.Stores == nil {
			env.Log.Warn("without --redis, documents are not re-extracted when the catalog changes")
			return w.Run, nil, nil
		}
		rx, err := extractor.NewReextractor(extractor.ReextractConfig{MaxDeliver: *maxDeliver}, env.Bus, env.Stores, ext,
			env.Log, env.Registry)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context) error {
			errc := make(chan error, 2)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() { errc <- w.Run(ctx) }()
			go func() { errc <- rx.Run(ctx) }()
			err := <-errc
			cancel()
			return errors.Join(err, <-errc)
		}, nil, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "extractor:", err)
		os.Exit(1)
	}
}
