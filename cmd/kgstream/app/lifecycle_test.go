package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/stream"
)

// TestFailedStageStopsTheApp: a stage whose durable is deleted fails; Wait
// returns its error and the other components, the HTTP API among them,
// stop too.
func TestFailedStageStopsTheApp(t *testing.T) {
	a := startApp(t, app.Config{DrainTimeout: time.Second})
	js := a.Bus.JetStream()

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- a.Wait(ctx) }()
	// A deletion while the stage is still creating its consumer is taken
	// back by the creation's retry; deleting again until the stage fails
	// makes the test independent of how far the start-up got.
	var err error
	deleting := time.NewTicker(500 * time.Millisecond)
	defer deleting.Stop()
	for done := false; !done; {
		_ = js.DeleteConsumer(ctx, a.Bus.StreamName(), "clusterer")
		select {
		case err = <-waited:
			done = true
		case <-deleting.C:
		}
	}
	require.ErrorIs(t, err, stream.ErrConsumerGone)
	require.Contains(t, err.Error(), "clusterer")
	require.Eventually(t, func() bool {
		resp, err := http.Get(a.URL() + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	}, 20*time.Second, 20*time.Millisecond, "the API still serves after a stage failed")
}
