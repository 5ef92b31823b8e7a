// Command clusterer keeps the community hierarchy current as its own process.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/services/clusterer"
)

func main() {
	f := daemon.Flags{Name: "clusterer"}
	fs := flag.NewFlagSet("clusterer", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:8084")
	quiet := fs.Duration("quiet", 2*time.Second, "quiet period before re-clustering")
	maxDelay := fs.Duration("max-delay", 30*time.Second, "maximum delay of a re-clustering")
	maxSize := fs.Int("max-cluster-size", 10, "hierarchical Leiden max cluster size")
	weightBy := fs.String("weight-by", "sources", "edge weight: sources or strength")
	fullEvery := fs.Int("full-every", 100, "every n-th re-clustering of a tenant is from scratch, the others start from the previous partition (0: all from scratch)")
	leaseTTL := fs.Duration("lease-ttl", 15*time.Second, "clustering lease TTL: replicas cluster one at a time, a standby takes over this long after the holder dies (0: no lease, a single replica)")
	daemon.MustParse(fs, os.Args[1:])
	err := daemon.Run(f, true, func(_ context.Context, env *daemon.Env) (func(context.Context) error, http.Handler, error) {
		w, err := clusterer.New(clusterer.Config{Quiet: *quiet, MaxDelay: *maxDelay, WeightBy: *weightBy,
			FullEvery: *fullEvery, MaxClusterSize: *maxSize, LeaseTTL: *leaseTTL, Partitioner: clusterer.Leiden(clusterer.LeidenConfig{MaxClusterSize: *maxSize})}, env.Bus, env.Stores, env.Log, env.Registry)
		if err != nil {
			return nil, nil, err
		}
		return w.Run, nil, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterer:", err)
		os.Exit(1)
	}
}
