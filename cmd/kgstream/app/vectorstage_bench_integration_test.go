//go:build integration

package app_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/clusterer"
	"github.com/kgstream/kgstream/services/reporter"
)

// BenchmarkVectorStage measures the reporter's vector consumer on batches
// of 64 graph-changed events of corpus documents (scaleDocs: the offline
// extractor, the resolver, the embedded stores, the offline embedder, as
// `kgstream up` runs them). The tenant holds KG_VEC_DOCS documents
// (default 1000), clustered and reported, every item indexed.
//
//   - reindex: a batch of documents already indexed, whose reports cite
//     them (what the stage does when a document's report was written
//     before its graph change reached the stage, and on a replay);
//   - new: a batch of documents just applied (not timed), never indexed:
//     their text units are new, their entities new or patched.
//
// One op is one batch; docs/s is the stage's throughput on one core.
func BenchmarkVectorStage(b *testing.B) {
	n := 1000
	if v := os.Getenv("KG_VEC_DOCS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("KG_VEC_DOCS: %v", err)
		}
	}
	const batch = 64
	ctx := context.Background()
	dir := b.TempDir()
	bus := streamtest.NewBus(b, streamtest.Options{})
	st, vix := openBenchStores(b, dir)
	rep, err := reporter.New(reporter.Config{Vectors: vix, Embedder: embed.NewHashing(embed.DefaultHashingDimensions)}, bus, st, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	// 64 more documents per iteration of "new", up to 64 iterations.
	const fresh = 64 * batch
	docs := scaleDocs(b, n+fresh)
	applyScaleDocs(b, st, bus, docs[:n])
	cw, err := clusterer.New(clusterer.Config{Partitioner: clusterer.Leiden(clusterer.LeidenConfig{})}, bus, st, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := cw.ReclusterFull(ctx, scaleTenant); err != nil {
		b.Fatal(err)
	}
	for {
		r, err := rep.Reconcile(ctx, scaleTenant)
		if err != nil {
			b.Fatal(err)
		}
		if !r.More {
			break
		}
	}
	msgs := func(docs []events.DocChanged) []*stream.Message {
		ms := make([]*stream.Message, len(docs))
		for i, d := range docs {
			data, err := events.Encode(&events.GraphChanged{Header: events.Header{Tenant: scaleTenant}, DocID: d.DocID, Version: d.Version})
			if err != nil {
				b.Fatal(err)
			}
			ms[i] = &stream.Message{Subject: "kg.graph.changed." + scaleTenant, Kind: events.KindGraphChanged, Tenant: scaleTenant, Data: data}
		}
		return ms
	}
	handle := func(b *testing.B, ms []*stream.Message) {
		for _, err := range rep.HandleVectors(ctx, ms) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	var batches [][]*stream.Message
	for lo := 0; lo < n; lo += batch {
		batches = append(batches, msgs(docs[lo:min(lo+batch, n)]))
	}
	for _, ms := range batches {
		handle(b, ms)
	}
	b.Run(fmt.Sprintf("docs=%d/reindex", n), func(b *testing.B) {
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			handle(b, batches[i%len(batches)])
			i++
		}
		b.ReportMetric(float64(i*batch)/b.Elapsed().Seconds(), "docs/s")
	})
	next := n
	b.Run(fmt.Sprintf("docs=%d/new", n), func(b *testing.B) {
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			if next+batch > len(docs) {
				// A skip here would drop the figures of the runs before
				// it without a word.
				b.Fatalf("out of fresh documents after %d batches: run with -benchtime Nx, N <= %d, and -count 1", i, fresh/batch)
			}
			b.StopTimer()
			add := docs[next : next+batch]
			next += batch
			applyScaleDocs(b, st, bus, add)
			ms := msgs(add)
			b.StartTimer()
			handle(b, ms)
			i++
		}
		b.ReportMetric(float64(i*batch)/b.Elapsed().Seconds(), "docs/s")
	})
}
