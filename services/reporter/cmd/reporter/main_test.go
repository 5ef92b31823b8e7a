package main

import (
	"testing"

	"github.com/kgstream/kgstream/pkg/daemon/daemontest"
)

// TestMainRunsTheService: the binary, started as its main starts it,
// becomes ready and runs the stage its package's NewService builds.
func TestMainRunsTheService(t *testing.T) {
	r := daemontest.Start(t, run)
	r.WaitConsumer(t, "reporter")
}
