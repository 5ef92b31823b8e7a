package llmx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/internal/metrics"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// DefaultEntityTypes returns the entity-type preset for incident
// postmortems and service documentation.
func DefaultEntityTypes() []string {
	return []string{"incident", "service", "component", "datastore", "region", "release",
		"config_policy", "test_gate", "team", "failure_mode"}
}

// DefaultRelations returns the relation names the prompt suggests; the
// model may use others (they are normalised to snake_case).
func DefaultRelations() []string {
	return []string{"affected", "involved", "failure", "depends_on", "owned_by", "deployed_in",
		"caused_by", "mitigated_by", "part_of", "released_in", "guarded_by"}
}

// ExtractionSchema returns the fixed structured-output schema of
// extraction replies (prompts may change, this shape may not).
func ExtractionSchema() json.RawMessage { return json.RawMessage(extractionSchema) }

const extractionSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["entities", "relationships"],
  "properties": {
    "entities": {"type": "array", "items": {
      "type": "object", "additionalProperties": false,
      "required": ["name", "type", "description"],
      "properties": {"name": {"type": "string"}, "type": {"type": "string"}, "description": {"type": "string"}}}},
    "relationships": {"type": "array", "items": {
      "type": "object", "additionalProperties": false,
      "required": ["source", "source_type", "relation", "target", "target_type", "description", "strength"],
      "properties": {"source": {"type": "string"}, "source_type": {"type": "string"},
        "relation": {"type": "string"}, "target": {"type": "string"}, "target_type": {"type": "string"},
        "description": {"type": "string"}, "strength": {"type": "number"}}}}
  }
}`

// GleaningPrompt is GraphRAG's continuation asking for what the first pass
// missed.
const GleaningPrompt = "MANY entities and relationships were missed in the last extraction. " +
	"Remember to ONLY emit entities that match any of the previously extracted types. " +
	"Add them below using the same JSON format; answer with empty lists if nothing was missed."

// ErrSchema marks a reply that does not follow ExtractionSchema.
var ErrSchema = errors.New("reply does not follow the extraction schema")

// Config configures the LLM extractor.
type Config struct {
	// EntityTypes are the types the prompt asks for (default DefaultEntityTypes()).
	EntityTypes []string
	// Relations are the relation names the prompt suggests (default DefaultRelations()).
	Relations []string
	// Gleanings is the number of "entities were missed" passes per text unit
	// (default 1, GraphRAG's; negative means none).
	Gleanings int
	// Cache, when set, stores each text unit's extraction under its
	// CacheKey, so re-extracting unchanged text costs no LLM call.
	Cache Cache
	// PromptVersion is part of the cache key (default DefaultPromptVersion).
	PromptVersion string
	// Prices estimate cost per model (the client's model name); a model
	// without a price costs 0.
	Prices PriceTable
}

// Price is the cost of a model's tokens, in currency units (say USD) per
// million tokens.
type Price struct {
	PromptPerMTok, CompletionPerMTok float64
}

// PriceTable maps model names to prices.
type PriceTable map[string]Price

// Cost is the estimated cost of usage with model.
func (t PriceTable) Cost(model string, prompt, completion int) float64 {
	p := t[model]
	return (float64(prompt)*p.PromptPerMTok + float64(completion)*p.CompletionPerMTok) / 1e6
}

func (c *Config) setDefaults() {
	if len(c.EntityTypes) == 0 {
		c.EntityTypes = DefaultEntityTypes()
	}
	if len(c.Relations) == 0 {
		c.Relations = DefaultRelations()
	}
	if c.Gleanings == 0 {
		c.Gleanings = 1
	}
	if c.Gleanings < 0 {
		c.Gleanings = 0
	}
	if c.PromptVersion == "" {
		c.PromptVersion = DefaultPromptVersion
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	for _, t := range c.EntityTypes {
		if resolve.Type(t) == "" {
			return fmt.Errorf("extractor: entity type %q normalises to nothing", t)
		}
	}
	for m, p := range c.Prices {
		if p.PromptPerMTok < 0 || p.CompletionPerMTok < 0 {
			return fmt.Errorf("extractor: price of model %q must not be negative", m)
		}
	}
	return nil
}

// Extractor extracts with an OpenAI-compatible model, one request per text unit
// plus its gleaning passes. Each relationship's supporting sentence is
// found in its unit after extraction (offline.CiteUnit).
type Extractor struct {
	cfg      Config
	client   *llm.Client
	log      *slog.Logger
	schema   *llm.Schema
	tokens   *prometheus.CounterVec
	dropped  *prometheus.CounterVec
	calls    *prometheus.CounterVec
	cost     *prometheus.CounterVec
	cacheRes *prometheus.CounterVec
	perDoc   *prometheus.HistogramVec
	docCost  *prometheus.HistogramVec

	mu    sync.Mutex
	usage Usage
}

// New returns an LLM extractor using client.
func New(cfg Config, client *llm.Client, log *slog.Logger, reg prometheus.Registerer) (*Extractor, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, errors.New("extractor: LLM extractor needs a client")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	types := make([]string, len(cfg.EntityTypes))
	for i, t := range cfg.EntityTypes {
		types[i] = resolve.Type(t)
	}
	cfg.EntityTypes = types
	return &Extractor{
		cfg: cfg, client: client, log: log,
		schema: &llm.Schema{Name: "graph_extraction", Schema: ExtractionSchema()},
		tokens: metrics.Counter(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_llm_tokens_total",
			Help: "LLM tokens used, by model and direction (prompt, completion).",
		}, []string{"model", "direction"})),
		dropped: metrics.Dropped(reg),
		calls: metrics.Counter(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_llm_calls_total",
			Help: "LLM completion requests that returned a reply (retries of one request count once), by model.",
		}, []string{"model"})),
		cost: metrics.Counter(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_llm_cost_total",
			Help: "Estimated LLM cost from the configured price table, by model.",
		}, []string{"model"})),
		cacheRes: metrics.Counter(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_extract_cache_total",
			Help: "Extraction cache lookups of text units, by result (hit, miss, error).",
		}, []string{"result"})),
		perDoc: metrics.Histogram(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kgstream_llm_calls_per_document",
			Help:    "LLM calls made to extract one document version, by model.",
			Buckets: []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256},
		}, []string{"model"})),
		docCost: metrics.Histogram(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kgstream_llm_cost_per_document",
			Help:    "Estimated LLM cost of extracting one document version, by model.",
			Buckets: []float64{0, 0.0001, 0.001, 0.01, 0.1, 1, 10},
		}, []string{"model"})),
	}, nil
}

// Name implements extractor.Extractor.
func (x *Extractor) Name() string { return "llm" }

// DocUsage is what extracting one document cost.
type DocUsage struct {
	Calls, PromptTokens, CompletionTokens int
	CacheHits, CacheMisses                int
	Cost                                  float64
}

// Usage is what an LLM extractor has spent since it started, the figures
// `kgstream status` shows: documents extracted, their calls, tokens and
// estimated cost.
type Usage struct {
	Model     string
	Documents int
	DocUsage
}

// CostPerDocument is the mean estimated cost of one document version.
func (u Usage) CostPerDocument() float64 {
	if u.Documents == 0 {
		return 0
	}
	return u.Cost / float64(u.Documents)
}

// CallsPerDocument is the mean number of LLM calls per document version.
func (u Usage) CallsPerDocument() float64 {
	if u.Documents == 0 {
		return 0
	}
	return float64(u.Calls) / float64(u.Documents)
}

// Usage returns the extractor's usage so far.
func (x *Extractor) Usage() Usage {
	x.mu.Lock()
	defer x.mu.Unlock()
	u := x.usage
	u.Model = x.client.Model()
	return u
}

func (x *Extractor) addUsage(d *DocUsage) {
	x.mu.Lock()
	defer x.mu.Unlock()
	u := &x.usage
	u.Documents++
	u.Calls += d.Calls
	u.PromptTokens += d.PromptTokens
	u.CompletionTokens += d.CompletionTokens
	u.CacheHits += d.CacheHits
	u.CacheMisses += d.CacheMisses
	u.Cost += d.Cost
}

type usageKey struct{}

// usageOf returns the accumulator Extract put in ctx, or a throwaway.
func usageOf(ctx context.Context) *DocUsage {
	if u, ok := ctx.Value(usageKey{}).(*DocUsage); ok {
		return u
	}
	return &DocUsage{}
}

// cacheKey is the cache key of unit u of doc.
func (x *Extractor) cacheKey(doc *events.DocChanged, u events.TextUnit) string {
	return CacheKey{ContentHash: chunk.ContentHash(u.Text), Subject: doc.DocID + "\x00" + doc.DocType + "\x00" + doc.Title,
		PromptVersion: x.cfg.PromptVersion, EntityTypes: x.cfg.EntityTypes, Relations: x.cfg.Relations,
		Model: x.client.Model(), Gleanings: x.cfg.Gleanings}.String()
}

const systemPrompt = "You are an information extraction system that builds a knowledge graph from " +
	"engineering documents (incident postmortems, runbooks, design notes). You answer only with JSON " +
	"that follows the given schema."

func (x *Extractor) prompt(doc *events.DocChanged, u events.TextUnit, i, n int) string {
	docType := doc.DocType
	if docType == "" {
		docType = "the type that fits it best (incident for a postmortem)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `-Goal-
