// Command query serves kgstream's query API as its own process. With
// --weaviate (or --vector-dir) it answers basic mode from the vector index
// the reporter fills; with KG_LLM_BASE_URL global answers map and reduce
// with the LLM.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/openapi"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/services/query"
	"github.com/kgstream/kgstream/services/query/webui"
)

func main() {
	f := daemon.Flags{Name: "query"}
	fs := flag.NewFlagSet("query", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:8082")
	tokens := fs.String("tokens", os.Getenv("KG_TOKENS_FILE"), "tokens file")
	anonymous := fs.Bool("allow-anonymous", false, "admit callers without a token as tenant default, public documents only")
	aliasesFile := fs.String("aliases", os.Getenv("KG_ALIASES_FILE"), "alias table (YAML), reloaded when it changes")
	var vf daemon.VectorFlags
	vf.Register(fs)
	daemon.MustParse(fs, os.Args[1:])
	err := daemon.Run(f, true, func(ctx context.Context, env *daemon.Env) (func(context.Context) error, http.Handler, error) {
		var toks []auth.Token
		if *tokens != "" {
			var err error
			if toks, err = auth.LoadFile(*tokens); err != nil {
				return nil, nil, err
			}
		}
		var anon *provenance.Caller
		if *anonymous {
			c := auth.AnonymousCaller
			anon = &c
		}
		a, err := auth.New(toks, anon)
		if err != nil {
			return nil, nil, err
		}
		aliases, err := resolve.NewAliasWatcher(*aliasesFile, env.Log)
		if err != nil {
			return nil, nil, err
		}
		qcfg := query.DefaultConfig()
		qcfg.Aliases = aliases
		ix, emb, err := vf.Open(ctx, env.Log)
		if err != nil {
			return nil, nil, err
		}
		qcfg.Vectors, qcfg.Embedder = ix, emb
		qcfg.Events = env.Bus
		if base := os.Getenv("KG_LLM_BASE_URL"); base != "" {
			if qcfg.LLM, err = newLLM(); err != nil {
				return nil, nil, err
			}
		}
		q, err := query.New(qcfg, env.Stores, a, env.Log, env.Registry)
		if err != nil {
			return nil, nil, err
		}
		stc, err := status.NewCollector(env.Stores, env.Bus, []string{"extractor", "resolver", "clusterer", "reporter"}, env.Log, env.Registry)
		if err != nil {
			return nil, nil, err
		}
		if ix != nil {
			stc.WithVectors(ix)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /v1/status", stc.Handler(a))
		mux.Handle("GET "+openapi.Path, openapi.Handler())
		mux.Handle("/v1/status/", stc.DeadLetterHandler(a))
		if err := webui.Mount(mux); err != nil {
			return nil, nil, err
		}
		mux.Handle("/", q.Handler())
		return func(ctx context.Context) error {
			if ix != nil {
				defer ix.Close()
			}
			go aliases.Run(ctx, 5*time.Second)
			return q.Run(ctx)
		}, mux, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "query:", err)
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
