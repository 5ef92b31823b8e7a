package eval

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
)

// Triple is a typed relationship compared by canonical ids, so spelling
// variants of one entity ("Cert Manager", "cert-manager") are one triple.
type Triple struct {
	Source, Relation, Target string // canonical ids and relation name
}

func (t Triple) String() string { return t.Source + " -" + t.Relation + "-> " + t.Target }

// TripleOf is r's triple.
func TripleOf(r events.RawRelationship) Triple {
	return Triple{Source: resolve.ID(r.SourceType, r.Source), Relation: resolve.Type(r.Relation),
		Target: resolve.ID(r.TargetType, r.Target)}
}

// Gold is a labelled set: document id -> relationships (the format of the
// seed corpus's recorded-llm-extraction.json).
type Gold map[string][]events.RawRelationship

// LoadGold reads a gold file.
func LoadGold(path string) (Gold, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading gold triples: %w", err)
	}
	var g Gold
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, fmt.Errorf("decoding gold triples %s: %w", path, err)
	}
	return g, nil
}

// Relations lists the relation names the gold set uses, sorted.
func (g Gold) Relations() []string {
	set := map[string]bool{}
	for _, rels := range g {
		for _, r := range rels {
			set[resolve.Type(r.Relation)] = true
		}
	}
	out := make([]string, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Score is a precision/recall count.
type Score struct {
	TP, FP, FN int
	// Missed and Spurious list the false negatives and false positives.
	Missed, Spurious []string
}

// Precision is TP/(TP+FP) (1 when nothing was predicted).
func (s Score) Precision() float64 {
	if s.TP+s.FP == 0 {
		return 1
	}
	return float64(s.TP) / float64(s.TP+s.FP)
}

// Recall is TP/(TP+FN) (1 when nothing was to be found).
func (s Score) Recall() float64 {
	if s.TP+s.FN == 0 {
		return 1
	}
	return float64(s.TP) / float64(s.TP+s.FN)
}

// F1 is the harmonic mean of precision and recall.
func (s Score) F1() float64 {
	p, r := s.Precision(), s.Recall()
	if p+r == 0 {
		return 0
	}
	return 2 * p * r / (p + r)
}

// ScoreTriples compares the distinct triples of got with those of gold,
// document by document, over the documents of gold and, when relations is
// non-empty, only the triples of those relations (an extractor's extra
// relations, such as mentions, are not errors against a gold set that
// does not label them).
func ScoreTriples(gold, got map[string][]events.RawRelationship, relations []string) Score {
	keep := func(t Triple) bool { return len(relations) == 0 || slices.Contains(relations, t.Relation) }
	set := func(rels []events.RawRelationship) map[Triple]bool {
		m := map[Triple]bool{}
		for _, r := range rels {
			if t := TripleOf(r); keep(t) {
				m[t] = true
			}
		}
		return m
	}
	var s Score
	ids := make([]string, 0, len(gold))
	for id := range gold {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		g, p := set(gold[id]), set(got[id])
		for t := range p {
			if g[t] {
				s.TP++
			} else {
				s.FP++
				s.Spurious = append(s.Spurious, id+": "+t.String())
			}
		}
		for t := range g {
			if !p[t] {
				s.FN++
				s.Missed = append(s.Missed, id+": "+t.String())
			}
		}
	}
	sort.Strings(s.Missed)
	sort.Strings(s.Spurious)
	return s
}
