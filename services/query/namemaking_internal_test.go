package query

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
)

// slowListing holds a listing of every entity, once it has read them,
// until release is closed.
type slowListing struct {
	Stores
	lists    atomic.Int32
	read     chan struct{}
	release  chan struct{}
	readOnce sync.Once
}

func (s *slowListing) EntitiesByType(ctx context.Context, tenant, typ string) ([]store.Entity, error) {
	es, err := s.Stores.EntitiesByType(ctx, tenant, typ)
	if typ == "" {
		s.lists.Add(1)
		s.readOnce.Do(func() { close(s.read) })
		<-s.release
	}
	return es, err
}

// componentStore opens an embedded store and returns it with a function
// that announces doc at version (public) and applies it as naming one
// component, id, called name.
func componentStore(t *testing.T) (*embedded.Store, func(doc string, version int64, id, name string)) {
	t.Helper()
	ctx := t.Context()
	db, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db, func(doc string, version int64, id, name string) {
		t.Helper()
		_, err := db.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: version, ACL: provenance.PublicACL()})
		require.NoError(t, err)
		res, err := db.Apply(ctx, "acme", doc, version, store.Contributions{Title: doc, DocType: "postmortem",
			TextUnits: []events.TextUnit{{ID: "u0", Text: name + " failed.", End: len(name) + 8}},
			Entities:  []store.EntityContribution{{ID: id, Type: "component", Name: name, NameRank: 2, TextUnits: []string{"u0"}}}})
		require.NoError(t, err)
		require.Equal(t, store.Applied, res.Outcome)
	}
}

// TestIndexMadeDuringAChangeIsPatched: a change arriving while a request
// builds the tenant's first name index (from every entity) is not lost
// and costs no second listing: the set that follows waits for that index
// and patches it for the entities the change named.
func TestIndexMadeDuringAChangeIsPatched(t *testing.T) {
	ctx := t.Context()
	db, applyAt := componentStore(t)
	apply := func(doc, id, name string) { t.Helper(); applyAt(doc, 1, id, name) }
	apply("INC-1", "component:alpha", "alpha")
	st := &slowListing{Stores: db, read: make(chan struct{}), release: make(chan struct{})}
	a, err := auth.New(nil, nil)
	require.NoError(t, err)
	s, err := New(Config{}, st, a, nil, nil)
	require.NoError(t, err)
	s.cache.setLive(true)

	g, err := s.graphSet(ctx, "acme")
	require.NoError(t, err)
	built := make(chan error, 1)
	go func() {
		_, err := s.nameIndexOf(ctx, "acme", g)
		built <- err
	}()
	<-st.read // the listing has read alpha only
	apply("INC-2", "component:beta", "beta")
	s.cache.graph.change("acme", changeOf("INC-2", []string{"component:beta"}))
	close(st.release)
	require.NoError(t, <-built)

	next, err := s.graphSet(ctx, "acme")
	require.NoError(t, err)
	require.NotSame(t, g, next, "the change put a successor in place")
	ix, err := s.nameIndexOf(ctx, "acme", next)
	require.NoError(t, err)
	_, ok := ix.entity("component:beta")
	require.True(t, ok, "the entity the change named is in the index")
	require.True(t, slices.Contains(ix.list(kindKey, "beta"), "component:beta"))
	require.True(t, slices.Contains(ix.list(kindKey, "alpha"), "component:alpha"))
	require.EqualValues(t, 1, st.lists.Load(), "one listing of every entity")
}

