package query

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAgedValuesReloadInTheBackground: a value past its age that no event
// invalidated is still served while it is loaded again in the background
// (once however many requests ask), then the new one is; an event during
// that load keeps the reloaded value out; without a background runner the
// request reloads it itself.
func TestAgedValuesReloadInTheBackground(t *testing.T) {
	ctx := t.Context()
	var c tenantCache[int]
	c.maxAge = time.Nanosecond // every value is past its age when read again
	c.setLive(true)
	var (
		reloads sync.WaitGroup
		started = make(chan struct{}, 10)
		release = make(chan struct{})
		next    = 0
		prevs   []int
	)
	c.setRefresh(func(reload func(context.Context)) {
		started <- struct{}{}
		reloads.Go(func() { reload(ctx) })
	})
	load := func(_ context.Context, prev int, aged bool) (int, error) {
		if aged {
			<-release
			prevs = append(prevs, prev)
		}
		next++
		return next, nil
	}
	got, err := c.get(ctx, "acme", load)
	require.NoError(t, err)
	require.Equal(t, 1, got, "loaded by the request")
	for range 3 {
		got, err = c.get(ctx, "acme", load)
		require.NoError(t, err)
		require.Equal(t, 1, got, "served past its age while it reloads")
	}
	require.Len(t, started, 1, "one reload for three requests")
	close(release)
	reloads.Wait()
	require.Equal(t, []int{1}, prevs, "the reload is given the value it replaces")
	got, err = c.get(ctx, "acme", load)
	require.NoError(t, err)
	require.Equal(t, 2, got, "the reloaded value once its load is over")
	reloads.Wait() // the reload that read started

	// An event while a reload runs: the reloaded value is not kept, and
	// the next request loads its own.
	<-started
	<-started
	release = make(chan struct{})
	got, err = c.get(ctx, "acme", load) // served, and reloaded in the background
	require.NoError(t, err)
	c.invalidate("acme")
	close(release)
	reloads.Wait()
	got2, err := c.get(ctx, "acme", load)
	require.NoError(t, err)
	require.NotEqual(t, got, got2)
	require.Equal(t, next, got2, "loaded by the request after the event, not the reload's")

	// Without a background runner, the request reloads.
	c.setRefresh(nil)
	reloads.Wait()
	before := next
	got, err = c.get(ctx, "acme", func(ctx context.Context, _ int, aged bool) (int, error) {
		require.False(t, aged)
		next++
		return next, nil
	})
	require.NoError(t, err)
	require.Equal(t, before+1, got)
}

// TestFailedReloadIsNotServedOn: a background reload that fails drops the
// aged value, so the next request loads it itself and sees the error,
// instead of the old value being served for as long as the store fails.
func TestFailedReloadIsNotServedOn(t *testing.T) {
	ctx := t.Context()
	var c tenantCache[int]
	c.maxAge = time.Nanosecond
	c.setLive(true)
	var reloads sync.WaitGroup
	c.setRefresh(func(reload func(context.Context)) { reloads.Go(func() { reload(ctx) }) })
	down := errors.New("store is down")
	fail := false
	load := func(context.Context, int, bool) (int, error) {
		if fail {
			return 0, down
		}
		return 7, nil
	}
	got, err := c.get(ctx, "acme", load)
	require.NoError(t, err)
	require.Equal(t, 7, got)
	fail = true
	got, err = c.get(ctx, "acme", load) // past its age: served, reloaded in the background
	require.NoError(t, err)
	require.Equal(t, 7, got)
	reloads.Wait()
	_, err = c.get(ctx, "acme", load)
	require.ErrorIs(t, err, down, "the request after a failed reload loads, and fails, itself")
}
