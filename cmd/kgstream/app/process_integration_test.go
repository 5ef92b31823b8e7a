//go:build integration

package app_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
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
}
