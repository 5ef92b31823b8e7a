package extractor_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/catalog"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/services/extractor"
)

var seedIDs = []string{"INC-101", "INC-104", "INC-107", "INC-112", "INC-115", "INC-118", "INC-121", "INC-124", "INC-127", "INC-130"}

func replay(t *testing.T) *llmtest.Replay {
	t.Helper()
	r, err := llmtest.SeedReplay(filepath.Join(seed, "recorded-llm-extraction.json"))
	require.NoError(t, err)
	t.Cleanup(r.Close)
	return r
}

func llmExtractor(t *testing.T, url string, reg prometheus.Registerer) *extractor.LLM {
	t.Helper()
	c, err := llm.New(llm.Config{BaseURL: url, Model: "replay-model", Timeout: 2 * time.Second,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)
	x, err := extractor.NewLLM(extractor.LLMConfig{}, c, testLogger(t), reg)
	require.NoError(t, err)
	return x
}

func TestLLMExtractsSeedPostmortems(t *testing.T) {
	bus := startBus(t)
	r := replay(t)
	reg := prometheus.NewRegistry()
	startWorker(t, bus, llmExtractor(t, r.URL(), reg), reg, nil)

	for _, id := range seedIDs {
		publishDoc(t, bus, seedDoc(t, "acme", id, 1))
	}
	got := waitExtracted(t, bus, "acme", len(seedIDs))
	want := recorded(t)
	for _, ex := range got {
		require.Equal(t, want[ex.DocID], triples(ex.Relationships), ex.DocID)
		require.Equal(t, "llm", ex.Extractor)
		require.Equal(t, "incident", ex.DocType)
		require.Equal(t, "Postmortem "+ex.DocID, ex.Title)
		require.Equal(t, time.Date(2025, 1, 9, 12, 0, 0, 0, time.UTC), ex.ReceivedAt)
		require.Len(t, ex.TextUnits, 1)
		u := ex.TextUnits[0]
		require.Equal(t, extractor.TextUnitID(ex.DocID, 1, 0), u.ID)
		for _, rel := range ex.Relationships {
			require.Equal(t, u.ID, rel.TextUnit)
		}
		for _, e := range ex.Entities {
			require.Equal(t, u.ID, e.TextUnit)
		}
	}

	// One extraction call and one gleaning call per document.
	calls := r.Calls()
	require.Len(t, calls, 2*len(seedIDs))
	for i := 0; i < len(calls); i += 2 {
		require.Contains(t, calls[i].Prompt, "Document id: ")
		require.False(t, calls[i].Request.FollowUp())
		require.Equal(t, extractor.GleaningPrompt, calls[i+1].Prompt)
		require.True(t, calls[i+1].Request.FollowUp())
		require.Equal(t, 200, calls[i+1].Status)
	}
	require.Equal(t, float64(len(seedIDs)), metricValue(t, reg, "kgstream_extract_units_total", map[string]string{"extractor": "llm"}))
	// llmtest reports 100 prompt tokens per call.
	require.Equal(t, float64(100*len(calls)), metricValue(t, reg, "kgstream_llm_tokens_total",
		map[string]string{"model": "replay-model", "direction": "prompt"}))
	require.Zero(t, metricValue(t, reg, "kgstream_extract_dropped_relationships_total", nil))

	// The INC-121 edit: the revised postmortem blames a bad upgrade.
	r.Override("INC-121", []llmtest.Relationship{
		{Source: "INC-121", SourceType: "incident", Relation: "affected", Target: "notification-service", TargetType: "service"},
		{Source: "INC-121", SourceType: "incident", Relation: "involved", Target: "certmanager", TargetType: "component"},
		{Source: "INC-121", SourceType: "incident", Relation: "failure", Target: "bad upgrade", TargetType: "failure_mode"},
	})
	rev := seedDoc(t, "acme", "INC-121", 2)
	rev.Text = strings.Replace(rev.Text, "after an upgrade, certmanager stopped", "a bad upgrade of certmanager stopped", 1)
	publishDoc(t, bus, rev)
	got = waitExtracted(t, bus, "acme", len(seedIDs)+1)
	last := got[len(got)-1]
	require.Equal(t, int64(2), last.Version)
	require.Contains(t, triples(last.Relationships), "incident:INC-121 -failure-> failure_mode:bad upgrade")
	require.NotContains(t, triples(last.Relationships), "incident:INC-121 -failure-> failure_mode:expired certificate")
	require.NotEqual(t, got[6].TextUnits[0].ID, last.TextUnits[0].ID, "a new version has new text unit ids")
}

// metricValue sums the series of a metric whose labels include labels (0
// when there are none: a vector without series is not gathered).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func TestLLMRetriesRateLimitAndServerErrors(t *testing.T) {
	bus := startBus(t)
	r := replay(t)
	r.SetRetryAfter("0.05")
	r.Fail(llmtest.RateLimit, 1)
	r.Fail(llmtest.ServerError, 1)
	startWorker(t, bus, llmExtractor(t, r.URL(), nil), nil, nil)

	publishDoc(t, bus, seedDoc(t, "acme", "INC-112", 1))
	got := waitExtracted(t, bus, "acme", 1)
	require.Equal(t, recorded(t)["INC-112"], triples(got[0].Relationships))

	var statuses []int
	for _, c := range r.Calls() {
		statuses = append(statuses, c.Status)
	}
	// 429 then 500 on the extraction call, retried by the client, then the
	// gleaning call.
	require.Equal(t, []int{429, 500, 200, 200}, statuses)
	require.Equal(t, llmtest.RateLimit, r.Calls()[0].Failure)
	require.Contains(t, r.Calls()[2].Prompt, "INC-112")
}

