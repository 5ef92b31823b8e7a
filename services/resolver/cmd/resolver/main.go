// Command resolver applies extracted documents to the graph store as its own process.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/service"
	"github.com/kgstream/kgstream/services/resolver"
)

func main() { daemon.Main("resolver", run) }

func run(ctx context.Context, args []string) error {
	f := daemon.Flags{Name: "resolver"}
	fs := flag.NewFlagSet("resolver", flag.ContinueOnError)
	f.Register(fs, "127.0.0.1:8083")
	var cfg resolver.ServiceConfig
	fs.IntVar(&cfg.MaxDeliver, "max-deliver", 5, "deliveries before an event is dead-lettered")
	fs.IntVar(&cfg.BatchSize, "batch", 0, "most events applied in one store transaction (0: the default, 64)")
	fs.DurationVar(&cfg.BatchWait, "batch-wait", 0, "how long a batch waits for more events after its first (0: the default, 5ms)")
	fs.StringVar(&cfg.AliasesFile, "aliases", os.Getenv("KG_ALIASES_FILE"), "alias table (YAML), reloaded when it changes")
	if err := daemon.Parse(fs, args); err != nil {
		return &daemon.UsageError{Err: err}
	}
	return daemon.RunContext(ctx, f, true, daemon.ServiceBody(func(_ context.Context, env *daemon.Env) (service.Service, error) {
		return resolver.NewService(cfg, env.Deps())
	}))
}
