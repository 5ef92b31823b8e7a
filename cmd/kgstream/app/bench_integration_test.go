//go:build integration

package app_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/stream"
)

// corpus loads the dfds and cloud-incidents postmortems (Markdown) from
// ../shared beside the checkout.
func corpus(b *testing.B) []app.Document {
	b.Helper()
	var docs []app.Document
	for _, dir := range []string{"dfds-postmortems", "cloud-incidents"} {
		files, err := filepath.Glob(filepath.Join("../../../../shared/corpora", dir, "*.md"))
		if err != nil || len(files) == 0 {
			b.Fatalf("corpus %s not found beside the checkout: %v", dir, err)
		}
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			d := app.DocumentFromFile(f, data)
			d.ID = dir + "-" + strings.NewReplacer(" ", "_", "/", "_").Replace(d.ID)
			if len(d.ID) > 200 {
				d.ID = d.ID[:200]
			}
			d.DocType = "incident"
			docs = append(docs, d)
		}
	}
	return docs
}

type benchTarget struct {
	name string
	cfg  func(b *testing.B) app.Config
}

func benchTargets() []benchTarget {
	return []benchTarget{
		{"embedded", func(b *testing.B) app.Config { return app.Config{} }},
		{"redis", func(b *testing.B) app.Config {
			prefix := fmt.Sprintf("kgbench-%d", time.Now().UnixNano())
			b.Cleanup(func() { cleanRedis(b, prefix) })
			return app.Config{RedisURL: redisURL(), RedisPrefix: prefix}
		}},
		// Both on the machine's servers: NATS JetStream (a stream and
		// subjects of its own) and Redis (a key prefix of its own), as a
		// deployment runs them; both deleted afterwards.
		{"nats-redis", func(b *testing.B) app.Config { return externalConfig(b, "kgbench") }},
	}
}

// externalConfig runs the all-in-one on the machine's NATS JetStream (a
// stream and subjects of its own) and Redis (a key prefix of its own),
// named after name and the time, both deleted when b ends.
func externalConfig(b *testing.B, name string) app.Config {
	id := fmt.Sprintf("%s%d", name, time.Now().UnixNano())
	stream := strings.ToUpper(id)
	b.Cleanup(func() { cleanRedis(b, id); deleteStream(b, stream) })
	return app.Config{NATSURL: natsURL(), Stream: stream, SubjectPrefix: id, RedisURL: redisURL(), RedisPrefix: id}
}

func startBench(b *testing.B, cfg app.Config) *app.App {
	b.Helper()
	cfg.DataDir = b.TempDir()
	cfg.HTTPAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Quiet, cfg.MaxDelay = time.Second, 10*time.Second
	// KG_BENCH_QUIET and KG_BENCH_MAX_DELAY set the re-clustering's
	// debounce (1s and 10s unless set).
	for _, o := range []struct {
		env string
		to  *time.Duration
	}{{"KG_BENCH_QUIET", &cfg.Quiet}, {"KG_BENCH_MAX_DELAY", &cfg.MaxDelay}} {
		if v := os.Getenv(o.env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				b.Fatalf("%s: %v", o.env, err)
			}
			*o.to = d
		}
	}
	// KG_BENCH_GIVE_WAY sets the background stages' longest wait (the
	// app's default when unset; 0 turns it off, to compare).
	if v := os.Getenv("KG_BENCH_GIVE_WAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("KG_BENCH_GIVE_WAY: %v", err)
		}
		cfg.GiveWay = cmp.Or(d, -1)
	}
	cfg.Log = quietLog()
	a, err := app.Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(a.Close)
	return a
}

func applied(b *testing.B, c *app.Client) int {
	var st statusResp
	if err := c.Do(context.Background(), "GET", "/v1/status", "", nil, &st); err != nil {
		b.Fatal(err)
	}
	return st.Applied
}

