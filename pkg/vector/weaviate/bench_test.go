package weaviate_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/kgstream/kgstream/pkg/vector/vectortest"
)

// BenchmarkSearch reports Search p50/p99 at 100,000 text units (or
// KG_BENCH_VECTORS) on the server .ci/weaviate.sh starts:
//
//	go test -run '^$' -bench Search -benchtime=1000x -timeout 60m ./vector/weaviate/
func BenchmarkSearch(b *testing.B) {
	n := 100_000
	if s := os.Getenv("KG_BENCH_VECTORS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 10 {
			b.Fatalf("KG_BENCH_VECTORS=%q: want an integer >= 10", s)
		}
	}
	vectortest.Benchmark(b, newIndex(b, serverConfig()), n)
}
