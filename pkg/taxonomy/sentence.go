package taxonomy

import "strings"

// Most cues found are neither negated nor effects, yet each hit runs the
// negation and effect expressions on parts of its sentence. Those that
// need a literal in every match (effect.remedy needs "mitigat",
// "resolved", "workaround"...) run only where the part holds one: the
// automaton that finds the cues' literals also finds theirs, with where
// they stand in the sentence. What does not depend on the hit (the
// sentence stating a rule, asserting causes, opening with the remedy) is
// worked out once a sentence.

// The sentence expressions with a literal prefilter.
const (
	exprAssertion = iota
	exprNegSentence
	exprNegBefore
	exprNegAfter
	exprNegClause
	exprEffectBefore
	exprEffectAfter
	exprExposed
	exprReason
	exprRemedy
	exprRemedyKeeps
	nExprs
)

// minExprLiteral is the shortest literal worth looking for: shorter ones
// ("n", ",") stand in almost every part of a sentence.
const minExprLiteral = 2

// exprLiteralSets are the literal sets of expr (see LiteralSets)
// without those holding a literal shorter than minExprLiteral.
func exprLiteralSets(expr string) [][]string {
	if expr == "" {
		return nil
	}
	var out [][]string
	for _, set := range LiteralSets(expr) {
		if !hasShort(set) {
			out = append(out, set)
		}
	}
	return out
}

func hasShort(set []string) bool {
	for _, l := range set {
		if len(l) < minExprLiteral {
			return true
		}
	}
	return false
}

// sentence is the sentence Find is working on and what it knows of it.
type sentence struct {
	text string
	// occ are the places of the sentence expressions' literals; when
	// !located they are not known and every expression runs.
	occ     []occurrence
	located bool
	// plain is set when text holds no rune folding to an ASCII letter,
	// where word lists match as their expressions (WordListApplies);
	// ascii when it is ASCII, where the patterns' first occurrences are
	// known.
	plain, ascii bool

	ruleKnown, rule     bool
	assertKnown, assert bool
	leadKnown, lead     bool
}

// occurrence is a literal at text[start:end], of the sets in mask.
type occurrence struct {
	start, end int32
	mask       uint32
}

// scanSentence makes sc the sentence sent, marks in found the patterns
// of the automaton occurring in its lower-case form and reports whether
// the cues' literals cannot decide (see asciiFolds).
//
// An ASCII sentence is scanned as it is (the automaton folds ASCII
// case), once for both. Another is scanned lower-cased for found and, to
// place the literals, as it is, unless it holds a rune that matches an
// ASCII letter case-insensitively (the Kelvin sign, the long s): an
// expression's match could hold that rune where the literal has the
// letter, and then every expression runs.
func (t *Taxonomy) scanSentence(sc *sentence, sent string, found []bool, first []int32) (exact bool) {
	*sc = sentence{text: sent, occ: sc.occ[:0]}
	if asciiOnly(sent) {
		sc.occ = t.auto.scan(sent, found, first, t.setMask, sc.occ)
		sc.located, sc.plain, sc.ascii = true, true, true
		return false
	}
	t.auto.scan(strings.ToLower(sent), found, nil, nil, nil)
	into, lowerMisses := asciiFolds(sent)
	sc.plain = !into
	if !into {
		sc.occ = t.auto.scan(sent, nil, nil, t.setMask, sc.occ)
		sc.located = true
	}
	return lowerMisses
}

// may reports whether expression e can match in sc.text[a:b]: false
// only when a literal set of e has no literal there.
func (t *Taxonomy) may(sc *sentence, e, a, b int) bool {
	if !sc.located {
		return true
	}
	for _, bit := range t.exprSet[e] {
		ok := false
		for _, o := range sc.occ {
			if o.mask&bit != 0 && int(o.start) >= a && int(o.end) <= b {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
