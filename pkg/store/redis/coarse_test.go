package redis_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/redis"
	"github.com/kgstream/kgstream/pkg/store/storetest"
)

// TestStripesSeeConcurrentApply makes another writer apply a document
// sharing the hub entities and an edge with a large apply between the
// large apply's read of the heads and its write: the large apply's first
// attempt, which watches stripes or coarse stripes instead of the heads,
// must fail at EXEC, and its second attempt (watching the heads) apply on
// top of the other write. Both documents end applied, as when applied one
// after the other. A writer that left the (coarse) stripe of what it
// wrote alone would let the first attempt write the hub's head as it read
// it, counting the other document's fragment out.
func TestStripesSeeConcurrentApply(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []redis.Option
		pad  int // entities added to the large document
	}{
		{"large document, coarse stripes", nil, 1100},
		{"medium document, stripes", nil, 600},
		{"coarse stripes always", []redis.Option{redis.WithStripesAlways(), redis.WithCoarseStripesAlways()}, 0},
		{"stripes always", []redis.Option{redis.WithStripesAlways()}, 0},
	} {
		for _, racer := range []struct {
			name string
			con  store.Contributions
		}{
			{"shared entities and edge", storetest.HubDoc(2, 1)},
			// Only an entity of the large document: its stripe, not an
			// edge's, is the one to see changed.
			{"shared entity", store.Contributions{
				TextUnits: []events.TextUnit{{ID: "u", Text: "t"}},
				Entities:  []store.EntityContribution{{ID: "service:hub2", Type: "service", Name: "Hub two", NameRank: 2, TextUnits: []string{"u"}}},
			}},
		} {
			t.Run(tc.name+"/"+racer.name, func(t *testing.T) {
				testStripesSeeConcurrentApply(t, tc.opts, tc.pad, racer.con)
			})
		}
	}
}

func testStripesSeeConcurrentApply(t *testing.T, opts []redis.Option, pad int, racer store.Contributions) {
	ctx := t.Context()
	other, c, prefix := freshStore(t)
	large := func(v int64) store.Contributions {
		con := storetest.HubDoc(1, v)
		for j := range pad {
			con.Entities = append(con.Entities, store.EntityContribution{ID: fmt.Sprintf("part:%04d", j),
				Type: "part", Name: fmt.Sprintf("part %d", j), NameRank: 2, TextUnits: []string{"u"}})
		}
		return con
	}
	var attempts []int
	raced := false
	s := storeOn(t, c, prefix, append(opts, redis.WithBeforeWrite(func(attempt int) {
		attempts = append(attempts, attempt)
		if !raced {
			raced = true
			_, err := other.Apply(ctx, "race", "doc-002", 1, racer)
			require.NoError(t, err)
		}
	}))...)
	// The large document's first version, then an edit: the edit
	// changes the hub entities the other document's apply also changes.
	_, err := other.Apply(ctx, "race", "doc-001", 1, large(1))
	require.NoError(t, err)
	res, err := s.Apply(ctx, "race", "doc-001", 2, large(2))
	require.NoError(t, err)
	require.Equal(t, store.Applied, res.Outcome)

	for _, step := range []struct {
		doc     string
		version int64
		con     store.Contributions
	}{{"doc-001", 1, large(1)}, {"doc-002", 1, racer}, {"doc-001", 2, large(2)}} {
		_, err := other.Apply(ctx, "sequential", step.doc, step.version, step.con)
		require.NoError(t, err)
	}
	want, err := other.Snapshot(ctx, "sequential")
	require.NoError(t, err)
	got, err := other.Snapshot(ctx, "race")
	require.NoError(t, err)
	require.Equal(t, want, got)
	rep, err := other.Audit(ctx, "race")
	require.NoError(t, err)
	require.Empty(t, rep.Problems)
	require.Equal(t, []int{1, 2}, attempts, "the attempts of the large apply")
}
