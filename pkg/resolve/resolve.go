// Package resolve turns mentions into canonical, typed entity ids. The
// normalisation key folds case, spaces, hyphens, underscores and dots, so
// "cert-manager", "Cert Manager" and "certmanager" are one component.
package resolve

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// ErrInvalidRef means a TYPE:NAME reference is malformed.
var ErrInvalidRef = errors.New("invalid entity reference")

// Key is the normalisation key of a name: NFKC, lower case, with every rune
// that is not a letter or digit removed. A name with no letter or digit keys
// to its trimmed lower-case form so it is never empty.
func Key(name string) string {
	s := norm.NFKC.String(name)
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return strings.ToLower(strings.TrimSpace(s))
	}
	return b.String()
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