// TestCountsTakeTheExactNameIndex: the entities of a type and the
// entities an aggregate loads come from the name index patched for every
// graph change the request's graph reads follow, never from the one a
// background patch left (recentNames), which local search may take: a
// component applied after that patch is counted at once.
func TestCountsTakeTheExactNameIndex(t *testing.T) {
	ctx := t.Context()
	db, applyAt := componentStore(t)
	apply := func(doc, id, name string) { t.Helper(); applyAt(doc, 1, id, name) }
	apply("INC-1", "component:alpha", "alpha")
	a, err := auth.New(nil, nil)
	require.NoError(t, err)
	s, err := New(Config{}, db, a, nil, nil)
	require.NoError(t, err)
	s.cache.setLive(true)
	g, err := s.graphSet(ctx, "acme")
	require.NoError(t, err)
	_, err = s.nameIndexOf(ctx, "acme", g)
	require.NoError(t, err)
	s.namesKept.Store("acme", time.Now()) // as after a background patch

	apply("INC-2", "component:beta", "beta")
	s.cache.graph.change("acme", changeOf("INC-2", []string{"component:beta"}))
	caller := provenance.Caller{Tenant: "acme", Principal: "sam"}
	stale, err := newView(ctx, s, caller).nameIndex()
	require.NoError(t, err)
	_, ok := stale.entity("component:beta")
	require.False(t, ok, "local search may take the index of the last background patch")

	v := newView(ctx, s, caller)
	require.NoError(t, v.loadEntities([]string{"component:beta"}))
	require.True(t, v.known("component:beta").ok, "loaded from the patched index")

	// Once more, for the entities of a type.
	s.namesKept.Store("acme", time.Now())
	apply("INC-3", "component:gamma", "gamma")
	s.cache.graph.change("acme", changeOf("INC-3", []string{"component:gamma"}))
	v = newView(ctx, s, caller)
	visible, err := v.entitiesOfType("component")
	require.NoError(t, err)
	var ids []string
	for _, e := range visible {
		ids = append(ids, e.out.ID)
	}
	require.Equal(t, []string{"component:alpha", "component:beta", "component:gamma"}, ids)

	// An entity local search admitted from the background patch's index,
	// as it was before a change (alpha renamed), counts as stored now, in
	// that request and in the caller's next ones.
	s.namesKept.Store("acme", time.Now())
	applyAt("INC-1", 2, "component:alpha", "alpha prime")
	s.cache.graph.change("acme", changeOf("INC-1", []string{"component:alpha"}))
	names := func(v *view) map[string]string {
		t.Helper()
		visible, err := v.entitiesOfType("component")
		require.NoError(t, err)
		out := map[string]string{}
		for _, e := range visible {
			out[e.out.ID] = e.out.Name
		}
		return out
	}
	v = newView(ctx, s, caller)
	ix, err := v.nameIndex()
	require.NoError(t, err)
	old, err := v.admitIDs(ix, []string{"component:alpha"})
	require.NoError(t, err)
	require.Equal(t, "alpha", old[0].out.Name, "local search may take the name before the change")
	require.Equal(t, "alpha prime", names(v)["component:alpha"], "counted as stored, in the same request")
	require.True(t, v.known("component:alpha").ok)
	require.Equal(t, "alpha prime", v.known("component:alpha").out.Name, "and the request sees it so from then on")
	// Renamed again: one request's local search takes the name before,
	// the caller's next request counts it as stored.
	s.namesKept.Store("acme", time.Now())
	applyAt("INC-1", 3, "component:alpha", "alpha second")
	s.cache.graph.change("acme", changeOf("INC-1", []string{"component:alpha"}))
	v = newView(ctx, s, caller)
	ix, err = v.nameIndex()
	require.NoError(t, err)
	old, err = v.admitIDs(ix, []string{"component:alpha"})
	require.NoError(t, err)
	require.Equal(t, "alpha prime", old[0].out.Name)
	require.Equal(t, "alpha second", names(newView(ctx, s, caller))["component:alpha"], "the next request of the caller does not take it kept")

	// A change between a request's index and its admissions: what it
	// admits from the index is not kept for the set after the change.
	v = newView(ctx, s, caller)
	ix, err = v.nameIndex()
	require.NoError(t, err)
	applyAt("INC-1", 4, "component:alpha", "alpha third")
	s.cache.graph.change("acme", changeOf("INC-1", []string{"component:alpha"}))
	old, err = v.admitIDs(ix, []string{"component:alpha"})
	require.NoError(t, err)
	require.Equal(t, "alpha second", old[0].out.Name)
	require.Equal(t, "alpha third", names(newView(ctx, s, caller))["component:alpha"], "not kept with the later set")
}
