package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/daemon/daemontest"
)

// TestMainRunsTheService: the binary, started as its main starts it,
// becomes ready and runs the stage its package's NewService builds.
func TestMainRunsTheService(t *testing.T) {
	r := daemontest.Start(t, run)
	r.WaitConsumer(t, "reporter")
}

// TestVectorBatchFlag: --vector-batch reaches the vector consumer (its
// durable consumers admit twice a batch unacknowledged), and a batch below
// one is refused.
func TestVectorBatchFlag(t *testing.T) {
	r := daemontest.Start(t, run, "--vector-dir", t.TempDir(), "--vector-batch", "8", "--vector-batch-wait", "1ms", "--reconcile-gap", "10ms")
	r.WaitConsumer(t, "reporter-vectors")
	st, err := r.Bus.JetStream().Stream(t.Context(), r.Bus.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for info := range st.ListConsumers(t.Context()).Info() {
		if strings.HasPrefix(info.Name, "reporter-vectors") {
			found++
			if info.Config.MaxAckPending != 16 {
				t.Errorf("consumer %s: MaxAckPending %d, want 16", info.Name, info.Config.MaxAckPending)
			}
		}
	}
	if found == 0 {
		t.Fatal("no vector consumer")
	}

	// Refused before connecting (the NATS URL leads nowhere).
	for _, bad := range [][]string{{"--vector-batch", "0"}, {"--vector-batch-wait", "-1s"}, {"--report-concurrency", "-1"}} {
		err = run(t.Context(), append([]string{"--nats", "nats://127.0.0.1:1"}, bad...))
		var ue *daemon.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), bad[0]) {
			t.Fatalf("%v: %v", bad, err)
		}
	}
}
