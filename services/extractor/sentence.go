package extractor

import (
	"unicode"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/taxonomy"
)

// Sentences splits text into sentence spans (byte offsets into text,
// surrounding space trimmed): at a line break, and after '.', '!' or '?'
// followed by space and then anything but a lower-case letter or digit
// ("e.g. the", "v1. 2" stay whole). Markdown tables and lists are one line
// per row, so each row is a sentence.
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
				if unicode.IsLower(r) || unicode.IsDigit(r) {
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
