package taxonomy

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// A cue written as a list of whole words ("\b(overload\w*|saturated)\b")
// matches, in ASCII text, exactly the maximal runs of word bytes
// ([0-9A-Za-z_], what \b separates) whose lower case is one of its words
// or, for a word ending in \w* or \w+, starts with it: such a match holds
// word bytes only and starts and ends at a word boundary, which inside a
// run of word bytes there is none of. Looking the runs up finds what the
// regular expression finds without trying it at every byte. So it does
// in a text outside ASCII that holds no rune that case folding takes to
// an ASCII letter (the Kelvin sign, the long s; WordListApplies): there
// every other rune is, as to \b, no word byte, and no letter of the list
// matches it.
//
// A list may hold phrases too ("ran out", "could not", "timed\s+out"):
// words joined by spaces, apostrophes or \s+. A phrase starts at the
// start of a run of word bytes and, after its last word, ends where the
// run does; whether a text holds one is told by trying the phrases at
// each run's start (Match). Where a match ends may then depend on
// the order of the alternatives ("\b(a|a b)\b" matches "a" of "a b"):
// FindAll finds where matches start so, and has the expression, anchored
// there, tell where each ends.

// WordList is an expression that matches whole words only, as a list of
// them (see ParseWordList).
type WordList struct {
	items []wordItem // by first byte
	from  [257]uint16
	// phrases is set when an item holds a byte that is no word byte.
	phrases bool
	// anchored is the expression anchored at the start of the text, for
	// a list with phrases.
	anchored *regexp.Regexp
}

// wordItem is a lower-case word or phrase (spaceRun standing for \s+);
// tail says what may follow it in the run: nothing (0), any word bytes
// (1, \w*) or at least one (2, \w+).
type wordItem struct {
	s    string
	tail uint8
	// head is how many word bytes s starts with, and skip how many of the
	// items after it (of its first byte) start with those bytes too: a
	// text where the head is not fails them all (matchAt).
	head, skip uint16
}

// maxWordItems bounds the words of a WordList.
const maxWordItems = 1024

// spaceRun stands for \s+ in a phrase.
const spaceRun = 0x01

// gapWord stands for \w+\s+ in a phrase, a word of a gap between two of
// its words ("surge of (\w+\s+){0,3}traffic"). In a text a list applies
// to it is a whole run of word bytes and the white space after it: \w+
// must stop at white space, \s+ before a word byte.
const gapWord = 0x02

// ParseWordList returns the word list expr is, read as a case-insensitive
// expression ("(?i)"+expr, as cues are compiled), or nil when it is not
// one: a list of branches, each \b, words of ASCII letters, digits and
// underscores (alternatives, optional parts, a final \w* or \w+) maybe
// joined by spaces, apostrophes or \s+ into phrases, \b.
func ParseWordList(expr string) *WordList {
	re, err := syntax.Parse("(?i)"+expr, syntax.Perl)
	if err != nil {
		return nil
	}
	re = re.Simplify()
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	branches := []*syntax.Regexp{re}
	if re.Op == syntax.OpAlternate {
		branches = re.Sub
	}
	var items []wordItem
	for _, b := range branches {
		for b.Op == syntax.OpCapture {
			b = b.Sub[0]
		}
		if b.Op != syntax.OpConcat || len(b.Sub) < 3 || b.Sub[0].Op != syntax.OpWordBoundary ||
			b.Sub[len(b.Sub)-1].Op != syntax.OpWordBoundary {
			return nil
		}
		l, ok := concatWords(b.Sub[1 : len(b.Sub)-1])
		if !ok {
			return nil
		}
		items = append(items, l...)
	}
	if len(items) == 0 || len(items) > maxWordItems {
		return nil
	}
	w := &WordList{}
	for _, it := range items {
		// A list matching the empty word matches at every boundary; an
		// item must start and end with a word byte for the boundaries
		// to be its run's; \s+ must be followed by a byte it cannot take.
		if it.s == "" || !isWordByte(it.s[0]) || !isWordByte(it.s[len(it.s)-1]) {
			return nil
		}
		for i := 0; i < len(it.s); i++ {
			if c := it.s[i]; !isWordByte(c) {
				w.phrases = true
				if (c == spaceRun || c == gapWord) && (it.s[i+1] == ' ' || it.s[i+1] == spaceRun) {
					return nil
				}
			}
		}
	}
	for c := 0; c < 256; c++ {
		w.from[c] = uint16(len(w.items))
		for _, it := range items {
			if it.s[0] == byte(c) {
				w.items = append(w.items, it)
			}
		}
	}
	w.from[256] = uint16(len(w.items))
	for x := range w.items {
		it := &w.items[x]
		for int(it.head) < len(it.s) && isWordByte(it.s[it.head]) {
			it.head++
		}
		head := it.s[:it.head]
		for y := x + 1; y < len(w.items) && w.items[y].s[0] == it.s[0] && strings.HasPrefix(w.items[y].s, head); y++ {
			it.skip++
		}
	}
	if w.phrases {
		if w.anchored, err = regexp.Compile("(?i)^(?:" + expr + ")"); err != nil {
			return nil
		}
	}
	return w
}

