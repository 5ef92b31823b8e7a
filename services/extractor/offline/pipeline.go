package offline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/kgstream/kgstream/pkg/doctype"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/taxonomy"
	"github.com/kgstream/kgstream/services/extractor/chunk"
)

// EntityID is the canonical id an entity resolves to: its type and key,
// or its name when it has no key.
func EntityID(e events.RawEntity) string {
	if e.Key != "" {
		return resolve.ID(e.Type, e.Key)
	}
	return resolve.ID(e.Type, e.Name)
}

// RelMentions is the relation from a document to an entity it names.
const RelMentions = "mentions"

// Config configures the offline extractor: a pipeline of stages
// over one analysis of the document (its sentences and the entities it
// mentions), whose outputs merge.
type Config struct {
	// Gazetteer lists the tenant's catalog entities to look for (nil:
	// none). It must not depend on other documents: see CatalogGazetteer.
	Gazetteer Gazetteer
	// Bundled are the technology and cloud-service names looked for in
	// every document (nil: DefaultGazetteer, plus Extra); a catalog entity
	// of the same name wins. DisableBundled looks for catalog names only.
	Bundled        StaticGazetteer
	Extra          StaticGazetteer
	DisableBundled bool
	// MinKeyLen skips entries whose key is shorter (default 3): a
	// two-letter name matches too much prose.
	MinKeyLen int
	// MaxWords bounds a mention's length in words (default 8).
	MaxWords int

	// Patterns are the relation patterns (nil: DefaultPatterns).
	Patterns *Patterns
	// Taxonomy is the failure-mode taxonomy (nil: taxonomy.Default).
	Taxonomy *taxonomy.Taxonomy
	// FailureDocTypes are the document types the taxonomy stage classifies
	// (default incident and postmortem).
	FailureDocTypes []string
	// DisablePatterns, DisableTaxonomy, DisableComponents and
	// DisableCoOccurrence switch those parts off; DisableMentions drops the document -mentions-> entity
	// edges (the entities stay, for the other stages).
	DisablePatterns, DisableTaxonomy, DisableComponents, DisableMentions bool
	DisableCoOccurrence                                                  bool
	// ComponentHeads are the head nouns that make an unknown identifier
	// ("rate-limiter", "orders-db", "DNS resolver") a component (default
	// DefaultComponentHeads); ServiceHeads make a hyphenated identifier
	// ("checkout-api", "ingest-worker") a service (default
	// DefaultServiceHeads). A gazetteer entity always wins.
	ComponentHeads, ServiceHeads []string
	// NounPhrases adds noun-phrase co-occurrence (off unless Enabled).
	NounPhrases NounPhraseConfig
	// Stages are appended to the built-in ones.
	Stages []Stage
}