Given a text unit of a document and a list of entity types, identify all entities of those types in the text and all relationships among the identified entities.

-Steps-
1. Identify all entities. For each give:
- name: the entity's name, spelled exactly as in the text
- type: one of [%s]
- description: a comprehensive description of the entity's attributes and activities, from the text only
The document itself is an entity: name it by its document id %q, with type %s.
2. Among the entities of step 1, identify every pair (source, target) that is clearly related. For each give:
- source and source_type: the source entity's name and type, as in step 1
- relation: a lower-case snake_case relation name, preferably one of [%s]
- target and target_type: the target entity's name and type, as in step 1
- description: why source and target are related
- strength: a number from 1 to 10 for how strong the relationship is
Relate the document entity to what it is about (for an incident: the services it affected, the components involved, its failure mode).
3. Answer with one JSON object {"entities": [...], "relationships": [...]} following the schema.

-Document-
Document id: %s
Title: %s
Text unit %d of %d:
%s
`, strings.Join(x.cfg.EntityTypes, ", "), doc.DocID, docType, strings.Join(x.cfg.Relations, ", "),
		doc.DocID, doc.Title, i+1, n, u.Text)
	return b.String()
}

// Extract implements extractor.Extractor.
func (x *Extractor) Extract(ctx context.Context, doc *events.DocChanged, units []events.TextUnit) ([]events.RawEntity, []events.RawRelationship, error) {
	usage := &DocUsage{}
	ctx = context.WithValue(ctx, usageKey{}, usage)
	var ents []events.RawEntity
	var rels []events.RawRelationship
	for i, u := range units {
		e, r, err := x.cachedUnit(ctx, doc, u, i, len(units))
		if err != nil {
			return nil, nil, fmt.Errorf("extracting text unit %d (%s): %w", i, u.ID, err)
		}
		// After the cache: spans are document offsets, and the same text
		// may sit elsewhere in another version.
		offline.CiteUnit(u, e, r)
		ents = append(ents, e...)
		rels = append(rels, r...)
	}
	model := x.client.Model()
	x.addUsage(usage)
	x.perDoc.WithLabelValues(model).Observe(float64(usage.Calls))
	x.docCost.WithLabelValues(model).Observe(usage.Cost)
	x.log.Info("LLM extraction cost", "tenant", doc.Tenant, "doc", doc.DocID, "version", doc.Version,
		"model", model, "calls", usage.Calls, "prompt_tokens", usage.PromptTokens,
		"completion_tokens", usage.CompletionTokens, "cache_hits", usage.CacheHits,
		"cache_misses", usage.CacheMisses, "estimated_cost", usage.Cost)
	return ents, rels, nil
}

// cachedUnit extracts one unit through the cache, when there is one.
func (x *Extractor) cachedUnit(ctx context.Context, doc *events.DocChanged, u events.TextUnit, i, n int) ([]events.RawEntity, []events.RawRelationship, error) {
	if x.cfg.Cache == nil {
		return x.unit(ctx, doc, u, i, n)
	}
	usage := usageOf(ctx)
	key := x.cacheKey(doc, u)
	data, ok, err := x.cfg.Cache.Get(ctx, key)
	if err != nil {
		x.cacheRes.WithLabelValues("error").Inc()
		x.log.Warn("extraction cache read failed; extracting", "doc", doc.DocID, "text_unit", u.ID, "error", err)
	}
	if ok {
		ents, rels, err := decodeUnit(data, u.ID)
		if err == nil {
			x.cacheRes.WithLabelValues("hit").Inc()
			usage.CacheHits++
			return ents, rels, nil
		}
		x.cacheRes.WithLabelValues("error").Inc()
		x.log.Warn("extraction cache entry unreadable; extracting", "doc", doc.DocID, "text_unit", u.ID, "error", err)
	} else if err == nil {
		x.cacheRes.WithLabelValues("miss").Inc()
	}
	usage.CacheMisses++
	ents, rels, err := x.unit(ctx, doc, u, i, n)
	if err != nil {
		return nil, nil, err
	}
	if data, err := encodeUnit(ents, rels); err == nil {
		if err := x.cfg.Cache.Set(ctx, key, data); err != nil {
			x.log.Warn("extraction cache write failed", "doc", doc.DocID, "text_unit", u.ID, "error", err)
		}
	}
	return ents, rels, nil
}

func (x *Extractor) unit(ctx context.Context, doc *events.DocChanged, u events.TextUnit, i, n int) ([]events.RawEntity, []events.RawRelationship, error) {
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: systemPrompt},
		{Role: llm.RoleUser, Content: x.prompt(doc, u, i, n)},
	}
	m := newMerge(u.ID)
	for pass := 0; pass <= x.cfg.Gleanings; pass++ {
		if pass > 0 {
			msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: GleaningPrompt})
		}
		content, ex, err := x.complete(ctx, msgs)
		if err != nil {
			if pass > 0 {
				return nil, nil, fmt.Errorf("gleaning pass %d: %w", pass, err)
			}
			return nil, nil, err
		}
		m.add(ex)
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: content})
	}
	ents, rels, dropped := m.result()
	if dropped > 0 {
		x.dropped.WithLabelValues(x.Name()).Add(float64(dropped))
		x.log.Info("dropped relationships with unknown endpoints", "doc", doc.DocID, "version", doc.Version,
			"text_unit", u.ID, "dropped", dropped)
	}
	return ents, rels, nil
}

// complete asks once, and once more if the reply breaks the schema: a
// sampling slip is worth one retry, a model that cannot follow the schema
// is not worth MaxDeliver of them, so the second failure is permanent.
func (x *Extractor) complete(ctx context.Context, msgs []llm.Message) (string, *extraction, error) {
	var lastErr error
	var lastContent string
	for attempt := 0; attempt < 2; attempt++ {
		out, err := x.client.Complete(ctx, msgs, x.schema)
		if err != nil {
			return "", nil, err // transport failures: the runner retries the event
		}
		model := x.client.Model()
		x.tokens.WithLabelValues(model, "prompt").Add(float64(out.Usage.PromptTokens))
		x.tokens.WithLabelValues(model, "completion").Add(float64(out.Usage.CompletionTokens))
		x.calls.WithLabelValues(model).Inc()
		cost := x.cfg.Prices.Cost(model, out.Usage.PromptTokens, out.Usage.CompletionTokens)
		x.cost.WithLabelValues(model).Add(cost)
		u := usageOf(ctx)
		u.Calls++
		u.PromptTokens += out.Usage.PromptTokens
		u.CompletionTokens += out.Usage.CompletionTokens
		u.Cost += cost
		ex, err := parseExtraction(out.Content)
		if err == nil {
			return out.Content, ex, nil
		}
		lastErr, lastContent = err, out.Content
		x.log.Warn("LLM reply does not follow the extraction schema", "attempt", attempt+1, "error", err,
			"finish_reason", out.FinishReason)
	}
	return "", nil, stream.Permanent(fmt.Errorf("%w after 2 attempts: %w; last reply: %s",
		ErrSchema, lastErr, llm.Excerpt(lastContent, 512)))
}

type extraction struct {
	Entities      []extractedEntity `json:"entities"`
	Relationships []extractedRel    `json:"relationships"`
}

type extractedEntity struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description"`
}

