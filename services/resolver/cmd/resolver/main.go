// Command resolver applies extracted documents to the graph store as its own process.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/services/resolver"
)

func main() {
	f := daemon.Flags{Name: "resolver"}
	fs := flag.NewFlagSet("resolver", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:8083")
	maxDeliver := fs.Int("max-deliver", 5, "deliveries before an event is dead-lettered")
	batch := fs.Int("batch", 0, "most events applied in one store transaction (0: the default, 64)")
	batchWait := fs.Duration("batch-wait", 0, "how long a batch waits for more events after its first (0: the default, 5ms)")
	aliasesFile := fs.String("aliases", os.Getenv("KG_ALIASES_FILE"), "alias table (YAML), reloaded when it changes")
	daemon.MustParse(fs, os.Args[1:])
	err := daemon.Run(f, true, func(_ context.Context, env *daemon.Env) (func(context.Context) error, http.Handler, error) {
		aliases, err := resolve.NewAliasWatcher(*aliasesFile, env.Log)
		if err != nil {
			return nil, nil, err
		}
		w, err := resolver.New(resolver.Config{MaxDeliver: *maxDeliver, Aliases: aliases,
			BatchSize: *batch, BatchWait: *batchWait}, env.Bus, env.Stores, env.Log, env.Registry)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context) error {
			go aliases.Run(ctx, 5*time.Second)
			go w.WatchAliases(ctx, time.Second)
			return w.Run(ctx)
		}, nil, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "resolver:", err)
		os.Exit(1)
	}
}
