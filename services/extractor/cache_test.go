package extractor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/llmx"
	"github.com/kgstream/kgstream/services/extractor/redis"
)

func cachedLLM(t *testing.T, url string, cache llmx.Cache, version string, reg prometheus.Registerer) *llmx.Extractor {
	t.Helper()
	c, err := llm.New(llm.Config{BaseURL: url, Model: "replay-model", Timeout: 2 * time.Second,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)
	x, err := llmx.New(llmx.Config{Cache: cache, PromptVersion: version,
		Prices: llmx.PriceTable{"replay-model": {PromptPerMTok: 1, CompletionPerMTok: 2}}}, c, testLogger(t), reg)
	require.NoError(t, err)
	return x
}

// histogram returns the sample count and sum of a histogram's series.
func histogram(t *testing.T, reg *prometheus.Registry, name string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			var n uint64
			var sum float64
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
				sum += m.GetHistogram().GetSampleSum()
			}
			return n, sum
		}
	}
	return 0, 0
}

// testCacheReingest is the cache contract end to end: the own corpus
// through the worker, an unchanged re-ingest (new versions, same text)
// that makes no LLM call, then a prompt-version change that misses for
// every text unit. The replay server's call log is the proof.
func testCacheReingest(t *testing.T, cache llmx.Cache) {
	bus := startBus(t)
	r := ownReplay(t)
	reg := prometheus.NewRegistry()
	x := cachedLLM(t, r.URL(), cache, "", reg)
	startWorker(t, bus, x, reg, nil)

	for _, id := range ownIDs {
		publishDoc(t, bus, ownDoc(t, "acme", id, 1))
	}
	first := waitExtracted(t, bus, "acme", len(ownIDs))
	require.Len(t, r.Calls(), 2*len(ownIDs), "extraction and gleaning per document")
	require.Equal(t, float64(len(ownIDs)), metricValue(t, reg, "kgstream_extract_cache_total", map[string]string{"result": "miss"}))

	// Cost accounting: llmtest reports 100 prompt and 20 completion tokens
	// per call; at 1 and 2 per million tokens a call costs 0.00014.
	require.Equal(t, float64(2*len(ownIDs)), metricValue(t, reg, "kgstream_llm_calls_total", map[string]string{"model": "replay-model"}))
	require.InDelta(t, 2*float64(len(ownIDs))*0.00014, metricValue(t, reg, "kgstream_llm_cost_total", nil), 1e-12)
	n, calls := histogram(t, reg, "kgstream_llm_calls_per_document")
	require.Equal(t, uint64(len(ownIDs)), n)
	require.Equal(t, float64(2*len(ownIDs)), calls)
	_, cost := histogram(t, reg, "kgstream_llm_cost_per_document")
	require.InDelta(t, 2*float64(len(ownIDs))*0.00014, cost, 1e-12)
	// The summary `kgstream status` can show.
	u := x.Usage()
	require.Equal(t, "replay-model", u.Model)
	require.Equal(t, len(ownIDs), u.Documents)
	require.Equal(t, 2.0, u.CallsPerDocument())
	require.InDelta(t, 2*0.00014, u.CostPerDocument(), 1e-12)

	r.ResetCalls()
	for _, id := range ownIDs {
		publishDoc(t, bus, ownDoc(t, "acme", id, 2))
	}
	all := waitExtracted(t, bus, "acme", 2*len(ownIDs))
	require.Empty(t, r.Calls(), "an unchanged re-ingest makes no LLM call")
	require.Equal(t, float64(len(ownIDs)), metricValue(t, reg, "kgstream_extract_cache_total", map[string]string{"result": "hit"}))
	want := ownRecorded(t)
	for i, ex := range all[len(ownIDs):] {
		require.Equal(t, int64(2), ex.Version)
		require.Equal(t, want[ex.DocID], triples(ex.Relationships), ex.DocID)
		require.Equal(t, len(first[i].Entities), len(ex.Entities))
		unit := chunk.TextUnitID(ex.DocID, 2, 0)
		for _, rel := range ex.Relationships {
			require.Equal(t, unit, rel.TextUnit, "a cached extraction is re-tagged with the new unit")
			require.Equal(t, ex.TextUnits[0].Hash, rel.UnitHash)
			require.Less(t, rel.SentenceStart, rel.SentenceEnd, "and cited afresh")
		}
	}
	// Cache hits cost nothing: the mean cost per document halves.
	u = x.Usage()
	require.Equal(t, 2*len(ownIDs), u.Documents)
	require.Equal(t, len(ownIDs), u.CacheHits)
	require.InDelta(t, 0.00014, u.CostPerDocument(), 1e-12)

	// A new prompt version misses for every unit.
	r.ResetCalls()
	reg2 := prometheus.NewRegistry()
	x2 := cachedLLM(t, r.URL(), cache, "extract-v2", reg2)
	for _, id := range ownIDs {
		d := ownDoc(t, "acme", id, 3)
		_, rels, err := x2.Extract(t.Context(), d, []events.TextUnit{{ID: chunk.TextUnitID(id, 3, 0), Text: d.Text, End: len(d.Text)}})
		require.NoError(t, err)
		require.Equal(t, want[id], triples(rels))
	}
	require.Len(t, r.Calls(), 2*len(ownIDs), "a prompt-version change misses the cache")
	require.Equal(t, float64(len(ownIDs)), metricValue(t, reg2, "kgstream_extract_cache_total", map[string]string{"result": "miss"}))
	require.Zero(t, metricValue(t, reg2, "kgstream_extract_cache_total", map[string]string{"result": "hit"}))
}

