//go:build integration

package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
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
	"testing"
	"time"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/store"
)

// scaleCorpusDirs are the corpora BenchmarkScale cycles through, in order.
var scaleCorpusDirs = []string{"dfds-postmortems", "cloud-incidents", "wikitech-incidents"}

// scaleCorpus builds n documents the same way every time: document i is the
// i-th non-empty file (modulo their number) of the corpora of
// scaleCorpusDirs, each directory's files in name order, with id doc-%05d
// and doc type incident.
func scaleCorpus(b testing.TB, n int) []app.Document {
	b.Helper()
	var files []string
	for _, dir := range scaleCorpusDirs {
		entries, err := os.ReadDir(filepath.Join("../../../../shared/corpora", dir))
		if err != nil || len(entries) == 0 {
			b.Fatalf("corpus %s not found beside the checkout: %v", dir, err)
		}
		var names []string
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || strings.HasPrefix(name, "LICENSE") || strings.HasPrefix(name, "README") || strings.HasPrefix(name, ".") {
				continue
			}
			names = append(names, filepath.Join("../../../../shared/corpora", dir, name))
		}
		sort.Strings(names)
		files = append(files, names...)
	}
	var bases []app.Document
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		if strings.TrimSpace(string(data)) == "" {
			continue // the gateway refuses empty documents
		}
		bases = append(bases, app.DocumentFromFile(f, data))
	}
	docs := make([]app.Document, n)
	for i := range docs {
		d := bases[i%len(bases)]
		d.ID = fmt.Sprintf("doc-%05d", i)
		d.DocType = "incident"
		docs[i] = d
	}
	return docs
}

// envInt reads a positive integer from the environment, or def.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// envDuration reads a duration from the environment, or def.
func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// queryScaleDir is where the query benchmarks keep their data set:
// KG_QUERY_SCALE_DATA (made if absent), else a temporary directory.
func queryScaleDir(b *testing.B) string {
	dir := os.Getenv("KG_QUERY_SCALE_DATA")
	if dir == "" {
		return b.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	return dir
}

// metricSum is the sum over every label set of a counter, or of a
// histogram's sample sum (sum) or count (!sum).
func metricSum(b testing.TB, a *app.App, name string, sum bool) float64 {
	b.Helper()
	mfs, err := a.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Histogram != nil && sum:
				total += m.Histogram.GetSampleSum()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return total
}

// scaleIdle waits until every stage has nothing pending, and the
// clustering run, the report count and the reports written stay the same
// over a quiet period longer than the clusterer's.
func scaleIdle(b testing.TB, a *app.App, c *app.Client, timeout time.Duration, minRuns float64) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	prev := ""
	for {
		var st statusResp
		if err := c.Do(context.Background(), "GET", "/v1/status", "", nil, &st); err != nil {
			b.Fatal(err)
		}
		pending := uint64(0)
		for _, s := range app.Stages {
			pending += st.Pending[s]
		}
		runs := metricSum(b, a, "kgstream_recluster_duration_seconds", false)
		cur := fmt.Sprint(runs, metricSum(b, a, "kgstream_reports_written_total", false),
			metricSum(b, a, "kgstream_reports_restamped_total", false), st.Applied)
		if pending == 0 && runs >= minRuns && cur == prev {
			return
		}
		prev = cur
		if pending != 0 || runs < minRuns {
			prev = ""
		}
		if time.Now().After(deadline) {
			b.Fatalf("not idle after %s: pending %v, runs %v", timeout, st.Pending, runs)
		}
		time.Sleep(3 * time.Second) // longer than the clusterer's quiet period
	}
}

// latencies runs fn total times over clients goroutines and returns the
// p50 and p99 in milliseconds.
func latencies(b *testing.B, clients, total int, fn func(i int) error) (p50, p99 float64) {
	b.Helper()
	ds := make([]time.Duration, total)
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				start := time.Now()
				if err := fn(i); err != nil {
					b.Error(err)
				}
				ds[i] = time.Since(start)
			}
		}()
	}
	for i := range total {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	slices.Sort(ds)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return float64(ds[max(i, 0)].Microseconds()) / 1000
	}
	return q(0.50), q(0.99)
}

