// Command query serves kgstream's query API as its own process. With
// --weaviate (or --vector-dir) it answers basic mode from the vector index
// the reporter fills; with KG_LLM_BASE_URL global answers map and reduce
// with the LLM.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/service"
	"github.com/kgstream/kgstream/services/query"
)

func main() { daemon.Main("query", run) }

func run(ctx context.Context, args []string) error {
	f := daemon.Flags{Name: "query"}
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	f.Register(fs, "127.0.0.1:8082")
	tokens := fs.String("tokens", os.Getenv("KG_TOKENS_FILE"), "tokens file")
	anonymous := fs.Bool("allow-anonymous", false, "admit callers without a token as tenant default, public documents only")
	var cfg query.ServiceConfig
	cfg.Config = query.DefaultConfig()
	fs.StringVar(&cfg.AliasesFile, "aliases", os.Getenv("KG_ALIASES_FILE"), "alias table (YAML), reloaded when it changes")
	var vf daemon.VectorFlags
	vf.Register(fs)
	if err := daemon.Parse(fs, args); err != nil {
		return &daemon.UsageError{Err: err}
	}
	client, err := daemon.LLMFromEnv(nil)
	if err != nil {
		return &daemon.UsageError{Err: err}
	}
	return daemon.RunContext(ctx, f, true, daemon.ServiceBody(func(ctx context.Context, env *daemon.Env) (service.Service, error) {
		var toks []auth.Token
		if *tokens != "" {
			var err error
			if toks, err = auth.LoadFile(*tokens); err != nil {
				return nil, err
			}
		}
		var anon *provenance.Caller
		if *anonymous {
			c := auth.AnonymousCaller
			anon = &c
		}
		a, err := auth.New(toks, anon)
		if err != nil {
			return nil, err
		}
		d, err := env.DepsWithVectors(ctx, vf)
		if err != nil {
			return nil, err
		}
		d.Auth, d.LLM = a, client
		return query.NewService(cfg, d)
	}))
}
