//go:build integration

package chunk

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkChunk reports the chunker's throughput, in documents and
// megabytes per second, on each corpus of the extraction benchmark, with
// the chunker the extractor service uses.
func BenchmarkChunk(b *testing.B) {
	tk, err := testTokenizer()
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(tk, DefaultTokens, DefaultOverlap)
	if err != nil {
		b.Fatal(err)
	}
	for _, dir := range []string{"dfds-postmortems", "cloud-incidents", "wikitech-incidents"} {
		entries, err := os.ReadDir(filepath.Join("../../../../shared/corpora", dir))
		if err != nil {
			b.Fatalf("corpus %s is required: %v", dir, err)
		}
		var docs []string
		var bytes int
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || name == "README.md" || name == "LICENSE" || strings.Contains(name, "template") {
				continue
			}
			data, err := os.ReadFile(filepath.Join("../../../../shared/corpora", dir, name))
			if err != nil {
				b.Fatal(err)
			}
			docs = append(docs, string(data))
			bytes += len(data)
		}
		if len(docs) == 0 {
			b.Fatalf("corpus %s has no documents", dir)
		}
		b.Run(dir, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for i, d := range docs {
					c.Chunk(dir, int64(i), d)
				}
			}
			el := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N*len(docs))/el, "docs/s")
			b.ReportMetric(float64(b.N*bytes)/el/1e6, "MB/s")
		})
	}
}
