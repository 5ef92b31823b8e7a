package offline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/jdkato/prose/v2"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
)

// RelCoOccurs relates two noun phrases of one text unit.
const RelCoOccurs = "co_occurs"

// TypeConcept is the entity type of a noun phrase that names no known
// entity.
const TypeConcept = "concept"

// Tagger is a part-of-speech tagger: prose's averaged perceptron, trained
// on the Penn Treebank, with its model embedded in the module (no download
// at run time). Loading it takes a moment, so share one per process; it is
// safe for concurrent use.
type Tagger struct {
	model *prose.Model
}

// NewTagger loads the embedded tagging model.
func NewTagger() (*Tagger, error) {
	doc, err := prose.NewDocument("load", prose.WithSegmentation(false), prose.WithExtraction(false))
	if err != nil {
		return nil, fmt.Errorf("loading the part-of-speech model: %w", err)
	}
	return &Tagger{model: doc.Model}, nil
}

// TaggedToken is a token with its Penn Treebank tag.
type TaggedToken struct{ Text, Tag string }

// Tag tokenizes and tags one sentence.
func (t *Tagger) Tag(sentence string) ([]TaggedToken, error) {
	doc, err := prose.NewDocument(sentence, prose.UsingModel(t.model), prose.WithSegmentation(false),
		prose.WithExtraction(false))
	if err != nil {
		return nil, fmt.Errorf("tagging: %w", err)
	}
	toks := doc.Tokens()
	out := make([]TaggedToken, len(toks))
	for i, tk := range toks {
		out[i] = TaggedToken{Text: tk.Text, Tag: tk.Tag}
	}
	return out, nil
}

// NounPhraseConfig configures noun-phrase co-occurrence. It is off unless
// Enabled: on incident postmortems it adds many concept edges the gold
// sets do not have, so it also skips incident documents unless
// IncludeIncidents.
type NounPhraseConfig struct {
	Enabled          bool
	IncludeIncidents bool
	// Tagger is shared when set; otherwise one is loaded.
	Tagger *Tagger
	// MaxPhrases bounds the phrases per text unit, most frequent first
	// (default 24): pairs grow with its square.
	MaxPhrases int
	// MaxWords bounds a phrase's length (default 4).
	MaxWords int
	// GenericNouns are dropped as one-word phrases and as phrase heads
	// that carry no meaning alone (default DefaultGenericNouns).
	GenericNouns []string
}

// Validate checks the configuration.
func (c NounPhraseConfig) Validate() error {
	if c.MaxPhrases < 0 || c.MaxWords < 0 {
		return errors.New("extractor: noun-phrase MaxPhrases and MaxWords must be >= 0")
	}
	return nil
}

// DefaultGenericNouns returns the nouns too generic to be graph nodes.
func DefaultGenericNouns() []string {
	return []string{"action", "actions", "amount", "case", "cases", "cause", "change", "changes", "customer", "customers",
		"day", "days", "end", "event", "events", "fact", "hour", "hours", "impact", "incident", "incidents",
		"issue", "issues", "item", "items", "kind", "lot", "minute", "minutes", "number", "part", "period",
		"place", "point", "problem", "problems", "reason", "result", "results", "second", "seconds", "set",
		"side", "situation", "start", "summary", "thing", "things", "time", "times", "today", "type", "use",
		"user", "users", "way", "week", "weeks", "work", "year", "years", "root", "team", "teams", "postmortem",
		"timeline", "detection", "resolution", "response", "status", "update", "updates", "name"}
}

// NounPhraseStage relates the noun phrases of each text unit pairwise
// (co_occurs), weighted by how often they co-occur: 1 for the unit, plus 1
// per sentence holding both. A phrase that is a known mention keeps the
// mention's entity; others become concept entities.
type NounPhraseStage struct {
	cfg     NounPhraseConfig
	tagger  *Tagger
	generic map[string]bool
}

var _ Stage = (*NounPhraseStage)(nil)

// NewNounPhraseStage returns the stage, loading a tagger unless shared.
func NewNounPhraseStage(cfg NounPhraseConfig) (*NounPhraseStage, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxPhrases == 0 {
		cfg.MaxPhrases = 24
	}
	if cfg.MaxWords == 0 {
		cfg.MaxWords = 4
	}
	if len(cfg.GenericNouns) == 0 {
		cfg.GenericNouns = DefaultGenericNouns()
	}
	t := cfg.Tagger
	if t == nil {
		var err error
		if t, err = NewTagger(); err != nil {
			return nil, err
		}
	}
	g := make(map[string]bool, len(cfg.GenericNouns))
	for _, n := range cfg.GenericNouns {
		g[strings.ToLower(n)] = true
	}
	return &NounPhraseStage{cfg: cfg, tagger: t, generic: g}, nil
}

