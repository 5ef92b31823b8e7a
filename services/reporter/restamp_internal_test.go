package reporter

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
)

// TestBoundedIndexWritesWhatTheSnapshotWrites: the reports of a few
// communities, written from their members' neighbourhood only, equal those
// written from the whole graph, input hashes included.
func TestBoundedIndexWritesWhatTheSnapshotWrites(t *testing.T) {
	ctx := t.Context()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	w, err := New(Config{}, streamtest.NewBus(t, streamtest.Options{}), st, nil, nil)
	require.NoError(t, err)
	for i := range 12 {
		doc := fmt.Sprintf("d%02d", i)
		inc := "incident:" + doc
		fm := fmt.Sprintf("failure_mode:f%d", i%3)
		_, err := st.Apply(ctx, "acme", doc, 1, store.Contributions{
			TextUnits: []events.TextUnit{{ID: doc + "-u", Text: "t"}},
			Entities: []store.EntityContribution{
				{ID: inc, Type: "incident", Name: doc, Description: "incident " + doc, TextUnits: []string{doc + "-u"}},
				{ID: fm, Type: "failure_mode", Name: fm[len("failure_mode:"):], TextUnits: []string{doc + "-u"}},
				{ID: "component:db", Type: "component", Name: "DB " + doc, NameRank: 2, TextUnits: []string{doc + "-u"}},
			},
			Edges: []store.EdgeContribution{
				{Source: inc, Relation: "failure", Target: fm, Weight: 1, TextUnits: []string{doc + "-u"}},
				{Source: inc, Relation: "mentions", Target: "component:db", Weight: 2, Description: "uses the db"},
			},
		})
		require.NoError(t, err)
	}
	cs := []store.Community{
		{ID: "x", Members: []string{"failure_mode:f0", "incident:d00", "incident:d03"}, MemberHash: "x"},
		{ID: "y", Members: []string{"incident:d01"}, MemberHash: "y"},
	}
	bounded, err := w.loadIndex(ctx, "acme", cs)
	require.NoError(t, err)
	require.Less(t, len(bounded.ents), 15, "a bounded read, not the graph")
	g, err := st.Snapshot(ctx, "acme")
	require.NoError(t, err)
	full := newIndex(g)
	for _, c := range cs {
		a, b := w.Extractive(c, bounded), w.Extractive(c, full)
		a.UpdatedAt, b.UpdatedAt = time.Time{}, time.Time{}
		require.Equal(t, b, a, c.ID)
		require.Equal(t, w.inputHash(full, c), w.inputHash(bounded, c), c.ID)
	}
}
