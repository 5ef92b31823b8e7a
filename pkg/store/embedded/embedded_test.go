package embedded_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Stores {
		// NoSync: every test gets a throwaway file; durability is bbolt's.
		s, err := embedded.Open(filepath.Join(t.TempDir(), "kgstream.db"), embedded.Options{NoSync: true})
		if err != nil {
			t.Fatalf("opening the store: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// BenchmarkApply is issue 4's benchmark: Apply latency and throughput on a
// store already holding storetest.BenchDocs documents (about a million
// edges), and memory per edge. The preload writes without fsync; the
// measured applies run on the file reopened with fsync, as in production.
func BenchmarkApply(b *testing.B) {
	const tenant = "bench"
	corpus := storetest.NewBenchCorpus(b)
	path := filepath.Join(b.TempDir(), "kgstream.db")
	s, err := embedded.Open(path, embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	took := storetest.Preload(b, s, tenant, corpus, 2)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	// What `kgstream compact` makes of the file: a copy compacted, the
	// benchmark going on with the file as the applies left it.
	copied := filepath.Join(b.TempDir(), "copy")
	if err := os.CopyFS(copied, os.DirFS(filepath.Dir(path))); err != nil {
		b.Fatal(err)
	}
	cst, err := embedded.Compact(b.Context(), filepath.Join(copied, filepath.Base(path)))
	if err != nil {
		b.Fatal(err)
	}
	_ = os.RemoveAll(copied)

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err = embedded.Open(path, embedded.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	st, err := s.Stats(b.Context(), tenant)
	if err != nil {
		b.Fatal(err)
	}
	// Heap of an open store: bbolt maps the file, so reads cost page cache,
	// not heap; what the heap holds is the store's own state.
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("preloaded %d documents, %d entities, %d edges in %v (%.0f applies/s); file %d MiB; heap in use %d KiB before open, %d KiB after",
		st.Sources, st.Entities, st.Edges, took.Round(time.Second), float64(corpus.Docs)/took.Seconds(),
		fi.Size()>>20, before.HeapInuse>>10, after.HeapInuse>>10)
	b.Run("memory", func(b *testing.B) {
		for b.Loop() {
		}
		edges := float64(st.Edges)
		b.ReportMetric(edges, "edges")
		b.ReportMetric(float64(fi.Size())/edges, "disk-B/edge")
		b.ReportMetric(float64(cst.BytesAfter)/edges, "compacted-disk-B/edge")
		b.ReportMetric(float64(after.HeapInuse)/edges, "heap-B/edge")
		b.ReportMetric(took.Seconds(), "preload-s")
	})
	storetest.BenchApply(b, s, tenant, corpus)
	storetest.BenchApplyBatch(b, s, tenant, corpus)
}

// BenchmarkReplaceCommunities stores a run of 4,000 communities over 12,000
// entities (a three-level hierarchy: every entity in one community of each
// level, 36,000 member index entries), as a re-clustering of a tenant of
// about 10,000 documents does.
func BenchmarkReplaceCommunities(b *testing.B) {
	const tenant = "bench"
	s, err := embedded.Open(filepath.Join(b.TempDir(), "kgstream.db"), embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	var cs []store.Community
	for level, size := range []int{6, 12, 60} {
		for first := 0; first < 12000; first += size {
			var members []string
			for e := first; e < first+size; e++ {
				// Entity ids whose order is unrelated to the communities'.
				members = append(members, fmt.Sprintf("component:%08x", uint32(e)*2654435761))
			}
			slices.Sort(members)
			h := store.MemberHash(members)
			cs = append(cs, store.Community{ID: fmt.Sprintf("c%d-%s", level, h[:16]), Level: level, Members: members, MemberHash: h,
				Sources: []provenance.SourceRef{{DocID: fmt.Sprintf("doc-%05d", first), Version: 1}}})
		}
	}
	store.SortCommunities(cs)
	run := int64(0)
	for b.Loop() {
		run++
		for i := range cs {
			cs[i].Run = run
		}
		if err := s.ReplaceCommunities(b.Context(), tenant, run, cs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCountSources compares what an admin's status reads to count a
// tenant of 10,000 documents: the registry's counts, or its listing.
func BenchmarkCountSources(b *testing.B) {
	ctx := b.Context()
	s, err := embedded.Open(filepath.Join(b.TempDir(), "kgstream.db"), embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	for i := range 10_000 {
		a := store.Announcement{DocID: fmt.Sprintf("doc-%05d", i), Title: fmt.Sprintf("Postmortem %d", i),
			ACL: provenance.ACL{Groups: []string{"sre", "eng"}}}
		if _, err := s.Announce(ctx, "bench", a); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("counts", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.CountSources(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("listing", func(b *testing.B) {
		for b.Loop() {
			all, err := s.ListSources(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			_ = store.CountStates(all)
		}
	})
}

// BenchmarkHubChanged reads what a change of one document makes of a hub
// named by 5,000 documents (5,000 fragments, 5,000 edges, one per
// document to its own incident): the hub whole and its edge list whole,
// against its head and that document's fragment (EntityParts) and its
// edges to that document's entities (EdgesAmong).
func BenchmarkHubChanged(b *testing.B) {
	ctx := b.Context()
	s, err := embedded.Open(filepath.Join(b.TempDir(), "kgstream.db"), embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	const hub, docs = "service:hub", 5000
	for i := range docs {
		doc, inc := fmt.Sprintf("doc-%05d", i), fmt.Sprintf("incident:i%05d", i)
		c := store.Contributions{Title: doc, DocType: "incident",
			TextUnits: []events.TextUnit{{ID: "u0", Text: "the hub failed", End: 14}},
			Entities: []store.EntityContribution{
				{ID: hub, Type: "service", Name: "hub", NameRank: 2, Description: "the hub failed in " + doc, TextUnits: []string{"u0"}},
				{ID: inc, Type: "incident", Name: inc, NameRank: 2, TextUnits: []string{"u0"}}},
			Edges: []store.EdgeContribution{{Source: inc, Relation: "affected", Target: hub, Weight: 1, Description: "affected", TextUnits: []string{"u0"}}}}
		if _, err := s.Apply(ctx, "bench", doc, 1, c); err != nil {
			b.Fatal(err)
		}
	}
	doc, named := "doc-02500", []string{"incident:i02500", hub}
	b.Run("entity/whole", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Entities(ctx, "bench", []string{hub}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("entity/parts", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.EntityParts(ctx, "bench", []string{hub}, 0, map[string][]string{hub: {doc}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("edges/whole", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Edges(ctx, "bench", hub, store.In); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("edges/among", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.EdgesAmong(ctx, "bench", hub, store.In, named); err != nil {
				b.Fatal(err)
			}
		}
	})
}
