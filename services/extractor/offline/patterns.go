package offline

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/taxonomy"
)

//go:embed patterns.yaml
var defaultPatternsYAML string

// DefaultPatternsYAML returns the embedded default relation patterns.
func DefaultPatternsYAML() []byte { return []byte(defaultPatternsYAML) }

// Patterns is a set of sentence-level relation patterns: an offline
// Stage. It is immutable and safe for concurrent use.
type Patterns struct {
	list []pattern
}

var _ Stage = (*Patterns)(nil)

type pattern struct {
	name, relation, from string
	docTypes             map[string]bool
	sourceTypes          map[string]bool
	targetTypes          map[string]bool
	cues                 []*regexp.Regexp
	// cueLits are, per cue, the sets of literals (lower case) every match
	// of the cue holds one of each of (taxonomy.LiteralSets), nil when the
	// cue needs none it can tell.
	cueLits [][][]string
	// cueWords are, per cue, the cue as a word list (nil: not one), which
	// an ASCII sentence is matched against instead of the cue's regexp.
	cueWords []*taxonomy.WordList
	between  *regexp.Regexp
	fallback bool
}

type patternFile struct {
	Version  int `yaml:"version"`
	Patterns []struct {
		Name          string   `yaml:"name"`
		Relation      string   `yaml:"relation"`
		From          string   `yaml:"from"`
		DocumentTypes []string `yaml:"document_types"`
		SourceTypes   []string `yaml:"source_types"`
		TargetTypes   []string `yaml:"target_types"`
		Cues          []string `yaml:"cues"`
		Between       string   `yaml:"between"`
		Fallback      string   `yaml:"fallback"`
	} `yaml:"patterns"`
}

// DefaultPatterns parses the embedded default patterns (patterns.yaml):
// incident -affected-> service for services named in a sentence with an
// outage cue, incident -involved-> component for components named in a
// sentence with a cause cue, and depends_on / owned_by between mentions.
func DefaultPatterns() (*Patterns, error) { return ParsePatterns([]byte(defaultPatternsYAML)) }

// LoadPatterns reads and parses a patterns file.
func LoadPatterns(path string) (*Patterns, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading relation patterns: %w", err)
	}
	p, err := ParsePatterns(data)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	return p, nil
}

func typeSet(ts []string) map[string]bool {
	m := make(map[string]bool, len(ts))
	for _, t := range ts {
		m[resolve.Type(t)] = true
	}
	return m
}

// ParsePatterns parses relation patterns (the format of patterns.yaml).
func ParsePatterns(data []byte) (*Patterns, error) {
	var f patternFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("extractor: decoding relation patterns: %w", err)
	}
	p := &Patterns{}
	for i, fp := range f.Patterns {
		pt := pattern{name: fp.Name, relation: resolve.Type(fp.Relation), from: fp.From,
			docTypes: typeSet(fp.DocumentTypes), sourceTypes: typeSet(fp.SourceTypes), targetTypes: typeSet(fp.TargetTypes)}
		if pt.name == "" {
			pt.name = fmt.Sprintf("pattern %d", i)
		}
		if pt.relation == "" || len(pt.targetTypes) == 0 {
			return nil, fmt.Errorf("extractor: relation pattern %q needs a relation and target_types", pt.name)
		}
		switch fp.Fallback {
		case "":
		case "document":
			pt.fallback = true
		default:
			return nil, fmt.Errorf("extractor: relation pattern %q: unknown fallback %q", pt.name, fp.Fallback)
		}
		for _, c := range fp.Cues {
			re, err := regexp.Compile("(?i)" + c)
			if err != nil {
				return nil, fmt.Errorf("extractor: relation pattern %q cue: %w", pt.name, err)
			}
			pt.cues = append(pt.cues, re)
			pt.cueLits = append(pt.cueLits, taxonomy.LiteralSets(c))
			pt.cueWords = append(pt.cueWords, taxonomy.ParseWordList(c))
		}
		switch fp.From {
		case "document":
			if len(pt.docTypes) == 0 {
				return nil, fmt.Errorf("extractor: relation pattern %q from document needs document_types", pt.name)
			}
		case "mention":
			if len(pt.sourceTypes) == 0 || fp.Between == "" {
				return nil, fmt.Errorf("extractor: relation pattern %q from mention needs source_types and between", pt.name)
			}
			re, err := regexp.Compile("(?i)^(?:" + fp.Between + ")$")
			if err != nil {
				return nil, fmt.Errorf("extractor: relation pattern %q between: %w", pt.name, err)
			}
			pt.between = re
		default:
			return nil, fmt.Errorf("extractor: relation pattern %q: from must be document or mention, not %q", pt.name, fp.From)
		}
		p.list = append(p.list, pt)
	}
	return p, nil
}

// Names lists the patterns' names.
func (p *Patterns) Names() []string {
	out := make([]string, len(p.list))
	for i, pt := range p.list {
		out[i] = pt.name
	}
	return out
}

