package taxonomy

import (
	"regexp"
	"regexp/syntax"
	"strings"
)

// Several sentence expressions (undetermined, negation.after,
// negation.sentence, effect.after...) are alternations of phrases each
// needing words of its own ("cause" and "unknown", "what" and "caused"),
// run on a part of a sentence for every cue found. Where only whether one
// matches is asked, it matches when one of its branches does, and a
// branch can only match where its own literals stand (LiteralSets): one
// pass of an automaton over the branches' literals tells which branches
// to run, and most parts run none. A branch is also a smaller program
// than the whole, which Go's regexp runs with its backtracker rather than
// its slower NFA (above 500 instructions).

// alternatives is an expression asked only whether it matches, as the
// branches of its top-level alternation, each with the literal sets its
// matches hold.
type alternatives struct {
	branches []*regexp.Regexp
	sets     [][][]int32 // branch -> literal sets (pattern ids; nil: always run)
	auto     *automaton
	n        int // patterns of auto
}

// MatchString reports whether the expression matches s: whether a
// branch whose literals s holds matches it.
func (a *alternatives) MatchString(s string) bool {
	if len(a.branches) == 1 || a.auto == nil {
		return a.any(s, nil)
	}
	var buf [128]bool
	var found []bool
	if a.n <= len(buf) {
		found = buf[:a.n]
	} else {
		found = make([]bool, a.n)
	}
	if asciiOnly(s) {
		a.auto.scan(s, found, nil, nil, nil)
	} else if _, lowerMisses := asciiFolds(s); !lowerMisses {
		// As scanSentence scans: strings.ToLower makes every rune
		// folding into ASCII ASCII but the long s.
		a.auto.scan(strings.ToLower(s), found, nil, nil, nil)
	} else {
		return a.any(s, nil)
	}
	return a.any(s, found)
}

// any reports whether a branch matches s, running only those whose
// literal sets found (nil: all) marks.
func (a *alternatives) any(s string, found []bool) bool {
	for i, re := range a.branches {
		if found != nil && a.sets[i] != nil && !allFound(found, a.sets[i]) {
			continue
		}
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// splitAlternation returns re as alternatives: the branches of its
// top-level alternation ("a|b", or "^(?:a|b)" as compile writes an
// anchored one, each branch then anchored), or re alone when it is no
// alternation. nil re gives nil.
func splitAlternation(re *regexp.Regexp) *alternatives {
	if re == nil {
		return nil
	}
	whole := &alternatives{branches: []*regexp.Regexp{re}}
	tree, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return whole
	}
	tree = uncapture(tree)
	var anchor *syntax.Regexp
	if tree.Op == syntax.OpConcat && len(tree.Sub) == 2 && tree.Sub[0].Op == syntax.OpBeginText {
		anchor, tree = tree.Sub[0], uncapture(tree.Sub[1])
	}
	if tree.Op != syntax.OpAlternate {
		return whole
	}
	a := &alternatives{}
	var patterns []string
	ids := map[string]int32{}
	for _, sub := range tree.Sub {
		var sets [][]int32
		for _, set := range requiredLiteralSets(sub.Simplify()) {
			if hasShort(set) {
				continue // in almost every text
			}
			var s []int32
			for _, l := range set {
				id, ok := ids[l]
				if !ok {
					id = int32(len(patterns))
					ids[l] = id
					patterns = append(patterns, l)
				}
				s = append(s, id)
			}
			sets = append(sets, s)
		}
		if anchor != nil {
			sub = &syntax.Regexp{Op: syntax.OpConcat, Flags: anchor.Flags, Sub: []*syntax.Regexp{anchor, sub}}
		}
		b, err := regexp.Compile(sub.String())
		if err != nil {
			return whole
		}
		a.branches = append(a.branches, b)
		a.sets = append(a.sets, sets)
	}
	if len(patterns) > 0 {
		a.auto, a.n = newAutomaton(patterns), len(patterns)
	}
	return a
}

// uncapture strips the capturing groups around re: whether it matches
// does not depend on them.
func uncapture(re *syntax.Regexp) *syntax.Regexp {
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	return re
}
