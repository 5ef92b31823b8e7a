package store

import (
	"slices"
	"strings"
)

// NameKey is the key of the name index: a name lower-cased with its runs of
// white space collapsed.
func NameKey(name string) string {
	return strings.ToLower(strings.Join(strings.Fields(name), " "))
}

// NameKeys returns the distinct name keys an entity is indexed under: its
// display name and every fragment's spelling, sorted.
func NameKeys(e Entity) []string {
	return nameKeys(e.Name, len(e.Sources), func(i int) string { return e.Sources[i].Name })
}

// nameKeys is the sorted distinct name keys of a display name and n
// spellings.
func nameKeys(name string, n int, spelling func(i int) string) []string {
	keys := make([]string, 0, 1+n)
	if k := NameKey(name); k != "" {
		keys = append(keys, k)
	}
	for i := range n {
		if k := NameKey(spelling(i)); k != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}
