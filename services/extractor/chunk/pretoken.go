package chunk

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file splits text into cl100k_base tokens without a regular
// expression engine. tiktoken-go runs cl100kPattern with a backtracking
// engine over the text's runes, then converts every piece back to a
// string: most of the chunker's time. nextPiece states the same pattern
// as code, and tokenEnds encodes each piece as tiktoken does (a piece that
// is a token, else byte-pair merges by rank), giving token boundaries,
// not ids: the chunker needs no more. TestTokenEndsEqualTiktoken checks
// both against tiktoken-go.

// isLetter, isNumber and isSpace are the classes cl100kPattern names:
// \p{L}, \p{N} and \s as regexp2 reads them (unicode.IsSpace).
func isLetter(r rune) bool {
	return r < utf8.RuneSelf && ('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') || r >= utf8.RuneSelf && unicode.IsLetter(r)
}
func isNumber(r rune) bool { return '0' <= r && r <= '9' || r >= utf8.RuneSelf && unicode.IsNumber(r) }
func isSpace(r rune) bool  { return unicode.IsSpace(r) }

// isOther is [^\s\p{L}\p{N}].
func isOther(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }

// runeAt decodes the rune at byte offset i of s (utf8.RuneError and 0
// past its end).
func runeAt(s string, i int) (rune, int) {
	if i >= len(s) {
		return utf8.RuneError, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// skip returns the offset after the run of runes of s from i that in
// accepts, taking at most n of them (n < 0: no bound).
func skip(s string, i int, in func(rune) bool, n int) int {
	for n != 0 && i < len(s) {
		r, w := runeAt(s, i)
		if !in(r) {
			break
		}
		i += w
		n--
	}
	return i
}

// skipLetters is skip(s, i, isLetter, -1), ASCII letters told by a
// byte test rather than through the function and a decoded rune: most
// pieces are words.
func skipLetters(s string, i int) int {
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if c|0x20 < 'a' || c|0x20 > 'z' {
				return i
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) {
			return i
		}
		i += w
	}
	return i
}

// contraction returns the length of a contraction at s[i:] that the
// pattern's first alternative matches ((?i:'s|'t|'re|'ve|'m|'ll|'d), in
// that order), or 0. Only ASCII letters fold to those letters.
func contraction(s string, i int) int {
	if s[i] != '\'' || i+1 >= len(s) {
		return 0
	}
	lower := func(j int) byte {
		if j >= len(s) {
			return 0
		}
		c := s[j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		return c
	}
	switch c := lower(i + 1); {
	case c == 's' || c == 't':
		return 2
	case c == 'r' && lower(i+2) == 'e', c == 'v' && lower(i+2) == 'e':
		return 3
	case c == 'm':
		return 2
	case c == 'l' && lower(i+2) == 'l':
		return 3
	case c == 'd':
		return 2
	}
	return 0
}

// nextPiece returns the end of the piece of cl100kPattern that starts at
// byte offset i of s (valid UTF-8, i < len(s)): the match of the first
// alternative that matches there, as a backtracking engine finds it.
func nextPiece(s string, i int) int {
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if n := contraction(s, i); n > 0 {
		return i + n
	}
	c, w := runeAt(s, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if isLetter(c) {
		return skipLetters(s, i+w)
	}
	if c != '\r' && c != '\n' && !isNumber(c) {
		if r, _ := runeAt(s, i+w); i+w < len(s) && isLetter(r) {
			return skipLetters(s, i+w)
		}
	}
	// \p{N}{1,3}
	if isNumber(c) {
		return skip(s, i, isNumber, 3)
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	j := i
	if c == ' ' {
		j += w
	}
	if r, _ := runeAt(s, j); j < len(s) && isOther(r) {
		j = skip(s, j, isOther, -1)
		return skip(s, j, func(r rune) bool { return r == '\r' || r == '\n' }, -1)
	}
	// c is white space from here on.
	end := skip(s, i, isSpace, -1)
	// \s*[\r\n]+: up to the run's last line break.
	for k := end - 1; k >= i; k-- {
		if s[k] == '\r' || s[k] == '\n' {
			return k + 1
		}
	}
	// \s+(?!\S): the run at the text's end, else the run but its last
	// rune (which the next piece begins with)...
	if end == len(s) {
		return end
	}
	_, lw := utf8.DecodeLastRuneInString(s[:end])
	if end-lw > i {
		return end - lw
	}
	// ...and \s+ a single white-space rune.
	return end
}

// tokenEnds appends to ends the byte offset at which every cl100k_base
// token of text (valid UTF-8) ends, as EncodeOrdinary splits it.
func (t *Tokenizer) tokenEnds(text string, ends []int) []int {
	for i := 0; i < len(text); {
		e := nextPiece(text, i)
		if _, ok := t.ranks.rank(text[i:e]); ok {
			ends = append(ends, e)
		} else {
			ends = t.mergedEnds(text[i:e], i, ends)
		}
		i = e
	}
	return ends
}

// mergedEnds is mergeEnds, the ends of a short piece remembered
// (mergeCache).
func (t *Tokenizer) mergedEnds(piece string, off int, ends []int) []int {
	if len(piece) > maxMerged {
		return t.mergeEnds(piece, off, ends)
	}
	slot := t.merged.slot(piece)
	if mp := slot.Load(); mp != nil && mp.piece == piece {
		for i := 0; i < len(mp.ends); i++ {
			ends = append(ends, off+int(mp.ends[i]))
		}
		return ends
	}
	from := len(ends)
	ends = t.mergeEnds(piece, off, ends)
	var b strings.Builder
	b.Grow(len(piece) + len(ends) - from)
	b.WriteString(piece)
	for _, e := range ends[from:] {
		b.WriteByte(byte(e - off))
	}
	s := b.String()
	slot.Store(&mergedPiece{piece: s[:len(piece)], ends: s[len(piece):]})
	return ends
}

// mergeEnds appends to ends the ends (plus off) of the tokens byte-pair
// merging makes of piece: tiktoken's merge, repeatedly joining the
// adjacent pair whose joined bytes have the lowest rank (the first such
// pair on ties).
func (t *Tokenizer) mergeEnds(piece string, off int, ends []int) []int {
	type part struct{ start, rank int }
	var buf [32]part // most pieces that are no token are short
	parts := buf[:0]
	for i := 0; i <= len(piece); i++ {
		parts = append(parts, part{i, math.MaxInt})
	}
	rank := func(i, skip int) int {
		if i+skip+2 < len(parts) {
			if r, ok := t.ranks.rank(piece[parts[i].start:parts[i+skip+2].start]); ok {
				return r
			}
		}
		return math.MaxInt
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i].rank = rank(i, 0)
	}
	for len(parts) > 1 {
		minRank, minIdx := math.MaxInt, -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i].rank < minRank {
				minRank, minIdx = parts[i].rank, i
			}
		}
		if minIdx < 0 {
			break
		}
		i := minIdx
		parts[i].rank = rank(i, 1)
		if i > 0 {
			parts[i-1].rank = rank(i-1, 1)
		}
		parts = append(parts[:i+1], parts[i+2:]...)
	}
	for _, p := range parts[1:] {
		ends = append(ends, off+p.start)
	}
	return ends
}
