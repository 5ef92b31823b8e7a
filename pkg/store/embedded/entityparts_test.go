package embedded_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
)

// TestEntityParts: the parts of an entity many documents name are what
// store.PartOf makes of the whole entity, for every byte bound and set of
// documents: the head, the fragment count, the first fragments in doc-id
// order holding the bytes asked for, and the fragments of the documents
// asked for (absent when a document has none). An absent entity has none.
func TestEntityParts(t *testing.T) {
	s, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	const hub, other = "service:api", "service:db"
	for i := range 12 {
		doc := fmt.Sprintf("d%02d", i)
		desc := strings.Repeat("x", i%4*5) // "", 5, 10, 15 bytes, ...
		ents := []store.EntityContribution{{ID: hub, Type: "service", Name: "API", NameRank: i % 3, Description: desc, TextUnits: []string{"u"}}}
		if i%5 == 0 {
			ents = append(ents, store.EntityContribution{ID: other, Type: "service", Name: "DB", Description: "db", TextUnits: []string{"u"}})
		}
		_, err := s.Apply(ctx, "acme", doc, 1, store.Contributions{TextUnits: []events.TextUnit{{ID: "u", Text: "t"}}, Entities: ents})
		require.NoError(t, err)
	}
	whole, err := s.Entities(ctx, "acme", []string{hub, other})
	require.NoError(t, err)
	require.Len(t, whole[hub].Sources, 12)
	docs := map[string][]string{hub: {"d00", "d07", "d11", "nope"}, other: {"d05", "d06"}}
	for _, bound := range []int{0, 1, 6, 17, 18, 40, 1000} {
		parts, err := s.EntityParts(ctx, "acme", []string{hub, other, "service:none", hub}, bound, docs)
		require.NoError(t, err)
		require.Equal(t, map[string]store.EntityPart{
			hub:   store.PartOf(whole[hub], bound, docs[hub]),
			other: store.PartOf(whole[other], bound, docs[other]),
		}, parts, "bound %d", bound)
	}
	// d00 has no description, d01 5 bytes, d02 10: with their separators
	// they hold 17 bytes, so 17 take the first three fragments, 18 four.
	require.Len(t, store.PartOf(whole[hub], 17, nil).First, 3)
	require.Len(t, store.PartOf(whole[hub], 18, nil).First, 4)
	p := store.PartOf(whole[hub], 1000, docs[hub])
	require.Equal(t, 12, p.Fragments)
	require.Equal(t, whole[hub].Sources, p.First)
	require.Equal(t, []string{"d00", "d07", "d11"}, sortedKeys(p.Of))

	none, err := s.EntityParts(ctx, "other", []string{hub}, 10, nil)
	require.NoError(t, err)
	require.Empty(t, none)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
