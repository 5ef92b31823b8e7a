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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
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
			req, _ := http.NewRequest("POST", srv.URL+"/v1/query", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer t")
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var out query.QueryResponse
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
				b.Fatalf("global query: %d %v", resp.StatusCode, err)
			}
			resp.Body.Close()
			lat = append(lat, time.Since(start))
			if out.Global == nil || out.Global.ReportsUsed != reports {
				b.Fatalf("global used %+v reports, want %d", out.Global, reports)
			}
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}
