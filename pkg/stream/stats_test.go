package stream_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
)

// TestStatsBucketSharedByProcesses: what one process puts in the stats
// bucket another reads, with the server's write time, until it is deleted;
// before anyone wrote, there is nothing and no error.
func TestStatsBucketSharedByProcesses(t *testing.T) {
	ctx := t.Context()
	buses := streamtest.NewBuses(t, 2, streamtest.Options{Config: stream.Config{Stream: "KGT"}})
	a, b := buses[0], buses[1]
	require.Equal(t, "KGT_stats", a.StatsBucket())

	got, err := b.Stats(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, b.DeleteStat(ctx, "nobody.llm"), "deleting from a bucket nobody created")

	before := time.Now().Add(-time.Minute)
	require.NoError(t, a.PutStat(ctx, "p2.llm", []byte(`{"n":2}`)))
	require.NoError(t, a.PutStat(ctx, "p1.lag.graph", []byte(`{"n":1}`)))
	require.NoError(t, a.PutStat(ctx, "p1.lag.graph", []byte(`{"n":3}`)))
	got, err = b.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "p1.lag.graph", got[0].Key)
	require.JSONEq(t, `{"n":3}`, string(got[0].Value), "the latest value only")
	require.Equal(t, "p2.llm", got[1].Key)
	for _, s := range got {
		require.True(t, s.Written.After(before), "written %s", s.Written)
	}

	require.NoError(t, b.DeleteStat(ctx, "p2.llm"))
	got, err = a.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "p1.lag.graph", got[0].Key)
}

// TestLagSamplesOldestFirst: the lag ring gives back its samples oldest
// first, once full too, and only the stages that have any.
func TestLagSamplesOldestFirst(t *testing.T) {
	bus := streamtest.NewBus(t, streamtest.Options{})
	require.Empty(t, bus.LagStages())
	require.Empty(t, bus.LagSamples("graph"))
	start := time.Now()
	for i := range 4096 + 10 {
		// Older receipts first: the samples decrease.
		bus.ObserveLag("graph", start.Add(-time.Duration(5000-i)*time.Second))
	}
	bus.ObserveLag("reports", start.Add(-time.Second))
	require.Equal(t, []string{"graph", "reports"}, bus.LagStages())
	vs := bus.LagSamples("graph")
	require.Len(t, vs, 4096)
	for i := 1; i < len(vs); i++ {
		require.Less(t, vs[i], vs[i-1], "sample %d is not newer than the one before", i)
	}
	require.InDelta(t, 5000-10, vs[0], 60, "the ten oldest were overwritten")

	// Read since a mark: only what came after it, every sample once;
	// at most the ring's worth when more came.
	all, mark := bus.LagSamplesSince("graph", 0)
	require.Equal(t, vs, all)
	require.EqualValues(t, 4096+10, mark)
	none, again := bus.LagSamplesSince("graph", mark)
	require.Empty(t, none)
	require.Equal(t, mark, again)
	bus.ObserveLag("graph", start.Add(-7*time.Second))
	bus.ObserveLag("graph", start.Add(-8*time.Second))
	two, mark2 := bus.LagSamplesSince("graph", mark)
	require.Len(t, two, 2)
	require.InDelta(t, 7, two[0], 1)
	require.InDelta(t, 8, two[1], 1)
	require.Equal(t, mark+2, mark2)
	last, _ := bus.LagSamplesSince("graph", 5)
	require.Equal(t, bus.LagSamples("graph"), last)
	unknown, m := bus.LagSamplesSince("nothing", 3)
	require.Empty(t, unknown)
	require.EqualValues(t, 3, m)

	p50, p99, ok := stream.Quantiles([]float64{5, 1, 4, 2, 3})
	require.True(t, ok)
	require.Equal(t, 3.0, p50)
	require.Equal(t, 5.0, p99)
	_, _, ok = stream.Quantiles(nil)
	require.False(t, ok)
}
