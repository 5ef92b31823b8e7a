// Command reporter writes community reports as its own process and, with
// --weaviate (or --vector-dir), keeps the vector index current: text units,
// entity descriptions and reports, embedded by the KG_EMBED_* endpoint or
// the offline hashing embedder.
package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/service"
	"github.com/kgstream/kgstream/services/reporter"
)

func main() { daemon.Main("reporter", run) }

func run(ctx context.Context, args []string) error {
	f := daemon.Flags{Name: "reporter"}
	fs := flag.NewFlagSet("reporter", flag.ContinueOnError)
	f.Register(fs, "127.0.0.1:8085")
	var vf daemon.VectorFlags
	vf.Register(fs)
	var cfg reporter.Config
	fs.DurationVar(&cfg.ReconcileEvery, "reconcile-every", time.Minute, "how often the reports are reconciled with every stored community, besides at start; it bounds how long a lost announcement leaves a community without its report (negative: never)")
	fs.IntVar(&cfg.VectorBatch, "vector-batch", 256, "the most graph and ACL changes the vector index is rewritten for together")
	fs.DurationVar(&cfg.VectorBatchWait, "vector-batch-wait", 50*time.Millisecond, "how long the vector consumer waits for more changes once the first of a batch arrived")
	fs.DurationVar(&cfg.ReconcileGap, "reconcile-gap", 2*time.Second, "the least time between a reconciliation pass and the narrow one (the communities the events named) a communities event asks for (negative: none)")
	fs.IntVar(&cfg.ReportConcurrency, "report-concurrency", 0, "how many community reports are written at once (0: 8 with an LLM writer, whose calls then overlap within the LLM client's own bound on requests in flight, 1 without)")
	if err := daemon.Parse(fs, args); err != nil {
		return &daemon.UsageError{Err: err}
	}
	// Refused here, before connecting anywhere (0 would mean the default).
	if cfg.ReportConcurrency < 0 {
		return &daemon.UsageError{Err: fmt.Errorf("--report-concurrency %d: must not be negative", cfg.ReportConcurrency)}
	}
	if cfg.VectorBatch < 1 {
		return &daemon.UsageError{Err: fmt.Errorf("--vector-batch %d: must be at least 1", cfg.VectorBatch)}
	}
	if cfg.VectorBatchWait < 0 {
		return &daemon.UsageError{Err: fmt.Errorf("--vector-batch-wait %v: must not be negative", cfg.VectorBatchWait)}
	}
	client, err := daemon.LLMFromEnv(nil)
	if err != nil {
		return &daemon.UsageError{Err: err}
	}
	return daemon.RunContext(ctx, f, true, daemon.ServiceBody(func(ctx context.Context, env *daemon.Env) (service.Service, error) {
		d, err := env.DepsWithVectors(ctx, vf)
		if err != nil {
			return nil, err
		}
		d.LLM = client
		return reporter.NewService(cfg, d)
	}))
}
