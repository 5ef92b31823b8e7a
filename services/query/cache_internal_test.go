package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// TestChangesSucceedValues: a change replaces the tenant's value by its
// successor (keeping its age), or drops it when there is none; a value
// read while a change came is not kept as read; a background reload a
// change overtook is followed up for the changes since it began, and
// thrown away when an invalidation came too.
func TestChangesSucceedValues(t *testing.T) {
	ctx := t.Context()
	var c tenantCache[[]string]
	c.setLive(true)
	var followed []namedChange
	c.succeed = func(v []string, ch namedChange) ([]string, bool) {
		followed = append(followed, ch)
		if len(ch.ids) == 1 && ch.ids[0] == "none" {
			return nil, false
		}
		return slices.Concat(v, ch.ids), true
	}
	named := func(doc string, ids ...string) namedChange { return changeOf(doc, ids) }
	load := func(context.Context, []string, bool) ([]string, error) { return []string{"loaded"}, nil }
	got, err := c.get(ctx, "acme", load)
	require.NoError(t, err)
	require.Equal(t, []string{"loaded"}, got)
	c.change("acme", named("doc-1", "a", "b"))
	got, err = c.get(ctx, "acme", func(context.Context, []string, bool) ([]string, error) {
		t.Fatal("a successor is served, not loaded")
		return nil, nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"loaded", "a", "b"}, got)
	c.change("acme", named("doc-1", "none"))
	got, err = c.get(ctx, "acme", func(context.Context, []string, bool) ([]string, error) { return []string{"again"}, nil })
	require.NoError(t, err)
	require.Equal(t, []string{"again"}, got, "no successor: dropped and loaded")

	// A value read while a change came is not kept.
	got, err = c.get(ctx, "globex", func(context.Context, []string, bool) ([]string, error) {
		c.change("globex", named("doc-1", "x"))
		return []string{"read"}, nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"read"}, got)
	got, err = c.get(ctx, "globex", func(context.Context, []string, bool) ([]string, error) { return []string{"reread"}, nil })
	require.NoError(t, err)
	require.Equal(t, []string{"reread"}, got)

	// A reload overtaken by changes is followed up for them.
	c.maxAge = time.Nanosecond
	var reloads sync.WaitGroup
	c.setRefresh(func(reload func(context.Context)) { reloads.Go(func() { reload(ctx) }) })
	release := make(chan struct{})
	reloadWith := func(context.Context, []string, bool) ([]string, error) {
		<-release
		return []string{"reloaded"}, nil
	}
	_, err = c.get(ctx, "acme", reloadWith) // past its age: reloaded in the background
	require.NoError(t, err)
	c.change("acme", named("doc-3", "c"))
	c.change("acme", named("doc-2", "b", "d"))
	close(release)
	reloads.Wait()
	c.maxAge = time.Hour
	got, err = c.get(ctx, "acme", load)
	require.NoError(t, err)
	require.Equal(t, []string{"reloaded", "b", "c", "d"}, got)
	require.Equal(t, namedChange{ids: []string{"b", "c", "d"}, docs: map[string][]string{"doc-2": {"b", "d"}, "doc-3": {"c"}}}, followed[len(followed)-1],
		"the reload is followed up for the changes' entities and documents")

	// An invalidation too: the reload is thrown away.
	c.maxAge = time.Nanosecond
	release = make(chan struct{})
	_, err = c.get(ctx, "acme", reloadWith)
	require.NoError(t, err)
	c.change("acme", named("doc-1", "e"))
	c.invalidate("acme")
	c.change("acme", named("doc-1", "f"))
	close(release)
	reloads.Wait()
	c.maxAge = time.Hour
	got, err = c.get(ctx, "acme", load)
	require.NoError(t, err)
	require.Equal(t, []string{"loaded"}, got)

	// A change whose documents are not known: nor are the follow-up's.
	c.maxAge = time.Nanosecond
	release = make(chan struct{})
	_, err = c.get(ctx, "acme", reloadWith)
	require.NoError(t, err)
	c.change("acme", named("doc-4", "g"))
	c.change("acme", namedChange{ids: []string{"h"}})
	close(release)
	reloads.Wait()
	c.maxAge = time.Hour
	got, err = c.get(ctx, "acme", load)
	require.NoError(t, err)
	require.Equal(t, []string{"reloaded", "g", "h"}, got)
	require.Equal(t, namedChange{ids: []string{"g", "h"}}, followed[len(followed)-1])
}

// TestNamedChangeThen: a run of changes names the union of their
// entities and, per document, of the entities its changes named; no
// documents once one change's are not known or past maxChangeDocs.
func TestNamedChangeThen(t *testing.T) {
	a := changeOf("d1", []string{"x", "z"})
	b := namedChange{ids: []string{"y", "z"}, docs: map[string][]string{"d0": {"y"}, "d1": {"z"}}}
	ab := a.then(b)
	require.Equal(t, namedChange{ids: []string{"x", "y", "z"}, docs: map[string][]string{"d0": {"y"}, "d1": {"x", "z"}}}, ab)
	require.Equal(t, map[string][]string{"x": {"d1"}, "y": {"d0"}, "z": {"d1"}}, ab.byEntity())
	require.Equal(t, map[string][]string{"y": {"d0", "d2"}}, namedChange{ids: []string{"y"}, docs: map[string][]string{"d2": {"y"}, "d0": {"y"}}}.byEntity())
	require.Equal(t, []string{"x", "z"}, a.docs["d1"], "the changes followed are left as they were")
	require.Nil(t, a.then(namedChange{ids: []string{"y"}}).docs)
	require.Nil(t, namedChange{ids: []string{"y"}}.then(a).docs)
	require.Nil(t, namedChange{ids: []string{"y"}}.byEntity())
	run := namedChange{docs: map[string][]string{}}
	for i := range maxChangeDocs {
		run = run.then(changeOf(fmt.Sprintf("d%04d", i), []string{"x"}))
	}
	require.Len(t, run.docs, maxChangeDocs)
	require.Nil(t, run.then(changeOf("another", []string{"x"})).docs)
}
