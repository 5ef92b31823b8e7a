package clusterer_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

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
// runs. It reports ms/op and the communities changed per edit.
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
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		// Document i%docs gets the contributions another document would
		// have, as its version 2, 3, ...
		doc := i % docs
		if _, err := st.Apply(ctx, tenant, corpus.DocID(doc), int64(2+i/docs), corpus.Doc(docs+i)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := w.Recluster(ctx, tenant); err != nil {
			b.Fatal(err)
		}
	}
}
