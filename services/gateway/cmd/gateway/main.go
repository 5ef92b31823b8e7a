// Command gateway serves kgstream's document API as its own process.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/service"
	"github.com/kgstream/kgstream/services/gateway"
)

func main() { daemon.Main("gateway", run) }

func run(ctx context.Context, args []string) error {
	f := daemon.Flags{Name: "gateway"}
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	f.Register(fs, "127.0.0.1:8081")
	tokens := fs.String("tokens", os.Getenv("KG_TOKENS_FILE"), "tokens file (required)")
	var cfg gateway.ServiceConfig
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", 4<<20, "request body limit")
	fs.StringVar(&cfg.WebhooksFile, "webhooks", os.Getenv("KG_WEBHOOKS_FILE"), "webhook receivers (YAML or JSON)")
	if err := daemon.Parse(fs, args); err != nil {
		return &daemon.UsageError{Err: err}
	}
	return daemon.RunContext(ctx, f, true, daemon.ServiceBody(func(_ context.Context, env *daemon.Env) (service.Service, error) {
		toks, err := auth.LoadFile(*tokens)
		if err != nil {
			return nil, err
		}
		a, err := auth.New(toks, nil)
		if err != nil {
			return nil, err
		}
		d := env.Deps()
		d.Auth = a
		return gateway.NewService(cfg, d)
	}))
}
