package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/gateway"
)

// BenchmarkRepublish measures how fast a gateway publishes what an outage
// left in its outbox: 2,000 documents are written while the stream takes
// no document events (each request answers 503 and leaves its event
// pending), then one Republish round publishes them all. Reported:
// events/s of that round, on the embedded store and on Redis.
func BenchmarkRepublish(b *testing.B) {
	const docs = 2000
	for name, open := range registries() {
		b.Run(name, func(b *testing.B) {
			var perSec []float64
			for range b.N {
				st := open(b)
				bus := streamtest.NewBus(b, streamtest.Options{})
				a, err := auth.New([]auth.Token{{Token: "w", Tenant: "acme", Principal: "writer", Writer: true}}, nil)
				if err != nil {
					b.Fatal(err)
				}
				g, err := gateway.New(gateway.Config{MaxBodyBytes: 1 << 16, PublishTimeout: 2 * time.Second, OutboxEvery: time.Hour},
					st, bus, a, nil, prometheus.NewRegistry())
				if err != nil {
					b.Fatal(err)
				}
				srv := httptest.NewServer(g.Handler())
				ctx := b.Context()
				setSubjects, subjects := streamSubjects(b, bus)
				setSubjects([]string{"outage.nothing"})
				// Each refused publish takes the client's retries (about half a
				// second): the writes go 50 at a time.
				var wg errgroup.Group
				wg.SetLimit(50)
				for i := range docs {
					wg.Go(func() error {
						body := fmt.Sprintf(`{"id":"outage/%04d","text":"written during the outage, number %d"}`, i, i)
						req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/documents", strings.NewReader(body))
						req.Header.Set("Authorization", "Bearer w")
						req.Header.Set("Content-Type", "application/json")
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							return err
						}
						_ = resp.Body.Close()
						if resp.StatusCode != http.StatusServiceUnavailable {
							return fmt.Errorf("POST during the outage answered %d", resp.StatusCode)
						}
						return nil
					})
				}
				if err := wg.Wait(); err != nil {
					b.Fatal(err)
				}
				srv.Close()
				setSubjects(subjects)
				began := time.Now()
				left, err := g.Republish(context.WithoutCancel(ctx))
				took := time.Since(began)
				if err != nil || left != 0 {
					b.Fatalf("Republish = %d left, %v", left, err)
				}
				perSec = append(perSec, docs/took.Seconds())
			}
			sum := 0.0
			for _, v := range perSec {
				sum += v
			}
			b.ReportMetric(sum/float64(len(perSec)), "events/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