// BenchmarkScale builds a KG_SCALE_DOCS-document data set (default 1,000;
// see scaleCorpus) through the embedded all-in-one with the offline
// extractor and 8 posting clients, and reports the backfill rates, the
// graph's size, query latencies with 1 and 8 clients, and what one edit of
// one document costs (reports written, restamped, re-clustering time).
// KG_SCALE_IDLE_TIMEOUT bounds each wait (default 10m); KG_SCALE_PPROF
// names a directory for CPU profiles of the backfill, each query mode and
// the edit. KG_SCALE_STORE=redis runs the same on the machine's NATS
// JetStream (a stream of its own) and Redis (a key prefix of its own),
// both deleted afterwards; the default is the embedded stores.
func BenchmarkScale(b *testing.B) {
	n := envInt(b, "KG_SCALE_DOCS", 1000)
	config := func() app.Config { return app.Config{} }
	switch kind := os.Getenv("KG_SCALE_STORE"); kind {
	case "", "embedded":
	case "redis":
		config = func() app.Config { return externalConfig(b, "kgscale") }
	default:
		b.Fatalf("KG_SCALE_STORE=%q: want embedded or redis", kind)
	}
	timeout := 10 * time.Minute
	if v := os.Getenv("KG_SCALE_IDLE_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("KG_SCALE_IDLE_TIMEOUT=%q: %v", v, err)
		}
		timeout = d
	}
	profDir := os.Getenv("KG_SCALE_PPROF")
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
	docs := scaleCorpus(b, n)
	ctx := context.Background()
	for range b.N {
		a := startBench(b, config())
		c := app.NewClient(a.URL(), "")

		// Backfill.
		stop := profile("backfill")
		stopWaits := waitProfiles(b, profDir, "backfill")
		start := time.Now()
		postAll(ctx, b, c, docs)
		accepted := time.Since(start)
		deadline := time.Now().Add(timeout)
		for applied(b, c) < n {
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d documents applied after %s", applied(b, c), n, timeout)
			}
			// /v1/status lists every source: polling it often would
			// weigh on the figures.
			time.Sleep(time.Second)
		}
		appliedIn := time.Since(start)
		scaleIdle(b, a, c, timeout, 1)
		idleIn := time.Since(start)
		stop()
		stopWaits()
		b.ReportMetric(float64(n)/accepted.Seconds(), "accept-docs/s")
		b.ReportMetric(float64(n)/appliedIn.Seconds(), "applied-docs/s")
		b.ReportMetric(float64(n)/idleIn.Seconds(), "idle-docs/s")

		const tenant = "default"
		g, err := a.Stores.Snapshot(ctx, tenant)
		if err != nil {
			b.Fatal(err)
		}
		reps, err := a.Stores.Reports(ctx, tenant)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(g.Entities)), "entities")
		b.ReportMetric(float64(len(g.Edges)), "edges")
		b.ReportMetric(float64(len(reps)), "reports")

		hub, hubRel, agg := scaleWorkload(g)
		hubName := ""
		if e, err := a.Stores.Entity(ctx, tenant, hub); err == nil {
			hubName = e.Name
		}
		question := "What happened to " + hubName + " in our incidents?"
		modes := []struct {
			name string
			do   func(i int) error
		}{
			{"paths", func(int) error {
				return c.Do(ctx, "GET", "/v1/paths?start="+url.QueryEscape(hub)+"&rels="+url.QueryEscape("~"+hubRel), "", nil, &json.RawMessage{})
			}},
			{"aggregate", func(int) error {
				return c.Do(ctx, "GET", "/v1/aggregate?type="+url.QueryEscape(agg[0])+"&rel="+url.QueryEscape(agg[1]), "", nil, &json.RawMessage{})
			}},
			{"local", func(int) error { return scaleQuery(ctx, c, "local", question) }},
			{"basic", func(int) error { return scaleQuery(ctx, c, "basic", question) }},
			{"global", func(int) error {
				return scaleQuery(ctx, c, "global", "What are the recurring root causes of our incidents?")
			}},
		}
		b.Logf("%d documents: %d entities, %d edges, %d reports; paths %s ~%s, aggregate %s %s",
			n, len(g.Entities), len(g.Edges), len(reps), hub, hubRel, agg[0], agg[1])
		for _, m := range modes {
			for _, clients := range []int{1, 8} {
				stop := profile(fmt.Sprintf("%s-%d", m.name, clients))
				p50, p99 := latencies(b, clients, 10*clients+10, m.do)
				stop()
				b.ReportMetric(p50, fmt.Sprintf("%s-%dc-p50-ms", m.name, clients))
				b.ReportMetric(p99, fmt.Sprintf("%s-%dc-p99-ms", m.name, clients))
			}
		}

		// One edit of one document: a sentence appended.
		written := metricSum(b, a, "kgstream_reports_written_total", false)
		restamped := metricSum(b, a, "kgstream_reports_restamped_total", false)
		runs := metricSum(b, a, "kgstream_recluster_duration_seconds", false)
		took := metricSum(b, a, "kgstream_recluster_duration_seconds", true)
		d := docs[n/2]
		d.Text += "\n\nThe on-call engineer confirmed the fix the next morning.\n"
		stop = profile("edit")
		if _, err := c.PostDocument(ctx, d); err != nil {
			b.Fatal(err)
		}
		scaleIdle(b, a, c, timeout, runs+1)
		stop()
		reps2, err := a.Stores.Reports(ctx, tenant)
		if err != nil {
			b.Fatal(err)
		}
		w := metricSum(b, a, "kgstream_reports_written_total", false) - written
		r := metricSum(b, a, "kgstream_reports_restamped_total", false) - restamped
		dr := metricSum(b, a, "kgstream_recluster_duration_seconds", false) - runs
		dt := metricSum(b, a, "kgstream_recluster_duration_seconds", true) - took
		b.ReportMetric(w, "edit-reports-written")
		b.ReportMetric(r, "edit-reports-restamped")
		b.ReportMetric(100*w/float64(max(len(reps2), 1)), "edit-written-%")
		b.ReportMetric(1000*dt/max(dr, 1), "edit-recluster-ms")
		b.Logf("edit of %s: %.0f of %d reports written, %.0f restamped, %.0f runs in %.3fs", d.ID, w, len(reps2), r, dr, dt)
		b.ReportMetric(0, "ns/op")
	}
}

