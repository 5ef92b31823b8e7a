package reporter_test

import (
	"fmt"
	"testing"

	"github.com/kgstream/kgstream/pkg/events"
)

// BenchmarkHandleEvent measures the handler of one communities event
// naming 5 communities whose reports are current (each is checked, none
// stored), in tenants of 500 and 2000 communities: its cost follows what
// the event names, not the tenant.
func BenchmarkHandleEvent(b *testing.B) {
	for _, n := range []int{500, 2000} {
		w, _, cs := reconcileTenantB(b, n)
		ev := &events.CommunitiesChanged{Header: events.Header{Tenant: "acme"}, Run: 1, Refreshed: changes(cs[:5])}
		data, err := events.Encode(ev)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("communities=%d", n), func(b *testing.B) {
			for b.Loop() {
				if err := w.Handle(b.Context(), messageData(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
