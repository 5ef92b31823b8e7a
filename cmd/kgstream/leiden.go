package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/kgstream/kgstream/pkg/leiden"
)

// cmdLeiden clusters source<TAB>target<TAB>weight lines from stdin and
// writes the fixture format on stdout, modularity and time on stderr.
func cmdLeiden(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("leiden", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := leiden.DefaultOptions()
	flat := fs.Bool("flat", false, "one flat leiden run (node<TAB>cluster)")
	maxSize := fs.Int("max-cluster-size", 10, "hierarchical: split clusters larger than this")
	seed := fs.Uint64("seed", def.Seed, "random seed")
	res := fs.Float64("resolution", def.Resolution, "resolution")
	rnd := fs.Float64("randomness", def.Randomness, "randomness")
	iters := fs.Int("iterations", def.Iterations, "iterations")
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, msg: "leiden reads edges on stdin and takes no arguments"}
	}
	edges, err := leiden.ReadEdges(stdin)
	if err != nil {
		return fmt.Errorf("reading edges: %w", err)
	}
	opts := def
	opts.Seed, opts.Resolution, opts.Randomness, opts.Iterations = *seed, *res, *rnd, *iters
	start := time.Now()
	net, err := leiden.NewNetwork(edges)
	if err != nil {
		return err
	}
	var clusters []int
	var q float64
	if *flat {
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
	rows, err := leiden.Hierarchical(net, opts, *maxSize)
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