func TestLLMCacheInMemory(t *testing.T) { testCacheReingest(t, llmx.NewLRUCache(100)) }

// redisAddr is the Redis the tests use; it must be running (CI starts it).
const redisAddr = "127.0.0.1:6379"

func TestLLMCacheRedis(t *testing.T) {
	rdb := goredis.NewClient(&goredis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.Ping(t.Context()).Err(), "Redis must be running at %s", redisAddr)
	prefix := fmt.Sprintf("kgstream-test-%d:", time.Now().UnixNano())
	t.Cleanup(func() {
		// Not t.Context(): it is cancelled before cleanups run, and the
		// keys would stay behind (until their TTL).
		ctx := context.Background()
		keys, err := rdb.Keys(ctx, prefix+"*").Result()
		if err == nil && len(keys) > 0 {
			_ = rdb.Del(ctx, keys...).Err()
		}
	})
	c, err := redis.New(rdb, prefix, time.Hour)
	require.NoError(t, err)
	testCacheReingest(t, c)

	n, err := rdb.Keys(t.Context(), prefix+"extract:*").Result()
	require.NoError(t, err)
	require.Len(t, n, 2*len(ownIDs), "one entry per unit and prompt version")
	ttl, err := rdb.TTL(t.Context(), n[0]).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 59*time.Minute)

	_, err = redis.New(nil, "", 0)
	require.Error(t, err)
}

func TestLRUCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := llmx.NewLRUCache(2)
	ctx := t.Context()
	require.NoError(t, c.Set(ctx, "a", []byte("1")))
	require.NoError(t, c.Set(ctx, "b", []byte("2")))
	_, ok, _ := c.Get(ctx, "a") // a is now the most recent
	require.True(t, ok)
	require.NoError(t, c.Set(ctx, "c", []byte("3")))
	_, ok, _ = c.Get(ctx, "b")
	require.False(t, ok, "b was least recently used")
	v, ok, _ := c.Get(ctx, "a")
	require.True(t, ok)
	require.Equal(t, []byte("1"), v)
	require.Equal(t, 2, c.Len())
	v[0] = 'x'
	v, _, _ = c.Get(ctx, "a")
	require.Equal(t, []byte("1"), v, "values are copies")
}

func TestCacheKeyCoversItsInputs(t *testing.T) {
	base := llmx.CacheKey{ContentHash: chunk.ContentHash("text"), Subject: "INC-1", PromptVersion: "v1",
		EntityTypes: []string{"service", "incident"}, Model: "m", Gleanings: 1}
	same := base
	same.EntityTypes = []string{"incident", "service"}
	require.Equal(t, base.String(), same.String(), "entity type order does not matter")
	for name, mut := range map[string]func(*llmx.CacheKey){
		"content": func(k *llmx.CacheKey) { k.ContentHash = chunk.ContentHash("text!") },
		"subject": func(k *llmx.CacheKey) { k.Subject = "INC-2" },
		"prompt":  func(k *llmx.CacheKey) { k.PromptVersion = "v2" },
		"types":   func(k *llmx.CacheKey) { k.EntityTypes = []string{"service"} },
		"model":   func(k *llmx.CacheKey) { k.Model = "m2" },
		"glean":   func(k *llmx.CacheKey) { k.Gleanings = 2 },
	} {
		k := base
		mut(&k)
		require.NotEqual(t, base.String(), k.String(), name)
	}
}