// concatWords is the language of the concatenation of subs as words.
func concatWords(subs []*syntax.Regexp) ([]wordItem, bool) {
	cur := []wordItem{{}}
	for i := 0; i < len(subs); i++ {
		sub := subs[i]
		if i+1 < len(subs) && isGapWord(sub, subs[i+1]) {
			// \w+\s+ inside the concatenation: one gap word.
			for k := range cur {
				if cur[k].tail != 0 {
					return nil, false
				}
				cur[k].s += string(rune(gapWord))
			}
			i++
			continue
		}
		if (sub.Op == syntax.OpStar || sub.Op == syntax.OpPlus) && wordClass(sub.Sub[0]) {
			for i := range cur {
				if cur[i].tail != 0 {
					return nil, false
				}
				cur[i].tail = 1
				if sub.Op == syntax.OpPlus {
					cur[i].tail = 2
				}
			}
			continue
		}
		l, ok := []wordItem{{s: string(rune(spaceRun))}}, true
		if sub.Op != syntax.OpPlus || !spaceClass(sub.Sub[0]) {
			l, ok = regexpWords(sub)
		}
		if !ok || len(cur)*len(l) > maxWordItems {
			return nil, false
		}
		next := make([]wordItem, 0, len(cur)*len(l))
		for _, a := range cur {
			for _, b := range l {
				if a.tail != 0 {
					return nil, false
				}
				next = append(next, wordItem{s: a.s + b.s, tail: b.tail})
			}
		}
		cur = next
	}
	return cur, true
}

// regexpWords is the language of re as words, false when it is not a
// finite list of them (each maybe with a tail).
func regexpWords(re *syntax.Regexp) ([]wordItem, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return []wordItem{{}}, true
	case syntax.OpLiteral:
		var b strings.Builder
		for _, r := range re.Rune {
			c, ok := wordRune(r, re.Flags&syntax.FoldCase != 0)
			if r == ' ' || r == '\'' {
				c, ok = byte(r), true
			}
			if !ok {
				return nil, false
			}
			b.WriteByte(c)
		}
		return []wordItem{{s: b.String()}}, true
	case syntax.OpCharClass:
		// The class is its ASCII members, which must be word bytes, the
		// letters in both cases: beyond ASCII it may hold only the runes
		// folding to ASCII letters, which a text it is used on lacks.
		if !foldsBeyondASCII(re.Rune) {
			return nil, false
		}
		var out []wordItem
		seen := map[byte]bool{}
		for c := 0; c < 128; c++ {
			if !inClass(re.Rune, rune(c)) {
				continue
			}
			lc, ok := wordRune(rune(c), true)
			if !ok || lc != byte(c) && !inClass(re.Rune, rune(lc)) || lc == byte(c) && lc >= 'a' && lc <= 'z' && !inClass(re.Rune, rune(lc-'a'+'A')) {
				return nil, false
			}
			if !seen[lc] {
				seen[lc] = true
				out = append(out, wordItem{s: string(lc)})
			}
		}
		return out, len(out) > 0
	case syntax.OpCapture:
		return regexpWords(re.Sub[0])
	case syntax.OpQuest:
		l, ok := regexpWords(re.Sub[0])
		if !ok {
			return nil, false
		}
		return append([]wordItem{{}}, l...), true
	case syntax.OpAlternate:
		var out []wordItem
		for _, sub := range re.Sub {
			l, ok := regexpWords(sub)
			if !ok || len(out)+len(l) > maxWordItems {
				return nil, false
			}
			out = append(out, l...)
		}
		return out, true
	case syntax.OpConcat:
		return concatWords(re.Sub)
	}
	return nil, false
}

