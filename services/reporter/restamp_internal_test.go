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

// TestInputHashIsStable: the input hash of a report is stored with it and
// compared after an upgrade, so the bytes it hashes must not change: these
// are the hashes of two communities of a fixed graph.
func TestInputHashIsStable(t *testing.T) {
	g := store.Graph{
		Entities: []store.Entity{
			{ID: "incident:pm-1", Type: "incident", Name: "PM-1", Sources: []store.Fragment{{DocID: "pm-1", Version: 2, Name: "PM-1", Description: "The export queue stalled."}}},
			{ID: "component:queue", Type: "component", Name: "Export queue", Sources: []store.Fragment{
				{DocID: "pm-1", Version: 2, Name: "export queue", NameRank: 1},
				{DocID: "pm-2", Version: 1, Name: "Export queue", Description: "Holds invoice exports."}}},
			{ID: "failure_mode:bug", Type: "failure_mode", Name: "software bug"},
		},
		Edges: []store.Edge{
			{ID: store.EdgeID("incident:pm-1", "mentions", "component:queue"), Source: "incident:pm-1", Relation: "mentions", Target: "component:queue",
				Supports: []store.Fragment{{DocID: "pm-1", Version: 2, Description: "stalled", Weight: 1.5}}},
			{ID: store.EdgeID("incident:pm-1", "failure", "failure_mode:bug"), Source: "incident:pm-1", Relation: "failure", Target: "failure_mode:bug",
				Supports: []store.Fragment{{DocID: "pm-1", Version: 2, Weight: 1}}},
		},
	}
	w := &Worker{}
	ix := newIndex(g)
	require.Equal(t, "815312ac64ef43060de4553734358fe0bb51308d560068fbfa168b644c2ccad6",
		w.inputHash(ix, store.Community{ID: "a", Members: []string{"component:queue", "incident:pm-1"}}))
	require.Equal(t, "d743204a342d85a78cdd3fe08f50d8eb2cd65cc107c9f3e88d14d8616cabb058",
		w.inputHash(ix, store.Community{ID: "b", Members: []string{"failure_mode:bug"}}))
}