// waitProfiles, when dir is set, records where goroutines wait (blocking
// and mutex contention) until the returned function writes dir/name-block.pprof
// and dir/name-mutex.pprof: what a pipeline that does not keep its cores
// busy waits on.
func waitProfiles(b *testing.B, dir, name string) func() {
	b.Helper()
	if dir == "" {
		return func() {}
	}
	runtime.SetBlockProfileRate(int((100 * time.Microsecond).Nanoseconds()))
	runtime.SetMutexProfileFraction(10)
	return func() {
		for _, kind := range []string{"block", "mutex"} {
			f, err := os.Create(filepath.Join(dir, name+"-"+kind+".pprof"))
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.Lookup(kind).WriteTo(f, 0); err != nil {
				b.Fatal(err)
			}
			_ = f.Close()
		}
		runtime.SetBlockProfileRate(0)
		runtime.SetMutexProfileFraction(0)
	}
}

// maxKey is the key with the largest count (ties: the smallest key).
// scaleWorkload chooses the query workload from the graph the same way
// every time: the hub (most edges) and the relation most edges into it
// carry; the (subject type, relation) pair most edges have.
func scaleWorkload(g store.Graph) (hub, hubRel string, agg []string) {
	degree := map[string]int{}
	for _, e := range g.Edges {
		degree[e.Source]++
		degree[e.Target]++
	}
	for id, d := range degree {
		if hub == "" || d > degree[hub] || d == degree[hub] && id < hub {
			hub = id
		}
	}
	types := map[string]string{}
	for _, e := range g.Entities {
		types[e.ID] = e.Type
	}
	inRel, pairs := map[string]int{}, map[string]int{}
	for _, e := range g.Edges {
		if e.Target == hub {
			inRel[e.Relation]++
		}
		pairs[types[e.Source]+" "+e.Relation]++
	}
	return hub, maxKey(inRel), strings.SplitN(maxKey(pairs), " ", 2)
}

func maxKey(m map[string]int) string {
	best, first := "", true
	for k, v := range m {
		if first || v > m[best] || v == m[best] && k < best {
			best, first = k, false
		}
	}
	return best
}

// scaleQuery asks one POST /v1/query question.
func scaleQuery(ctx context.Context, c *app.Client, mode, q string) error {
	body, err := json.Marshal(map[string]string{"mode": mode, "question": q})
	if err != nil {
		return err
	}
	return c.Do(ctx, "POST", "/v1/query", "application/json", body, &json.RawMessage{})
}