type extractedRel struct {
	Source      string   `json:"source"`
	SourceType  string   `json:"source_type"`
	Relation    string   `json:"relation"`
	Target      string   `json:"target"`
	TargetType  string   `json:"target_type"`
	Description string   `json:"description"`
	Strength    *float64 `json:"strength"`
}

// parseExtraction checks a reply against ExtractionSchema. It is strict
// about shape (one object, both lists present, no unknown fields, right
// JSON types, non-empty names) and lenient where a local model's omission
// is harmless: an empty description or a missing strength. An empty
// endpoint type is inferred later from the entities.
func parseExtraction(content string) (*extraction, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(strings.TrimSpace(content))))
	dec.DisallowUnknownFields()
	var raw struct {
		Entities      *[]extractedEntity `json:"entities"`
		Relationships *[]extractedRel    `json:"relationships"`
	}
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON object")
	}
	if raw.Entities == nil || raw.Relationships == nil {
		return nil, errors.New(`"entities" and "relationships" are both required`)
	}
	ex := &extraction{Entities: *raw.Entities, Relationships: *raw.Relationships}
	for i, e := range ex.Entities {
		if strings.TrimSpace(e.Name) == "" || resolve.Type(e.Type) == "" {
			return nil, fmt.Errorf("entities[%d]: name and type are required", i)
		}
	}
	for i, r := range ex.Relationships {
		if strings.TrimSpace(r.Source) == "" || strings.TrimSpace(r.Target) == "" || resolve.Type(r.Relation) == "" {
			return nil, fmt.Errorf("relationships[%d]: source, relation and target are required", i)
		}
	}
	return ex, nil
}

