package query

import (
	"errors"
	"fmt"

	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/vector"
)

// HardMaxHops is the longest rels list a paths query may have, whatever the
// configuration says: each hop multiplies the frontier, so the bound keeps a
// single request from walking the whole graph.
const HardMaxHops = 6

// Config configures a Service. Zero fields take the defaults of
// DefaultConfig (see WithDefaults); Validate rejects what is out of range.
type Config struct {
	// Aliases, when set, resolves TYPE:NAME references through the same
	// reviewed alias table the resolver uses.
	Aliases *resolve.AliasWatcher
	// MaxHops is the longest rels list accepted by GET /v1/paths (1..HardMaxHops).
	MaxHops int
	// MaxPathRows caps the rows of a paths response; the response says
	// "truncated":true when more paths existed.
	MaxPathRows int
	// MaxFrontier caps the partial paths held at any hop of a traversal, so
	// a hub node cannot make one request unbounded. Exceeding it truncates.
	MaxFrontier int
	// ExcludedPathTypes are entity types never stepped onto by a traversal
	// (e.g. a "document" hub type that links everything). The start entity
	// is exempt.
	ExcludedPathTypes []string
	// ExcludedPathEntities are canonical entity ids never stepped onto by a
	// traversal. The start entity is exempt.
	ExcludedPathEntities []string

	// DefaultListLimit is the page size of GET /v1/entities without limit.
	DefaultListLimit int
	// MaxListLimit is the largest limit GET /v1/entities accepts.
	MaxListLimit int
	// MaxEntityEdges caps the edges per direction shown by GET
	// /v1/entities/{type}/{name} and gathered per entity by local search.
	MaxEntityEdges int

	// DefaultBudgetTokens is the context budget of POST /v1/query without
	// budget_tokens.
	DefaultBudgetTokens int
	// MaxBudgetTokens is the largest budget_tokens accepted.
	MaxBudgetTokens int
	// MaxQuestionBytes caps the question of POST /v1/query.
	MaxQuestionBytes int
	// MaxBodyBytes caps the request body of POST /v1/query.
	MaxBodyBytes int64
	// MaxSeedEntities caps the entities local search takes from a question.
	MaxSeedEntities int
	// MaxAnswerFacts caps the sentences of an extractive answer.
	MaxAnswerFacts int

	// Vectors and Embedder, set together, enable basic mode (vector search
	// over text units) and add the closest text units to local answers.
	// Both nil: basic mode answers 501. The index is only a pre-filter:
	// every hit is admitted again against the registry before use.
	Vectors  vector.Index
	Embedder embed.Embedder
	// BasicTopK is how many passages a basic answer shows at most.
	BasicTopK int
	// BasicCandidates is how many hits basic mode asks the index for before
	// re-admission, so hits the registry refuses (a revocation the index
	// has not seen yet) still leave BasicTopK passages when there are that
	// many. At least BasicTopK, at most vector.MaxK.
	BasicCandidates int
	// LocalVectorUnits is how many vector-search text units local search
	// adds to the graph's own when Vectors is set; negative disables it.
	LocalVectorUnits int

	// LocalShares are the shares of a local answer's token budget for each
	// section of its context (entities, relationships, text units, reports);
	// what a section does not use goes to text units first. Zero: defaults.
	LocalShares LocalShares
	// DriftFollowUps is how many follow-up questions a DRIFT answer asks.
	DriftFollowUps int

	// LLM, when set, drives the map and reduce steps of global answers; a
	// failed or malformed LLM answer falls back to the offline map/reduce,
	// counted and flagged in the response.
	LLM *llm.Client
	// Events, when set, is the bus whose kg.graph.changed,
	// kg.communities.changed and kg.reports.changed events Run follows to
	// keep per-tenant caches of whole-tenant reads (reports, communities,
	// relation edges, entity names). Without it every request reads the
	// stores.
	Events *stream.Bus
	// WarmOnStart, with Events, has Run read and index every tenant's
	// documents and entity names (and read its communities and reports)
	// as soon as the caches are live, so the first local question after a
	// start does not wait for that (see Service.Warmed). DefaultConfig
	// sets it; a Config written without it does not warm.
	WarmOnStart bool
	// GiveWay, when set with WarmOnStart, makes the background reads that
	// keep the caches warm while the tenant changes (keepWarm) wait,
	// within its bound, while the stages it names (the extractor and the
	// resolver) have a backlog: in one process sharing its cores,
	// documents become readable first (see stream.GiveWay).
	GiveWay *stream.GiveWay
}

// LocalShares divides a local context's token budget between its sections.
// The shares must each be 0..1 and sum to at most 1.
type LocalShares struct {
	Entities      float64
	Relationships float64
	TextUnits     float64
	Reports       float64
}

func (l LocalShares) sum() float64 { return l.Entities + l.Relationships + l.TextUnits + l.Reports }

