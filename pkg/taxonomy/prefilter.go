package taxonomy

import (
	"encoding/binary"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The cue search is the hot path of offline extraction: every sentence of
// every document against every cue. A cue's regular expression runs only
// on a sentence holding the literal strings every match of it must
// contain: one of each of its sets ("cert" for `\bcert(ificate)?s?\b`;
// one of puppet, ansible and one of change, patch for
// `(puppet|ansible)\s+(change|patch)`). A mode's keywords and those
// literals are found by one pass of an Aho-Corasick automaton over the
// lower-cased sentence. The result is the same as running every cue.

// requiredLiterals returns lower-case strings one of which every match of
// re contains, or nil when there is no such set (a cue that may match
// anything, or a literal the lower-case comparison cannot decide).
func requiredLiterals(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		return exactStrings(re)
	case syntax.OpCapture:
		return requiredLiterals(re.Sub[0])
	case syntax.OpPlus:
		return requiredLiterals(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiterals(re.Sub[0])
		}
		return nil
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			l := requiredLiterals(sub)
			if l == nil {
				return nil
			}
			out = append(out, l...)
		}
		return out
	case syntax.OpConcat:
		// Adjacent literals join into one ("time" "out" -> "timeout");
		// of the candidate sets the one whose shortest string is longest
		// filters best.
		var best []string
		bestLen := 0
		consider := func(l []string) {
			if l == nil {
				return
			}
			m := len(l[0])
			for _, s := range l[1:] {
				m = min(m, len(s))
			}
			if m > bestLen {
				best, bestLen = l, m
			}
		}
		concatParts(re, consider, func(sub *syntax.Regexp) { consider(requiredLiterals(sub)) })
		return best
	}
	return nil
}

// concatParts walks the parts of a concatenation in order: each run of
// adjacent parts matching a few strings exactly (see exactStrings) goes
// to literal as the strings the run matches ("time" "out" -> "timeout";
// "w" (as|ere) -> "was", "were"); every other part goes to other.
func concatParts(re *syntax.Regexp, literal func([]string), other func(*syntax.Regexp)) {
	var run []string
	flush := func() {
		// A run that may match the empty string requires nothing.
		if run != nil && !slices.Contains(run, "") {
			literal(minimalSet(run))
		}
		run = nil
	}
	for _, sub := range re.Sub {
		if ex := exactStrings(sub); ex != nil {
			if p := product(run, ex); p != nil {
				run = p
			} else {
				flush()
				run = ex
			}
			continue
		}
		flush()
		other(sub)
	}
	flush()
}

// maxExact bounds the strings exactStrings and product return.
const maxExact = 64

// exactStrings returns the lower-case strings every match of re is one
// of (up to case), or nil when there is no such list of at most maxExact
// ASCII strings.
func exactStrings(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return []string{""}
	case syntax.OpQuest:
		if ex := exactStrings(re.Sub[0]); ex != nil && len(ex) < maxExact {
			return append([]string{""}, ex...)
		}
		return nil
	case syntax.OpLiteral:
		s := strings.ToLower(string(re.Rune))
		if s == "" || !asciiOnly(s) {
			return nil
		}
		return []string{s}
	case syntax.OpCapture:
		return exactStrings(re.Sub[0])
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			ex := exactStrings(sub)
			if ex == nil || len(out)+len(ex) > maxExact {
				return nil
			}
			out = append(out, ex...)
		}
		return out
	case syntax.OpConcat:
		var out []string
		for _, sub := range re.Sub {
			ex := exactStrings(sub)
			if ex == nil {
				return nil
			}
			if out = product(out, ex); out == nil {
				return nil
			}
		}
		return out
	}
	return nil
}

// minimalSet is set without the strings holding another of it: a text
// holds one of set if and only if it holds one of those left.
func minimalSet(set []string) []string {
	var out []string
	for i, s := range set {
		keep := true
		for j, o := range set {
			if j != i && strings.Contains(s, o) && (len(o) < len(s) || j < i) {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, s)
		}
	}
	return out
}

// product returns every string of a followed by one of b (b when a is
// nil), nil when they would be more than maxExact.
func product(a, b []string) []string {
	if a == nil {
		return b
	}
	if len(a)*len(b) > maxExact {
		return nil
	}
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	return out
}

func asciiOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// LiteralSets parses expr as a case-insensitive expression ("(?i)"+expr,
// as cues are compiled) and returns sets of lower-case ASCII strings such
// that every match of it holds a string of each set; nil when nothing can
// be said (the expression always has to run). An expression naming two
// things ("(puppet|ansible) (change|patch)") needs one of each. An ASCII
// text whose lower-case form lacks every string of a set cannot match;
// outside ASCII a rune may fold to an ASCII letter (see asciiFolds).
func LiteralSets(expr string) [][]string {
	re, err := syntax.Parse("(?i)"+expr, syntax.Perl)
	if err != nil {
		return nil
	}
	return requiredLiteralSets(re.Simplify())
}

// requiredLiteralSets returns the literal sets of re: every part of a
// concatenation must match, so each part's required literals are one set
// (adjacent literals joined, as requiredLiterals joins them); anything
// else is the one set requiredLiterals finds.
func requiredLiteralSets(re *syntax.Regexp) [][]string {
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	if re.Op != syntax.OpConcat {
		if l := requiredLiterals(re); l != nil {
			return [][]string{l}
		}
		return nil
	}
	var out [][]string
	concatParts(re, func(set []string) { out = append(out, set) },
		func(sub *syntax.Regexp) { out = append(out, requiredLiteralSets(sub)...) })
	return out
}

// prefixLiterals returns lower-case ASCII strings one of which every
// match of expr (read as a cue is, "(?i)"+expr) starts with, nil when
// there are none such: its first part after any \b matches one of a few
// strings exactly (exactStrings). No match starts before the first of
// them in a text, so the search can start there. An expression with ^ or
// \A is left out: it is searched from the start of the text.
func prefixLiterals(expr string) []string {
	re, err := syntax.Parse("(?i)"+expr, syntax.Perl)
	if err != nil {
		return nil
	}
	re = re.Simplify()
	if anchorsBegin(re) {
		return nil
	}
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	first := re
	if re.Op == syntax.OpConcat {
		i := 0
		for i < len(re.Sub) && re.Sub[i].Op == syntax.OpWordBoundary {
			i++
		}
		if i == len(re.Sub) {
			return nil
		}
		first = re.Sub[i]
	}
	ex := exactStrings(first)
	if slices.Contains(ex, "") {
		return nil
	}
	return ex
}

// anchorsBegin reports whether re holds ^ or \A.
func anchorsBegin(re *syntax.Regexp) bool {
	if re.Op == syntax.OpBeginLine || re.Op == syntax.OpBeginText {
		return true
	}
	return slices.ContainsFunc(re.Sub, anchorsBegin)
}

// asciiFolds reports whether s holds a non-ASCII rune that
// case-insensitive matching folds to an ASCII one (into: the Kelvin sign,
// the long s), and whether it holds one of those that strings.ToLower does
// not make ASCII (lowerMisses: the long s): there the lower-case
// comparison could miss a match, so the prefilter is not used.
func asciiFolds(s string) (into, lowerMisses bool) {
	if asciiOnly(s) {
		return false, false
	}
	for _, r := range s {
		if r < utf8.RuneSelf {
			continue
		}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < utf8.RuneSelf {
				into = true
				if unicode.ToLower(r) >= utf8.RuneSelf {
					return true, true
				}
				break
			}
		}
	}
	return into, false
}

// automaton is an Aho-Corasick automaton over bytes: Scan reports which
// of its patterns occur in a text, in one pass. Its patterns hold no
// upper-case ASCII letter, and it reads one as the lower-case letter: a
// text and its lower-case form give the same result when the text is
// ASCII.
//
// Its transition table is laid out for the scan, which is most of Find's
// own time: bytes that move every state alike share a class (the letters
// with their capitals, every byte no pattern holds), so a state's row is
// a few dozen entries instead of 256; entries are row offsets; the states
// where a pattern ends are numbered last, so that one comparison tells a
// state without any.
type automaton struct {
	class [256]uint8
	nc    int32     // classes
	delta []int32   // state*nc + class -> next state*nc
	outAt int32     // states from outAt/nc on have outputs
	start int32     // the initial state*nc
	out   [][]int32 // (state - outAt/nc) -> patterns ending there (with suffixes)
	plen  []int32   // pattern -> length
}

