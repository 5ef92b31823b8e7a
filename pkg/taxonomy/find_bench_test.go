package taxonomy_test

import (
	"strings"
	"testing"

	"github.com/kgstream/kgstream/pkg/taxonomy"
)

// corpusSentences returns the lines and ". "-separated sentences of the
// postmortem corpora beside the checkout.
func corpusSentences(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, text := range taxonomy.CorpusTexts(tb) {
		for _, line := range strings.Split(text, "\n") {
			for _, s := range strings.SplitAfter(line, ". ") {
				if strings.TrimSpace(s) != "" {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// BenchmarkFind runs Find on every sentence of the corpora, one sentence
// a call, as the offline extractor does.
func BenchmarkFind(b *testing.B) {
	sents := corpusSentences(b)
	if len(sents) == 0 {
		b.Skip("no corpora beside the checkout")
	}
	tx, err := taxonomy.Default()
	if err != nil {
		b.Fatal(err)
	}
	size, hits := 0, 0
	for _, s := range sents {
		size += len(s)
		hits += len(tx.Find(s, nil))
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, s := range sents {
			tx.Find(s, nil)
		}
	}
	b.ReportMetric(float64(len(sents)), "sentences")
	b.ReportMetric(float64(hits), "hits")
}