func TestLLMSchemaInvalidTwiceIsDeadLettered(t *testing.T) {
	bus := startBus(t)
	r := replay(t)
	r.Fail(llmtest.InvalidSchema, 2)
	startWorker(t, bus, llmExtractor(t, r.URL(), nil), nil, nil)

	publishDoc(t, bus, seedDoc(t, "acme", "INC-101", 1))
	dls := waitDeadLetters(t, bus, "extractor", 1)
	require.Len(t, dls, 1)
	dl := dls[0]
	require.Equal(t, "extractor", dl.Stage)
	require.Equal(t, "kg.doc.changed.acme", dl.Subject)
	require.Equal(t, uint64(1), dl.Deliveries, "a permanent error is not redelivered")
	require.Equal(t, "acme/INC-101/1/doc.changed", dl.MsgID)
	require.Contains(t, dl.Error, extractor.ErrSchema.Error())
	require.Contains(t, dl.Error, llmtest.InvalidSchemaContent, "the error shows the raw reply")
	var orig events.DocChanged
	require.NoError(t, events.Decode(dl.Data, &orig))
	require.Equal(t, "INC-101", orig.DocID)

	// Exactly the two extraction attempts; nothing was published.
	require.Len(t, r.Calls(), 2)
	require.Empty(t, messages(t, bus, "kg.extracted.acme"))

	// The next document goes through: the stage is not stuck.
	publishDoc(t, bus, seedDoc(t, "acme", "INC-104", 1))
	got := waitExtracted(t, bus, "acme", 1)
	require.Equal(t, "INC-104", got[0].DocID)
}

func TestLLMSchemaInvalidOnceIsRetried(t *testing.T) {
	bus := startBus(t)
	r := replay(t)
	r.Fail(llmtest.MalformedJSON, 1)
	startWorker(t, bus, llmExtractor(t, r.URL(), nil), nil, nil)

	publishDoc(t, bus, seedDoc(t, "acme", "INC-107", 1))
	got := waitExtracted(t, bus, "acme", 1)
	require.Equal(t, recorded(t)["INC-107"], triples(got[0].Relationships))
	require.Len(t, r.Calls(), 3) // malformed, retry, gleaning
}

