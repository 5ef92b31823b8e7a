package reporter_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
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
			applyB(b, st, doc, fm)
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