// isGapWord reports whether a followed by b is \w+\s+.
func isGapWord(a, b *syntax.Regexp) bool {
	return a.Op == syntax.OpPlus && wordClass(a.Sub[0]) && b.Op == syntax.OpPlus && spaceClass(b.Sub[0])
}

// wordRune returns the byte r is in lower case when r is an ASCII word
// byte; a letter must be matched in either case (fold).
func wordRune(r rune, fold bool) (byte, bool) {
	switch {
	case 'a' <= r && r <= 'z':
		return byte(r), fold
	case 'A' <= r && r <= 'Z':
		return byte(r - 'A' + 'a'), fold
	case '0' <= r && r <= '9', r == '_':
		return byte(r), true
	}
	return 0, false
}

// inClass reports whether r is in the ranges of a character class.
func inClass(ranges []rune, r rune) bool {
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i] <= r && r <= ranges[i+1] {
			return true
		}
	}
	return false
}

// foldsBeyondASCII reports whether the members of a class outside ASCII
// are runes that case folding takes to ASCII letters (the Kelvin sign,
// the long s), if any.
func foldsBeyondASCII(ranges []rune) bool {
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := max(ranges[i], utf8.RuneSelf); r <= ranges[i+1]; r++ {
			if r != '\u017f' && r != '\u212a' {
				return false
			}
		}
	}
	return true
}

// wordClass reports whether re is \w as a text WordListApplies to sees
// it: a class whose ASCII members are the word bytes, and no others but
// those folding to them.
func wordClass(re *syntax.Regexp) bool {
	if re.Op != syntax.OpCharClass || !foldsBeyondASCII(re.Rune) {
		return false
	}
	for c := rune(0); c < 128; c++ {
		_, word := wordRune(c, true)
		if inClass(re.Rune, c) != word {
			return false
		}
	}
	return true
}

// spaceClass reports whether re is \s: the class [\t\n\f\r ].
func spaceClass(re *syntax.Regexp) bool {
	if re.Op != syntax.OpCharClass {
		return false
	}
	for c := rune(0); c < utf8.RuneSelf; c++ {
		if inClass(re.Rune, c) != (c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == ' ') {
			return false
		}
	}
	return len(re.Rune) > 0 && re.Rune[len(re.Rune)-1] < utf8.RuneSelf
}

// isWordByte reports whether c is a word byte ([0-9A-Za-z_]).
func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// match reports whether the run of word bytes w is a word of the list.
func (l *WordList) match(w string) bool {
	c := w[0]
	if 'A' <= c && c <= 'Z' {
		c += 'a' - 'A'
	}
	for _, it := range l.items[l.from[c]:l.from[int(c)+1]] {
		switch it.tail {
		case 0:
			if len(w) != len(it.s) {
				continue
			}
		case 2:
			if len(w) <= len(it.s) {
				continue
			}
		default:
			if len(w) < len(it.s) {
				continue
			}
		}
		if lowerPrefix(w, it.s) {
			return true
		}
	}
	return false
}

