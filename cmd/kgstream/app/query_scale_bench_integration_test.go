//go:build integration

package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	kgstatus "github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/pkg/vector"
	vecembedded "github.com/kgstream/kgstream/pkg/vector/embedded"
	"github.com/kgstream/kgstream/services/clusterer"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/offline"
	"github.com/kgstream/kgstream/services/query"
	"github.com/kgstream/kgstream/services/reporter"
	"github.com/kgstream/kgstream/services/resolver"
)

// scaleCorpusDirs are the corpora the query scale data set cycles through.

const scaleTenant = "acme"

// scaleACL is document i's ACL: a quarter each public, oncall only, sre
// only, and oncall plus sre.
func scaleACL(i int) provenance.ACL {
	switch i % 4 {
	case 0:
		return provenance.PublicACL()
	case 1:
		return provenance.ACL{Groups: []string{"oncall"}}
	case 2:
		return provenance.ACL{Groups: []string{"sre"}}
	default:
		return provenance.ACL{Groups: []string{"oncall", "sre"}}
	}
}

// scaleDocs returns n documents the same way every time: document i is
// the i-th non-empty file (modulo their number) of scaleCorpusDirs, each
// directory's files in name order, id doc-%05d, doc type incident, title
// its first line.
func scaleDocs(tb testing.TB, n int) []events.DocChanged {
	tb.Helper()
	type base struct{ title, text string }
	var bases []base
	for _, dir := range scaleCorpusDirs {
		root := filepath.Join("../../../../shared/corpora", dir)
		entries, err := os.ReadDir(root)
		if err != nil || len(entries) == 0 {
			tb.Fatalf("corpus %s not found beside the checkout: %v", dir, err)
		}
		var names []string
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || strings.HasPrefix(name, "LICENSE") || strings.HasPrefix(name, "README") || strings.HasPrefix(name, ".") {
				continue
			}
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			data, err := os.ReadFile(filepath.Join(root, name))
			if err != nil {
				tb.Fatal(err)
			}
			text := string(data)
			if strings.TrimSpace(text) == "" {
				continue
			}
			title, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
			bases = append(bases, base{strings.TrimSpace(title), text})
		}
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	docs := make([]events.DocChanged, n)
	for i := range docs {
		b := bases[i%len(bases)]
		docs[i] = events.DocChanged{Header: events.Header{Tenant: scaleTenant}, DocID: fmt.Sprintf("doc-%05d", i), Version: 1,
			DocType: "incident", Title: b.title, Text: b.text, ACL: scaleACL(i), ReceivedAt: at}
	}
	return docs
}

// scaleData is a built data set: the stores, the vector index and the
// bus the query service follows.
type scaleData struct {
	st  *embedded.Store
	vix *vecembedded.Index
	bus *stream.Bus
}

