package query_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/vector"
	vecembedded "github.com/kgstream/kgstream/pkg/vector/embedded"
	"github.com/kgstream/kgstream/services/query"
)

// BenchmarkGlobal measures global search latency (p50/p99) over 1,000
// admitted community reports built from 5,000 documents, offline.
func BenchmarkGlobal(b *testing.B) {
	const (
		docs    = 5000
		reports = 1000
		queries = 200
	)
	st, err := embedded.Open(filepath.Join(b.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	ctx := b.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	members := make([][]string, reports)
	var findings [reports][]store.Finding
	var sources [reports]map[provenance.SourceRef]bool
	for i := range sources {
		sources[i] = map[provenance.SourceRef]bool{}
	}
	for i := 0; i < docs; i++ {
		doc := fmt.Sprintf("D-%d", i)
		if _, err := st.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: 1, ACL: provenance.PublicACL()}); err != nil {
			b.Fatal(err)
		}
		inc, fm := fmt.Sprintf("incident:d%d", i), fmt.Sprintf("failure_mode:fm%d", rng.IntN(40))
		u := doc + "-u"
		if _, err := st.Apply(ctx, "acme", doc, 1, store.Contributions{TextUnits: []events.TextUnit{{ID: u, Text: "t"}},
			Entities: []store.EntityContribution{{ID: inc, Type: "incident", Name: doc, NameRank: 2, TextUnits: []string{u}},
				{ID: fm, Type: "failure_mode", Name: fm[13:], NameRank: 2, TextUnits: []string{u}}},
			Edges: []store.EdgeContribution{{Source: inc, Relation: "failure", Target: fm, Weight: 1, TextUnits: []string{u}}}}); err != nil {
			b.Fatal(err)
		}
		k := i % reports
		ref := provenance.SourceRef{DocID: doc, Version: 1}
		members[k] = append(members[k], inc)
		sources[k][ref] = true
		findings[k] = append(findings[k], store.Finding{Summary: doc + " failure " + fm, Entities: []string{inc},
			Edges: []string{store.EdgeID(inc, "failure", fm)}, Citations: []provenance.SourceRef{{DocID: doc, Version: 1, TextUnit: u}}})
	}
	var cs []store.Community
	for k := 0; k < reports; k++ {
		var srcs []provenance.SourceRef
		for r := range sources[k] {
			srcs = append(srcs, r)
		}
		sort.Slice(srcs, func(i, j int) bool { return srcs[i].DocID < srcs[j].DocID })
		id := fmt.Sprintf("c0-%04d", k)
		sort.Strings(members[k])
		cs = append(cs, store.Community{ID: id, Level: 0, Members: members[k], MemberHash: id, Sources: srcs, Run: 1})
		if err := st.PutReport(ctx, "acme", store.Report{ID: "r-" + id, Community: id, Title: id, Summary: "s",
			Findings: findings[k], Rating: 5, Sources: srcs, MemberHash: id, Writer: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.ReplaceCommunities(ctx, "acme", 1, cs); err != nil {
		b.Fatal(err)
	}
	a, _ := auth.New([]auth.Token{{Token: "t", Tenant: "acme", Principal: "p"}}, nil)
	svc, err := query.New(query.Config{}, st, a, nil, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	b.Cleanup(srv.Close)
	body, _ := json.Marshal(map[string]any{"mode": "global", "question": "What are the recurring root causes?"})
	b.ResetTimer()
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		for q := 0; q < queries; q++ {
			out, took := postQuery(b, srv.URL, body)
			lat = append(lat, took)
			if out.Global == nil || out.Global.ReportsUsed != reports {
				b.Fatalf("global used %+v reports, want %d", out.Global, reports)
			}
		}
	}
	reportLatency(b, lat)
	b.ReportMetric(0, "ns/op")
}

// BenchmarkBasic measures basic search latency (p50/p99) through the query
// service over 100,000 text units of 4,000 documents on the embedded vector
// index with the offline embedder (384 dimensions): embedding the question,
// the pre-filtered exact search, re-admission of every hit and the answer.
func BenchmarkBasic(b *testing.B) {
	const (
		docs    = 4000
		perDoc  = 25
		queries = 200
	)
	st, err := embedded.Open(filepath.Join(b.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	ix, err := vecembedded.Open(filepath.Join(b.TempDir(), "vectors.db"), vecembedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ix.Close() })
	emb := embed.NewHashing(embed.DefaultHashingDimensions)
	ctx := b.Context()
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"certificate", "expired", "dns", "resolver", "config", "push", "pool", "exhaustion", "disk", "full",
		"ingress", "checkout", "payments", "auth", "latency", "rollback", "pager", "shard", "replica", "timeout"}
	for d := 0; d < docs; d++ {
		doc := fmt.Sprintf("D-%d", d)
		acl := provenance.PublicACL()
		if d%4 == 0 {
			acl = provenance.ACL{Groups: []string{"sre"}}
		}
		if _, err := st.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: 1, ACL: acl}); err != nil {
			b.Fatal(err)
		}
		items := make([]vector.Item, perDoc)
		texts := make([]string, perDoc)
		for u := range items {
			var sentence []string
			for w := 0; w < 12; w++ {
				sentence = append(sentence, words[rng.IntN(len(words))])
			}
			texts[u] = doc + ": " + strings.Join(sentence, " ")
			unit := fmt.Sprintf("u%d", u)
			items[u] = vector.Item{ID: doc + "#" + unit, Kind: vector.KindTextUnit, Text: texts[u],
				Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: doc, Version: 1, TextUnit: unit}, ACL: acl}}}
		}
		vecs, err := emb.Embed(ctx, texts)
		if err != nil {
			b.Fatal(err)
		}
		for u := range items {
			items[u].Vector = vecs[u]
		}
		if err := ix.Upsert(ctx, "acme", items); err != nil {
			b.Fatal(err)
		}
	}
	a, _ := auth.New([]auth.Token{{Token: "t", Tenant: "acme", Principal: "p", Groups: []string{"sre"}}}, nil)
	svc, err := query.New(query.Config{Vectors: ix, Embedder: emb}, st, a, nil, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	b.Cleanup(srv.Close)
	b.ResetTimer()
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		for q := 0; q < queries; q++ {
			question := fmt.Sprintf("why did the %s %s %s?", words[rng.IntN(len(words))], words[rng.IntN(len(words))], words[rng.IntN(len(words))])
			body, _ := json.Marshal(map[string]any{"mode": "basic", "question": question})
			out, took := postQuery(b, srv.URL, body)
			lat = append(lat, took)
			if out.Basic == nil || out.Basic.Used == 0 {
				b.Fatalf("basic answer without passages: %+v", out.Basic)
			}
		}
	}
	reportLatency(b, lat)
	b.ReportMetric(docs*perDoc, "text-units")
	b.ReportMetric(0, "ns/op")
}

// postQuery sends one POST /v1/query as the benchmark's caller and returns
// the answer and its latency.
func postQuery(b *testing.B, base string, body []byte) (query.QueryResponse, time.Duration) {
	b.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/query", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer t")
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var out query.QueryResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		b.Fatalf("query %s: %d %v", body, resp.StatusCode, err)
	}
	return out, time.Since(start)
}

// reportLatency reports the p50 and p99 of lat in milliseconds.
func reportLatency(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