func TestInvalidEventIsDeadLettered(t *testing.T) {
	bus := startBus(t)
	x, err := extractor.NewOffline(extractor.OfflineConfig{})
	require.NoError(t, err)
	startWorker(t, bus, x, nil, nil)

	_, err = bus.JetStream().Publish(t.Context(), "kg.doc.changed.acme", []byte(`{"schema":1,"tenant":"acme","doc_id":"X","version":0,"text":"hi"}`))
	require.NoError(t, err)
	dls := waitDeadLetters(t, bus, "extractor", 1)
	require.Contains(t, dls[0].Error, events.ErrInvalidEvent.Error())
	require.Contains(t, dls[0].Error, "version 0")
}

func TestStructuredDocumentPassesThrough(t *testing.T) {
	bus := startBus(t)
	r := replay(t)
	startWorker(t, bus, llmExtractor(t, r.URL(), nil), nil, nil)

	yaml, err := os.ReadFile(filepath.Join(seed, "catalog-info.yaml"))
	require.NoError(t, err)
	st, skipped, err := catalog.Parse(yaml)
	require.NoError(t, err)
	require.Empty(t, skipped)
	doc := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "catalog-info.yaml", Version: 1,
		DocType: "catalog", Structured: st, ReceivedAt: time.Now().UTC()}
	publishDoc(t, bus, doc)

	got := waitExtracted(t, bus, "acme", 1)[0]
	require.Equal(t, "structured", got.Extractor)
	require.Empty(t, got.TextUnits)
	require.Equal(t, st.Entities, got.Entities)
	require.Equal(t, st.Relationships, got.Relationships)
	require.Len(t, got.Relationships, 6)
	require.Empty(t, r.Calls(), "no LLM call for a structured document")
}

func TestConfigValidate(t *testing.T) {
	bus := startBus(t)
	x, err := extractor.NewOffline(extractor.OfflineConfig{})
	require.NoError(t, err)
	for _, cfg := range []extractor.Config{
		{ChunkTokens: 100, ChunkOverlap: 100},
		{ChunkTokens: -1},
		{MaxDeliver: -1},
	} {
		cfg.Tokenizer = tok(t)
		_, err := extractor.New(cfg, bus, x, nil, nil)
		require.Error(t, err, "%+v", cfg)
	}
	w, err := extractor.New(extractor.Config{Tokenizer: tok(t), ChunkTokens: 60}, bus, x, nil, nil)
	require.NoError(t, err)
	cc := w.ConsumerConfig()
	require.Equal(t, "extractor", cc.Stage)
	require.Equal(t, []events.Kind{events.KindDocChanged}, cc.Kinds)
	_, err = extractor.New(extractor.Config{}, nil, x, nil, nil)
	require.Error(t, err)
}

// Handle can be driven directly, e.g. to check a redelivery publishes
// nothing new (JetStream drops the duplicate Nats-Msg-Id).
func TestHandleIsIdempotent(t *testing.T) {
	bus := startBus(t)
	x, err := extractor.NewOffline(extractor.OfflineConfig{})
	require.NoError(t, err)
	w, err := extractor.New(extractor.Config{Tokenizer: tok(t)}, bus, x, nil, nil)
	require.NoError(t, err)

	data, err := events.Encode(seedDoc(t, "acme", "INC-118", 3))
	require.NoError(t, err)
	m := &stream.Message{Subject: "kg.doc.changed.acme", Kind: events.KindDocChanged, Tenant: "acme", Data: data}
	require.NoError(t, w.Handle(t.Context(), m))
	require.NoError(t, w.Handle(t.Context(), m))
	got := waitExtracted(t, bus, "acme", 1)
	require.Len(t, messages(t, bus, "kg.extracted.acme"), 1)
	require.Equal(t, "offline", got[0].Extractor)
	unit := extractor.TextUnitID("INC-118", 3, 0)
	require.Equal(t, events.RawEntity{Name: "INC-118", Type: "incident", Description: "Postmortem INC-118",
		TextUnit: unit}, got[0].Entities[0])
	// Without a gazetteer: shape-found names and the failure mode.
	require.Contains(t, triples(got[0].Relationships), "incident:INC-118 -failure-> failure_mode:dns misconfiguration")
	require.Contains(t, triples(got[0].Relationships), "incident:INC-118 -affected-> service:ingest-worker")

	// A tenant that does not match its subject is invalid.
	m.Tenant = "other"
	require.ErrorIs(t, w.Handle(t.Context(), m), events.ErrInvalidEvent)
}