func (c *Config) setDefaults() {
	if c.MinKeyLen == 0 {
		c.MinKeyLen = 3
	}
	if c.MaxWords == 0 {
		c.MaxWords = 8
	}
	if len(c.FailureDocTypes) == 0 {
		c.FailureDocTypes = []string{"incident", "postmortem"}
	}
	if len(c.ComponentHeads) == 0 {
		c.ComponentHeads = DefaultComponentHeads()
	}
	if len(c.ServiceHeads) == 0 {
		c.ServiceHeads = DefaultServiceHeads()
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.MinKeyLen < 1 || c.MaxWords < 1 {
		return errors.New("extractor: MinKeyLen and MaxWords must be >= 1")
	}
	return c.NounPhrases.Validate()
}

// Extractor extracts without a model: the document as an entity typed by its
// source, the known entities it mentions (and component-shaped names it
// uses), relations from sentence patterns, its failure mode from the
// taxonomy and, optionally, noun-phrase co-occurrence.
type Extractor struct {
	cfg     Config
	bundled []Entry
	// bundledMatcher finds the bundled entries, built once.
	bundledMatcher *matcher
	taxonomy       *taxonomy.Taxonomy
	stages         []Stage
	components     *componentFinder

	// catalogs keeps, per tenant, the matcher of the catalog entries the
	// gazetteer gave last (see matcherFor).
	mu       sync.Mutex
	catalogs map[string]*catalogMatcher

	// scratch holds *unitScratch: the working storage of a unit's
	// analysis, kept from one document to the next.
	scratch sync.Pool
}

// catalogMatcher is a matcher of a tenant's catalog entries (with the
// bundled ones as its fallback) built for no document in particular.
type catalogMatcher struct {
	entries []Entry // what it was built from, told apart by identity
	m       *matcher
	ids     map[string]bool // the entries' ids
}

// matcherFor returns the matcher of a document whose own entity is
// exclude, over the catalog entries the gazetteer gave (catalog) and the
// bundled ones. The gazetteer gives the same slice while its cache holds
// (CatalogGazetteer, StaticGazetteer), so the matcher of those entries is
// built once and kept per tenant until the gazetteer gives another: a
// tenant with thousands of catalog entities does not pay for their
// matcher on every document. A document whose own entity is a catalog
// entity gets a matcher built without it, as before.
func (x *Extractor) matcherFor(tenant string, catalog []Entry, exclude string) *matcher {
	x.mu.Lock()
	c := x.catalogs[tenant]
	x.mu.Unlock()
	if c == nil || !sameEntries(c.entries, catalog) {
		c = &catalogMatcher{entries: catalog, ids: make(map[string]bool, len(catalog)),
			m: withFallback(catalog, x.bundledMatcher, "", x.cfg.MinKeyLen, x.cfg.MaxWords)}
		for _, e := range catalog {
			c.ids[e.ID] = true
		}
		x.mu.Lock()
		if x.catalogs == nil {
			x.catalogs = map[string]*catalogMatcher{}
		}
		x.catalogs[tenant] = c
		x.mu.Unlock()
	}
	if c.ids[exclude] {
		return withFallback(catalog, x.bundledMatcher, exclude, x.cfg.MinKeyLen, x.cfg.MaxWords)
	}
	m := *c.m // its maps and trie are only read
	m.exclude = exclude
	return &m
}

// sameEntries reports whether a and b are the same slice (not merely
// equal ones).
func sameEntries(a, b []Entry) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// New returns an offline extractor.
func New(cfg Config) (*Extractor, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	x := &Extractor{cfg: cfg}
	if !cfg.DisableBundled {
		b := cfg.Bundled
		if b == nil {
			var err error
			if b, err = DefaultGazetteer(); err != nil {
				return nil, err
			}
		}
		x.bundled = append(append([]Entry(nil), b...), cfg.Extra...)
		x.bundledMatcher = newMatcher(x.bundled, "", cfg.MinKeyLen, cfg.MaxWords)
	}
	if !cfg.DisableComponents {
		x.components = newComponentFinder(cfg.ComponentHeads, cfg.ServiceHeads)
	}
	if !cfg.DisableMentions {
		x.stages = append(x.stages, MentionStage{})
	}
	if !cfg.DisablePatterns {
		p := cfg.Patterns
		if p == nil {
			var err error
			if p, err = DefaultPatterns(); err != nil {
				return nil, err
			}
		}
		x.stages = append(x.stages, p)
	}
	if !cfg.DisableCoOccurrence {
		x.stages = append(x.stages, CoOccurrenceStage{})
	}
	if !cfg.DisableTaxonomy {
		t := cfg.Taxonomy
		if t == nil {
			var err error
			if t, err = taxonomy.Default(); err != nil {
				return nil, err
			}
		}
		x.taxonomy = t
		x.stages = append(x.stages, &FailureStage{Taxonomy: t, DocTypes: cfg.FailureDocTypes})
	}
	if cfg.NounPhrases.Enabled {
		np, err := NewNounPhraseStage(cfg.NounPhrases)
		if err != nil {
			return nil, err
		}
		x.stages = append(x.stages, np)
	}
	x.stages = append(x.stages, cfg.Stages...)
	return x, nil
}

// Name implements extractor.Extractor.
func (x *Extractor) Name() string { return "offline" }

// InvalidateCatalog makes the next extraction of tenant's documents read
// the catalog afresh (when the gazetteer caches it: CatalogGazetteer).
func (x *Extractor) InvalidateCatalog(tenant string) {
	if g, ok := x.cfg.Gazetteer.(interface{ Invalidate(string) }); ok {
		g.Invalidate(tenant)
	}
}

// Stages lists the pipeline's stage names in order.
func (x *Extractor) Stages() []string {
	out := make([]string, len(x.stages))
	for i, s := range x.stages {
		out[i] = s.Name()
	}
	return out
}

// DocEntity is the entity standing for a document: named by its id, typed
// by its doc type (checked against doctype.Default: a synonym gives its
// type; a missing or unknown one is inferred from the text, so a free-form
// value never makes a new entity type), described by its title.
func DocEntity(doc *events.DocChanged) events.RawEntity {
	d, err := doctype.Default().Resolve(doc.DocType, doc.Title, doc.Text)
	if err != nil {
		d.Type = doctype.Infer(doc.Title, doc.Text)
	}
	return events.RawEntity{Name: doc.DocID, Type: d.Type, Description: doc.Title}
}

// Extract implements extractor.Extractor.
func (x *Extractor) Extract(ctx context.Context, doc *events.DocChanged, units []events.TextUnit) ([]events.RawEntity, []events.RawRelationship, error) {
	if len(units) == 0 {
		return nil, nil, nil
	}
	a, err := x.Analyse(ctx, doc, units)
	if err != nil {
		return nil, nil, err
	}
	out := NewOutput()
	de := a.DocEntity
	de.TextUnit = units[0].ID
	out.Entity(de)
	for _, s := range x.stages {
		if err := s.Extract(ctx, a, out); err != nil {
			return nil, nil, fmt.Errorf("running offline stage %s: %w", s.Name(), err)
		}
	}
	ents, rels := out.Result()
	a.cite(rels)
	return ents, rels, nil
}

// cite completes the provenance of relationships a stage did not cite
// (Unit.Cite): a custom stage may only name the text unit, and then the
// whole unit is the supporting span. Every relationship leaves Extract
// with its unit's hash and a span.
func (a *Analysis) cite(rels []events.RawRelationship) {
	for i, r := range rels {
		if r.UnitHash != "" {
			continue
		}
		for _, u := range a.Units {
			if u.ID == r.TextUnit {
				if r.SentenceStart == 0 && r.SentenceEnd == 0 {
					rels[i] = u.Cite(r, taxonomy.Span{Start: 0, End: len(u.Text)})
				} else {
					rels[i].UnitHash = u.Hash
				}
				break
			}
		}
	}
}

// Analysis is one document version as the offline stages see it.
type Analysis struct {
	Doc *events.DocChanged
	// DocEntity is the document's entity (without a text unit).
	DocEntity events.RawEntity
	Units     []Unit
}

// DocType is the document entity's type.
func (a *Analysis) DocType() string { return a.DocEntity.Type }

// Unit is a text unit with its sentences and mentions. Its Hash is set
// (computed from Text when the caller's unit had none).
type Unit struct {
	events.TextUnit
	// Sentences are byte spans of Text.
	Sentences []taxonomy.Span
	// Mentions are the entities the unit names, in text order.
	Mentions []Mention
}

// Sentence returns the span of sentence i of the unit, or the whole unit
// when i is not a sentence index (a mention outside every sentence).
func (u Unit) Sentence(i int) taxonomy.Span {
	if i >= 0 && i < len(u.Sentences) {
		return u.Sentences[i]
	}
	return taxonomy.Span{Start: 0, End: len(u.Text)}
}

// Cite returns r supported by span s of u (byte offsets into u.Text): r
// names the unit, carries the span in document offsets and the unit's
// content hash. Stages cite every relationship they emit.
func (u Unit) Cite(r events.RawRelationship, s taxonomy.Span) events.RawRelationship {
	r.TextUnit = u.ID
	r.SentenceStart, r.SentenceEnd = u.Start+s.Start, u.Start+s.End
	r.UnitHash = u.Hash
	return r
}

// unitHash is u's content hash: TextUnit.Hash, computed when the unit
// came without one.
func unitHash(u events.TextUnit) string {
	if u.Hash != "" {
		return u.Hash
	}
	return chunk.ContentHash(u.Text)
}

// Mention is an entity named in a text unit.
type Mention struct {
	// Start and End are byte offsets into the unit's Text.
	Start, End int
	// Text is the spelling used.
	Text string
	// Type and Key identify the entity (Key is its normalisation key).
	Type, Key string
	// Known is set for a gazetteer entity, unset for a name the extractor
	// inferred (a component-shaped identifier).
	Known bool
	// Display and Category are set for an entry of the bundled gazetteer.
	Display, Category string
	// Sentence indexes the unit's Sentences.
	Sentence int
}

// ID is the mention's canonical entity id.
func (m Mention) ID() string { return m.Type + ":" + m.Key }

// Ref is the name relationships use for the mention: the gazetteer key of
// a known entity (its id, whatever spelling matched), else the text.
func (m Mention) Ref() string {
	if m.Known {
		return m.Key
	}
	return m.Text
}

// Entity is the mention as a raw entity of unit.
func (m Mention) Entity(unit string) events.RawEntity {
	e := events.RawEntity{Name: m.Text, Type: m.Type, TextUnit: unit}
	if m.Known {
		e.Key = m.Key
	}
	if m.Display != "" {
		// A bundled entry is named by its display name whatever alias
		// matched ("k8s" names Kubernetes).
		e.Name = m.Display
		e.Description = m.Display + " (" + m.Category + ")"
	}
	return e
}

// Analyse splits units into sentences and finds their mentions.
func (x *Extractor) Analyse(ctx context.Context, doc *events.DocChanged, units []events.TextUnit) (*Analysis, error) {
	de := DocEntity(doc)
	a := &Analysis{Doc: doc, DocEntity: de}
	var catalog []Entry
	if x.cfg.Gazetteer != nil {
		var err error
		if catalog, err = x.cfg.Gazetteer.Entries(ctx, doc.Tenant); err != nil {
			return nil, fmt.Errorf("reading the gazetteer: %w", err)
		}
	}
	var m *matcher
	if len(catalog) > 0 || x.bundledMatcher != nil {
		m = x.matcherFor(doc.Tenant, catalog, EntityID(de))
	}
	sc, _ := x.scratch.Get().(*unitScratch)
	if sc == nil {
		sc = &unitScratch{}
	}
	defer x.scratch.Put(sc)
	for _, u := range units {
		au := Unit{TextUnit: u, Sentences: chunk.Sentences(u.Text)}
		au.Hash = unitHash(u)
		var known []hit
		if m != nil {
			known = m.findWith(&sc.match, u.Text)
		}
		for _, h := range known {
			for _, e := range h.entries {
				au.Mentions = append(au.Mentions, Mention{Start: h.start, End: h.end, Text: h.text, Type: e.Type,
					Key: e.Key, Known: true, Display: e.Display, Category: e.Category})
			}
		}
		if x.components != nil {
			for _, c := range x.components.find(u.Text, &sc.runs) {
				if overlaps(known, c.start, c.end) || resolve.Key(c.text) == resolve.Key(doc.DocID) {
					continue
				}
				au.Mentions = append(au.Mentions, Mention{Start: c.start, End: c.end, Text: c.text,
					Type: c.typ, Key: resolve.Key(c.text)})
			}
		}
		sortMentions(au.Mentions)
		for i := range au.Mentions {
			au.Mentions[i].Sentence = sentenceOf(au.Sentences, au.Mentions[i].Start)
		}
		a.Units = append(a.Units, au)
	}
	return a, nil
}

func overlaps(hits []hit, start, end int) bool {
	for _, h := range hits {
		if h.start < end && start < h.end {
			return true
		}
	}
	return false
}

func sortMentions(ms []Mention) {
	// Insertion sort: a unit has few mentions, and it is stable.
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j].Start < ms[j-1].Start; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
}

