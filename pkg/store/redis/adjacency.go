package redis

import "strings"

// Adjacency hashes.
//
// The edges leaving an entity are the fields of one hash, g:out:<entity>,
// and those entering it of another, g:in:<entity>; every value is empty.
// Hashes rather than sets because Redis 7.0 keeps a set of strings in a
// hash table (a dict entry and a string per member, ~100 bytes each at the
// benchmark's ids) whatever its size, while it keeps a hash of at most
// hash-max-listpack-entries fields (128 by default) of at most
// hash-max-listpack-value bytes (64) in one listpack, a few bytes of
// framing per field.
//
// A field is the edge id less the endpoint its key already names: an
// edge "<source>|<relation>|<target>" is field "<relation>|<target>" of
// its source's out hash and "<source>|<relation>" of its target's in
// hash. That keeps fields short (further below the listpack's value
// limit) and halves what they hold. An id that does not spell the
// endpoint so (store.Plan keeps the id another spelling of an edge was
// stored under, whatever its endpoints) is stored whole, after a "|":
// a shortened field never starts with one, so each field reads back as
// exactly one id (edgeOfField; readSetsScript does the same in Lua).

// adjacencyField is the field of edge id in the out hash of its source
// (out true) or the in hash of its target, endpoint.
func adjacencyField(id, endpoint string, out bool) string {
	if out {
		if rest, ok := strings.CutPrefix(id, endpoint+"|"); ok && rest != "" && rest[0] != '|' {
			return rest
		}
	} else if rest, ok := strings.CutSuffix(id, "|"+endpoint); ok && rest != "" && rest[0] != '|' {
		return rest
	}
	return "|" + id
}

// edgeOfField is the edge id a field of endpoint's out hash (out true) or
// in hash stands for: adjacencyField's inverse.
func edgeOfField(field, endpoint string, out bool) string {
	if whole, ok := strings.CutPrefix(field, "|"); ok {
		return whole
	}
	if out {
		return endpoint + "|" + field
	}
	return field + "|" + endpoint
}

// fieldNames returns the fields of an adjacency hash (strings boxed in
// members) for HDEL.
func fieldNames(members []any) []string {
	out := make([]string, len(members))
	for i, m := range members {
		out[i], _ = m.(string)
	}
	return out
}

// emptyValued returns the HSET arguments giving every field of members
// the empty value.
func emptyValued(members []any) []any {
	out := make([]any, 0, 2*len(members))
	for _, m := range members {
		out = append(out, m, "")
	}
	return out
}