// Name implements Stage.
func (s *NounPhraseStage) Name() string { return "noun_phrases" }

func isNoun(tag string) bool { return strings.HasPrefix(tag, "NN") }

func wordy(s string) bool {
	letters := 0
	for _, r := range s {
		switch {
		case unicode.IsLetter(r):
			letters++
		case unicode.IsDigit(r), r == '-', r == '_', r == '.', r == '/', r == '\'':
		default:
			return false
		}
	}
	return letters >= 2
}

// NounPhrases returns the noun phrases of a sentence: maximal runs of
// adjectives and nouns ending in a noun, generic one-word phrases dropped.
func (s *NounPhraseStage) NounPhrases(sentence string) ([]string, error) {
	toks, err := s.tagger.Tag(sentence)
	if err != nil {
		return nil, err
	}
	var out []string
	var run []TaggedToken
	flush := func() {
		for len(run) > 0 && !isNoun(run[len(run)-1].Tag) {
			run = run[:len(run)-1]
		}
		for len(run) > 0 && !isNoun(run[0].Tag) && run[0].Tag != "JJ" {
			run = run[1:]
		}
		if len(run) > s.cfg.MaxWords {
			run = run[len(run)-s.cfg.MaxWords:]
		}
		if len(run) > 0 {
			words := make([]string, len(run))
			for i, t := range run {
				words[i] = t.Text
			}
			head := strings.ToLower(words[len(words)-1])
			if !(len(words) == 1 && s.generic[head]) && !(len(words) == 2 && run[0].Tag == "JJ" && s.generic[head]) {
				out = append(out, strings.Join(words, " "))
			}
		}
		run = run[:0]
	}
	for _, t := range toks {
		if (isNoun(t.Tag) || t.Tag == "JJ") && wordy(t.Text) {
			run = append(run, t)
			continue
		}
		flush()
	}
	flush()
	return out, nil
}

// Extract implements Stage.
func (s *NounPhraseStage) Extract(ctx context.Context, a *Analysis, out *Output) error {
	if !s.cfg.IncludeIncidents && (a.DocType() == "incident" || a.DocType() == "postmortem") {
		return nil
	}
	// A sentence the document repeats (units overlap) is tagged once.
	tagged := map[string][]string{} // sentence text -> its noun phrases
	for _, u := range a.Units {
		if err := ctx.Err(); err != nil {
			return err
		}
		type phrase struct {
			ent       events.RawEntity
			ref       string
			count     int
			sentences []int
		}
		byKey := map[string]*phrase{}
		var order []string
		mentions := map[string]Mention{}
		for _, m := range u.Mentions {
			mentions[resolve.Key(m.Text)] = m
		}
		for si, sp := range u.Sentences {
			sent := u.Text[sp.Start:sp.End]
			nps, ok := tagged[sent]
			if !ok {
				var err error
				if nps, err = s.NounPhrases(sent); err != nil {
					return err
				}
				tagged[sent] = nps
			}
			for _, np := range nps {
				k := resolve.Key(np)
				p := byKey[k]
				if p == nil {
					p = &phrase{ent: events.RawEntity{Name: np, Type: TypeConcept, TextUnit: u.ID}, ref: np}
					if m, ok := mentions[k]; ok {
						p.ent, p.ref = m.Entity(u.ID), m.Ref()
					}
					byKey[k] = p
					order = append(order, k)
				}
				p.count++
				if len(p.sentences) == 0 || p.sentences[len(p.sentences)-1] != si {
					p.sentences = append(p.sentences, si)
				}
			}
		}
		slices.SortStableFunc(order, func(x, y string) int { return byKey[y].count - byKey[x].count })
		if len(order) > s.cfg.MaxPhrases {
			order = order[:s.cfg.MaxPhrases]
		}
		slices.Sort(order) // a pair's direction is its keys' order
		for i, ka := range order {
			pa := byKey[ka]
			for _, kb := range order[i+1:] {
				pb := byKey[kb]
				if EntityID(pa.ent) == EntityID(pb.ent) {
					continue
				}
				shared, first := 0, -1
				for _, x := range pa.sentences {
					if slices.Contains(pb.sentences, x) {
						if shared == 0 {
							first = x
						}
						shared++
					}
				}
				out.Entity(pa.ent)
				out.Entity(pb.ent)
				// The support is the first sentence holding both, else the
				// unit (what co-occurrence is measured over).
				out.Relationship(u.Cite(events.RawRelationship{Source: pa.ref, SourceType: pa.ent.Type, Relation: RelCoOccurs,
					Target: pb.ref, TargetType: pb.ent.Type, Strength: float64(1 + shared),
					Description: fmt.Sprintf("%q and %q co-occur in a text unit (%d sentences together)", pa.ent.Name, pb.ent.Name, shared)},
					u.Sentence(first)))
			}
		}
	}
	return nil
}
