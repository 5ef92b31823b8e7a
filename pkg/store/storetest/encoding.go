package storetest

import (
	"fmt"
	"strings"
	"testing"

	json "github.com/segmentio/encoding/json"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
)

// RawValues gives the value encoding test an adapter's stored bytes: an
// entity's and a source record's (tenant "acme"), and a way to store an
// entity's bytes as they are.
type RawValues struct {
	Entity, Source func(id string) []byte
	PutEntity      func(id string, data []byte)
}

// ValueEncoding checks an adapter's value encoding: a hub entity (many like
// fragments) and a source record holding a document's text are stored
// compressed, smaller than half their JSON, and read back whole; a plain
// JSON value (as every value was written before compression) still reads.
func ValueEncoding(t *testing.T, s store.GraphStore, raw RawValues) {
	ctx := t.Context()
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
	for name, v := range map[string]struct {
		stored []byte
		value  any
	}{"the hub": {raw.Entity("service:hub"), hub}, "a source record": {raw.Source("doc-007"), rec}} {
		plain, err := json.Marshal(v.value)
		require.NoError(t, err)
		require.False(t, json.Valid(v.stored), "%s is stored as plain JSON", name)
		require.Less(t, 2*len(v.stored), len(plain), "%s: %d bytes stored for %d of JSON", name, len(v.stored), len(plain))
		back, err := store.DecompressValue(v.stored)
		require.NoError(t, err)
		require.JSONEq(t, string(plain), string(back))
	}

	old := hub
	old.Name = "Hub as stored before"
	plain, err := json.Marshal(old)
	require.NoError(t, err)
	raw.PutEntity("service:hub", plain)
	got, err := s.Entity(ctx, "acme", "service:hub")
	require.NoError(t, err)
	require.Equal(t, old, got)
}
