package app_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/store"
)

// rxStart starts an all-in-one on a fresh data directory.
func rxStart(t *testing.T, cfg app.Config) (*app.App, *app.Client) {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Log = quietLog()
	cfg.Quiet, cfg.MaxDelay = 50*time.Millisecond, 2*time.Second
	cfg.Backoff = []time.Duration{20 * time.Millisecond}
	a, err := app.Start(context.WithoutCancel(t.Context()), cfg)
	require.NoError(t, err)
	t.Cleanup(a.Close)
	return a, app.NewClient(a.URL(), "")
}

// rxWait polls cond for up to a minute.
func rxWait(t *testing.T, c *app.Client, what string, cond func() (bool, error)) {
	t.Helper()
	require.NoError(t, c.WaitFor(t.Context(), time.Minute, cond), what)
}

// rxApplied waits until every registry version of the tenant is applied.
func rxApplied(t *testing.T, a *app.App, c *app.Client) {
	t.Helper()
	rxWait(t, c, "documents applied", func() (bool, error) {
		srcs, err := a.Stores.ListSources(t.Context(), "default")
		if err != nil || len(srcs) == 0 {
			return false, err
		}
		for _, s := range srcs {
			rec, err := a.Stores.Source(t.Context(), "default", s.DocID)
			if err != nil {
				return false, err
			}
			if rec.Version != s.Version {
				return false, fmt.Errorf("%s applied at %d, registry at %d", s.DocID, rec.Version, s.Version)
			}
		}
		return true, nil
	})
}

func rxHasEdge(t *testing.T, a *app.App, id string) (bool, error) {
	g, err := a.Stores.Snapshot(t.Context(), "default")
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(g.Edges, func(e store.Edge) bool { return e.ID == id }), nil
}

// rxGraph renders the tenant graph with text units by position in their
// document (unit ids hash the version).
func rxGraph(t *testing.T, a *app.App) []string {
	t.Helper()
	g, err := a.Stores.Snapshot(t.Context(), "default")
	require.NoError(t, err)
	pos := map[string]int{}
	units := func(doc string, ids []string) []int {
		rec, err := a.Stores.Source(t.Context(), "default", doc)
		require.NoError(t, err)
		for i, u := range rec.TextUnits {
			pos[u.ID] = i
		}
		var ps []int
		for _, id := range ids {
			p, ok := pos[id]
			require.True(t, ok, "unit %s of %s", id, doc)
			ps = append(ps, p)
		}
		slices.Sort(ps)
		return ps
	}
	var out []string
	for _, e := range g.Entities {
		out = append(out, fmt.Sprintf("entity %s type=%s name=%q", e.ID, e.Type, e.Name))
		for _, f := range e.Sources {
			out = append(out, fmt.Sprintf("  fragment %s name=%q rank=%d desc=%q units=%v", f.DocID, f.Name, f.NameRank,
				f.Description, units(f.DocID, f.TextUnits)))
		}
	}
	for _, e := range g.Edges {
		out = append(out, "edge "+e.ID)
		for _, s := range e.Supports {
			out = append(out, fmt.Sprintf("  support %s desc=%q weight=%g units=%v", s.DocID, s.Description, s.Weight,
				units(s.DocID, s.TextUnits)))
		}
	}
	return out
}

const (
	rxCatalogWith = `apiVersion: backstage.io/v1alpha1
kind: Component
metadata:
  name: frobnicator
spec:
  type: library
  owner: platform
---
apiVersion: backstage.io/v1alpha1
kind: Component
metadata:
  name: quota-keeper
spec:
  type: service
  owner: platform
`
	rxCatalogWithout = `apiVersion: backstage.io/v1alpha1
kind: Component
metadata:
  name: quota-keeper
spec:
  type: service
  owner: platform
`
)

var rxDocs = []app.Document{
	{ID: "inc101", DocType: "incident", Title: "Queue stall",
		Text: "At 03:10 the frobnicator stopped draining its work queue and uploads timed out. " +
			"The on-call engineer restarted the frobnicator at 03:25 and the backlog cleared."},
	{ID: "inc102", DocType: "incident", Title: "Quota errors",
		Text: "quota-keeper returned 429 to every tenant after a bad limits push; rolling back the push fixed it."},
}

const rxMention = "incident:inc101|mentions|component:frobnicator"

