// Package resolve turns mentions into canonical, typed entity ids. The
// normalisation key folds case, spaces, hyphens, underscores and dots, so
// "cert-manager", "Cert Manager" and "certmanager" are one component.
package resolve

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/errkind"
	"golang.org/x/text/unicode/norm"
)

// ErrInvalidRef means a TYPE:NAME reference is malformed.
var ErrInvalidRef = errkind.New(errkind.Invalid, "invalid entity reference")

// Key is the normalisation key of a name: NFKC, lower case, with every rune
// that is not a letter or digit removed, and the last word of a name of
// several words in the singular unless the name has digits ("Kafka
// brokers" and "Kafka broker" are one key; see singular). A name with no letter or digit keys to its trimmed
// lower-case form so it is never empty.
func Key(name string) string {
	s := name
	if ascii(s) {
		return asciiKey(s)
	}
	s = norm.NFKC.String(s)
	words := strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if len(words) == 0 {
		return strings.ToLower(strings.TrimSpace(s))
	}
	// A code-like name with digits ("cr2-esams", "asw2-a-eqiad") is an
	// identifier, not English.
	code := strings.IndexFunc(s, unicode.IsDigit) >= 0
	var b strings.Builder
	for i, w := range words {
		if i == len(words)-1 && i > 0 && !code {
			w = singular(w)
		}
		b.WriteString(strings.ToLower(w))
	}
	return b.String()
}

// asciiKey is Key of an ASCII name (NFKC leaves ASCII as it is), in one
// pass without splitting the name into words: the gazetteer matcher asks
// for the key of every run of words of every text.
func asciiKey(s string) string {
	isWord := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	words, code := 0, false
	lastStart, lastEnd := -1, -1
	for i := 0; i < len(s); {
		if !isWord(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isWord(s[j]) {
			if s[j] >= '0' && s[j] <= '9' {
				code = true
			}
			j++
		}
		words++
		lastStart, lastEnd = i, j
		i = j
	}
	if words == 0 {
		return strings.ToLower(strings.TrimSpace(s))
	}
	var buf [64]byte
	b := buf[:0]
	for i := 0; i < lastStart; i++ {
		if c := s[i]; isWord(c) {
			b = append(b, lower(c))
		}
	}
	last := s[lastStart:lastEnd]
	if words > 1 && !code {
		last = singular(last)
	}
	for i := 0; i < len(last); i++ {
		b = append(b, lower(last[i]))
	}
	return string(b)
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// singular folds a plural English noun to its singular form, so that the
// inflections of one name share a key. It touches only lower- or
// title-case words of four letters or more (an acronym such as "EBS" or
// "IOPS" stays), and leaves alone the endings that are rarely plurals
// ("status", "redis", "kubernetes", "devops", "atlas", "class").
func singular(w string) string {
	if len(w) < 4 || strings.IndexFunc(w, func(r rune) bool { return r > unicode.MaxASCII || !unicode.IsLetter(r) }) >= 0 {
		return w
	}
	if strings.ToUpper(w) == w || strings.IndexFunc(w[1:], unicode.IsUpper) >= 0 {
		return w // an acronym or a CamelCase name
	}
	l := strings.ToLower(w)
	switch {
	case !strings.HasSuffix(l, "s"):
		return w
	case strings.HasSuffix(l, "ss"), strings.HasSuffix(l, "us"), strings.HasSuffix(l, "is"),
		strings.HasSuffix(l, "os"), strings.HasSuffix(l, "as"), strings.HasSuffix(l, "ops"),
		strings.HasSuffix(l, "etes"), strings.HasSuffix(l, "ics"), strings.HasSuffix(l, "ies") && len(l) == 4:
		return w
	case strings.HasSuffix(l, "ies"):
		return w[:len(w)-3] + "y"
	case strings.HasSuffix(l, "sses"), strings.HasSuffix(l, "shes"), strings.HasSuffix(l, "xes"), strings.HasSuffix(l, "zzes"),
		strings.HasSuffix(l, "ches") && !strings.HasSuffix(l, "aches"):
		return w[:len(w)-2]
	}
	return w[:len(w)-1]
}

// Type normalises an entity type or relation name to lower-case snake_case.
func Type(t string) string {
	var b strings.Builder
	prevUnderscore := true
	for _, r := range strings.TrimSpace(t) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
			prevUnderscore = false
		default:
			if !prevUnderscore {
				b.WriteByte('_')
				prevUnderscore = true
			}
		}
	}
	return strings.TrimSuffix(b.String(), "_")
}

// ID returns the canonical id of an entity of type typ named name.
func ID(typ, name string) string { return Type(typ) + ":" + Key(name) }

// ParseRef parses "TYPE:NAME" into a canonical id.
func ParseRef(ref string) (string, error) {
	typ, name, ok := strings.Cut(ref, ":")
	if !ok || Type(typ) == "" || strings.TrimSpace(name) == "" {
		return "", fmt.Errorf("%w: %q must be TYPE:NAME", ErrInvalidRef, ref)
	}
	return ID(typ, name), nil
}

// SplitID splits a canonical id into type and key.
func SplitID(id string) (typ, key string) {
	typ, key, _ = strings.Cut(id, ":")
	return typ, key
}
