// Command clusterer keeps the community hierarchy current as its own process.
package main

import (
	"context"
	"flag"
	"time"

	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/service"
	"github.com/kgstream/kgstream/services/clusterer"
)

func main() { daemon.Main("clusterer", run) }

func run(ctx context.Context, args []string) error {
	f := daemon.Flags{Name: "clusterer"}
	fs := flag.NewFlagSet("clusterer", flag.ContinueOnError)
	f.Register(fs, "127.0.0.1:8084")
	var cfg clusterer.Config
	fs.DurationVar(&cfg.Quiet, "quiet", 2*time.Second, "quiet period before re-clustering")
	fs.DurationVar(&cfg.MaxDelay, "max-delay", 30*time.Second, "maximum delay of a re-clustering")
	fs.IntVar(&cfg.MaxClusterSize, "max-cluster-size", 10, "hierarchical Leiden max cluster size")
	fs.StringVar(&cfg.WeightBy, "weight-by", "sources", "edge weight: sources or strength")
	fs.IntVar(&cfg.FullEvery, "full-every", 100, "every n-th re-clustering of a tenant is from scratch, the others start from the previous partition (0: all from scratch)")
	fs.DurationVar(&cfg.FullInterval, "full-interval", 0, "a tenant's re-clustering is from scratch once its last one from scratch is this old, and one is run then if runs since were incremental (0: no such schedule)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", 15*time.Second, "clustering lease TTL: replicas cluster one at a time, a standby takes over this long after the holder dies (0: no lease, a single replica)")
	if err := daemon.Parse(fs, args); err != nil {
		return &daemon.UsageError{Err: err}
	}
	return daemon.RunContext(ctx, f, true, daemon.ServiceBody(func(_ context.Context, env *daemon.Env) (service.Service, error) {
		return clusterer.NewService(cfg, env.Deps())
	}))
}
