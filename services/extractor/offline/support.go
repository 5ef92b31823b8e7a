package offline

import (
	"strings"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/taxonomy"
	"github.com/kgstream/kgstream/services/extractor/chunk"
)

// A model names a relationship's endpoints, not where the text asserts it,
// so the LLM extractor finds the supporting sentence afterwards. The rule,
// first match wins, over the sentences of the relationship's text unit
// (Sentences):
//
//  1. the first sentence naming both endpoints;
//  2. the first sentence naming the target;
//  3. the sentence sharing the most word stems with the target's name (at
//     least one; ties go to the one sharing more stems with the
//     relationship's description, then to the earlier): a failure mode
//     ("expired certificate") is a label, rarely the text's own words
//     ("the certificate ... expired");
//  4. the first sentence naming the source;
//  5. the whole unit.
//
// A sentence names an entity when the gazetteer's matcher finds it there:
// whole words, longest match, normalisation-insensitive ("Cert Manager"
// names cert-manager). A stem is a word's first five letters, lower-cased,
// after an -ing, -ed, -es or -s ending ("expired", "expiry" and
// "expiration" share "expir", "pushed" and "push" "push"); words shorter
// than three letters and a few function words have none.

// stemLen is the prefix length that makes a stem.
const stemLen = 5

// stemStop reports whether word (lower case) is a function word, which
// has no stem.
func stemStop(word string) bool {
	switch word {
	case "the", "and", "for", "with", "from", "that", "this", "was", "were", "its", "into", "has", "had", "have",
		"are", "not", "but", "via":
		return true
	}
	return false
}

// stems returns the stems of the words of s.
func stems(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range words(s) {
		word := strings.ToLower(s[w.start:w.end])
		if utf8.RuneCountInString(word) < 3 || stemStop(word) {
			continue
		}
		for _, suffix := range []string{"ing", "ed", "es", "s"} {
			if w, ok := strings.CutSuffix(word, suffix); ok && len(w) >= 3 {
				word = w
				break
			}
		}
		if utf8.RuneCountInString(word) > stemLen {
			i := 0
			for n := range word {
				if i == stemLen {
					word = word[:n]
					break
				}
				i++
			}
		}
		out[word] = true
	}
	return out
}

func shared(a, b map[string]bool) int {
	n := 0
	for k := range a {
		if b[k] {
			n++
		}
	}
	return n
}

// supporter finds supporting sentences in one text unit.
type supporter struct {
	text      string
	sentences []taxonomy.Span
	named     map[string][]int // entity id -> sentences naming it, in order
	stems     []map[string]bool
}

// newSupporter analyses text for relationships among ents (and the
// endpoints rels name, declared or not).
func newSupporter(text string, ents []events.RawEntity, rels []events.RawRelationship) *supporter {
	s := &supporter{text: text, sentences: chunk.Sentences(text), named: map[string][]int{}}
	var entries []Entry
	seen := map[string]bool{}
	maxWords := 1
	add := func(typ, name string) {
		id := resolve.ID(typ, name)
		if seen[id+"\x00"+name] {
			return
		}
		seen[id+"\x00"+name] = true
		entries = append(entries, Entry{ID: id, Type: resolve.Type(typ), Name: name, Key: resolve.Key(name)})
		maxWords = max(maxWords, min(len(words(name)), 16))
	}
	for _, e := range ents {
		add(e.Type, e.Name)
	}
	for _, r := range rels {
		add(r.SourceType, r.Source)
		add(r.TargetType, r.Target)
	}
	m := newMatcher(entries, "", 2, maxWords)
	for _, h := range m.find(text) {
		si := sentenceOf(s.sentences, h.start)
		if si < 0 {
			continue
		}
		for _, e := range h.entries {
			if l := s.named[e.ID]; len(l) == 0 || l[len(l)-1] != si {
				s.named[e.ID] = append(s.named[e.ID], si)
			}
		}
	}
	return s
}

// span returns the supporting span of r in the unit's text, by the rule
// above.
func (s *supporter) span(r events.RawRelationship) taxonomy.Span {
	src, tgt := s.named[resolve.ID(r.SourceType, r.Source)], s.named[resolve.ID(r.TargetType, r.Target)]
	for _, i := range tgt {
		for _, j := range src {
			if i == j {
				return s.sentences[i]
			}
		}
	}
	if len(tgt) > 0 {
		return s.sentences[tgt[0]]
	}
	if best := s.byStems(r); best >= 0 {
		return s.sentences[best]
	}
	if len(src) > 0 {
		return s.sentences[src[0]]
	}
	return taxonomy.Span{Start: 0, End: len(s.text)}
}

func (s *supporter) byStems(r events.RawRelationship) int {
	target := stems(r.Target)
	if len(target) == 0 {
		return -1
	}
	if s.stems == nil {
		s.stems = make([]map[string]bool, len(s.sentences))
		for i, sp := range s.sentences {
			s.stems[i] = stems(s.text[sp.Start:sp.End])
		}
	}
	desc := stems(r.Description)
	best, bestT, bestD := -1, 0, 0
	for i, st := range s.stems {
		t := shared(target, st)
		if t == 0 {
			continue
		}
		d := shared(desc, st)
		if t > bestT || (t == bestT && d > bestD) {
			best, bestT, bestD = i, t, d
		}
	}
	return best
}

// CiteUnit gives each relationship extracted from unit u its provenance:
// the unit, the supporting sentence's span in document offsets, the unit's
// hash.
func CiteUnit(u events.TextUnit, ents []events.RawEntity, rels []events.RawRelationship) {
	if len(rels) == 0 {
		return
	}
	s := newSupporter(u.Text, ents, rels)
	hash := unitHash(u)
	for i := range rels {
		sp := s.span(rels[i])
		rels[i].TextUnit = u.ID
		rels[i].SentenceStart, rels[i].SentenceEnd = u.Start+sp.Start, u.Start+sp.End
		rels[i].UnitHash = hash
	}
}
