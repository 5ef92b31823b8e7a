package clusterer_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/store/storetest"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/clusterer"
)

// BenchmarkReclusterAfterEdit measures what re-clustering costs after one
// edit of one document: a store preloaded with KG_RECLUSTER_DOCS
// documents (default 10,000; 8 entity mentions and 7 edges each,
// drawn as storetest's apply benchmark draws them, over 1.1 entities per
// document: about 10,000 entities with an edge and 70,000 edges at the
// default) is clustered from scratch once; then each iteration edits one
// document (a new version with other contributions, not timed) and
// re-clusters incrementally (timed), as the clusterer does between full
// runs: reading the graph whole (whole: Recluster) or patching the graph
// the last run read with what the edit's graph change names (patched: as
// Run does).
func BenchmarkReclusterAfterEdit(b *testing.B) {
	docs := 10_000
	if v := os.Getenv("KG_RECLUSTER_DOCS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("KG_RECLUSTER_DOCS=%q: want a positive document count", v)
		}
		docs = n
	}
	corpus := storetest.BenchCorpus{Docs: docs, EdgesPerDoc: 7, Entities: docs * 11 / 10}
	st, err := embedded.Open(filepath.Join(b.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	storetest.Preload(b, st, tenant, corpus, 2)
	bus := streamtest.NewBus(b, streamtest.Options{Config: stream.Config{}})
	w, err := clusterer.New(clusterer.Config{Partitioner: clusterer.Leiden(clusterer.LeidenConfig{}), FullEvery: 1 << 30},
		bus, st, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	if err := w.ReclusterFull(ctx, tenant); err != nil {
		b.Fatal(err)
	}
	g, err := st.Snapshot(ctx, tenant)
	if err != nil {
		b.Fatal(err)
	}
	comms, err := st.Communities(ctx, tenant)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d documents: %d entities, %d edges, %d communities; the full run took %v",
		docs, len(g.Entities), len(g.Edges), len(comms), time.Since(start).Round(time.Millisecond))
	// Each mode edits documents of its own (whole from the first, patched
	// from the middle) so that both edit documents at version 2.
	for m, mode := range []string{"whole", "patched"} {
		b.Run(mode, func(b *testing.B) {
			for i := range b.N {
				b.StopTimer()
				// Document doc gets the contributions another document
				// would have, as its version 2, 3, ...
				doc := (i + m*docs/2) % docs
				id := corpus.DocID(doc)
				rec, err := st.Source(ctx, tenant, id)
				if err != nil {
					b.Fatal(err)
				}
				c := corpus.Doc(docs + i + m*docs/2)
				res, err := st.Apply(ctx, tenant, id, rec.Version+1, c)
				if err != nil {
					b.Fatal(err)
				}
				// Announced as the resolver announces it.
				contributed := slices.Clone(rec.Entities)
				for _, e := range c.Entities {
					contributed = append(contributed, e.ID)
				}
				slices.Sort(contributed)
				data, err := events.Encode(&events.GraphChanged{Header: events.Header{Tenant: tenant}, DocID: id,
					Version: rec.Version + 1, Touched: res.Touched, Contributed: slices.Compact(contributed), ReceivedAt: time.Now()})
				if err != nil {
					b.Fatal(err)
				}
				if err := w.Handle(ctx, &stream.Message{Kind: events.KindGraphChanged, Tenant: tenant, Data: data}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				recluster := w.Recluster
				if mode == "patched" {
					recluster = w.ReclusterPatched
				}
				if err := recluster(ctx, tenant); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