// buildScaleData builds the n-document data set in dir, or opens it when
// dir holds one already built for n documents (KG_QUERY_SCALE_DATA lets
// two test binaries measure the very same files). Building: the offline
// extractor on each document's chunks, the resolver's Resolve, the
// registry announcement and ApplyBatch (64 a transaction), the text units'
// vectors (offline hashing embedder), one full clustering (the
// clusterer's ReclusterFull: hierarchical Leiden, as the first run of a
// tenant) and the reporter's reconciliation until every community has its
// report.
func buildScaleData(b *testing.B, dir string, n int) *scaleData {
	b.Helper()
	ctx := context.Background()
	bus := streamtest.NewBus(b, streamtest.Options{})
	stamp := filepath.Join(dir, "built")
	want := strconv.Itoa(n)
	got, _ := os.ReadFile(stamp)
	fresh := string(got) != want
	if fresh {
		// A graph applied whole (stamp "applied") is kept; the rest is
		// built again.
		if got, _ := os.ReadFile(filepath.Join(dir, "applied")); string(got) != want {
			_ = os.Remove(filepath.Join(dir, "kg.db"))
		}
		_ = os.Remove(filepath.Join(dir, "vectors.db"))
	}
	st, vix := openBenchStores(b, dir)
	d := &scaleData{st: st, vix: vix, bus: bus}
	if !fresh {
		b.Logf("data set of %d documents reused from %s", n, dir)
		return d
	}
	start := time.Now()
	docs := scaleDocs(b, n)
	applied := filepath.Join(dir, "applied")
	if got, _ := os.ReadFile(applied); string(got) != want {
		applyScaleDocs(b, st, bus, docs)
		if err := os.WriteFile(applied, []byte(want), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	appliedIn := time.Since(start)
	// The text units' vectors, as the reporter writes them (id doc#unit,
	// the document's ACL), embedded and upserted in batches: the
	// reporter's per-document handler costs a transaction per document.
	emb := embed.NewHashing(embed.DefaultHashingDimensions)
	var items []vector.Item
	flush := func() {
		texts := make([]string, len(items))
		for i, it := range items {
			texts[i] = it.Text
		}
		vecs, err := emb.Embed(ctx, texts)
		if err != nil {
			b.Fatal(err)
		}
		for i := range items {
			items[i].Vector = vecs[i]
		}
		if err := vix.Upsert(ctx, scaleTenant, items); err != nil {
			b.Fatal(err)
		}
		items = items[:0]
	}
	for _, doc := range docs {
		rec, err := st.Source(ctx, scaleTenant, doc.DocID)
		if err != nil {
			b.Fatal(err)
		}
		for _, tu := range rec.TextUnits {
			items = append(items, vector.Item{ID: doc.DocID + "#" + tu.ID, Kind: vector.KindTextUnit, Text: tu.Text,
				Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: doc.DocID, Version: rec.Version, TextUnit: tu.ID}, ACL: doc.ACL}}})
		}
		if len(items) >= 2000 {
			flush()
		}
	}
	if len(items) > 0 {
		flush()
	}
	rep, err := reporter.New(reporter.Config{Vectors: vix, Embedder: emb}, bus, st, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	indexedIn := time.Since(start)
	cw, err := clusterer.New(clusterer.Config{Partitioner: clusterer.Leiden(clusterer.LeidenConfig{})}, bus, st, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := cw.ReclusterFull(ctx, scaleTenant); err != nil {
		b.Fatal(err)
	}
	clusteredIn := time.Since(start)
	for {
		r, err := rep.Reconcile(ctx, scaleTenant)
		if err != nil {
			b.Fatal(err)
		}
		if !r.More {
			break
		}
	}
	b.Logf("built %d documents in %s: extracted and applied %s, vectors %s, clustered %s",
		n, time.Since(start).Round(time.Millisecond), appliedIn.Round(time.Millisecond),
		indexedIn.Round(time.Millisecond), clusteredIn.Round(time.Millisecond))
	if err := os.WriteFile(stamp, []byte(want), 0o644); err != nil {
		b.Fatal(err)
	}
	return d
}

// applyScaleDocs extracts docs (extractScaleDocs), resolves them with the resolver's Resolve
// and applies them after their registry announcement, 64 a transaction.
func applyScaleDocs(b *testing.B, st *embedded.Store, bus *stream.Bus, docs []events.DocChanged) {
	b.Helper()
	ctx := context.Background()
	n := len(docs)
	extracted := extractScaleDocs(b, st, docs)
	rw, err := resolver.New(resolver.Config{}, bus, st, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 64
	for lo := 0; lo < n; lo += batch {
		hi := min(lo+batch, n)
		var changes []store.Change
		for i := lo; i < hi; i++ {
			if _, err := st.Announce(ctx, scaleTenant, store.Announcement{DocID: docs[i].DocID, Version: 1, ACL: docs[i].ACL,
				Title: docs[i].Title}); err != nil {
				b.Fatal(err)
			}
			c, err := rw.Resolve(ctx, &extracted[i])
			if err != nil {
				b.Fatal(err)
			}
			changes = append(changes, store.Change{DocID: docs[i].DocID, Version: 1, Contributions: c, Now: docs[i].ReceivedAt})
		}
		_, errs, err := st.ApplyBatch(ctx, scaleTenant, changes)
		if err != nil {
			b.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// scaleLatencies runs fn over clients goroutines, at least minN and at
// most maxN times, stopping after budget once minN are done, and returns
// p50 and p99 in milliseconds and the number of requests.
func scaleLatencies(b *testing.B, clients, minN, maxN int, budget time.Duration, fn func(i int) error) (p50, p99 float64, count int) {
	b.Helper()
	var mu sync.Mutex
	var ds []time.Duration
	start := time.Now()
	issued := 0
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if issued >= maxN || issued >= minN && time.Since(start) > budget {
			return 0, false
		}
		issued++
		return issued - 1, true
	}
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok {
					return
				}
				t0 := time.Now()
				if err := fn(i); err != nil {
					b.Error(err)
					return
				}
				took := time.Since(t0)
				mu.Lock()
				ds = append(ds, took)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(ds)
	q := func(p float64) float64 {
		if len(ds) == 0 {
			return 0
		}
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return float64(ds[max(i, 0)].Microseconds()) / 1000
	}
	return q(0.50), q(0.99), len(ds)
}

// The pages the bounded modes ask for: a screenful, as a client paging
// through an answer would.
const (
	pageOfTerminals = "&limit=50"
	pageOfGroups    = "&limit=20&members=10"
)

// BenchmarkQueryScale measures p50/p99 of every query mode through the
// query service's HTTP handler, with 1 and 8 concurrent clients, over a
// KG_QUERY_SCALE_DOCS-document data set (default 10,000; see scaleDocs and
// buildScaleData) built without the pipeline. The caller (group oncall)
// reads three quarters of the documents; caches are live (the service
// follows the bus). KG_QUERY_SCALE_DATA keeps the data set in a directory
// for the next run; KG_QUERY_SCALE_PPROF names a directory for a CPU
// profile per mode and client count, of each mode's first request
// (<mode>-first.pprof: its caches cold) and of the service's start-up
// warm-up (warm.pprof); KG_QUERY_SCALE_BUDGET bounds each
// measurement (default 20s, at least KG_QUERY_SCALE_MIN requests (default
// 20, never fewer than the clients), at most 400); KG_QUERY_SCALE_MODES
// lists the modes to measure (comma-separated; default all);
// KG_QUERY_SCALE_RESPONSES names a directory for each mode's last response.
func BenchmarkQueryScale(b *testing.B) {
	n := envInt(b, "KG_QUERY_SCALE_DOCS", 10000)
	budget := envDuration(b, "KG_QUERY_SCALE_BUDGET", 20*time.Second)
	dir := queryScaleDir(b)
	profDir := os.Getenv("KG_QUERY_SCALE_PPROF")
	profile := func(name string) func() {
		if profDir == "" {
			return func() {}
		}
		f, err := os.Create(filepath.Join(profDir, name+".pprof"))
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		return func() { pprof.StopCPUProfile(); _ = f.Close() }
	}
	d := buildScaleData(b, dir, n)
	ctx := context.Background()

	g, err := d.st.Snapshot(ctx, scaleTenant)
	if err != nil {
		b.Fatal(err)
	}
	reps, err := d.st.Reports(ctx, scaleTenant)
	if err != nil {
		b.Fatal(err)
	}
	comms, err := d.st.Communities(ctx, scaleTenant)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(g.Entities)), "entities")
	b.ReportMetric(float64(len(g.Edges)), "edges")
	b.ReportMetric(float64(len(reps)), "reports")

	// The workload (scaleWorkload), plus incidents by failure mode
	// (aggregate); the largest (subject type, relation) pair is
	// aggregate-largest, a response listing every one. The -page modes
	// ask for one bounded page of the same answers.
	hub, hubRel, agg := scaleWorkload(g)
	hubName := ""
	if e, err := d.st.Entity(ctx, scaleTenant, hub); err == nil {
		hubName = e.Name
	}
	b.Logf("%d documents: %d entities, %d edges, %d communities, %d reports; paths %s ~%s, aggregate %s %s",
		n, len(g.Entities), len(g.Edges), len(comms), len(reps), hub, hubRel, agg[0], agg[1])
	g = store.Graph{}

	a, err := auth.New([]auth.Token{{Token: "t-alice", Tenant: scaleTenant, Principal: "alice", Groups: []string{"oncall"}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg := query.DefaultConfig()
	cfg.Vectors, cfg.Embedder = d.vix, embed.NewHashing(embed.DefaultHashingDimensions)
	cfg.Events = d.bus
	svc, err := query.New(cfg, d.st, a, nil, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	coll := statusBeside(b, d.st, d.bus, svc)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(rctx) }()
	b.Cleanup(func() { cancel(); <-done })
	// The service warms its caches as it starts (Config.WarmOnStart):
	// measured once that is over, as a service that has been up a while.
	warmBegan := time.Now()
	stopWarm := profile("warm")
	select {
	case <-svc.Warmed():
	case <-time.After(10 * time.Minute):
		b.Fatal("the query service did not warm its caches within 10 minutes")
	}
	stopWarm()
	b.Logf("caches warmed in %.1f s after the start", time.Since(warmBegan).Seconds())
	srv := serveWithStatus(b, coll, a, svc)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var lastSize atomic.Int64 // the size of the last response, for the log
	// KG_QUERY_SCALE_RESPONSES names a directory for each mode's last
	// response (its timings say where a request spent its time); the
	// bodies are then read whole, which the latencies include.
	keepDir := os.Getenv("KG_QUERY_SCALE_RESPONSES")
	var lastBody atomic.Pointer[[]byte]
	call := func(method, path string, body []byte) error {
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer t-alice")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			out, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		// The latency is the server's, up to the last byte received; what a
		// client does with the JSON is its own cost, and not measured.
		if keepDir != "" {
			out, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			lastSize.Store(int64(len(out)))
			lastBody.Store(&out)
			return nil
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return err
		}
		lastSize.Store(n)
		return nil
	}
	modes := selectModes(benchQueryModes(call, hub, hubRel, hubName, agg), os.Getenv("KG_QUERY_SCALE_MODES"))
	minN := envInt(b, "KG_QUERY_SCALE_MIN", 20)
	for range b.N {
		for _, m := range modes {
			stop := profile(m.name + "-first")
			began := time.Now()
			if err := m.do(0); err != nil { // warm the caches
				b.Fatal(err)
			}
			stop()
			b.Logf("%s: a response is %d bytes; the first request (caches cold for this mode) took %.1f ms",
				m.name, lastSize.Load(), float64(time.Since(began).Microseconds())/1000)
			heapProfile(b, profDir, m.name)
			for _, clients := range []int{1, 8} {
				stop := profile(fmt.Sprintf("%s-%d", m.name, clients))
				p50, p99, count := scaleLatencies(b, clients, max(minN, clients), 400, budget, m.do)
				stop()
				b.ReportMetric(p50, fmt.Sprintf("%s-%dc-p50-ms", m.name, clients))
				b.ReportMetric(p99, fmt.Sprintf("%s-%dc-p99-ms", m.name, clients))
				b.Logf("%s %d clients: p50 %.1f ms, p99 %.1f ms over %d requests", m.name, clients, p50, p99, count)
			}
			if body := lastBody.Load(); keepDir != "" && body != nil {
				if err := os.WriteFile(filepath.Join(keepDir, m.name+".json"), *body, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(0, "ns/op")
}

// statusBeside returns the collector of GET /v1/status for the query
// service svc, as query.NewService composes them: told of every graph
// change svc follows (Service.FollowDocsFor). Call it before svc.Run.
func statusBeside(b *testing.B, st kgstatus.Stores, bus *stream.Bus, svc *query.Service) *kgstatus.Collector {
	b.Helper()
	coll, err := kgstatus.NewCollector(st, bus, kgstatus.Stages, nil, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	svc.FollowDocsFor(coll)
	return coll
}

// serveWithStatus serves svc's routes and coll's GET /v1/status, as the
// query process does.
func serveWithStatus(b *testing.B, coll *kgstatus.Collector, a *auth.Authenticator, svc *query.Service) *httptest.Server {
	b.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /v1/status", coll.Handler(a))
	mux.Handle("/", svc.Handler())
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	return srv
}

// benchMode is one kind of request a query benchmark measures: do asks it
// once.
type benchMode struct {
	name string
	do   func(i int) error
}

// benchQueryModes is every kind of request BenchmarkQueryScale measures,
// made with call (an HTTP request to the query service as the benchmark's
// caller; body nil for a GET): questions about the hub (hubName), paths
// from it over ~hubRel, aggregates of incidents by failure mode and of
// the largest (subject type, relation) pair agg, a bounded page of each
// path and aggregate answer, the documents list, the status.
func benchQueryModes(call func(method, path string, body []byte) error, hub, hubRel, hubName string, agg []string) []benchMode {
	ask := func(mode, q string) error {
		body, _ := json.Marshal(map[string]string{"mode": mode, "question": q})
		return call(http.MethodPost, "/v1/query", body)
	}
	question := "What happened to " + hubName + " in our incidents?"
	return []benchMode{
		{"paths", func(int) error {
			return call(http.MethodGet, "/v1/paths?start="+url.QueryEscape(hub)+"&rels="+url.QueryEscape("~"+hubRel), nil)
		}},
		{"aggregate", func(int) error { return call(http.MethodGet, "/v1/aggregate?type=incident&rel=failure", nil) }},
		{"aggregate-largest", func(int) error {
			return call(http.MethodGet, "/v1/aggregate?type="+url.QueryEscape(agg[0])+"&rel="+url.QueryEscape(agg[1]), nil)
		}},
		// The bounded variants: one page of each (the counts and totals of
		// the whole answer, a window of what it lists), so the cost of a
		// page is measured against the unbounded response above.
		{"paths-page", func(int) error {
			return call(http.MethodGet, "/v1/paths?start="+url.QueryEscape(hub)+"&rels="+url.QueryEscape("~"+hubRel)+pageOfTerminals, nil)
		}},
		{"aggregate-page", func(int) error {
			return call(http.MethodGet, "/v1/aggregate?type=incident&rel=failure"+pageOfGroups, nil)
		}},
		{"aggregate-largest-page", func(int) error {
			return call(http.MethodGet, "/v1/aggregate?type="+url.QueryEscape(agg[0])+"&rel="+url.QueryEscape(agg[1])+pageOfGroups, nil)
		}},
		// The documents list of the web UI: its first page, and a search
		// by a word of titles.
		{"sources", func(int) error { return call(http.MethodGet, "/v1/sources", nil) }},
		// The status a reader who may not read every document sees.
		{"status", func(int) error { return call(http.MethodGet, "/v1/status", nil) }},
		{"sources-search", func(int) error { return call(http.MethodGet, "/v1/sources?q=outage", nil) }},
		{"local", func(int) error { return ask("local", question) }},
		{"basic", func(int) error { return ask("basic", question) }},
		{"global", func(int) error { return ask("global", "What are the recurring root causes of our incidents?") }},
		{"drift", func(int) error { return ask("drift", question) }},
	}
}

// selectModes keeps the modes the comma-separated list names, in their
// order; an empty list keeps them all.
func selectModes(modes []benchMode, list string) []benchMode {
	if list == "" {
		return modes
	}
	want := strings.Split(list, ",")
	return slices.DeleteFunc(modes, func(m benchMode) bool { return !slices.Contains(want, m.name) })
}

// heapProfile writes, when dir is set, the live heap after a collection
// (the caches the modes measured so far have filled) to dir/name-heap.pprof.
func heapProfile(b *testing.B, dir, name string) {
	b.Helper()
	if dir == "" {
		return
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.Logf("%s: live heap after warming %.1f MB in %d objects", name, float64(ms.HeapAlloc)/(1<<20), ms.HeapObjects)
	f, err := os.Create(filepath.Join(dir, name+"-heap.pprof"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// scaleMaxKey is the key with the largest count (ties: the smallest key).

// openBenchStores opens (creating) the embedded graph store kg.db and
// vector index vectors.db in dir, without fsync, closed when b ends.
func openBenchStores(b *testing.B, dir string) (*embedded.Store, *vecembedded.Index) {
	b.Helper()
	st, err := embedded.Open(filepath.Join(dir, "kg.db"), embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	vix, err := vecembedded.Open(filepath.Join(dir, "vectors.db"), vecembedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { vix.Close() })
	return st, vix
}

// extractScaleDocs extracts docs with the offline extractor, chunked as
// the extractor worker chunks, in parallel (extraction is a pure function
// of the document).
func extractScaleDocs(b *testing.B, st store.GraphStore, docs []events.DocChanged) []events.Extracted {
	b.Helper()
	ctx := context.Background()
	tok, err := chunk.NewTokenizer()
	if err != nil {
		b.Fatal(err)
	}
	chunker, err := chunk.New(tok, chunk.DefaultTokens, min(chunk.DefaultOverlap, chunk.DefaultTokens/12))
	if err != nil {
		b.Fatal(err)
	}
	x, err := offline.New(offline.Config{Gazetteer: offline.NewCatalogGazetteer(st, 0)})
	if err != nil {
		b.Fatal(err)
	}
	out := make([]events.Extracted, len(docs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				doc := &docs[i]
				units := chunker.Chunk(doc.DocID, doc.Version, doc.Text)
				ents, rels, err := x.Extract(ctx, doc, units)
				if err != nil {
					b.Error(err)
				}
				out[i] = events.Extracted{Header: doc.Header, DocID: doc.DocID, Version: doc.Version, Title: doc.Title,
					DocType: doc.DocType, TextUnits: units, Entities: ents, Relationships: rels, Extractor: x.Name(), ReceivedAt: doc.ReceivedAt}
			}
		})
	}
	for i := range docs {
		next <- i
	}
	close(next)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return out
}
