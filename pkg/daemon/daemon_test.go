package daemon

import (
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/serve"
	"github.com/kgstream/kgstream/pkg/service"
	"github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/pkg/stream"
)

// natsURL starts an embedded JetStream server listening on a free port.
func natsURL(t *testing.T) string {
	t.Helper()
	emb, err := stream.StartEmbedded(stream.EmbeddedConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	return emb.ClientURL()
}

func testFlags(t *testing.T, url string) Flags {
	t.Helper()
	return Flags{Name: "test", NATSURL: url, Stream: "KG", SubjectPrefix: "kg", HTTPAddr: "127.0.0.1:0",
		LogFormat: LogFormatText, LogLevel: "error"}
}

func runAsync(ctx context.Context, f Flags, body Body) <-chan error {
	done := make(chan error, 1)
	go func() { done <- run(ctx, f, false, body) }()
	return done
}

func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not stop")
		return nil
	}
}

// TestRunReturnsFailedStage: a stage whose durable is deleted on the server
// fails; the daemon stops its HTTP server and returns the stage's error,
// which a service's main turns into a non-zero exit.
func TestRunReturnsFailedStage(t *testing.T) {
	f := testFlags(t, natsURL(t))
	var bus *stream.Bus
	started := make(chan struct{})
	done := runAsync(t.Context(), f, func(_ context.Context, env *Env) (func(context.Context) error, http.Handler, error) {
		bus = env.Bus
		return func(ctx context.Context) error {
			close(started)
			return env.Bus.Run(ctx, stream.ConsumerConfig{Stage: "st", Kinds: []events.Kind{events.KindDocChanged}},
				func(context.Context, *stream.Message) error { return nil })
		}, nil, nil
	})
	<-started
	// Delete the consumer until the daemon stops: a deletion that races the
	// consumer's creation is taken back by the creation's retry.
	deadline := time.After(60 * time.Second)
	for {
		_ = bus.JetStream().DeleteConsumer(t.Context(), "KG", "st")
		select {
		case err := <-done:
			if !errors.Is(err, stream.ErrConsumerGone) {
				t.Fatalf("run = %v, want ErrConsumerGone", err)
			}
			return
		case <-deadline:
			t.Fatal("the daemon did not stop after its consumer was deleted")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestRunStopsCleanly: cancelling (the signal) stops the stage and the
// daemon returns nil; a body whose run fails at once makes it return that
// error.
func TestRunStopsCleanly(t *testing.T) {
	url := natsURL(t)
	ctx, cancel := context.WithCancel(t.Context())
	running := make(chan struct{})
	done := runAsync(ctx, testFlags(t, url), func(context.Context, *Env) (func(context.Context) error, http.Handler, error) {
		return func(ctx context.Context) error { close(running); return Block(ctx) }, nil, nil
	})
	<-running
	cancel()
	if err := wait(t, done); err != nil {
		t.Fatalf("run after cancel = %v, want nil", err)
	}

	boom := errors.New("stage broke")
	done = runAsync(t.Context(), testFlags(t, url), func(context.Context, *Env) (func(context.Context) error, http.Handler, error) {
		return func(context.Context) error { return boom }, nil, nil
	})
	if err := wait(t, done); !errors.Is(err, boom) {
		t.Fatalf("run = %v, want %v", err, boom)
	}
}

// TestDrainTimeoutFlag: --drain-timeout, its variable and the config file
// set Flags.DrainTimeout; a malformed variable fails Run with its name.
func TestDrainTimeoutFlag(t *testing.T) {
	parse := func(args ...string) (Flags, error) {
		var f Flags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		f.Register(fs, "127.0.0.1:0")
		return f, Parse(fs, args)
	}
	t.Setenv("KG_DRAIN_TIMEOUT", "")
	f, err := parse()
	if err != nil || f.DrainTimeout != stream.DefaultDrainTimeout {
		t.Fatalf("default: %v %s", err, f.DrainTimeout)
	}
	if f, err = parse("--drain-timeout", "5s"); err != nil || f.DrainTimeout != 5*time.Second {
		t.Fatalf("flag: %v %s", err, f.DrainTimeout)
	}
	path := t.TempDir() + "/svc.yaml"
	if err := os.WriteFile(path, []byte("drain-timeout: 7s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err = parse("--config", path); err != nil || f.DrainTimeout != 7*time.Second {
		t.Fatalf("config file: %v %s", err, f.DrainTimeout)
	}
	t.Setenv("KG_DRAIN_TIMEOUT", "9s")
	if f, err = parse("--config", path); err != nil || f.DrainTimeout != 9*time.Second {
		t.Fatalf("environment over the file: %v %s", err, f.DrainTimeout)
	}
	t.Setenv("KG_DRAIN_TIMEOUT", "soon")
	if f, err = parse(); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), f, false, nil); err == nil || !strings.Contains(err.Error(), `KG_DRAIN_TIMEOUT: time: invalid duration "soon"`) {
		t.Fatalf("run with a malformed KG_DRAIN_TIMEOUT = %v", err)
	}
	t.Setenv("KG_DRAIN_TIMEOUT", "")
	if f, err = parse("--drain-timeout", "-1s"); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), f, false, nil); err == nil || !strings.Contains(err.Error(), "DrainTimeout must be >= 0") {
		t.Fatalf("run with a negative drain timeout = %v", err)
	}
}