// TestCatalogChangeReextractsAppliedDocuments ingests an incident naming
// a component the catalog does not know yet, then adds the component to
// the catalog (the incident gains its mention), then drops it (the mention
// goes), and compares the result with a clean ingest of the final
// documents, catalog first.
func TestCatalogChangeReextractsAppliedDocuments(t *testing.T) {
	a, c := rxStart(t, app.Config{})
	for _, d := range rxDocs {
		_, err := c.PostDocument(t.Context(), d)
		require.NoError(t, err)
	}
	rxApplied(t, a, c)
	has, err := rxHasEdge(t, a, rxMention)
	require.NoError(t, err)
	require.False(t, has, "no catalog yet, no component")

	_, err = c.PostCatalog(t.Context(), "catalog", []byte(rxCatalogWith))
	require.NoError(t, err)
	rxWait(t, c, "the mention of the new catalog component", func() (bool, error) { return rxHasEdge(t, a, rxMention) })
	rec, err := a.Stores.Source(t.Context(), "default", "inc101")
	require.NoError(t, err)
	require.Equal(t, int64(1), rec.Version, "the same version, resolved again")
	require.Positive(t, rec.Resolution)

	_, err = c.PostCatalog(t.Context(), "catalog", []byte(rxCatalogWithout))
	require.NoError(t, err)
	rxWait(t, c, "the mention gone with the component", func() (bool, error) {
		has, err := rxHasEdge(t, a, rxMention)
		return !has, err
	})
	rxApplied(t, a, c)
	_, err = a.Stores.Entity(t.Context(), "default", "component:frobnicator")
	require.True(t, errors.Is(err, store.ErrNotFound), "no component left: %v", err)

	clean, cc := rxStart(t, app.Config{})
	_, err = cc.PostCatalog(t.Context(), "catalog", []byte(rxCatalogWithout))
	require.NoError(t, err)
	rxApplied(t, clean, cc)
	for _, d := range rxDocs {
		_, err := cc.PostDocument(t.Context(), d)
		require.NoError(t, err)
	}
	rxApplied(t, clean, cc)
	want := rxGraph(t, clean)
	require.Contains(t, want, "edge incident:inc102|mentions|service:quotakeeper")
	// The re-extractions may still be on their way: wait for the graphs to meet.
	var got []string
	err = c.WaitFor(t.Context(), time.Minute, func() (bool, error) {
		got = rxGraph(t, a)
		return slices.Equal(got, want), nil
	})
	require.Equal(t, want, got, "%v", err)
	rep, err := a.Stores.Audit(t.Context(), "default")
	require.NoError(t, err)
	require.Zero(t, rep.OrphanEdges+rep.OrphanEntities+rep.IndexMismatches, "%v", rep.Problems)
}

// TestAliasChangeMergesAppliedEntities applies an incident naming one
// component two ways, then adds an alias joining them: the applied
// incident is re-resolved and links one entity.
func TestAliasChangeMergesAppliedEntities(t *testing.T) {
	aliases := filepath.Join(t.TempDir(), "aliases.yaml")
	require.NoError(t, os.WriteFile(aliases, []byte("aliases: []\n"), 0o600))
	a, c := rxStart(t, app.Config{AliasesFile: aliases})
	_, err := c.PostDocument(t.Context(), app.Document{ID: "inc201", DocType: "incident", Title: "Cache eviction",
		Text: "The session-cache evicted every key after a config push. Later the sess-cache node was replaced and hit rates recovered."})
	require.NoError(t, err)
	rxApplied(t, a, c)
	for _, id := range []string{"component:sessioncache", "component:sesscache"} {
		_, err := a.Stores.Entity(t.Context(), "default", id)
		require.NoError(t, err, "%s before the alias", id)
	}

	require.NoError(t, os.WriteFile(aliases, []byte(
		"aliases:\n  - type: component\n    canonical: session-cache\n    mentions: [sess-cache]\n"), 0o600))
	rxWait(t, c, "sess-cache merged into session-cache", func() (bool, error) {
		_, err := a.Stores.Entity(t.Context(), "default", "component:sesscache")
		if !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
		return rxHasEdge(t, a, "incident:inc201|mentions|component:sessioncache")
	})
	rec, err := a.Stores.Source(t.Context(), "default", "inc201")
	require.NoError(t, err)
	require.Equal(t, int64(1), rec.Version)
	require.Positive(t, rec.Resolution)
	require.NotContains(t, rec.Entities, "component:sesscache")
}
