package offline

import (
	"context"
	"fmt"
	"sort"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/taxonomy"
)

// Co-occurrence weights: per sentence naming both, capped below a stated
// relation's weight; a sentence naming more entities is a list, not a
// relation.
const (
	coOccurWeight      = 0.25
	coOccurMaxWeight   = 1.0
	coOccurMaxEntities = 5
)

// CoOccurrenceStage relates the entities named in one sentence, so
// incidents connect through the systems they share even where no pattern
// reads a stated relation: one co_occurs (RelCoOccurs) edge per pair of the document (source and target in id
// order), weighing 0.25 per sentence naming both, at most 1, citing the
// first such sentence. Pairs a pattern already relates get none, and
// sentences naming more than five entities are skipped.
type CoOccurrenceStage struct{}

// Name implements Stage.
func (CoOccurrenceStage) Name() string { return "co-occurrence" }

// Extract implements Stage.
func (CoOccurrenceStage) Extract(_ context.Context, a *Analysis, out *Output) error {
	type pair struct {
		a, b     Mention // a.ID() < b.ID()
		count    int
		unit     int
		sentence taxonomy.Span
	}
	self := EntityID(a.DocEntity)
	pairs := map[[2]string]*pair{}
	var order [][2]string
	seenSentence := map[string]bool{} // units overlap: one count per document sentence
	for ui, u := range a.Units {
		bySentence := map[int][]Mention{}
		for _, m := range u.Mentions {
			if m.Sentence >= 0 && m.ID() != self {
				bySentence[m.Sentence] = append(bySentence[m.Sentence], m)
			}
		}
		idx := make([]int, 0, len(bySentence))
		for i := range bySentence {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		for _, si := range idx {
			sp := u.Sentences[si]
			key := fmt.Sprintf("%d-%d", u.Start+sp.Start, u.Start+sp.End)
			if seenSentence[key] {
				continue
			}
			seenSentence[key] = true
			distinct := map[string]Mention{}
			for _, m := range bySentence[si] {
				if _, ok := distinct[m.ID()]; !ok {
					distinct[m.ID()] = m
				}
			}
			if len(distinct) < 2 || len(distinct) > coOccurMaxEntities {
				continue
			}
			ids := make([]string, 0, len(distinct))
			for id := range distinct {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for i := range ids {
				for j := i + 1; j < len(ids); j++ {
					k := [2]string{ids[i], ids[j]}
					p := pairs[k]
					if p == nil {
						p = &pair{a: distinct[ids[i]], b: distinct[ids[j]], unit: ui, sentence: sp}
						pairs[k] = p
						order = append(order, k)
					}
					p.count++
				}
			}
		}
	}
	for _, k := range order {
		p := pairs[k]
		if out.Related(k[0], k[1]) {
			continue
		}
		u := a.Units[p.unit]
		out.Relationship(u.Cite(events.RawRelationship{
			Source: p.a.Ref(), SourceType: p.a.Type, Relation: RelCoOccurs, Target: p.b.Ref(), TargetType: p.b.Type,
			Description: fmt.Sprintf("%s and %s are named together in %d sentence(s) of %s", p.a.Text, p.b.Text, p.count, a.Doc.DocID),
			Strength:    min(coOccurWeight*float64(p.count), coOccurMaxWeight),
		}, p.sentence))
	}
	return nil
}
