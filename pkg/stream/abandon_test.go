package stream_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
)

// stuckRun starts a stage whose handler, single or batch, ignores its
// context until the test ends, and returns once it is stuck.
func stuckRun(t *testing.T, bus *stream.Bus, cc stream.ConsumerConfig, batch bool) (cancel func(), done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	stuck, release := make(chan struct{}, 1), make(chan struct{})
	t.Cleanup(func() { close(release) })
	ch := make(chan error, 1)
	if batch {
		go func() {
			ch <- bus.RunBatch(ctx, cc, func(_ context.Context, ms []*stream.Message) []error {
				stuck <- struct{}{}
				<-release
				return make([]error, len(ms))
			})
		}()
	} else {
		go func() {
			ch <- bus.Run(ctx, cc, func(context.Context, *stream.Message) error {
				stuck <- struct{}{}
				<-release
				return nil
			})
		}()
	}
	publish(t, bus, "acme/d/1/changed", doc("d", 1))
	select {
	case <-stuck:
	case <-time.After(20 * time.Second):
		t.Fatal("handler not called")
	}
	return cancel, ch
}

// TestDrainTimeoutAbandonsAStuckHandler: a handler that ignores its
// cancelled context does not hold the stop past the drain timeout: Run
// returns without it, says so, and its message is redelivered (not
// dead-lettered) to the next process. Single and batch handlers alike.
func TestDrainTimeoutAbandonsAStuckHandler(t *testing.T) {
	for _, batch := range []bool{false, true} {
		name := "single"
		if batch {
			name = "batch"
		}
		t.Run(name, func(t *testing.T) {
			bus, m, logs := logBus(t, stream.Config{DrainTimeout: 200 * time.Millisecond})
			cc := stream.ConsumerConfig{Stage: "stuck", Kinds: []events.Kind{events.KindDocChanged}}
			cancel, done := stuckRun(t, bus, cc, batch)
			cancel()
			if err := waitRun(t, done, 30*time.Second); err != nil {
				t.Fatalf("Run = %v", err)
			}
			if got := testutil.ToFloat64(m.Events.WithLabelValues("stuck", "abandoned")); got != 1 {
				t.Fatalf("abandoned = %v, want 1", got)
			}
			if !strings.Contains(logs.String(), "handler ignored its cancelled context past the drain timeout") {
				t.Errorf("logs do not say a handler was left behind:\n%s", logs.String())
			}
			var deliveries atomic.Uint64
			run(t, bus, cc, func(_ context.Context, msg *stream.Message) error {
				deliveries.Store(msg.Deliveries)
				return nil
			})
			waitFor(t, "redelivery", func() bool { return deliveries.Load() != 0 })
			if d := deliveries.Load(); d != 2 {
				t.Fatalf("redelivered with Deliveries %d, want 2", d)
			}
			if dls := readDLQ(t, bus, "stuck"); len(dls) != 0 {
				t.Fatalf("dead letters = %+v, want none", dls)
			}
		})
	}
}
