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

// RawValues gives the value encoding test an adapter's stored bytes of a
// source record (tenant "acme"), and a way to store a record's bytes as
// they are.
type RawValues struct {
	Source    func(docID string) []byte
	PutSource func(docID string, data []byte)
}

// ValueEncoding checks an adapter's value encoding: a source record holding
// a document's text is stored compressed, smaller than half its JSON, and
// read back whole; a plain JSON value (as every value was written before
// compression) still reads; a hub named by every document reads whole.
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
	stored := raw.Source("doc-007")
	plain, err := json.Marshal(rec)
	require.NoError(t, err)
	require.False(t, json.Valid(stored), "the source record is stored as plain JSON")
	require.Less(t, 2*len(stored), len(plain), "the source record: %d bytes stored for %d of JSON", len(stored), len(plain))
	back, err := store.DecompressValue(stored)
	require.NoError(t, err)
	require.JSONEq(t, string(plain), string(back))

	old := rec
	old.Title = "as stored before"
	plain, err = json.Marshal(old)
	require.NoError(t, err)
	raw.PutSource("doc-007", plain)
	got, err := s.Source(ctx, "acme", "doc-007")
	require.NoError(t, err)
	require.Equal(t, old, got)
}
