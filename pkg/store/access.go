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
	keys := make([]string, 0, 1+len(e.Sources))
	if k := NameKey(e.Name); k != "" {
		keys = append(keys, k)
	}
	for _, f := range e.Sources {
		if k := NameKey(f.Name); k != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}
