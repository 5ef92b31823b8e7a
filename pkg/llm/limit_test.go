package llm_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/httpretry"
	"github.com/kgstream/kgstream/pkg/httpretry/httpretrytest"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
)

// TestConcurrencyCapUnderFiftyDocuments sends 50 documents at once through
// two clients sharing one endpoint's limiter and counts, at the server, the
// requests in flight and the tokens that arrived by each (simulated) time.
func TestConcurrencyCapUnderFiftyDocuments(t *testing.T) {
	const docs, maxConc, tpm = 50, 4, 1500
	clock := httpretrytest.NewClock(time.Unix(0, 0))
	start := clock.Now()
	var (
		inFlight, peak atomic.Int32
		mu             sync.Mutex
		arrivals       []time.Duration // simulated time of each request's arrival
		tokens         []int           // the request's estimated tokens
	)
	srv := llmtest.New(func(req llmtest.Request) (string, bool) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for cur := peak.Load(); n > cur && !peak.CompareAndSwap(cur, n); cur = peak.Load() {
		}
		mu.Lock()
		arrivals = append(arrivals, clock.Now().Sub(start))
		tokens = append(tokens, llm.EstimateTokens(req.Messages))
		mu.Unlock()
		// Hold the request a little (not an assertion), so that requests
		// would pile up past the cap if it did not hold.
		for hold := time.Now(); inFlight.Load() <= maxConc && time.Since(hold) < 20*time.Millisecond; {
			time.Sleep(time.Millisecond)
		}
		return `{"ok":true}`, true
	})
	t.Cleanup(srv.Close)
	srv.SetUsage(llm.Usage{PromptTokens: 1, TotalTokens: 1})

	m := httpretry.NewMetrics(prometheus.NewRegistry())
	cfg := llm.Config{BaseURL: srv.URL(), Model: "m"}
	lim, err := httpretry.NewLimiter("llm", httpretry.Limits{MaxConcurrency: maxConc, TokensPerMinute: tpm, Clock: clock}, m)
	require.NoError(t, err)
	cfg.Limiter = lim
	clients := []*llm.Client{}
	for range 2 {
		c, err := llm.New(cfg)
		require.NoError(t, err)
		clients = append(clients, c)
	}

	var wg sync.WaitGroup
	for i := range docs {
		wg.Go(func() {
			text := fmt.Sprintf("document %d: ", i) + strings.Repeat("the cache node was replaced. ", 12+i%5)
			_, err := clients[i%2].Complete(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: text}}, nil)
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	require.Len(t, arrivals, docs)
	require.LessOrEqual(t, int(peak.Load()), maxConc, "requests in flight at once")
	require.Equal(t, int32(maxConc), peak.Load(), "the cap was never reached: the test shows nothing")
	total := 0
	for i, at := range arrivals {
		total += tokens[i]
		sum := 0
		for j, b := range arrivals {
			if b <= at {
				sum += tokens[j]
			}
		}
		allowed := tpm + int(float64(tpm)*at.Minutes())
		require.LessOrEqual(t, sum, allowed+1, "tokens arrived by %s", at)
	}
	require.Greater(t, total, 2*tpm, "the documents must need more than a minute's tokens")
	require.Greater(t, clock.Now().Sub(start), time.Minute, "simulated time spent waiting for tokens")
	require.Positive(t, testutil.ToFloat64(m.Waits.WithLabelValues("llm", "concurrency")))
	require.Positive(t, testutil.ToFloat64(m.Waits.WithLabelValues("llm", "tokens")))
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{"KG_LLM_BASE_URL": "http://127.0.0.1:1/v1", "KG_LLM_MODEL": "m",
		"KG_LLM_MAX_CONCURRENCY": "2", "KG_LLM_TOKENS_PER_MINUTE": "6000"}
	cfg, err := llm.ConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, 2, cfg.MaxConcurrency)
	require.Equal(t, 6000, cfg.TokensPerMinute)
	_, err = llm.NewLimiter(cfg, httpretry.NewMetrics(prometheus.NewRegistry()))
	require.NoError(t, err)
	env["KG_LLM_TOKENS_PER_MINUTE"] = "lots"
	_, err = llm.ConfigFromEnv(func(k string) string { return env[k] })
	require.Error(t, err)
}
