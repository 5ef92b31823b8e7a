package embedded

import (
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

// The records and source rows hold JSON written by appendItemJSON and
// appendSourceJSON: the bytes encoding/json's Marshal writes (a test holds
// them to it), without its reflection and allocations. Every source of
// every item written is a row, a hub report's thousands of them.

// appendSourceJSON appends json.Marshal(s).
func appendSourceJSON(dst []byte, s vector.Source) []byte {
	dst = append(dst, `{"doc_id":`...)
	dst = appendJSONString(dst, s.DocID)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, s.Version, 10)
	if s.TextUnit != "" {
		dst = append(dst, `,"text_unit":`...)
		dst = appendJSONString(dst, s.TextUnit)
	}
	dst = append(dst, `,"acl":`...)
	return append(appendACLJSON(dst, s.ACL), '}')
}

// appendACLJSON appends json.Marshal(a).
func appendACLJSON(dst []byte, a provenance.ACL) []byte {
	dst = append(dst, '{')
	n := 0
	sep := func() {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
	}
	if a.Public {
		sep()
		dst = append(dst, `"public":true`...)
	}
	if len(a.Groups) > 0 {
		sep()
		dst = appendJSONStrings(append(dst, `"groups":`...), a.Groups)
	}
	if len(a.Principals) > 0 {
		sep()
		dst = appendJSONStrings(append(dst, `"principals":`...), a.Principals)
	}
	if !a.Writers.IsZero() {
		sep()
		dst = append(dst, `"writers":{`...)
		if len(a.Writers.Groups) > 0 {
			dst = appendJSONStrings(append(dst, `"groups":`...), a.Writers.Groups)
		}
		if len(a.Writers.Principals) > 0 {
			if len(a.Writers.Groups) > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONStrings(append(dst, `"principals":`...), a.Writers.Principals)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendItemJSON appends json.Marshal(it) of an item without sources (a
// record's JSON: its sources are rows, its vector is not JSON).
func appendItemJSON(dst []byte, it vector.Item) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, it.ID)
	dst = append(dst, `,"kind":`...)
	dst = appendJSONString(dst, string(it.Kind))
	dst = append(dst, `,"text":`...)
	dst = appendJSONString(dst, it.Text)
	dst = append(dst, `,"sources":null`...)
	if len(it.Metadata) > 0 {
		dst = append(dst, `,"metadata":{`...)
		keys := make([]string, 0, len(it.Metadata))
		for k := range it.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendJSONString(dst, k), ':')
			dst = appendJSONString(dst, it.Metadata[k])
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendJSONStrings appends a JSON array of ss.
func appendJSONStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, s)
	}
	return append(dst, ']')
}

// appendJSONString appends s quoted as encoding/json quotes a string: HTML
// characters, control characters, U+2028 and U+2029 escaped, invalid UTF-8
// replaced by \ufffd.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