// sentenceOf returns the index of the sentence holding offset, or -1.
func sentenceOf(ss []taxonomy.Span, off int) int {
	for i, s := range ss {
		if off >= s.Start && off < s.End {
			return i
		}
	}
	return -1
}

// unitScratch is what Analyse computes of each unit and forgets.
type unitScratch struct {
	match matchScratch
	runs  textRuns
}

// Stage is one offline extractor of the pipeline: it adds what it finds
// in an analysed document to out. Relationships must name entities that
// are (or will be) in out: the document entity always is.
type Stage interface {
	Name() string
	Extract(ctx context.Context, a *Analysis, out *Output) error
}

// Output merges the stages' entities and relationships: one entity per
// (id, text unit), one relationship per (source, relation, target, text
// unit), first description wins.
type Output struct {
	ents    []events.RawEntity
	entSeen map[string]bool
	rels    []events.RawRelationship
	relSeen map[string]bool
	pairs   map[[2]string]bool // entity ids a relationship other than mentions joins
	// src is the last relationship source's type, name and id: a stage
	// relates one source (the document) to many targets.
	src [3]string
	// types holds resolve.Type of the entity types and relations seen: a
	// document's few, spelled again for every entity and relationship.
	types map[string]string
}

// typeOf is resolve.Type(t).
func (o *Output) typeOf(t string) string {
	v, ok := o.types[t]
	if !ok {
		v = resolve.Type(t)
		if o.types == nil {
			o.types = map[string]string{}
		}
		o.types[t] = v
	}
	return v
}

