package chunk

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/taxonomy"
)

// Sentences splits text into sentence spans (byte offsets into text,
// surrounding space trimmed): at a line break, and after '.', '!' or '?'
// followed by space and then anything but a digit ("v1. 2" stays whole).
// A lower-case start ends a sentence too, since postmortems start
// sentences with identifiers ("... expired. cert-manager could not"),
// except after an abbreviation or an initial ("e.g. the", "etc. and"),
// or after '!' or '?'. Markdown tables and lists are one line per row,
// so each row is a sentence.
func Sentences(text string) []taxonomy.Span {
	var out []taxonomy.Span
	emit := func(s, e int) {
		for s < e {
			r, n := utf8.DecodeRuneInString(text[s:])
			if !unicode.IsSpace(r) {
				break
			}
			s += n
		}
		for e > s {
			r, n := utf8.DecodeLastRuneInString(text[:e])
			if !unicode.IsSpace(r) {
				break
			}
			e -= n
		}
		if e > s {
			out = append(out, taxonomy.Span{Start: s, End: e})
		}
	}
	start := 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '\n':
			emit(start, i)
			start = i + 1
		case '.', '!', '?':
			j := i + 1
			for j < len(text) && (text[j] == '"' || text[j] == '\'' || text[j] == ')') {
				j++
			}
			if j < len(text) && text[j] != ' ' && text[j] != '\t' && text[j] != '\n' && text[j] != '\r' {
				continue
			}
			k := j
			for k < len(text) && (text[k] == ' ' || text[k] == '\t') {
				k++
			}
			if k < len(text) {
				r, _ := utf8.DecodeRuneInString(text[k:])
				if unicode.IsDigit(r) || (unicode.IsLower(r) && (c != '.' || abbreviation(text[:i]))) {
					continue
				}
			}
			emit(start, j)
			start = j
		}
	}
	emit(start, len(text))
	return out
}

// abbreviated reports whether w (lower case, without its periods at
// either end) is a word that ends with a period inside a sentence.
func abbreviated(w string) bool {
	switch w {
	case "e.g", "i.e", "eg", "ie", "etc", "vs", "cf", "approx", "incl", "resp", "a.k.a", "aka", "no", "fig",
		"inc", "ltd", "corp", "mr", "ms", "dr", "st", "al", "ca":
		return true
	}
	return false
}

// abbreviation reports whether before (the text up to a period) ends with
// an abbreviation or a one-letter initial.
func abbreviation(before string) bool {
	j := len(before)
	for j > 0 {
		r, n := utf8.DecodeLastRuneInString(before[:j])
		if !unicode.IsLetter(r) && r != '.' {
			break
		}
		j -= n
	}
	w := strings.ToLower(strings.Trim(before[j:], "."))
	return utf8.RuneCountInString(w) == 1 || abbreviated(w)
}
