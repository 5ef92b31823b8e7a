// Package streamtest gives tests a real JetStream: an embedded server in
// the test's temporary directory, connected in-process, with kgstream's
// stream created (the nats-server habit of testing against the real server,
// never a mock).
package streamtest

import (
	"log/slog"
	"testing"
	"time"

	"github.com/kgstream/kgstream/pkg/stream"
)

// Options tune NewBus; the zero value is a file-backed stream, no logs and
// unregistered metrics.
type Options struct {
	Config  stream.Config // Conn is set by NewBus
	Log     *slog.Logger
	Metrics *stream.Metrics
}

// NewBus starts an embedded JetStream server for t and returns a Bus on it.
// Everything is shut down when the test ends.
func NewBus(t testing.TB, opts Options) *stream.Bus {
	t.Helper()
	return NewBuses(t, 1, opts)[0]
}

// NewBuses starts one embedded JetStream server for t and returns n Buses
// on it, each with its own connection: n processes sharing one stream.
func NewBuses(t testing.TB, n int, opts Options) []*stream.Bus {
	t.Helper()
	emb, err := stream.StartEmbedded(stream.EmbeddedConfig{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatalf("starting embedded JetStream: %v", err)
	}
	t.Cleanup(emb.Shutdown)
	buses := make([]*stream.Bus, n)
	for i := range buses {
		nc, err := emb.Connect()
		if err != nil {
			t.Fatalf("connecting to embedded JetStream: %v", err)
		}
		t.Cleanup(nc.Close)
		cfg := opts.Config
		cfg.Conn = nc
		if buses[i], err = stream.Connect(t.Context(), cfg, opts.Log, opts.Metrics); err != nil {
			t.Fatalf("connecting the bus: %v", err)
		}
	}
	return buses
}

// Eventually polls cond until it returns nil or timeout passes, then fails
// the test with cond's last error: a bounded poll instead of a sleep.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