// merge accumulates the passes over one text unit without duplicates.
type merge struct {
	unit    string
	ents    []events.RawEntity
	entIdx  map[string]int      // entity id -> index in ents
	byKey   map[string][]string // name key -> entity ids, to infer missing types
	rels    []events.RawRelationship
	relSeen map[string]bool
	pending []extractedRel
}

func newMerge(unit string) *merge {
	return &merge{unit: unit, entIdx: map[string]int{}, byKey: map[string][]string{}, relSeen: map[string]bool{}}
}

func (m *merge) add(ex *extraction) {
	for _, e := range ex.Entities {
		typ := resolve.Type(e.Type)
		name := strings.TrimSpace(e.Name)
		id := resolve.ID(typ, name)
		if i, ok := m.entIdx[id]; ok {
			if m.ents[i].Description == "" {
				m.ents[i].Description = strings.TrimSpace(e.Description)
			}
			continue
		}
		m.entIdx[id] = len(m.ents)
		m.byKey[resolve.Key(name)] = append(m.byKey[resolve.Key(name)], id)
		m.ents = append(m.ents, events.RawEntity{Name: name, Type: typ,
			Description: strings.TrimSpace(e.Description), TextUnit: m.unit})
	}
	// Relationships are resolved at the end: a gleaning pass may add the
	// entity an earlier relationship points to.
	m.pending = append(m.pending, ex.Relationships...)
}

