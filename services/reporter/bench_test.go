package reporter_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/services/reporter"
)

// BenchmarkRegenerate measures report regeneration per community: one
// communities.changed event rewriting 100 communities of 20 incidents each
// (extractive writer, embedded store), reported per community.
func BenchmarkRegenerate(b *testing.B) {
	w, st, _, _ := setupB(b)
	const comms, per = 100, 20
	var cs []store.Community
	var changed []events.CommunityChange
	for k := 0; k < comms; k++ {
		var ms []string
		for i := 0; i < per; i++ {
			doc := fmt.Sprintf("d%d-%d", k, i)
			fm := fmt.Sprintf("fm%d", k)
			apply(b, st, doc, 1, fm)
			ms = append(ms, "incident:"+doc)
		}
		ms = append(ms, fmt.Sprintf("failure_mode:fm%d", k))
		id := fmt.Sprintf("c0-%03d", k)
		cs = append(cs, store.Community{ID: id, Members: ms, MemberHash: id})
		changed = append(changed, events.CommunityChange{ID: id, MemberHash: id})
	}
	if err := st.ReplaceCommunities(b.Context(), "acme", 1, cs); err != nil {
		b.Fatal(err)
	}
	ev := &events.CommunitiesChanged{Header: events.Header{Tenant: "acme"}, Run: 1, Changed: changed}
	data, err := events.Encode(ev)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if err := w.Handle(b.Context(), messageData(data)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N*comms), "ms/community")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkReconcile measures one reconciliation pass of a tenant with
// 2000 communities (one incident and its failure mode each, every document
// in the registry): "current" when every report is in place (the pass reads
// the communities, the citation index and the registry, and decodes no
// report), "missing_10" when 10 reports were deleted before each pass, and
// for comparison "decode_all", reading every report as a pass without the
// index would.
func BenchmarkReconcile(b *testing.B) {
	const n = 2000
	w, st, cs := reconcileTenantB(b, n)
	b.Run("current", func(b *testing.B) {
		for b.Loop() {
			if r, err := w.Reconcile(b.Context(), "acme"); err != nil || r != (reporter.Reconciled{}) {
				b.Fatalf("%+v, %v", r, err)
			}
		}
	})
	b.Run("missing_10", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			for _, c := range cs[:10] {
				if err := st.DeleteReport(b.Context(), "acme", reporter.ReportID(c.ID)); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			if r, err := w.Reconcile(b.Context(), "acme"); err != nil || r.Written != 10 {
				b.Fatalf("%+v, %v", r, err)
			}
		}
	})
	b.Run("decode_all", func(b *testing.B) {
		for b.Loop() {
			if rs, err := st.Reports(b.Context(), "acme"); err != nil || len(rs) != n {
				b.Fatalf("%d reports, %v", len(rs), err)
			}
		}
	})
}

// BenchmarkEventPass measures the reconciliation pass a communities event
// asks for, after an event naming 5 communities, in tenants of 500 and
// 2000 communities: "changed", the narrow pass (the communities named),
// and "all", the full pass every such event ran before.
func BenchmarkEventPass(b *testing.B) {
	for _, n := range []int{500, 2000} {
		w, _, cs := reconcileTenantB(b, n)
		ev := &events.CommunitiesChanged{Header: events.Header{Tenant: "acme"}, Run: 1, Changed: changes(cs[:5])}
		data, err := events.Encode(ev)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("communities=%d/changed", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				if err := w.Handle(b.Context(), messageData(data)); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if r := w.ReconcileChanged(b.Context()); r != (reporter.Reconciled{}) {
					b.Fatalf("%+v", r)
				}
			}
		})
		b.Run(fmt.Sprintf("communities=%d/all", n), func(b *testing.B) {
			for b.Loop() {
				if r := w.ReconcileAll(b.Context()); r != (reporter.Reconciled{}) {
					b.Fatalf("%+v", r)
				}
			}
		})
	}
}

// reconcileTenantB is a tenant of n communities (one incident and its
// failure mode each, every document in the registry), each with its report.
func reconcileTenantB(b *testing.B, n int) (*reporter.Worker, *embedded.Store, []store.Community) {
	b.Helper()
	w, st, _, _ := setupB(b)
	var cs []store.Community
	for i := range n {
		doc := fmt.Sprintf("d%04d", i)
		if _, err := st.Announce(b.Context(), "acme", store.Announcement{DocID: doc, Version: 1}); err != nil {
			b.Fatal(err)
		}
		apply(b, st, doc, 1, fmt.Sprintf("fm%04d", i))
		ms := []string{fmt.Sprintf("failure_mode:fm%04d", i), "incident:" + doc}
		h := store.MemberHash(ms)
		cs = append(cs, store.Community{ID: "c0-" + h[:12], Members: ms, MemberHash: h,
			Sources: []provenance.SourceRef{{DocID: doc, Version: 1}}})
	}
	if err := st.ReplaceCommunities(b.Context(), "acme", 1, cs); err != nil {
		b.Fatal(err)
	}
	if r := w.ReconcileAll(b.Context()); r.Written != n {
		b.Fatalf("%d reports written, want %d", r.Written, n)
	}
	return w, st, cs
}