// matchAt reports whether a word or phrase of the list starts at s[i], the
// start of a run of word bytes.
func (l *WordList) matchAt(s string, i int) bool {
	c := s[i]
	if 'A' <= c && c <= 'Z' {
		c += 'a' - 'A'
	}
	items := l.items[l.from[c]:l.from[int(c)+1]]
	for x := 0; x < len(items); x++ {
		it := &items[x]
		if !lowerAt(s, i, it.s[:it.head]) {
			x += int(it.skip)
			continue
		}
		j, ok := i, true
		for k := 0; k < len(it.s) && ok; k++ {
			if it.s[k] == spaceRun {
				n := j
				for n < len(s) && asciiSpace(s[n]) {
					n++
				}
				ok, j = n > j, n
				continue
			}
			if it.s[k] == gapWord {
				n := j
				for n < len(s) && isWordByte(s[n]) {
					n++
				}
				m := n
				for m < len(s) && asciiSpace(s[m]) {
					m++
				}
				ok, j = n > j && m > n, m
				continue
			}
			if j >= len(s) {
				ok = false
				break
			}
			b := s[j]
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			ok = b == it.s[k]
			j++
		}
		if !ok {
			continue
		}
		// The run goes on after the last word as its tail allows.
		n := j
		for n < len(s) && isWordByte(s[n]) {
			n++
		}
		if it.tail == 0 && n == j || it.tail == 1 || it.tail == 2 && n > j {
			return true
		}
	}
	return false
}

// lowerAt reports whether the ASCII lower case of s holds p (lower
// case) at i.
func lowerAt(s string, i int, p string) bool {
	if len(s)-i < len(p) {
		return false
	}
	return lowerPrefix(s[i:], p)
}

// lowerPrefix reports whether the ASCII lower case of w starts with p
// (lower case, no longer than w).
func lowerPrefix(w, p string) bool {
	for i := 0; i < len(p); i++ {
		c := w[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != p[i] {
			return false
		}
	}
	return true
}

// WordListApplies reports whether a WordList matches s as its expression
// does: s holds no rune that case folding takes to an ASCII letter.
func WordListApplies(s string) bool {
	into, _ := asciiFolds(s)
	return !into
}

// Match is the expression's MatchString on a text for which
// WordListApplies holds.
func (l *WordList) Match(s string) bool {
	for i := 0; i < len(s); {
		if !isWordByte(s[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && isWordByte(s[j]) {
			j++
		}
		if l.phrases && l.matchAt(s, i) || !l.phrases && l.match(s[i:j]) {
			return true
		}
		i = j
	}
	return false
}

// Finds reports whether FindAll can be used: it can for every list.
func (l *WordList) Finds() bool { return true }

// FindAll is the expression's FindAllStringIndex(s, -1) on a text for
// which WordListApplies holds.
func (l *WordList) FindAll(s string) [][]int {
	if l.phrases {
		return l.findPhrases(s)
	}
	var out [][]int
	for i := 0; i < len(s); {
		if !isWordByte(s[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && isWordByte(s[j]) {
			j++
		}
		if l.match(s[i:j]) {
			out = append(out, []int{i, j})
		}
		i = j
	}
	return out
}

// findPhrases is FindAll for a list with phrases. A match starts at the
// start of a run of word bytes where a word or phrase of the list starts
// (matchAt), the first such at or after the end of the previous match,
// and ends where the expression matching from there ends: at the end of a
// run, as the list's items end with a word byte before the expression's
// final \b. The byte before a run's start is no word byte (or there is
// none), so \b holds there in s[i:] as in s.
func (l *WordList) findPhrases(s string) [][]int {
	var out [][]int
	for i := 0; i < len(s); {
		if !isWordByte(s[i]) {
			i++
			continue
		}
		if l.matchAt(s, i) {
			if m := l.anchored.FindStringIndex(s[i:]); m != nil && m[1] > 0 {
				out = append(out, []int{i, i + m[1]})
				i += m[1]
				continue
			}
		}
		for i++; i < len(s) && isWordByte(s[i]); i++ {
		}
	}
	return out
}