// DefaultConfig returns the configuration used for zero fields.
func DefaultConfig() Config {
	return Config{
		MaxHops:             4,
		MaxPathRows:         500,
		MaxFrontier:         20000,
		DefaultListLimit:    50,
		MaxListLimit:        1000,
		MaxEntityEdges:      200,
		DefaultBudgetTokens: 4000,
		MaxBudgetTokens:     64000,
		MaxQuestionBytes:    4096,
		MaxBodyBytes:        64 << 10,
		MaxSeedEntities:     20,
		MaxAnswerFacts:      12,
		BasicTopK:           8,
		BasicCandidates:     40,
		LocalVectorUnits:    4,
		LocalShares:         LocalShares{Entities: 0.1, Relationships: 0.2, TextUnits: 0.55, Reports: 0.15},
		DriftFollowUps:      3,
		WarmOnStart:         true,
	}
}

// WithDefaults returns c with every zero field set from DefaultConfig.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setInt(&c.MaxHops, d.MaxHops)
	setInt(&c.MaxPathRows, d.MaxPathRows)
	setInt(&c.MaxFrontier, d.MaxFrontier)
	setInt(&c.DefaultListLimit, d.DefaultListLimit)
	setInt(&c.MaxListLimit, d.MaxListLimit)
	setInt(&c.MaxEntityEdges, d.MaxEntityEdges)
	setInt(&c.DefaultBudgetTokens, d.DefaultBudgetTokens)
	setInt(&c.MaxBudgetTokens, d.MaxBudgetTokens)
	setInt(&c.MaxQuestionBytes, d.MaxQuestionBytes)
	setInt(&c.MaxSeedEntities, d.MaxSeedEntities)
	setInt(&c.MaxAnswerFacts, d.MaxAnswerFacts)
	setInt(&c.BasicTopK, d.BasicTopK)
	setInt(&c.BasicCandidates, max(d.BasicCandidates, c.BasicTopK))
	setInt(&c.LocalVectorUnits, d.LocalVectorUnits)
	setInt(&c.DriftFollowUps, d.DriftFollowUps)
	if c.LocalShares == (LocalShares{}) {
		c.LocalShares = d.LocalShares
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = d.MaxBodyBytes
	}
	return c
}

// Validate reports every field that is out of range.
func (c Config) Validate() error {
	var errs []error
	positive := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", name, v))
		}
	}
	if c.MaxHops < 1 || c.MaxHops > HardMaxHops {
		errs = append(errs, fmt.Errorf("MaxHops must be 1..%d, got %d", HardMaxHops, c.MaxHops))
	}
	positive("MaxPathRows", c.MaxPathRows)
	positive("MaxFrontier", c.MaxFrontier)
	positive("DefaultListLimit", c.DefaultListLimit)
	positive("MaxListLimit", c.MaxListLimit)
	if c.DefaultListLimit > c.MaxListLimit {
		errs = append(errs, fmt.Errorf("DefaultListLimit %d exceeds MaxListLimit %d", c.DefaultListLimit, c.MaxListLimit))
	}
	positive("MaxEntityEdges", c.MaxEntityEdges)
	positive("DefaultBudgetTokens", c.DefaultBudgetTokens)
	positive("MaxBudgetTokens", c.MaxBudgetTokens)
	if c.DefaultBudgetTokens > c.MaxBudgetTokens {
		errs = append(errs, fmt.Errorf("DefaultBudgetTokens %d exceeds MaxBudgetTokens %d", c.DefaultBudgetTokens, c.MaxBudgetTokens))
	}
	positive("MaxQuestionBytes", c.MaxQuestionBytes)
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, fmt.Errorf("MaxBodyBytes must be positive, got %d", c.MaxBodyBytes))
	}
	positive("MaxSeedEntities", c.MaxSeedEntities)
	positive("MaxAnswerFacts", c.MaxAnswerFacts)
	positive("BasicTopK", c.BasicTopK)
	if c.BasicCandidates < c.BasicTopK || c.BasicCandidates > vector.MaxK {
		errs = append(errs, fmt.Errorf("BasicCandidates must be BasicTopK (%d) to %d, got %d", c.BasicTopK, vector.MaxK, c.BasicCandidates))
	}
	sh := c.LocalShares
	if min(sh.Entities, sh.Relationships, sh.TextUnits, sh.Reports) < 0 || sh.sum() > 1.0001 {
		errs = append(errs, fmt.Errorf("LocalShares must each be 0..1 and sum to at most 1, got %+v", sh))
	}
	if c.DriftFollowUps < 1 || c.DriftFollowUps > 8 {
		errs = append(errs, fmt.Errorf("DriftFollowUps must be 1..8, got %d", c.DriftFollowUps))
	}
	if c.GiveWay != nil {
		if err := c.GiveWay.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if (c.Vectors == nil) != (c.Embedder == nil) {
		errs = append(errs, errors.New("vector search needs both Vectors and Embedder, or neither"))
	}
	for _, t := range c.ExcludedPathTypes {
		if !nameRE.MatchString(t) {
			errs = append(errs, fmt.Errorf("ExcludedPathTypes: %q is not a lower-case snake_case type", t))
		}
	}
	for _, id := range c.ExcludedPathEntities {
		if typ, key, ok := cutID(id); !ok || !nameRE.MatchString(typ) || key == "" {
			errs = append(errs, fmt.Errorf("ExcludedPathEntities: %q is not a canonical TYPE:KEY id", id))
		}
	}
	return errors.Join(errs...)
}