// BenchmarkRegenerateHub is BenchmarkRegenerate where every document also
// mentions one hub (component:kafka, 2000 fragments, in no community of
// the event): the far end of 20 edges of each of the 100 communities,
// named and hashed with each report. "write" deletes the reports before
// each event (not timed), so each is written again; "current" handles the
// event with the reports in place, each checked and none stored.
func BenchmarkRegenerateHub(b *testing.B) {
	w, st, _, _ := setupB(b)
	const comms, per = 100, 20
	var changed []events.CommunityChange
	var cs []store.Community
	var rids []string
	for k := range comms {
		var ms []string
		for i := range per {
			doc := fmt.Sprintf("d%d-%d", k, i)
			inc, fm := "incident:"+doc, fmt.Sprintf("failure_mode:fm%d", k)
			_, err := st.Apply(b.Context(), "acme", doc, 1, store.Contributions{
				TextUnits: []events.TextUnit{{ID: doc + "-u", Text: "t"}},
				Entities: []store.EntityContribution{
					{ID: inc, Type: "incident", Name: doc, NameRank: 2, TextUnits: []string{doc + "-u"}},
					{ID: fm, Type: "failure_mode", Name: fm[len("failure_mode:"):], NameRank: 2, TextUnits: []string{doc + "-u"}},
					{ID: "component:kafka", Type: "component", Name: "Kafka", NameRank: 1, Description: "The event bus " + doc + " uses.", TextUnits: []string{doc + "-u"}},
				},
				Edges: []store.EdgeContribution{
					{Source: inc, Relation: "failure", Target: fm, Weight: 1, TextUnits: []string{doc + "-u"}},
					{Source: inc, Relation: "mentions", Target: "component:kafka", Weight: 1, Description: "stalled on the bus", TextUnits: []string{doc + "-u"}},
				},
			})
			if err != nil {
				b.Fatal(err)
			}
			ms = append(ms, inc)
		}
		ms = append(ms, fmt.Sprintf("failure_mode:fm%d", k))
		id := fmt.Sprintf("c0-%03d", k)
		cs = append(cs, store.Community{ID: id, Members: ms, MemberHash: id})
		changed = append(changed, events.CommunityChange{ID: id, MemberHash: id})
		rids = append(rids, reporter.ReportID(id))
	}
	cs = append(cs, store.Community{ID: "c0-hub", Members: []string{"component:kafka"}, MemberHash: "c0-hub"})
	if err := st.ReplaceCommunities(b.Context(), "acme", 1, cs); err != nil {
		b.Fatal(err)
	}
	data, err := events.Encode(&events.CommunitiesChanged{Header: events.Header{Tenant: "acme"}, Run: 1, Changed: changed})
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"write", "current"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				if mode == "write" {
					b.StopTimer()
					if err := st.DeleteReports(b.Context(), "acme", rids); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if err := w.Handle(b.Context(), messageData(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLLMReports measures one communities event rewriting 64
// communities with an LLM writer against a local OpenAI-compatible server
// answering each call after 100ms (an LLM's latency, not its work), one
// report at a time and 8 at once: ms per community. The LLM client allows
// its default 8 requests in flight.
func BenchmarkLLMReports(b *testing.B) {
	answer := oneFindingReport(b)
	srv := llmtest.New(func(llmtest.Request) (string, bool) {
		time.Sleep(100 * time.Millisecond)
		return answer, true
	})
	b.Cleanup(srv.Close)
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", APIKey: "k", Timeout: 5 * time.Second, MaxRetries: 1})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("concurrency=%d", n), func(b *testing.B) {
			_, st, bus, _ := setupB(b)
			const comms = 64
			cs, changed := incidentCommunities(b, st, comms)
			w, err := reporter.New(reporter.Config{LLM: reporter.NewLLMWriter(client), ReportConcurrency: n}, bus, st, nil, prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			data, err := events.Encode(&events.CommunitiesChanged{Header: events.Header{Tenant: "acme"}, Run: 1, Changed: changed})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				// Written anew each time, not restamped.
				for _, c := range cs {
					if err := st.DeleteReport(b.Context(), "acme", reporter.ReportID(c.ID)); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if err := w.Handle(b.Context(), messageData(data)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*comms), "ms/community")
		})
	}
}
