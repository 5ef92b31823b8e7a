// Command gateway serves kgstream's document API as its own process.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/openapi"
	"github.com/kgstream/kgstream/services/gateway"
)

func main() {
	f := daemon.Flags{Name: "gateway"}
	fs := flag.NewFlagSet("gateway", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:8081")
	tokens := fs.String("tokens", os.Getenv("KG_TOKENS_FILE"), "tokens file (required)")
	maxBody := fs.Int64("max-body-bytes", 4<<20, "request body limit")
	webhooks := fs.String("webhooks", os.Getenv("KG_WEBHOOKS_FILE"), "webhook receivers (YAML or JSON)")
	daemon.MustParse(fs, os.Args[1:])
	err := daemon.Run(f, true, func(_ context.Context, env *daemon.Env) (func(context.Context) error, http.Handler, error) {
		toks, err := auth.LoadFile(*tokens)
		if err != nil {
			return nil, nil, err
		}
		a, err := auth.New(toks, nil)
		if err != nil {
			return nil, nil, err
		}
		gcfg := gateway.Config{MaxBodyBytes: *maxBody, Graph: env.Stores}
		if *webhooks != "" {
			if gcfg.Webhooks, err = gateway.LoadWebhooks(*webhooks); err != nil {
				return nil, nil, err
			}
		}
		g, err := gateway.New(gcfg, env.Stores, env.Bus, a, env.Log, env.Registry)
		if err != nil {
			return nil, nil, err
		}
		mux := http.NewServeMux()
		mux.Handle("GET "+openapi.Path, openapi.Handler())
		mux.Handle("/", g.Handler())
		return g.Run, mux, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}
