//go:build integration

package app_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/query"
	"github.com/kgstream/kgstream/services/resolver"
)

// BenchmarkQueryChurn measures p50/p99 of queries through the
// query service's HTTP handler, with 1 and 8 concurrent clients, first on
// a quiet index and then while documents are being applied at a steady
// rate (KG_QUERY_CHURN_RATE a second, default 40): half edits of
// existing documents (another document's text, so their entities change),
// half new documents, each announced in the registry and applied by the
// resolver worker (Handle: resolve, apply, kg.graph.changed on the bus the
// service follows), as live ingestion does. The data set is
// BenchmarkQueryScale's (KG_QUERY_SCALE_DOCS, KG_QUERY_SCALE_DATA,
// KG_QUERY_SCALE_BUDGET), copied before every run so that every run
// starts from the same files. Each measurement logs the documents applied
// meanwhile, the CPU time the process used and the machine's load
// average: two runs on a shared machine compare only with those.
// KG_QUERY_SCALE_PPROF names a directory for a CPU profile of each.
// KG_QUERY_CHURN_MODES lists the kinds of request measured, by
// BenchmarkQueryScale's names (comma-separated; default local, the
// question about the corpus's hub); each mode is measured on its own,
// quiet then under churn, so the documents applied accumulate from one
// mode to the next.
func BenchmarkQueryChurn(b *testing.B) {
	n := envInt(b, "KG_QUERY_SCALE_DOCS", 10000)
	rate := envInt(b, "KG_QUERY_CHURN_RATE", 40)
	budget := envDuration(b, "KG_QUERY_SCALE_BUDGET", 20*time.Second)
	dir := queryScaleDir(b)
	// Built (or found) and closed, then copied: the run changes its copy.
	d := buildScaleData(b, dir, n)
	if err := d.st.Close(); err != nil {
		b.Fatal(err)
	}
	if err := d.vix.Close(); err != nil {
		b.Fatal(err)
	}
	work := b.TempDir()
	for _, f := range []string{"kg.db", "vectors.db"} {
		if err := copyFile(filepath.Join(dir, f), filepath.Join(work, f)); err != nil {
			b.Fatal(err)
		}
	}
	st, vix := openBenchStores(b, work)
	bus := streamtest.NewBus(b, streamtest.Options{})
	ctx := context.Background()

	g, err := st.Snapshot(ctx, scaleTenant)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(g.Entities)), "entities")
	b.ReportMetric(float64(len(g.Edges)), "edges")
	hub, hubRel, agg := scaleWorkload(g)
	hubName := ""
	if e, err := st.Entity(ctx, scaleTenant, hub); err == nil {
		hubName = e.Name
	}
	b.Logf("%d documents: %d entities, %d edges; questions about %s", n, len(g.Entities), len(g.Edges), hub)
	g = store.Graph{}

	// The documents applied while the clients ask: extracted beforehand
	// (extraction is not what is measured), applied in a cycle, each
	// time at the document's next version.
	const churnDocs = 800
	all := scaleDocs(b, n+churnDocs/2)
	var churn []events.DocChanged
	for k := range churnDocs / 2 {
		j := (k * 7919) % n
		edit := all[j]
		other := all[(j+1)%n]
		edit.Version, edit.Title, edit.Text = 2, other.Title, other.Text
		churn = append(churn, edit, all[n+k])
	}
	extracted := extractScaleDocs(b, st, churn)

	a, err := auth.New([]auth.Token{{Token: "t-alice", Tenant: scaleTenant, Principal: "alice", Groups: []string{"oncall"}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg := query.DefaultConfig()
	cfg.Vectors, cfg.Embedder = vix, embed.NewHashing(embed.DefaultHashingDimensions)
	cfg.Events = bus
	svc, err := query.New(cfg, st, a, nil, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	coll := statusBeside(b, st, bus, svc)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(rctx) }()
	b.Cleanup(func() { cancel(); <-done })
	select {
	case <-svc.Warmed():
	case <-time.After(10 * time.Minute):
		b.Fatal("the query service did not warm its caches within 10 minutes")
	}
	srv := serveWithStatus(b, coll, a, svc)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
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
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	modes := selectModes(benchQueryModes(call, hub, hubRel, hubName, agg), cmp.Or(os.Getenv("KG_QUERY_CHURN_MODES"), "local"))
	if len(modes) == 0 {
		b.Fatalf("KG_QUERY_CHURN_MODES=%q names no mode", os.Getenv("KG_QUERY_CHURN_MODES"))
	}

	rw, err := resolver.New(resolver.Config{}, bus, st, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	// apply announces and applies the i-th document of the cycle.
	version := map[string]int64{}
	apply := func(i int) error {
		ev := extracted[i%len(extracted)]
		doc := churn[i%len(churn)]
		v := max(version[doc.DocID]+1, doc.Version)
		version[doc.DocID] = v
		ev.Version = v
		if _, err := st.Announce(ctx, scaleTenant, store.Announcement{DocID: doc.DocID, Version: v, ACL: doc.ACL, Title: doc.Title}); err != nil {
			return err
		}
		data, err := events.Encode(&ev)
		if err != nil {
			return err
		}
		return rw.Handle(ctx, &stream.Message{Subject: events.DefaultSubjects.For(events.KindExtracted, scaleTenant),
			Kind: events.KindExtracted, Tenant: scaleTenant, Data: data, Deliveries: 1})
	}
	// churning applies documents at rate a second until stopped; it
	// returns how many it applied and over how long.
	churning := func() (stop func() (int, time.Duration)) {
		quit := make(chan struct{})
		var applied atomic.Int64
		var wg sync.WaitGroup
		began := time.Now()
		wg.Go(func() {
			tick := time.NewTicker(time.Second / time.Duration(rate))
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-quit:
					return
				case <-tick.C:
				}
				if err := apply(i); err != nil {
					b.Error(err)
					return
				}
				applied.Add(1)
			}
		})
		return func() (int, time.Duration) {
			close(quit)
			wg.Wait()
			return int(applied.Load()), time.Since(began)
		}
	}

	for range b.N {
		for _, m := range modes {
			if err := m.do(0); err != nil { // the mode's caches warm
				b.Fatal(err)
			}
			for _, churn := range []bool{false, true} {
				for _, clients := range []int{1, 8} {
					name := fmt.Sprintf("%s-%dc", m.name, clients)
					var stop func() (int, time.Duration)
					if churn {
						name = fmt.Sprintf("%s-churn-%dc", m.name, clients)
						stop = churning()
					}
					stopProfile := cpuProfile(b, name)
					cpu0 := processCPU()
					p50, p99, count := scaleLatencies(b, clients, max(20, clients), 100000, budget, m.do)
					cpu := processCPU() - cpu0
					stopProfile()
					note := ""
					if stop != nil {
						docs, took := stop()
						note = fmt.Sprintf(", while %d documents were applied (%.1f a second)", docs, float64(docs)/took.Seconds())
					}
					b.ReportMetric(p50, name+"-p50-ms")
					b.ReportMetric(p99, name+"-p99-ms")
					b.Logf("%s: p50 %.1f ms, p99 %.1f ms over %d requests%s; the process used %.1f s of CPU; load average %s",
						name, p50, p99, count, note, cpu.Seconds(), loadAverage())
				}
			}
		}
	}
	b.ReportMetric(0, "ns/op")
}

// cpuProfile starts a CPU profile in KG_QUERY_SCALE_PPROF/name.pprof when
// that is set, and returns what stops it.
func cpuProfile(b *testing.B, name string) func() {
	dir := os.Getenv("KG_QUERY_SCALE_PPROF")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }
}

// copyFile copies the file src to dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is the machine's 1, 5 and 15 minute load averages.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