func TestLLMMergesGleaningAndDropsUnknownEndpoints(t *testing.T) {
	first := `{"entities":[
		{"name":"INC-9","type":"Incident","description":"an outage"},
		{"name":"checkout-api","type":"service","description":""}],
	 "relationships":[
		{"source":"INC-9","source_type":"incident","relation":"Affected","target":"checkout-api","target_type":"service","description":"503s","strength":9},
		{"source":"INC-9","source_type":"incident","relation":"involved","target":"orders-db","target_type":"datastore","description":"found by gleaning","strength":5},
		{"source":"INC-9","source_type":"incident","relation":"involved","target":"ghost","target_type":"component","description":"never declared","strength":5}]}`
	glean := `{"entities":[
		{"name":"orders-db","type":"datastore","description":"the orders database"},
		{"name":"Checkout API","type":"service","description":"the checkout service"}],
	 "relationships":[
		{"source":"INC-9","source_type":"incident","relation":"affected","target":"checkout-api","target_type":"service","description":"dup","strength":9},
		{"source":"orders-db","source_type":"","relation":"owned_by","target":"payments","target_type":"team","description":"no such team","strength":3}]}`
	srv := llmtest.New(func(req llmtest.Request) (string, bool) {
		if req.FollowUp() {
			return glean, true
		}
		return first, true
	})
	t.Cleanup(srv.Close)
	reg := prometheus.NewRegistry()
	x := llmExtractor(t, srv.URL(), reg)

	doc := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "INC-9", Version: 1, Title: "Checkout outage"}
	units := []events.TextUnit{{ID: "u1", Text: "first part"}, {ID: "u2", Text: "second part"}}
	ents, rels, err := x.Extract(t.Context(), doc, units)
	require.NoError(t, err)

	// Per unit: entities deduplicated by resolved id (the gleaned "Checkout
	// API" is checkout-api and fills its empty description), types
	// normalised, everything tagged with its unit.
	var u1 []events.RawEntity
	for _, e := range ents {
		if e.TextUnit == "u1" {
			u1 = append(u1, e)
		}
	}
	require.Equal(t, []events.RawEntity{
		{Name: "INC-9", Type: "incident", Description: "an outage", TextUnit: "u1"},
		{Name: "checkout-api", Type: "service", Description: "the checkout service", TextUnit: "u1"},
		{Name: "orders-db", Type: "datastore", Description: "the orders database", TextUnit: "u1"},
	}, u1)
	require.Len(t, ents, 6)
	require.Equal(t, []string{
		"incident:INC-9 -affected-> service:checkout-api",
		"incident:INC-9 -affected-> service:checkout-api",
		"incident:INC-9 -involved-> datastore:orders-db",
		"incident:INC-9 -involved-> datastore:orders-db",
	}, triples(rels))
	// ghost and payments were never declared: 2 drops per unit.
	require.Equal(t, 4.0, metricValue(t, reg, "kgstream_extract_dropped_relationships_total", map[string]string{"extractor": "llm"}))

	calls := srv.Calls()
	require.Len(t, calls, 4)
	require.Contains(t, calls[0].Prompt, "Document id: INC-9\nTitle: Checkout outage\nText unit 1 of 2:\nfirst part")
	require.Contains(t, calls[2].Prompt, "Text unit 2 of 2:\nsecond part")
	// The gleaning request carries the first exchange.
	require.Len(t, calls[1].Request.Messages, 4)
	require.Equal(t, first, calls[1].Request.Messages[2].Content)
}