// Name implements Stage.
func (p *Patterns) Name() string { return "patterns" }

// Extract implements Stage.
func (p *Patterns) Extract(_ context.Context, a *Analysis, out *Output) error {
	for _, pt := range p.list {
		switch pt.from {
		case "document":
			pt.fromDocument(a, out)
		case "mention":
			pt.fromMention(a, out)
		}
	}
	return nil
}

func (pt *pattern) cued(sentence string) bool {
	if len(pt.cues) == 0 {
		return true
	}
	// A cue that is a word list is matched as one, in one pass over the
	// sentence's words (looking for its literals first would cost about as
	// much). A sentence lacking every literal of one of another cue's
	// literal sets cannot match it: that cue's regexp is skipped. Both
	// hold unless case folding may make a literal of other runes ("ſ"
	// folds to "s"): then every cue runs.
	var lower string
	plain := isASCII(sentence) || taxonomy.WordListApplies(sentence)
	for i, re := range pt.cues {
		if plain && pt.cueWords[i] != nil {
			if pt.cueWords[i].Match(sentence) {
				return true
			}
			continue
		}
		if plain && pt.cueLits[i] != nil {
			if lower == "" {
				lower = strings.ToLower(sentence)
			}
			if !holdsEach(lower, pt.cueLits[i]) {
				continue
			}
		}
		if re.MatchString(sentence) {
			return true
		}
	}
	return false
}

// isASCII reports whether s holds ASCII bytes only.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// holdsEach reports whether lower holds a literal of every one of sets.
func holdsEach(lower string, sets [][]string) bool {
	for _, set := range sets {
		if !slices.ContainsFunc(set, func(l string) bool { return strings.Contains(lower, l) }) {
			return false
		}
	}
	return true
}

func (pt *pattern) fromDocument(a *Analysis, out *Output) {
	if !pt.docTypes[a.DocType()] {
		return
	}
	de := a.DocEntity
	found := false
	emit := func(u Unit, m Mention, sent taxonomy.Span) {
		out.Entity(m.Entity(u.ID))
		out.Relationship(u.Cite(events.RawRelationship{Source: de.Name, SourceType: de.Type, Relation: pt.relation,
			Target: m.Ref(), TargetType: m.Type, Description: evidence(u.Text, sent), Strength: 1}, sent))
	}
	for _, u := range a.Units {
		// Whether each sentence is cued, decided once: a sentence holds
		// many mentions.
		cued := make([]int8, len(u.Sentences)) // 0 unknown, 1 cued, -1 not
		for _, m := range u.Mentions {
			if !pt.targetTypes[m.Type] || m.Sentence < 0 {
				continue
			}
			s := u.Sentences[m.Sentence]
			if cued[m.Sentence] == 0 {
				cued[m.Sentence] = -1
				if pt.cued(u.Text[s.Start:s.End]) {
					cued[m.Sentence] = 1
				}
			}
			if cued[m.Sentence] == 1 {
				emit(u, m, s)
				found = true
			}
		}
	}
	if found || !pt.fallback {
		return
	}
	for _, u := range a.Units {
		for _, m := range u.Mentions {
			if pt.targetTypes[m.Type] && m.Sentence >= 0 {
				emit(u, m, u.Sentences[m.Sentence])
			}
		}
	}
}

func (pt *pattern) fromMention(a *Analysis, out *Output) {
	for _, u := range a.Units {
		for i, src := range u.Mentions {
			if !pt.sourceTypes[src.Type] || src.Sentence < 0 {
				continue
			}
			for _, tgt := range u.Mentions[i+1:] {
				if tgt.Sentence != src.Sentence || tgt.Start < src.End {
					continue
				}
				if pt.targetTypes[tgt.Type] && pt.between.MatchString(u.Text[src.End:tgt.Start]) {
					out.Entity(src.Entity(u.ID))
					out.Entity(tgt.Entity(u.ID))
					sent := u.Sentences[src.Sentence]
					out.Relationship(u.Cite(events.RawRelationship{Source: src.Ref(), SourceType: src.Type, Relation: pt.relation,
						Target: tgt.Ref(), TargetType: tgt.Type, Description: evidence(u.Text, sent), Strength: 1}, sent))
				}
				break // only the next mention
			}
		}
	}
}

// maxEvidence bounds the sentence quoted as a relationship's description.
const maxEvidence = 300

// evidence quotes the supporting sentence as the relationship's
// description (its span is the relationship's SentenceStart/End).
func evidence(text string, s taxonomy.Span) string {
	q := strings.Join(strings.Fields(text[s.Start:s.End]), " ")
	if len(q) > maxEvidence {
		cut := maxEvidence
		for cut > 0 && q[cut]&0xC0 == 0x80 {
			cut--
		}
		q = q[:cut] + "…"
	}
	return q
}