// id is resolve.ID(typ, name): the type's canonical spelling, a colon and
// the name's key.
func (o *Output) id(typ, name string) string { return o.typeOf(typ) + ":" + resolve.Key(name) }

// entityID is EntityID(e).
func (o *Output) entityID(e events.RawEntity) string {
	if e.Key != "" {
		return o.id(e.Type, e.Key)
	}
	return o.id(e.Type, e.Name)
}

// NewOutput returns an empty output.
func NewOutput() *Output {
	return &Output{entSeen: map[string]bool{}, relSeen: map[string]bool{}, pairs: map[[2]string]bool{}}
}

// Entity adds e unless an entity of the same id and unit is there.
func (o *Output) Entity(e events.RawEntity) {
	k := o.entityID(e) + "|" + e.TextUnit
	if o.entSeen[k] {
		return
	}
	o.entSeen[k] = true
	o.ents = append(o.ents, e)
}

// Relationship adds r unless it is there.
func (o *Output) Relationship(r events.RawRelationship) {
	if o.src[0] != r.SourceType || o.src[1] != r.Source || o.src[2] == "" {
		o.src = [3]string{r.SourceType, r.Source, o.id(r.SourceType, r.Source)}
	}
	a, rel, b := o.src[2], o.typeOf(r.Relation), o.id(r.TargetType, r.Target)
	k := a + "|" + rel + "|" + b + "|" + r.TextUnit
	if o.relSeen[k] {
		return
	}
	o.relSeen[k] = true
	o.rels = append(o.rels, r)
	if rel != RelMentions {
		o.pairs[[2]string{min(a, b), max(a, b)}] = true
	}
}

