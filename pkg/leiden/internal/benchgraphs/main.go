// Command benchgraphs writes the two benchmark graphs of package leiden
// (100,000 nodes, 1,000,000 edges: planted partition and Erdős–Rényi) as
// source<TAB>target<TAB>weight lines, in the order the benchmarks feed them
// to NewNetwork, so that other implementations can be timed on the same
// input:
//
//	go run ./pkg/leiden/internal/benchgraphs -out /tmp/leiden-bench
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kgstream/kgstream/pkg/leiden"
)

func write(path string, edges []leiden.Edge) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for _, e := range edges {
		fmt.Fprintf(w, "%s\t%s\t%g\n", e.Source, e.Target, e.Weight)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func main() {
	out := flag.String("out", ".", "directory for planted.edges.tsv and er.edges.tsv")
	nodes := flag.Int("nodes", 100_000, "nodes")
	edges := flag.Int("edges", 1_000_000, "edges")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for name, g := range map[string][]leiden.Edge{
		"planted": leiden.PlantedPartition(*nodes, *edges, 100, 0.8, 42),
		"er":      leiden.ErdosRenyi(*nodes, *edges, 42),
	} {
		path := filepath.Join(*out, name+".edges.tsv")
		if err := write(path, g); err != nil {
			fmt.Fprintln(os.Stderr, "writing", path+":", err)
			os.Exit(1)
		}
		fmt.Println(path)
	}
}
