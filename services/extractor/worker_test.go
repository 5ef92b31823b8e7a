package extractor_test

import (
	"os"
	"path/filepath"
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
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/llmx"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// ownReplay replays own's recording.
func ownReplay(t *testing.T) *llmtest.Replay {
	t.Helper()
	r, err := llmtest.SeedReplay(filepath.Join(own, "recorded-llm-extraction.json"))
	require.NoError(t, err)
	t.Cleanup(r.Close)
	return r
}

func llmExtractor(t *testing.T, url string, reg prometheus.Registerer) *llmx.Extractor {
	t.Helper()
	c, err := llm.New(llm.Config{BaseURL: url, Model: "replay-model", Timeout: 2 * time.Second,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)
	x, err := llmx.New(llmx.Config{}, c, testLogger(t), reg)
	require.NoError(t, err)
	return x
}

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
	r := ownReplay(t)
	r.SetRetryAfter("0.05")
	r.Fail(llmtest.RateLimit, 1)
	r.Fail(llmtest.ServerError, 1)
	startWorker(t, bus, llmExtractor(t, r.URL(), nil), nil, nil)

	publishDoc(t, bus, ownDoc(t, "acme", "PM-1", 1))
	got := waitExtracted(t, bus, "acme", 1)
	require.Equal(t, ownRecorded(t)["PM-1"], triples(got[0].Relationships))

	var statuses []int
	for _, c := range r.Calls() {
		statuses = append(statuses, c.Status)
	}
	// 429 then 500 on the extraction call, retried by the client, then the
	// gleaning call.
	require.Equal(t, []int{429, 500, 200, 200}, statuses)
	require.Equal(t, llmtest.RateLimit, r.Calls()[0].Failure)
	require.Contains(t, r.Calls()[2].Prompt, "PM-1")
}

func TestLLMSchemaInvalidTwiceIsDeadLettered(t *testing.T) {
	bus := startBus(t)
	r := ownReplay(t)
	r.Fail(llmtest.InvalidSchema, 2)
	startWorker(t, bus, llmExtractor(t, r.URL(), nil), nil, nil)

	publishDoc(t, bus, ownDoc(t, "acme", "PM-2", 1))
	dls := waitDeadLetters(t, bus, "extractor", 1)
	require.Len(t, dls, 1)
	dl := dls[0]
	require.Equal(t, "extractor", dl.Stage)
	require.Equal(t, "kg.doc.changed.acme", dl.Subject)
	require.Equal(t, uint64(1), dl.Deliveries, "a permanent error is not redelivered")
	require.Equal(t, events.ChangedID("acme", "PM-2", 1), dl.MsgID)
	require.Contains(t, dl.Error, llmx.ErrSchema.Error())
	require.Contains(t, dl.Error, llmtest.InvalidSchemaContent, "the error shows the raw reply")
	var orig events.DocChanged
	require.NoError(t, events.Decode(dl.Data, &orig))
	require.Equal(t, "PM-2", orig.DocID)

	// Exactly the two extraction attempts; nothing was published.
	require.Len(t, r.Calls(), 2)
	require.Empty(t, messages(t, bus, "kg.extracted.acme"))

	// The next document goes through: the stage is not stuck.
	publishDoc(t, bus, ownDoc(t, "acme", "PM-3", 1))
	got := waitExtracted(t, bus, "acme", 1)
	require.Equal(t, "PM-3", got[0].DocID)
}

func TestLLMSchemaInvalidOnceIsRetried(t *testing.T) {
	bus := startBus(t)
	r := ownReplay(t)
	r.Fail(llmtest.MalformedJSON, 1)
	startWorker(t, bus, llmExtractor(t, r.URL(), nil), nil, nil)

	publishDoc(t, bus, ownDoc(t, "acme", "PM-4", 1))
	got := waitExtracted(t, bus, "acme", 1)
	require.Equal(t, ownRecorded(t)["PM-4"], triples(got[0].Relationships))
	require.Len(t, r.Calls(), 3) // malformed, retry, gleaning
}

func TestInvalidEventIsDeadLettered(t *testing.T) {
	bus := startBus(t)
	x, err := offline.New(offline.Config{})
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
	r := ownReplay(t)
	startWorker(t, bus, llmExtractor(t, r.URL(), nil), nil, nil)

	yaml, err := os.ReadFile(filepath.Join(own, "catalog-info.yaml"))
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
	require.Len(t, got.Relationships, 3)
	require.Empty(t, r.Calls(), "no LLM call for a structured document")
}

func TestConfigValidate(t *testing.T) {
	bus := startBus(t)
	x, err := offline.New(offline.Config{})
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
	x, err := offline.New(offline.Config{})
	require.NoError(t, err)
	w, err := extractor.New(extractor.Config{Tokenizer: tok(t)}, bus, x, nil, nil)
	require.NoError(t, err)

	data, err := events.Encode(ownDoc(t, "acme", "PM-1", 3))
	require.NoError(t, err)
	m := &stream.Message{Subject: "kg.doc.changed.acme", Kind: events.KindDocChanged, Tenant: "acme", Data: data}
	require.NoError(t, w.Handle(t.Context(), m))
	require.NoError(t, w.Handle(t.Context(), m))
	got := waitExtracted(t, bus, "acme", 1)
	require.Len(t, messages(t, bus, "kg.extracted.acme"), 1)
	require.Equal(t, "offline", got[0].Extractor)
	unit := chunk.TextUnitID("PM-1", 3, 0)
	require.Equal(t, events.RawEntity{Name: "PM-1", Type: "incident", Description: "Postmortem PM-1",
		TextUnit: unit}, got[0].Entities[0])
	// Without a gazetteer: shape-found names and the failure mode.
	require.Contains(t, triples(got[0].Relationships), "incident:PM-1 -failure-> failure_mode:disk full")
	require.Contains(t, triples(got[0].Relationships), "incident:PM-1 -affected-> service:ledger-api")

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
