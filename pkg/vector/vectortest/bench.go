package vectortest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

// BenchDimensions is the embedding size of the benchmark corpus (the
// offline embedder's default).
const BenchDimensions = 384

var (
	benchServices = []string{"auth", "billing", "checkout", "gateway", "search", "payments", "inventory", "notifications",
		"ledger", "profile", "session", "reporting", "ingest", "scheduler", "storage", "cdn"}
	benchModes = []string{"expired certificate", "unstaged config push", "dns misconfiguration", "memory leak", "disk full",
		"connection pool exhaustion", "thundering herd", "clock skew", "bad deploy", "schema migration lock",
		"rate limit misconfigured", "expired credentials", "split brain", "cache stampede", "queue backlog", "noisy neighbour"}
	benchEffects = []string{"elevated latency", "failed logins", "dropped requests", "partial outage", "full outage",
		"stale reads", "duplicate charges", "timeouts", "5xx errors", "data loss risk"}
	benchActions = []string{"rolled back the release", "renewed the certificate", "restarted the pods", "failed over the database",
		"added an alert", "raised the pool size", "purged the cache", "paused the rollout", "fixed the zone file", "staged the config"}
)

// benchText is a synthetic postmortem paragraph.
func benchText(rng *rand.Rand, i int) string {
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	return fmt.Sprintf("INC-%d: the %s service saw %s caused by %s in the %s dependency; on-call %s and %s. Follow-up: %s for %s.",
		i, pick(benchServices), pick(benchEffects), pick(benchModes), pick(benchServices),
		pick(benchActions), pick(benchActions), pick(benchModes), pick(benchServices))
}

// benchQuery is a question-like text.
func benchQuery(rng *rand.Rand) string {
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	return fmt.Sprintf("why did %s have %s after %s", pick(benchServices), pick(benchEffects), pick(benchModes))
}

// Benchmark preloads n text units (384-dimension offline embeddings of
// generated postmortem text, 50 per document, half of the documents public
// and the rest readable by one of 8 groups) into ix, then measures Search
// (k = 10, a caller in 2 groups) one query at a time, and reports
// p50_ms and p99_ms, the preload time and recall@10 against exact search.
// Run with a fixed count for stable percentiles, e.g. -benchtime=1000x.
func Benchmark(b *testing.B, ix vector.Index, n int) {
	const (
		tenant  = "bench"
		k       = 10
		perDoc  = 50
		batch   = 1000
		queries = 256
		recallQ = 20
	)
	ctx := b.Context()
	rng := rand.New(rand.NewPCG(42, 42))
	emb := embed.NewHashing(BenchDimensions)
	groups := []string{"sre", "db", "payments", "security", "platform", "data", "mobile", "web"}
	f := vector.Filter{Principal: "bench-user", Groups: []string{"sre", "payments"}}

	items := make([]vector.Item, n)
	for i := range items {
		doc := fmt.Sprintf("INC-%d", i/perDoc)
		acl := provenance.PublicACL()
		if d := i / perDoc; d%2 == 1 {
			acl = provenance.ACL{Groups: []string{groups[(d/2)%len(groups)]}}
		}
		id := fmt.Sprintf("%s#%d", doc, i%perDoc)
		text := benchText(rng, i)
		items[i] = vector.Item{ID: id, Kind: vector.KindTextUnit, Vector: emb.Vector(text), Text: text,
			Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: doc, Version: 1, TextUnit: id}, ACL: acl}}}
	}
	start := time.Now()
	for chunk := range slices.Chunk(items, batch) {
		if err := ix.Upsert(ctx, tenant, chunk); err != nil {
			b.Fatalf("preloading: %v", err)
		}
	}
	preload := time.Since(start)

	qs := make([][]float32, queries)
	for i := range qs {
		qs[i] = emb.Vector(benchQuery(rng))
	}
	lat := make([]time.Duration, 0, 1024)
	i := 0
	for b.Loop() {
		q := qs[i%len(qs)]
		i++
		t0 := time.Now()
		hits, err := ix.Search(ctx, tenant, vector.KindTextUnit, q, k, f)
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatalf("searching: %v", err)
		}
		if len(hits) != k {
			b.Fatalf("got %d hits, want %d", len(hits), k)
		}
	}

	// Recall@k against exact search over the admitted items.
	var found, total int
	for _, q := range qs[:recallQ] {
		hits, err := ix.Search(ctx, tenant, vector.KindTextUnit, q, k, f)
		if err != nil {
			b.Fatalf("searching: %v", err)
		}
		exact := exactTopK(items, q, k, f)
		for _, h := range hits {
			if exact[h.ID] {
				found++
			}
		}
		total += k
	}

	slices.Sort(lat)
	pct := func(p float64) float64 {
		idx := int(p * float64(len(lat)-1))
		return float64(lat[idx].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	b.ReportMetric(preload.Seconds(), "preload_s")
	b.ReportMetric(float64(found)/float64(total), "recall@10")
	b.Logf("%d text units, %d dims, %d searches: p50 %.2f ms, p99 %.2f ms, preload %.1f s, recall@%d %.3f",
		n, BenchDimensions, len(lat), pct(0.5), pct(0.99), preload.Seconds(), k, float64(found)/float64(total))
}

// exactTopK returns the ids of the k admitted items nearest q; ties at the
// k-th score are all included, so an index may pick any of them.
func exactTopK(items []vector.Item, q []float32, k int, f vector.Filter) map[string]bool {
	type scored struct {
		id string
		s  float64
	}
	var all []scored
	for _, it := range items {
		if it.ReadableBy(f) {
			all = append(all, scored{it.ID, cosine(q, it.Vector)})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].s > all[j].s })
	out := map[string]bool{}
	for i, s := range all {
		if i >= k && s.s < all[k-1].s-1e-6 {
			break
		}
		out[s.id] = true
	}
	return out
}