// BenchmarkIngest measures documents per second from the gateway's 202 to
// the graph applied (offline extractor), for the embedded stores, the Redis
// stores and both NATS and Redis on the machine's servers (benchTargets).
func BenchmarkIngest(b *testing.B) {
	docs := corpus(b)
	for _, tg := range benchTargets() {
		b.Run(tg.name, func(b *testing.B) {
			a := startBench(b, tg.cfg(b))
			c := app.NewClient(a.URL(), "")
			b.ResetTimer()
			start := time.Now()
			total := 0
			for i := 0; i < b.N; i++ {
				jobs := make(chan app.Document)
				var wg sync.WaitGroup
				for w := 0; w < 4; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for d := range jobs {
							if _, err := c.PostDocument(context.Background(), d); err != nil {
								b.Error(err)
							}
						}
					}()
				}
				for _, d := range docs {
					d.ID = fmt.Sprintf("%s-r%d", d.ID, i)
					jobs <- d
				}
				close(jobs)
				wg.Wait()
				total += len(docs)
				for applied(b, c) < total {
					time.Sleep(5 * time.Millisecond)
				}
			}
			el := time.Since(start)
			b.ReportMetric(float64(total)/el.Seconds(), "docs/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkIndexLag sends documents at a steady rate (KG_LAG_RATE, default
// 100 per second) for KG_LAG_SECONDS (default 5) and reports the p50 and
// p99 index lag (gateway receipt to graph applied) the resolver observed
// over its last 4,096 documents (p50-lag-ms, p99-lag-ms) and over every
// document of the run (run-p50-lag-ms, run-p99-lag-ms), and how long the
// graph took to catch up after the last POST (drain-s: a bounded backlog
// keeps it near zero). KG_LAG_WARMUP=N first indexes N documents and
// waits until every stage is idle and the communities are built (not
// measured), so that the run measures a tenant in steady state rather
// than one whose first clustering and reports fall inside the run.
//
// The sender is open-loop: document j is due at start + j/rate and is sent
// then by its own request, at most KG_LAG_INFLIGHT (default 256) at once.
// When the gateway answers too slowly for that bound, requests start late:
// sent-docs/s is the rate actually sent, which is below the asked rate
// when the machine cannot take it, and post-p99-ms the POSTs' own p99.
// peak-front-backlog is the most events the extractor and the resolver
// had waiting or in flight at one of the sender's once-a-second samples
// (counted as the background stages' give-way counts them),
// peak-background-backlog the same for the clusterer and the reporter's
// two consumers (KG_LAG_VERBOSE=1 logs every sample, the extractor's and
// the resolver's apart; KG_LAG_PROFILE=file:from-to profiles a window of
// it, see lagWindow). KG_LAG_BACKGROUND=1
// waits for those stages to work off their backlog as well
// (background-drain-s), so that a CPU profile holds their work on every
// document sent.
func BenchmarkIndexLag(b *testing.B) {
	docs := corpus(b)
	rate, seconds := envInt(b, "KG_LAG_RATE", 100), envInt(b, "KG_LAG_SECONDS", 5)
	inflight := envInt(b, "KG_LAG_INFLIGHT", 256)
	for _, tg := range benchTargets() {
		b.Run(tg.name, func(b *testing.B) {
			a := startBench(b, tg.cfg(b))
			c := app.NewClient(a.URL(), "")
			n := 0
			if os.Getenv("KG_LAG_WARMUP") != "" {
				warm := envInt(b, "KG_LAG_WARMUP", 0)
				batch := make([]app.Document, warm)
				for j := range batch {
					batch[j] = docs[j%len(docs)]
					batch[j].ID = fmt.Sprintf("%s-warm-%d", batch[j].ID, j)
				}
				postAll(context.Background(), b, c, batch)
				for applied(b, c) < warm {
					time.Sleep(100 * time.Millisecond)
				}
				scaleIdle(b, a, c, 10*time.Minute, 1)
				n = warm
				b.ReportMetric(float64(warm), "warmup-docs")
			}
			_, mark := a.Bus.LagSamplesSince("graph", 0) // the run's samples only
			var lags []float64
			b.ResetTimer()
			var drain, backDrain, sending time.Duration
			var peakFront, peakBack uint64
			var mu sync.Mutex
			var posts []time.Duration
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				sem := make(chan struct{}, inflight)
				start := time.Now()
				// Every second, the backlog of the stages a document crosses
				// before it is readable and of the background ones.
				stopS := make(chan struct{})
				sampled := make(chan struct{})
				window := profileWindow(b)
				go func() {
					defer close(sampled)
					defer window.stop()
					for {
						select {
						case <-stopS:
							return
						case <-time.After(time.Second):
						}
						window.tick(time.Since(start))
						var more []float64
						more, mark = a.Bus.LagSamplesSince("graph", mark)
						lags = append(lags, more...)
						ex, _ := a.Bus.Backlog(context.Background(), "extractor")
						rs, _ := a.Bus.Backlog(context.Background(), "resolver")
						back, _ := a.Bus.Backlog(context.Background(), "clusterer", "reporter", "reporter-vectors")
						front := ex + rs
						peakFront, peakBack = max(peakFront, front), max(peakBack, back)
						if os.Getenv("KG_LAG_VERBOSE") != "" {
							b.Logf("%v: extractor %d + resolver %d, clusterer+reporter %d pending", time.Since(start).Round(time.Second), ex, rs, back)
						}
					}
				}()
				for j := 0; j < rate*seconds; j++ {
					time.Sleep(time.Until(start.Add(time.Duration(j) * time.Second / time.Duration(rate))))
					d := docs[j%len(docs)]
					d.ID = fmt.Sprintf("%s-lag%d-%d", d.ID, i, j)
					sem <- struct{}{}
					wg.Add(1)
					go func() {
						defer func() { <-sem; wg.Done() }()
						t0 := time.Now()
						if _, err := c.PostDocument(context.Background(), d); err != nil {
							b.Error(err)
						}
						mu.Lock()
						posts = append(posts, time.Since(t0))
						mu.Unlock()
					}()
				}
				sending += time.Since(start) // until the last request started
				wg.Wait()
				sent := time.Now()
				close(stopS)
				<-sampled
				n += rate * seconds
				// Every 50 ms: polling status faster takes CPU from the
				// pipeline measured.
				for applied(b, c) < n {
					time.Sleep(50 * time.Millisecond)
				}
				drain += time.Since(sent)
				var more []float64
				more, mark = a.Bus.LagSamplesSince("graph", mark)
				lags = append(lags, more...)
				// KG_LAG_BACKGROUND=1: wait for the background stages too,
				// so a CPU profile covers their work on every document.
				if os.Getenv("KG_LAG_BACKGROUND") != "" {
					for deadline := time.Now().Add(10 * time.Minute); ; {
						back, err := a.Bus.Backlog(context.Background(), "clusterer", "reporter", "reporter-vectors")
						if err == nil && back == 0 {
							break
						}
						if time.Now().After(deadline) {
							b.Fatalf("background stages not idle 10 minutes after the last document: backlog %d, error %v", back, err)
						}
						time.Sleep(50 * time.Millisecond)
					}
					backDrain += time.Since(sent)
				}
			}
			slices.Sort(posts)
			b.ReportMetric(float64(n)/sending.Seconds(), "sent-docs/s")
			b.ReportMetric(float64(posts[len(posts)*99/100].Microseconds())/1000, "post-p99-ms")
			p50, p99, _ := a.Bus.LagQuantiles("graph")
			b.ReportMetric(p50*1000, "p50-lag-ms")
			b.ReportMetric(p99*1000, "p99-lag-ms")
			if rp50, rp99, ok := stream.Quantiles(lags); ok {
				b.ReportMetric(rp50*1000, "run-p50-lag-ms")
				b.ReportMetric(rp99*1000, "run-p99-lag-ms")
				b.ReportMetric(float64(len(lags)), "run-lag-samples")
			}
			b.ReportMetric(drain.Seconds()/float64(b.N), "drain-s")
			if backDrain > 0 {
				b.ReportMetric(backDrain.Seconds()/float64(b.N), "background-drain-s")
			}
			b.ReportMetric(float64(peakFront), "peak-front-backlog")
			b.ReportMetric(float64(peakBack), "peak-background-backlog")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// lagWindow is KG_LAG_PROFILE=file:from-to: a CPU profile of the index
// lag benchmark's seconds from to to (since the first document), to see
// what runs while a backlog builds up; an execution trace when file ends
// in .trace (go tool trace -pprof=sched shows who waited for a core).
type lagWindow struct {
	file     string
	from, to time.Duration
	f        *os.File
}

func profileWindow(b *testing.B) *lagWindow {
	v := os.Getenv("KG_LAG_PROFILE")
	if v == "" {
		return &lagWindow{}
	}
	file, span, ok := strings.Cut(v, ":")
	from, to, ok2 := strings.Cut(span, "-")
	f, errF := strconv.Atoi(from)
	t, errT := strconv.Atoi(to)
	if !ok || !ok2 || errF != nil || errT != nil || t <= f {
		b.Fatalf("KG_LAG_PROFILE=%q: want file:from-to (seconds)", v)
	}
	return &lagWindow{file: file, from: time.Duration(f) * time.Second, to: time.Duration(t) * time.Second}
}

// tick starts or stops the profile at elapsed.
func (w *lagWindow) tick(elapsed time.Duration) {
	switch {
	case w.file == "":
	case w.f == nil && elapsed >= w.from && elapsed < w.to:
		f, err := os.Create(w.file)
		if err != nil {
			return
		}
		if strings.HasSuffix(w.file, ".trace") {
			err = trace.Start(f)
		} else {
			err = pprof.StartCPUProfile(f)
		}
		if err == nil {
			w.f = f
		}
	case w.f != nil && elapsed >= w.to:
		w.stop()
	}
}

func (w *lagWindow) stop() {
	if w.f != nil {
		if strings.HasSuffix(w.file, ".trace") {
			trace.Stop()
		} else {
			pprof.StopCPUProfile()
		}
		_ = w.f.Close()
		w.f, w.file = nil, ""
	}
}
