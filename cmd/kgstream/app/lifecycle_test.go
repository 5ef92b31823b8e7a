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
	require.Eventually(t, func() bool {
		return js.DeleteConsumer(t.Context(), a.Bus.StreamName(), "clusterer") == nil
	}, 20*time.Second, 10*time.Millisecond, "deleting the clusterer's consumer")

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := a.Wait(ctx)
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
