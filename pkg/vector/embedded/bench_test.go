package embedded_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kgstream/kgstream/pkg/vector/embedded"
	"github.com/kgstream/kgstream/pkg/vector/vectortest"
)

// benchItems is 100,000 unless KG_BENCH_VECTORS says otherwise.
func benchItems(b *testing.B) int {
	if s := os.Getenv("KG_BENCH_VECTORS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 10 {
			b.Fatalf("KG_BENCH_VECTORS=%q: want an integer >= 10", s)
		}
		return n
	}
	return 100_000
}

// BenchmarkSearch reports Search p50/p99 at 100,000 text units:
//
//	go test -run '^$' -bench Search -benchtime=1000x ./vector/embedded/
func BenchmarkSearch(b *testing.B) {
	ix, err := embedded.Open(filepath.Join(b.TempDir(), "vectors.db"), embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	vectortest.Benchmark(b, ix, benchItems(b))
}
