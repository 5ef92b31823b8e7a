//go:build integration

package app_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

// TestSeedScenarioDistributed runs every service as its own process against
// the machine's NATS JetStream and Redis: the workers share nothing but
// JetStream subjects and the Redis stores.
func TestSeedScenarioDistributed(t *testing.T) {
	bin := binaries(t)
	replay := newReplay(t)
	id := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000_000)
	prefix, streamName, subj := "kgtd"+id, "KGTD_"+id, "kgtd"+id
	t.Cleanup(func() { cleanRedis(t, prefix); deleteStream(t, streamName) })
	tokens := writeTokens(t)
	common := []string{"--nats", natsURL(), "--redis", redisURL(), "--redis-prefix", prefix,
		"--stream", streamName, "--subject-prefix", subj}
	// The reporter and the query service share the vector index through
	// Weaviate (the embedded index belongs to one process).
	wv := weaviateTestIndex(t, "Kgtd"+id)
	vectors := []string{"--weaviate", wv.URL, "--weaviate-grpc", wv.GRPCAddr, "--weaviate-collection", wv.Collection}
	llmEnv := []string{"KG_LLM_BASE_URL=" + replay.URL(), "KG_LLM_MODEL=replay", "KG_LLM_API_KEY=test"}
	type svc struct {
		name string
		env  []string
		args []string
	}
	addrs := map[string]string{}
	for _, s := range []svc{
		{"gateway", nil, []string{"--tokens", tokens}},
		{"query", nil, append([]string{"--tokens", tokens}, vectors...)},
		{"extractor", llmEnv, nil},
		{"resolver", nil, []string{"--max-deliver", "3"}},
		{"clusterer", nil, []string{"--quiet", "50ms", "--max-delay", "2s"}},
		{"reporter", nil, vectors},
	} {
		addr := freeAddr(t)
		addrs[s.name] = addr
		args := append(append(append([]string{}, common...), "--http", addr), s.args...)
		p := startProc(t, s.name, filepath.Join(bin, s.name), s.env, args...)
		waitReady(t, addr, p)
	}
	runSeedScenario(t, scenario{write: "http://" + addrs["gateway"], read: "http://" + addrs["query"],
		metrics: metricsOf(t, "http://"+addrs["query"])}, replay)

	// The query process applies nothing and calls no LLM: its status shows
	// the resolver's index lag and the extractor's LLM usage.
	requirePipelineFigures(t, app.NewClient("http://"+addrs["query"], "ops-token"), "resolver", "extractor")
}

// pipelineFigures is the part of an admin's GET /v1/status the processes
// record.
type pipelineFigures struct {
	IndexLag struct {
		P50     float64 `json:"p50"`
		P99     float64 `json:"p99"`
		Samples int     `json:"samples"`
	} `json:"index_lag_seconds"`
	LLM *struct {
		Documents        int     `json:"documents"`
		Calls            float64 `json:"calls"`
		CallsPerDocument float64 `json:"calls_per_document"`
		PromptTokens     float64 `json:"prompt_tokens"`
		CompletionTokens float64 `json:"completion_tokens"`
		ByModel          map[string]struct {
			Documents int `json:"documents"`
		} `json:"by_model"`
	} `json:"llm"`
	Sources []struct {
		Process    string  `json:"process"`
		Service    string  `json:"service"`
		Figure     string  `json:"figure"`
		AgeSeconds float64 `json:"age_seconds"`
		Live       bool    `json:"live"`
	} `json:"sources"`
}

// live is the service of the live process that recorded figure ("" when
// none did).
func (p pipelineFigures) live(figure string) string {
	for _, s := range p.Sources {
		if s.Figure == figure && s.Live {
			return s.Service
		}
	}
	return ""
}

// requirePipelineFigures checks that an admin's status shows the index lag
// of every change the seed scenario applied, recorded by the resolver
// service lagBy, and the LLM usage of its extraction (ten postmortems
// plus the INC-121 edit, one extraction and one gleaning call each),
// recorded by llmBy. The processes write every few seconds, hence the poll.
func requirePipelineFigures(t *testing.T, admin *app.Client, lagBy, llmBy string) {
	t.Helper()
	var p pipelineFigures
	eventually(t, 30*time.Second, "the processes' figures recorded", func() bool {
		p = pipelineFigures{}
		require.NoError(t, get(t, admin, "/v1/status", &p))
		return p.LLM != nil && p.LLM.Documents >= 11 && p.IndexLag.Samples >= 12 &&
			p.live("lag.graph") == lagBy && p.live("llm") == llmBy
	})
	t.Logf("index lag p50 %.3fs p99 %.3fs over %d samples; llm %d documents, %.0f calls (%.1f per document), %.0f prompt + %.0f completion tokens",
		p.IndexLag.P50, p.IndexLag.P99, p.IndexLag.Samples, p.LLM.Documents, p.LLM.Calls, p.LLM.CallsPerDocument,
		p.LLM.PromptTokens, p.LLM.CompletionTokens)
	for _, s := range p.Sources {
		t.Logf("source %s (%s) %s %.1fs ago live=%v", s.Process, s.Service, s.Figure, s.AgeSeconds, s.Live)
	}
	require.Greater(t, p.IndexLag.P50, 0.0)
	require.GreaterOrEqual(t, p.IndexLag.P99, p.IndexLag.P50)
	require.Equal(t, 11, p.LLM.Documents)
	require.Equal(t, 2.0, p.LLM.CallsPerDocument)
	require.Equal(t, 22.0, p.LLM.Calls, "every call counted once (kgstream_llm_calls_total)")
	require.Greater(t, p.LLM.PromptTokens, 0.0)
	require.Greater(t, p.LLM.CompletionTokens, 0.0)
	require.Equal(t, 11, p.LLM.ByModel["replay"].Documents, "the model the extractor was given")
}
