package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kgstream/kgstream/pkg/leiden"
)

// leidenOptions are the flags of `kgstream leiden`.
type leidenOptions struct {
	flat     bool
	maxSize  int
	seed     uint64
	res, rnd float64
	iters    int
}

func leidenCmd(g *globals) *cobra.Command {
	def := leiden.DefaultOptions()
	var o leidenOptions
	c := &cobra.Command{
		Use:   "leiden < EDGES",
		Short: "Cluster source<TAB>target<TAB>weight lines from stdin (hierarchical Leiden)",
		Long: "Cluster source<TAB>target<TAB>weight lines from stdin and write the fixture format on stdout\n" +
			"(level, node, cluster, parent; node<TAB>cluster with --flat), modularity and time on stderr.",
		Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLeiden(cmd.Context(), o, g.stdin, g.stdout, g.stderr)
		},
	}
	f := c.Flags()
	f.BoolVar(&o.flat, "flat", false, "one flat leiden run (node<TAB>cluster)")
	f.IntVar(&o.maxSize, "max-cluster-size", 10, "hierarchical: split clusters larger than this")
	f.Uint64Var(&o.seed, "seed", def.Seed, "random seed")
	f.Float64Var(&o.res, "resolution", def.Resolution, "resolution")
	f.Float64Var(&o.rnd, "randomness", def.Randomness, "randomness")
	f.IntVar(&o.iters, "iterations", def.Iterations, "iterations")
	return c
}

// runLeiden clusters the edges of stdin and writes the fixture format on
// stdout, modularity and time on stderr.
func runLeiden(_ context.Context, o leidenOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	def := leiden.DefaultOptions()
	edges, err := leiden.ReadEdges(stdin)
	if err != nil {
		return fmt.Errorf("reading edges: %w", err)
	}
	opts := def
	opts.Seed, opts.Resolution, opts.Randomness, opts.Iterations = o.seed, o.res, o.rnd, o.iters
	start := time.Now()
	net, err := leiden.NewNetwork(edges)
	if err != nil {
		return err
	}
	var clusters []int
	var q float64
	if o.flat {
		clusters, q, err = leiden.Leiden(net, opts)
		if err != nil {
			return err
		}
		took := time.Since(start)
		if err := leiden.WriteFlat(stdout, net, clusters); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "modularity %.17g\ntime %s\n", q, took)
		return nil
	}
	rows, err := leiden.Hierarchical(net, opts, o.maxSize)
	if err != nil {
		return err
	}
	took := time.Since(start)
	if err := leiden.WriteHierarchical(stdout, rows); err != nil {
		return err
	}
	// Modularity of level 0, the partition the hierarchy starts from.
	level0 := map[string]int{}
	for _, r := range rows {
		if r.Level == 0 {
			level0[r.Node] = r.Cluster
		}
	}
	if q, err = leiden.Modularity(edges, level0, opts.Resolution); err == nil {
		fmt.Fprintf(stderr, "modularity(level 0) %.17g\n", q)
	}
	fmt.Fprintf(stderr, "time %s\n", took)
	return nil
}
