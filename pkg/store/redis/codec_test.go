package redis_test

import (
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	json "github.com/segmentio/encoding/json"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/redis"
)

// TestValuesAreStoredCompressed: a hub entity (many like fragments) and a
// source record holding a document's text are SET compressed, smaller than
// their JSON, and read back whole; a plain JSON value (as every value was
// written before compression) still reads.
func TestValuesAreStoredCompressed(t *testing.T) {
	ctx := t.Context()
	c := newClient(t)
	prefix := "kgtest-" + rand.Text()[:12]
	s := redis.New(c, prefix)
	t.Cleanup(func() {
		_ = s.Close()
		deleteKeys(t, prefix)
	})
	u := []string{"u"}
	for i := range 40 {
		inc := fmt.Sprintf("incident:%03d", i)
		_, err := s.Apply(ctx, "acme", fmt.Sprintf("doc-%03d", i), 1, store.Contributions{
			TextUnits: []events.TextUnit{{ID: "u", Text: strings.Repeat(fmt.Sprintf("The broker of doc %d restarted. ", i), 20)}},
			Entities: []store.EntityContribution{
				{ID: inc, Type: "incident", Name: inc, NameRank: 2, TextUnits: u},
				{ID: "service:hub", Type: "service", Name: "Hub", NameRank: 2, TextUnits: u, Description: "the message broker"},
			},
			Edges: []store.EdgeContribution{{Source: inc, Relation: "affected", Target: "service:hub", Weight: 1, TextUnits: u}},
		})
		require.NoError(t, err)
	}
	hub, err := s.Entity(ctx, "acme", "service:hub")
	require.NoError(t, err)
	require.Len(t, hub.Sources, 40)
	rec, err := s.Source(ctx, "acme", "doc-007")
	require.NoError(t, err)

	base := prefix + ":{acme}:g:"
	for key, value := range map[string]any{base + "ent:service:hub": hub, base + "src:doc-007": rec} {
		stored, err := c.Get(ctx, key).Bytes()
		require.NoError(t, err)
		plain, err := json.Marshal(value)
		require.NoError(t, err)
		require.False(t, json.Valid(stored), "%s is stored as plain JSON", key)
		require.Less(t, 2*len(stored), len(plain), "%s: %d bytes stored for %d of JSON", key, len(stored), len(plain))
		back, err := store.DecompressValue(stored)
		require.NoError(t, err)
		require.JSONEq(t, string(plain), string(back))
	}

	old := hub
	old.Name = "Hub as stored before"
	plain, err := json.Marshal(old)
	require.NoError(t, err)
	require.NoError(t, c.Set(ctx, base+"ent:service:hub", plain, 0).Err())
	got, err := s.Entity(ctx, "acme", "service:hub")
	require.NoError(t, err)
	require.Equal(t, old, got)
}