// endpoint returns the type of an endpoint, inferring an empty one from
// the only entity of that name; ok is false when it names no entity.
func (m *merge) endpoint(name, typ string) (string, bool) {
	typ = resolve.Type(typ)
	if typ == "" {
		if ids := m.byKey[resolve.Key(name)]; len(ids) == 1 {
			t, _ := resolve.SplitID(ids[0])
			return t, true
		}
		return "", false
	}
	_, ok := m.entIdx[resolve.ID(typ, name)]
	return typ, ok
}

func (m *merge) result() ([]events.RawEntity, []events.RawRelationship, int) {
	dropped := 0
	for _, r := range m.pending {
		st, ok1 := m.endpoint(r.Source, r.SourceType)
		tt, ok2 := m.endpoint(r.Target, r.TargetType)
		if !ok1 || !ok2 {
			dropped++
			continue
		}
		rel := resolve.Type(r.Relation)
		src, tgt := strings.TrimSpace(r.Source), strings.TrimSpace(r.Target)
		k := resolve.ID(st, src) + "|" + rel + "|" + resolve.ID(tt, tgt)
		if m.relSeen[k] {
			continue
		}
		m.relSeen[k] = true
		strength := 1.0
		if r.Strength != nil {
			strength = *r.Strength
		}
		m.rels = append(m.rels, events.RawRelationship{Source: src, SourceType: st, Relation: rel,
			Target: tgt, TargetType: tt, Description: strings.TrimSpace(r.Description), Strength: strength,
			TextUnit: m.unit})
	}
	return m.ents, m.rels, dropped
}