// TestOneEditRewritesOnlyChangedReports builds 200 documents as
// BenchmarkScale does, then edits one document twice (a sentence appended;
// half of it cut). Re-clustering is incremental between full runs, so an
// edit reaches only the communities holding an entity the document
// contributes before or after it: every report the edit writes or removes
// is of such a community (before or after the edit), and at most a quarter
// of all reports are (a document of this corpus sits in one community per
// level and in those of the hubs it names, failure modes among them).
func TestOneEditRewritesOnlyChangedReports(t *testing.T) {
	const n = 200
	docs := scaleCorpus(t, n)
	ctx := context.Background()
	// Every edit is an incremental re-clustering: a full run (every
	// FullEvery-th, 100 by default) is GraphRAG's partition from scratch and
	// may move many member sets; how many runs a backfill takes depends on
	// the machine's speed.
	cfg := app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Quiet: time.Second, MaxDelay: 10 * time.Second, Log: quietLog(),
		FullEvery: 1 << 30}
	a, err := app.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	c := app.NewClient(a.URL(), "")
	postAll(ctx, t, c, docs)
	if t.Failed() {
		t.FailNow()
	}
	scaleIdle(t, a, c, 5*time.Minute, 1)
	// state reads the reports and the communities (each by id) of
	// the tenant, and the entities the document contributes.
	state := func(doc string) (reps map[string]store.Report, comms map[string]store.Community, ents []string) {
		t.Helper()
		rs, err := a.Stores.Reports(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		cs, err := a.Stores.Communities(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		rec, err := a.Stores.Source(ctx, "default", doc)
		if err != nil {
			t.Fatal(err)
		}
		reps, comms = map[string]store.Report{}, map[string]store.Community{}
		for _, r := range rs {
			reps[r.ID] = r
		}
		for _, c := range cs {
			comms[c.ID] = c
		}
		return reps, comms, rec.Entities
	}
	edit := func(d app.Document) {
		t.Helper()
		written := metricSum(t, a, "kgstream_reports_written_total", false)
		restamped := metricSum(t, a, "kgstream_reports_restamped_total", false)
		runs := metricSum(t, a, "kgstream_recluster_duration_seconds", false)
		repsBefore, commsBefore, entsBefore := state(d.ID)
		if _, err := c.PostDocument(ctx, d); err != nil {
			t.Fatal(err)
		}
		scaleIdle(t, a, c, 5*time.Minute, runs+1)
		reps, comms, ents := state(d.ID)
		w := metricSum(t, a, "kgstream_reports_written_total", false) - written
		r := metricSum(t, a, "kgstream_reports_restamped_total", false) - restamped
		t.Logf("edit of %s: %.0f of %d reports written or removed, %.0f restamped", d.ID, w, len(reps), r)
		touched := map[string]bool{}
		for _, e := range slices.Concat(entsBefore, ents) {
			touched[e] = true
		}
		reaches := func(c store.Community) bool {
			return slices.ContainsFunc(c.Members, func(m string) bool { return touched[m] })
		}
		changed := 0
		for id, rep := range reps {
			if old, ok := repsBefore[id]; ok && old.UpdatedAt.Equal(rep.UpdatedAt) {
				continue
			}
			changed++
			if c, ok := comms[rep.Community]; !ok || !reaches(c) {
				t.Errorf("edit of %s: report %s (community %s, level %d) written, out of the edit's reach", d.ID, id, rep.Community, rep.Level)
			}
		}
		for id, rep := range repsBefore {
			if _, ok := reps[id]; ok {
				continue
			}
			changed++
			if c, ok := commsBefore[rep.Community]; !ok || !reaches(c) {
				t.Errorf("edit of %s: report %s (community %s, level %d) removed, out of the edit's reach", d.ID, id, rep.Community, rep.Level)
			}
		}
		t.Logf("edit of %s: %d reports written, restamped or removed; the document's entities: %d before, %d after", d.ID, changed, len(entsBefore), len(ents))
		if len(reps) == 0 || w > 0.25*float64(len(reps)) {
			t.Fatalf("edit of %s: %.0f of %d reports written or removed, more than a quarter", d.ID, w, len(reps))
		}
	}
	d := docs[n/2]
	d.Text += "\n\nThe on-call engineer confirmed the fix the next morning.\n"
	edit(d)
	d.Text = d.Text[:len(d.Text)/2]
	edit(d)
}

// postAll posts docs from 8 concurrent clients, as a backfill does; a
// refused document fails tb.
func postAll(ctx context.Context, tb testing.TB, c *app.Client, docs []app.Document) {
	jobs := make(chan app.Document)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range jobs {
				if _, err := c.PostDocument(ctx, d); err != nil {
					tb.Errorf("posting %s: %v", d.ID, err)
				}
			}
		}()
	}
	for _, d := range docs {
		jobs <- d
	}
	close(jobs)
	wg.Wait()
}
