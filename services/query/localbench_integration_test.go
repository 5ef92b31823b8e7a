//go:build integration

package query_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/pkg/vector"
	vecembedded "github.com/kgstream/kgstream/pkg/vector/embedded"
	"github.com/kgstream/kgstream/services/query"
)

// localBenchCorpora are the corpora BenchmarkLocalRequest's documents
// cycle through, each directory's files in name order.
var localBenchCorpora = []string{"dfds-postmortems", "cloud-incidents", "wikitech-incidents"}

// capitalRE finds the capitalised words BenchmarkLocalRequest's data set
// takes for named things ("Azure", "MediaWiki", "UTC").
var capitalRE = regexp.MustCompile(`\b[A-Z][A-Za-z0-9-]{2,}\b`)

// BenchmarkLocalRequest measures one whole local search request (POST
// /v1/query, mode local, through the service's handler, the response
// encoded but not sent anywhere): unit ranking, vector search, question
// mapping, the seeds' neighbourhood, the context within the budget and the
// extractive answer; B/op and allocs/op are the server's per request.
//
// The data set, the same at every run: 10,000 documents, document i the
// i-th file (modulo their number) of localBenchCorpora, id doc-%05d, its
// ACL a quarter each public, oncall, sre and oncall plus sre (the caller
// is in oncall: it reads three quarters). A document's text units are its
// sentences (fixture's sentences) grouped up to 120 words. Its entities,
// as a gazetteer would find them: the incident (its id, described by the
// title) and the named things its units hold (capitalised words not
// opening a sentence, the first 8 distinct ones, type component, each
// citing the units naming it); edges: incident mentions each named thing,
// and each named thing co_occurs with the next one named. Communities:
// 1,000, community k the incidents of the documents i with i%1000 == k and
// the named things first seen in them, with a report listing its
// incidents. The text units have vectors (offline hashing embedder). The
// graph cache is live (the service follows a bus) and warm. Questions:
// "hub" names the thing most documents mention (thousands of neighbours),
// "rare" one that fewest documents mention (of those named by six letters
// or more). The -8clients runs ask from eight goroutines at once and
// report their latencies' p50 and p99.
//
// KG_LOCAL_BENCH_PPROF names a directory for heap profiles written after
// the warm-up (warm.pprof) and after each question's requests
// (NAME.pprof): `go tool pprof -sample_index=alloc_space -diff_base
// warm.pprof hub.pprof` shows what the requests alone allocated.
// KG_LOCAL_BENCH_RESPONSES names a directory for the responses to the two
// questions and to one about every 40th named thing (NAME.json), to
// compare before and after a change.
func BenchmarkLocalRequest(b *testing.B) {
	const (
		docs        = 10000
		tenant      = "acme"
		communities = 1000
	)
	ctx := context.Background()
	st, err := embedded.Open(filepath.Join(b.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	vix, err := vecembedded.Open(filepath.Join(b.TempDir(), "vectors.db"), vecembedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { vix.Close() })
	emb := embed.NewHashing(embed.DefaultHashingDimensions)

	type base struct{ title, text string }
	var bases []base
	for _, dir := range localBenchCorpora {
		root := filepath.Join("../../../shared/corpora", dir)
		entries, err := os.ReadDir(root)
		if err != nil || len(entries) == 0 {
			b.Fatalf("corpus %s not found beside the checkout: %v", dir, err)
		}
		for _, e := range entries { // ReadDir sorts by name
			name := e.Name()
			if e.IsDir() || strings.HasPrefix(name, "LICENSE") || strings.HasPrefix(name, "README") || strings.HasPrefix(name, ".") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(root, name))
			if err != nil {
				b.Fatal(err)
			}
			text := strings.TrimSpace(string(data))
			if text == "" {
				continue
			}
			title, _, _ := strings.Cut(text, "\n")
			bases = append(bases, base{strings.TrimSpace(strings.TrimLeft(title, "# ")), text})
		}
	}
	acl := func(i int) provenance.ACL {
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
	// units groups a text's sentences into units of up to 120 words.
	units := func(text string) []events.TextUnit {
		var out []events.TextUnit
		var cur []string
		words := 0
		flush := func() {
			if len(cur) > 0 {
				out = append(out, events.TextUnit{ID: fmt.Sprintf("u%d", len(out)), Text: strings.Join(cur, " ")})
				cur, words = nil, 0
			}
		}
		for _, s := range sentences(text) {
			n := len(strings.Fields(s.Text))
			if words > 0 && words+n > 120 {
				flush()
			}
			cur = append(cur, s.Text)
			words += n
		}
		flush()
		return out
	}
	mentions := map[string]int{}  // named thing id -> documents
	nameOf := map[string]string{} // named thing id -> a spelling
	firstDoc := map[string]int{}  // named thing id -> first document naming it
	members := make([][]string, communities)
	var changes []store.Change
	var items []vector.Item
	flush := func() {
		if len(changes) > 0 {
			_, errs, err := st.ApplyBatch(ctx, tenant, changes)
			if err != nil {
				b.Fatal(err)
			}
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			changes = changes[:0]
		}
		if len(items) > 0 {
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
			if err := vix.Upsert(ctx, tenant, items); err != nil {
				b.Fatal(err)
			}
			items = items[:0]
		}
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range docs {
		bs := bases[i%len(bases)]
		doc := fmt.Sprintf("doc-%05d", i)
		us := units(bs.text)
		c := store.Contributions{Title: bs.title, DocType: "incident", TextUnits: us}
		inc := resolve.ID("incident", doc)
		c.Entities = append(c.Entities, store.EntityContribution{ID: inc, Type: "incident", Name: doc, NameRank: 2,
			Description: bs.title, TextUnits: []string{us[0].ID}})
		members[i%communities] = append(members[i%communities], inc)
		var named []string
		cites := map[string][]string{}
		type pair struct{ src, tgt string }
		var pairs []pair
		co := map[pair][]string{}
		for _, u := range us {
			var prev string
			for _, s := range sentences(u.Text) {
				for _, loc := range capitalRE.FindAllStringIndex(s.Text, -1) {
					if loc[0] == 0 {
						continue // a sentence's first word
					}
					name := s.Text[loc[0]:loc[1]]
					id := resolve.ID("component", name)
					if _, ok := cites[id]; !ok {
						if len(named) == 8 {
							continue
						}
						named = append(named, id)
						nameOf[id] = name
					}
					if l := cites[id]; len(l) == 0 || l[len(l)-1] != u.ID {
						cites[id] = append(l, u.ID)
					}
					if p := (pair{prev, id}); prev != "" && prev != id {
						if _, ok := co[p]; !ok {
							pairs = append(pairs, p)
						}
						if l := co[p]; len(l) == 0 || l[len(l)-1] != u.ID {
							co[p] = append(l, u.ID)
						}
					}
					prev = id
				}
			}
		}
		for _, id := range named {
			c.Entities = append(c.Entities, store.EntityContribution{ID: id, Type: "component", Name: nameOf[id], NameRank: 2,
				Description: nameOf[id] + " is named in " + doc + ".", TextUnits: cites[id]})
			c.Edges = append(c.Edges, store.EdgeContribution{Source: inc, Relation: "mentions", Target: id, Weight: 1, TextUnits: cites[id]})
			mentions[id]++
			if _, ok := firstDoc[id]; !ok {
				firstDoc[id] = i
				members[i%communities] = append(members[i%communities], id)
			}
		}
		for _, p := range pairs {
			c.Edges = append(c.Edges, store.EdgeContribution{Source: p.src, Relation: "co_occurs", Target: p.tgt, Weight: 1, TextUnits: co[p]})
		}
		if _, err := st.Announce(ctx, tenant, store.Announcement{DocID: doc, Version: 1, ACL: acl(i), Title: bs.title}); err != nil {
			b.Fatal(err)
		}
		changes = append(changes, store.Change{DocID: doc, Version: 1, Contributions: c, Now: at})
		for _, u := range us {
			items = append(items, vector.Item{ID: doc + "#" + u.ID, Kind: vector.KindTextUnit, Text: u.Text,
				Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: doc, Version: 1, TextUnit: u.ID}, ACL: acl(i)}}})
		}
		if len(changes) == 64 {
			flush()
		}
	}
	flush()
	var cs []store.Community
	for k := range communities {
		var srcs []provenance.SourceRef
		var findings []store.Finding
		for i := k; i < docs; i += communities {
			ref := provenance.SourceRef{DocID: fmt.Sprintf("doc-%05d", i), Version: 1}
			srcs = append(srcs, ref)
			findings = append(findings, store.Finding{Summary: bases[i%len(bases)].title, Citations: []provenance.SourceRef{ref}})
		}
		id := fmt.Sprintf("c0-%04d", k)
		ms := slices.Clone(members[k])
		sort.Strings(ms)
		cs = append(cs, store.Community{ID: id, Level: 0, Members: ms, MemberHash: id, Sources: srcs, Run: 1})
		if err := st.PutReport(ctx, tenant, store.Report{ID: "r-" + id, Community: id, Title: "Community " + id,
			Summary: fmt.Sprintf("%d incidents.", len(srcs)), Findings: findings, Rating: float64(k % 10), Sources: srcs,
			MemberHash: id, Writer: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.ReplaceCommunities(ctx, tenant, 1, cs); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 0, len(mentions))
	for id := range mentions {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return strings.Compare(a, b) })
	hub, rare := ids[0], ""
	for _, id := range ids {
		if mentions[id] > mentions[hub] {
			hub = id
		}
		if len(nameOf[id]) > 5 && (rare == "" || mentions[id] < mentions[rare]) {
			rare = id
		}
	}
	b.Logf("%d documents, %d named things; hub %s in %d documents, rare %s in %d", docs, len(ids), hub, mentions[hub], rare, mentions[rare])

	bus := streamtest.NewBus(b, streamtest.Options{})
	a, err := auth.New([]auth.Token{{Token: "t", Tenant: tenant, Principal: "alice", Groups: []string{"oncall"}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg := query.DefaultConfig()
	cfg.Vectors, cfg.Embedder, cfg.Events = vix, emb, bus
	svc, err := query.New(cfg, st, a, nil, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(rctx) }()
	b.Cleanup(func() { cancel(); <-done })
	h := svc.Handler()
	ask := func(question string, w *discardWriter) {
		body := fmt.Sprintf(`{"mode":"local","question":%q}`, question)
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/query", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK || w.n == 0 {
			b.Fatalf("%s: status %d, %d bytes", question, w.code, w.n)
		}
	}
	questions := []struct{ name, q string }{
		{"hub", "What happened to " + nameOf[hub] + " in our incidents?"},
		{"rare", "Why did " + nameOf[rare] + " fail?"},
	}
	// Warm every cache (the first requests read the graph and the units)
	// once the service follows the bus: until then nothing is kept.
	time.Sleep(500 * time.Millisecond)
	for range 3 {
		for _, q := range questions {
			ask(q.q, &discardWriter{})
		}
	}
	if dir := os.Getenv("KG_LOCAL_BENCH_RESPONSES"); dir != "" {
		// Every 40th named thing's question too: the responses, less
		// their timings, must not change with how they are computed.
		for k := 0; k < len(ids); k += 40 {
			questions = append(questions, struct{ name, q string }{fmt.Sprintf("q%04d", k), "What happened to " + nameOf[ids[k]] + "?"})
		}
		for _, q := range questions {
			w := discardWriter{keep: true}
			ask(q.q, &w)
			if err := os.WriteFile(filepath.Join(dir, q.name+".json"), w.body, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		questions = questions[:2]
	}
	profDir := os.Getenv("KG_LOCAL_BENCH_PPROF")
	heapProfile := func(name string) {
		if profDir == "" {
			return
		}
		runtime.GC() // the profile is as of the last collection
		f, err := os.Create(filepath.Join(profDir, name+".pprof"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.WriteHeapProfile(f); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.Logf("live heap after warming: %.1f MB in %d objects", float64(ms.HeapAlloc)/(1<<20), ms.HeapObjects)
	heapProfile("warm")
	for _, q := range questions {
		b.Run(q.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ask(q.q, &discardWriter{})
			}
		})
		heapProfile(q.name)
	}
	// Eight clients at once (four goroutines a processor on two), their
	// latencies' p50 and p99: where collections cost, the tail shows it.
	for _, q := range questions {
		b.Run(q.name+"-8clients", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
			var mu sync.Mutex
			var lat []time.Duration
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					began := time.Now()
					ask(q.q, &discardWriter{})
					took := time.Since(began)
					mu.Lock()
					lat = append(lat, took)
					mu.Unlock()
				}
			})
			reportLatency(b, lat)
		})
	}
}

// discardWriter is a ResponseWriter that counts the body and keeps
// nothing of it (unless keep), as a connection would: a recorder's
// growing buffer would count as the server's allocations.
type discardWriter struct {
	h    http.Header
	code int
	n    int
	keep bool
	body []byte
}

func (w *discardWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}

func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	if w.keep {
		w.body = append(w.body, p...)
	}
	return len(p), nil
}