// Related reports whether a relationship other than mentions joins the
// entities a and b (canonical ids), in either direction.
func (o *Output) Related(a, b string) bool { return o.pairs[[2]string{min(a, b), max(a, b)}] }

// Result returns what was added, in order.
func (o *Output) Result() ([]events.RawEntity, []events.RawRelationship) { return o.ents, o.rels }

// MentionStage relates the document to every entity it mentions
// (RelMentions) and emits those entities.
type MentionStage struct{}

// Name implements Stage.
func (MentionStage) Name() string { return "mentions" }

// Extract implements Stage.
func (MentionStage) Extract(_ context.Context, a *Analysis, out *Output) error {
	de := a.DocEntity
	for _, u := range a.Units {
		for _, m := range u.Mentions {
			out.Entity(m.Entity(u.ID))
			out.Relationship(u.Cite(events.RawRelationship{
				Source: de.Name, SourceType: de.Type, Relation: RelMentions, Target: m.Key, TargetType: m.Type,
				Description: a.Doc.DocID + " mentions " + strconv.Quote(m.Text), Strength: 1, // as %s mentions %q
			}, u.Sentence(m.Sentence)))
		}
	}
	return nil
}

// GenericMode is the generic failure mode a mode of the extractor's
// taxonomy belongs to (the mode itself without a taxonomy).
func (x *Extractor) GenericMode(mode string) string {
	if x.taxonomy == nil {
		return mode
	}
	return x.taxonomy.Generic(mode)
}
