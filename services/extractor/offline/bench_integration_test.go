//go:build integration

package offline_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// corpora are the public postmortem corpora beside the seed.
var corpora = []string{"../../../../shared/corpora/dfds-postmortems", "../../../../shared/corpora/cloud-incidents",
	"../../../../shared/corpora/wikitech-incidents"}

type corpusDoc struct {
	id   string
	text string
}

// loadCorpus reads every markdown postmortem of dir (templates and
// READMEs skipped). It fails, never skips, without the corpus.
func loadCorpus(tb testing.TB, dir string) []corpusDoc {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatalf("corpus %s is required: %v", dir, err)
	}
	var out []corpusDoc
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == "README.md" || name == "LICENSE" || strings.Contains(name, "template") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, corpusDoc{id: strings.TrimSuffix(strings.TrimSuffix(name, ".md"), ".txt"), text: string(data)})
	}
	if len(out) == 0 {
		tb.Fatalf("corpus %s has no documents", dir)
	}
	return out
}

// BenchmarkOfflineExtraction reports offline extraction throughput
// (chunking included) in documents per second on each corpus, and the
// failure modes found.
func BenchmarkOfflineExtraction(b *testing.B) {
	c := benchChunker(b)
	tagger, err := offline.NewTagger()
	if err != nil {
		b.Fatal(err)
	}
	for _, dir := range corpora {
		docs := loadCorpus(b, dir)
		for _, mode := range []struct {
			name string
			cfg  offline.Config
		}{
			{"default", offline.Config{}},
			{"noun-phrases", offline.Config{NounPhrases: offline.NounPhraseConfig{Enabled: true, IncludeIncidents: true, Tagger: tagger}}},
		} {
			b.Run(filepath.Base(dir)+"/"+mode.name, func(b *testing.B) {
				x, err := offline.New(mode.cfg)
				if err != nil {
					b.Fatal(err)
				}
				modes := map[string]int{}
				var rels, units, bytes int
				b.ResetTimer()
				cpu0 := processCPU(b)
				for i := 0; i < b.N; i++ {
					for _, d := range docs {
						doc := &events.DocChanged{Header: events.Header{Tenant: "bench"}, DocID: d.id, Version: 1,
							DocType: "incident", Text: d.text}
						us := c.Chunk(d.id, 1, d.text)
						_, rs, err := x.Extract(b.Context(), doc, us)
						if err != nil {
							b.Fatal(err)
						}
						if i == 0 {
							units += len(us)
							rels += len(rs)
							bytes += len(d.text)
							for _, r := range rs {
								if r.Relation == offline.RelFailure {
									modes[r.Target]++
								}
							}
						}
					}
				}
				cpu := (processCPU(b) - cpu0).Seconds()
				el := b.Elapsed().Seconds()
				b.ReportMetric(float64(b.N*len(docs))/el, "docs/s")
				b.ReportMetric(float64(b.N*bytes)/el/1e6, "MB/s")
				// The process's CPU time (its collector's included) per
				// document: what bounds the ingest rate, and steadier than
				// the wall-clock rate on a loaded machine.
				b.ReportMetric(cpu/float64(b.N*len(docs))*1e3, "cpu-ms/doc")
				b.ReportMetric(0, "ns/op")
				names := make([]string, 0, len(modes))
				for m := range modes {
					names = append(names, m)
				}
				sort.Slice(names, func(i, j int) bool { return modes[names[i]] > modes[names[j]] })
				var sb strings.Builder
				for _, m := range names {
					fmt.Fprintf(&sb, "%s=%d ", m, modes[m])
				}
				b.Logf("%d docs, %d text units, %d relationships; failure modes: %s", len(docs), units, rels, sb.String())
			})
		}
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkExtractionCatalogSize reports offline extraction's CPU per
// document of the DFDS corpus for a tenant whose service catalog holds 0,
// 30 or 3,000 components (synthetic entries, named svc-<n>, that the
// texts do not mention), one extractor for every document as the
// extractor service runs it: what a large catalog costs each document.
func BenchmarkExtractionCatalogSize(b *testing.B) {
	c := benchChunker(b)
	docs := loadCorpus(b, corpora[0])
	units := make([][]events.TextUnit, len(docs))
	for i, d := range docs {
		units[i] = c.Chunk(d.id, 1, d.text)
	}
	for _, n := range []int{0, 30, 3000} {
		var g offline.StaticGazetteer
		for i := range n {
			g = append(g, offline.CatalogEntry(fmt.Sprintf("component:svc%d", i), "component", fmt.Sprintf("svc-%d", i), fmt.Sprintf("svc%d", i)))
		}
		b.Run(fmt.Sprintf("catalog=%d", n), func(b *testing.B) {
			x, err := offline.New(offline.Config{Gazetteer: g})
			if err != nil {
				b.Fatal(err)
			}
			cpu0 := processCPU(b)
			for b.Loop() {
				for i, d := range docs {
					doc := &events.DocChanged{Header: events.Header{Tenant: "bench"}, DocID: d.id, Version: 1,
						DocType: "incident", Text: d.text}
					if _, _, err := x.Extract(b.Context(), doc, units[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric((processCPU(b)-cpu0).Seconds()/float64(b.N*len(docs))*1e3, "cpu-ms/doc")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchChunker is the chunker the extractor service uses.
func benchChunker(b *testing.B) *chunk.Chunker {
	tk, err := tokenizer()
	if err != nil {
		b.Fatal(err)
	}
	c, err := chunk.New(tk, chunk.DefaultTokens, chunk.DefaultOverlap)
	if err != nil {
		b.Fatal(err)
	}
	return c
}
