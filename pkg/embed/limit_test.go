package embed_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/httpretry"
	"github.com/kgstream/kgstream/pkg/httpretry/httpretrytest"
)

// TestEmbedLimitsHold embeds 50 texts at once and counts, at the server,
// the requests in flight and the tokens that arrived by each simulated time.
func TestEmbedLimitsHold(t *testing.T) {
	const texts, maxConc, tpm = 50, 3, 1000
	clock := httpretrytest.NewClock(time.Unix(0, 0))
	start := clock.Now()
	var (
		inFlight, peak atomic.Int32
		mu             sync.Mutex
		arrivals       []time.Duration
	)
	s := &server{t: t, dims: 3}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for cur := peak.Load(); n > cur && !peak.CompareAndSwap(cur, n); cur = peak.Load() {
		}
		mu.Lock()
		arrivals = append(arrivals, clock.Now().Sub(start))
		mu.Unlock()
		// Hold the request a little (not an assertion), so that requests
		// would pile up past the cap if it did not hold.
		for hold := time.Now(); inFlight.Load() <= maxConc && time.Since(hold) < 20*time.Millisecond; {
			time.Sleep(time.Millisecond)
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	m := httpretry.NewMetrics(prometheus.NewRegistry())
	lim, err := httpretry.NewLimiter("embed", httpretry.Limits{MaxConcurrency: maxConc, TokensPerMinute: tpm, Clock: clock}, m)
	require.NoError(t, err)
	c, err := embed.New(embed.Config{BaseURL: ts.URL + "/v1", Model: "test-model", APIKey: "sk-test", Limiter: lim})
	require.NoError(t, err)

	text := func(i int) string { return fmt.Sprintf("t%02d %s", i, strings.Repeat("x", 96)) } // 25 tokens each
	per := httpretry.EstimateTokens(text(0))
	var wg sync.WaitGroup
	for i := range texts {
		wg.Go(func() {
			if _, err := c.Embed(t.Context(), []string{text(i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	require.Len(t, arrivals, texts)
	require.Equal(t, int32(maxConc), peak.Load(), "requests in flight at once")
	for _, at := range arrivals {
		n := 0
		for _, b := range arrivals {
			if b <= at {
				n++
			}
		}
		require.LessOrEqual(t, n*per, tpm+int(float64(tpm)*at.Minutes())+1, "tokens arrived by %s", at)
	}
	require.Greater(t, texts*per, tpm, "the texts must need more than a minute's tokens")
	require.Positive(t, testutil.ToFloat64(m.Waits.WithLabelValues("embed", "tokens")))
}

func TestEmbedConfigFromEnv(t *testing.T) {
	env := map[string]string{"KG_EMBED_BASE_URL": "http://127.0.0.1:1/v1", "KG_EMBED_MODEL": "m",
		"KG_EMBED_MAX_CONCURRENCY": "2", "KG_EMBED_TOKENS_PER_MINUTE": "1000000"}
	cfg, ok, err := embed.ConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, cfg.MaxConcurrency)
	require.Equal(t, 1000000, cfg.TokensPerMinute)
	_, err = embed.FromEnvMetrics(func(k string) string { return env[k] }, httpretry.NewMetrics(prometheus.NewRegistry()))
	require.NoError(t, err)
	env["KG_EMBED_MAX_CONCURRENCY"] = "x"
	_, _, err = embed.ConfigFromEnv(func(k string) string { return env[k] })
	require.Error(t, err)
}
