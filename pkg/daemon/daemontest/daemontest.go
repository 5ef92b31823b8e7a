// Package daemontest runs a service binary's run function in a test, as
// its main would, against a JetStream server embedded in the test process,
// and waits until the service is ready.
package daemontest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
)

// Running is a service started by Start.
type Running struct {
	// URL is the base URL of the service's HTTP listener.
	URL string
	// Bus is a connection of the test's own to the service's stream.
	Bus *stream.Bus
}

// Start runs run (a main's body: parse args, run until ctx ends) with
// args plus --nats (an embedded server), --http (a free loopback port),
// --data (a temporary directory) and --log-level error, and waits until
// its /readyz answers 200. When the test ends the service is stopped and
// must return nil.
func Start(t *testing.T, run func(ctx context.Context, args []string) error, args ...string) *Running {
	t.Helper()
	emb, err := stream.StartEmbedded(stream.EmbeddedConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatalf("starting embedded JetStream: %v", err)
	}
	t.Cleanup(emb.Shutdown)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	args = append([]string{"--nats", emb.ClientURL(), "--http", addr, "--data", t.TempDir(), "--log-level", "error"}, args...)
	go func() { done <- run(ctx, args) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the service stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("the service did not stop")
		}
	})
	r := &Running{URL: "http://" + addr}
	streamtest.Eventually(t, 30*time.Second, func() error {
		select {
		case err := <-done:
			t.Fatalf("the service stopped before it was ready: %v", err)
		default:
		}
		code, err := r.Status(http.MethodGet, "/readyz")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("/readyz answered %d", code)
		}
		return err
	})
	nc, err := emb.Connect()
	if err != nil {
		t.Fatalf("connecting to embedded JetStream: %v", err)
	}
	t.Cleanup(nc.Close)
	if r.Bus, err = stream.Connect(t.Context(), stream.Config{Conn: nc}, nil, nil); err != nil {
		t.Fatalf("connecting the bus: %v", err)
	}
	return r
}

// Status is the status code of an empty request to the service.
func (r *Running) Status(method, path string) (int, error) {
	req, err := http.NewRequest(method, r.URL+path, nil)
	if err != nil {
		return 0, err
	}
	c := http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// WaitConsumer waits until the stream has the durable consumer of stage
// (named stage, or stage-<kind> for a stage of several kinds): the
// service's stage is running.
func (r *Running) WaitConsumer(t *testing.T, stage string) {
	t.Helper()
	streamtest.Eventually(t, 30*time.Second, func() error {
		st, err := r.Bus.JetStream().Stream(t.Context(), r.Bus.StreamName())
		if err != nil {
			return err
		}
		names := st.ConsumerNames(t.Context())
		var seen []string
		for n := range names.Name() {
			if n == stage || strings.HasPrefix(n, stage+"-") {
				return nil
			}
			seen = append(seen, n)
		}
		if err := names.Err(); err != nil {
			return err
		}
		return fmt.Errorf("no consumer of stage %q among %v", stage, seen)
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