func newAutomaton(patterns []string) *automaton {
	next := make([][256]int32, 1)
	out := make([][]int32, 1)
	a := &automaton{}
	for _, p := range patterns {
		a.plen = append(a.plen, int32(len(p)))
	}
	for i := range next[0] {
		next[0][i] = -1
	}
	for id, p := range patterns {
		s := int32(0)
		for i := 0; i < len(p); i++ {
			c := p[i]
			if next[s][c] < 0 {
				next = append(next, [256]int32{})
				out = append(out, nil)
				n := int32(len(next) - 1)
				for j := range next[n] {
					next[n][j] = -1
				}
				next[s][c] = n
			}
			s = next[s][c]
		}
		out[s] = append(out[s], int32(id))
	}
	// Breadth first: failure links, outputs of suffixes, full transitions.
	fail := make([]int32, len(next))
	var queue []int32
	for c := 0; c < 256; c++ {
		if n := next[0][c]; n >= 0 {
			fail[n] = 0
			queue = append(queue, n)
		} else {
			next[0][c] = 0
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		out[s] = append(out[s], out[fail[s]]...)
		for c := 0; c < 256; c++ {
			if n := next[s][c]; n >= 0 {
				fail[n] = next[fail[s]][c]
				queue = append(queue, n)
			} else {
				next[s][c] = next[fail[s]][c]
			}
		}
	}
	for s := range next {
		for c := 'A'; c <= 'Z'; c++ {
			next[s][c] = next[s][c+'a'-'A']
		}
	}
	a.compact(next, out)
	return a
}

// compact lays out the complete transition table next and the outputs
// out for the scan: bytes whose columns of next are equal share a class,
// and the states with outputs are renumbered after those without.
func (a *automaton) compact(next [][256]int32, out [][]int32) {
	classes := map[string]uint8{}
	col := make([]byte, 4*len(next))
	for c := 0; c < 256; c++ {
		for s := range next {
			binary.LittleEndian.PutUint32(col[4*s:], uint32(next[s][c]))
		}
		k, ok := classes[string(col)]
		if !ok {
			k = uint8(len(classes))
			classes[string(col)] = k
		}
		a.class[c] = k
	}
	a.nc = int32(len(classes))
	rep := make([]int, a.nc) // a byte of each class
	for c := 255; c >= 0; c-- {
		rep[a.class[c]] = c
	}
	num := make([]int32, len(next)) // old state -> new
	n := int32(0)
	for s := range next {
		if len(out[s]) == 0 {
			num[s] = n
			n++
		}
	}
	a.outAt = n * a.nc
	for s := range next {
		if len(out[s]) > 0 {
			num[s] = n
			a.out = append(a.out, out[s])
			n++
		}
	}
	a.delta = make([]int32, len(next)*int(a.nc))
	for s := range next {
		row := a.delta[num[s]*a.nc:]
		for k, c := range rep {
			row[k] = num[next[s][c]] * a.nc
		}
	}
	a.start = num[0] * a.nc
}

// scan marks in found (when not nil) every pattern occurring in text,
// with in first (when not nil) where its first occurrence starts, and
// appends to occ where each pattern with a non-zero mask occurs.
func (a *automaton) scan(text string, found []bool, first []int32, mask []uint32, occ []occurrence) []occurrence {
	s := a.start
	delta, class := a.delta, &a.class
	for i := 0; i < len(text); i++ {
		s = delta[s+int32(class[text[i]])]
		if s < a.outAt {
			continue
		}
		for _, id := range a.out[(s-a.outAt)/a.nc] {
			if found != nil && !found[id] {
				found[id] = true
				if first != nil {
					first[id] = int32(i+1) - a.plen[id]
				}
			}
			if mask != nil && mask[id] != 0 {
				occ = append(occ, occurrence{start: int32(i+1) - a.plen[id], end: int32(i + 1), mask: mask[id]})
			}
		}
	}
	return occ
}
