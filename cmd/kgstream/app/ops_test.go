package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

// TestMetricsAreNotOnTheAPIAddress: /metrics, whose labels name tenants, is
// served on the ops listener only; the API address answers 404.
func TestMetricsAreNotOnTheAPIAddress(t *testing.T) {
	a := startApp(t, app.Config{TokensFile: writeTokens(t)})
	require.NotEqual(t, a.Addr, a.OpsAddr)

	resp, err := http.Get(a.URL() + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &e), "a JSON error: %s", body)
	require.NotContains(t, string(body), "kgstream_")

	require.Contains(t, metricsOf(t, a.OpsURL())(), "kgstream_events_total")
	for _, p := range []string{"/healthz", "/readyz"} {
		for _, base := range []string{a.URL(), a.OpsURL()} {
			resp, err := http.Get(base + p)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, base+p)
		}
	}
}