// TestRunRecordsStatusFigures: a service records the status figures it
// holds (here the index lag of what it applied) for every process to read,
// and removes them when it stops.
func TestRunRecordsStatusFigures(t *testing.T) {
	url := natsURL(t)
	f := testFlags(t, url)
	f.StatsInterval = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	done := runAsync(ctx, f, func(_ context.Context, env *Env) (func(context.Context) error, http.Handler, error) {
		env.Bus.ObserveLag("graph", time.Now().Add(-2*time.Second))
		return Block, nil, nil
	})
	reader, err := stream.Connect(t.Context(), stream.Config{URL: url}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	deadline := time.Now().Add(20 * time.Second)
	for {
		fl, err := status.ReadFleet(t.Context(), reader, time.Now())
		if err == nil && len(fl.Lag["graph"]) == 1 && len(fl.Sources) == 1 && fl.Sources[0].Service == "test" && fl.Sources[0].Live {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service's lag never recorded: %+v %v", fl, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	fl, err := status.ReadFleet(t.Context(), reader, time.Now())
	if err != nil || len(fl.Sources) != 0 {
		t.Fatalf("figures of a stopped service: %+v %v", fl, err)
	}
}

// warming is a service with one idle actor and no routes that is warm
// once its channel is closed.
type warming struct{ warm chan struct{} }

func (w warming) Actors() []service.Actor { return []service.Actor{{Name: "idle", Run: Block}} }
func (w warming) Routes() *serve.Routes   { return nil }
func (w warming) Warmed() <-chan struct{} { return w.warm }

// TestReadyAfterWarmUp: a service that warms up (service.Warmer) keeps
// the process's /readyz at 503 until its warm-up is over, then 200.
func TestReadyAfterWarmUp(t *testing.T) {
	f := testFlags(t, natsURL(t))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.HTTPAddr = l.Addr().String()
	_ = l.Close()
	w := warming{warm: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	done := runAsync(ctx, f, ServiceBody(func(context.Context, *Env) (service.Service, error) { return w, nil }))
	defer func() {
		cancel()
		if err := wait(t, done); err != nil {
			t.Errorf("run = %v", err)
		}
	}()
	readyz := func() int {
		resp, err := http.Get("http://" + f.HTTPAddr + "/readyz")
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	// Serving, not ready.
	deadline := time.Now().Add(30 * time.Second)
	for readyz() != http.StatusServiceUnavailable {
		select {
		case err := <-done:
			t.Fatalf("run = %v before the service was warm", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz never answered 503 while the service warmed up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 10 {
		if code := readyz(); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz answered %d before the warm-up was over, want 503", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(w.warm)
	for readyz() != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("/readyz did not answer 200 after the warm-up")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
