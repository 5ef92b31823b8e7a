//go:build integration

package app_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/store"
)

// determinismDocs are real postmortems of the public corpora (5 dfds, 4
// cloud, 4 wikitech), ids prefixed by their corpus.
func determinismDocs(t *testing.T) []app.Document {
	t.Helper()
	corpora := filepath.Join(seedDir(t), "..")
	var docs []app.Document
	for corpus, files := range map[string][]string{
		"dfds-postmortems": {"PM2020-002 - KIAM service disruption on Hellman.md", "PM2020-004 - CoreDNS upgrade issue.md",
			"PM2021-005 - All services returning 503 in Kubernetes.md", "PM2021-006 - All services returning 503 in Kubernetes.md",
			"PM2022-006 - ALB 502 errors.md"},
		"cloud-incidents":    {"aws-1.md", "azure-20190211-1.md", "azure-20201019-1.md", "google-gcps-17001.md"},
		"wikitech-incidents": {"20110926-PowerCable.txt", "20180710-MediaWiki.txt", "20190723-network eqiad.txt", "20200108-mw-api.txt"},
	} {
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(corpora, corpus, f))
			require.NoError(t, err, "the public corpora are required")
			id := corpus + "." + strings.ReplaceAll(strings.SplitN(strings.TrimSuffix(strings.TrimSuffix(f, ".md"), ".txt"), " - ", 2)[0], " ", "_")
			docs = append(docs, app.Document{ID: id, Title: f, Text: string(data), DocType: "incident"})
		}
	}
	// Two short notes spelling one component two ways, so its display
	// name is a tie between documents.
	docs = append(docs,
		app.Document{ID: "notes.a", Text: "The Ledger Cache node was replaced after a disk failure.", DocType: "incident"},
		app.Document{ID: "notes.b", Text: "ledger-cache evicted every key after a config change.", DocType: "incident"})
	sort.Slice(docs, func(i, j int) bool { return docs[i].ID < docs[j].ID })
	return docs
}

// settled waits until the graph store applied every document's latest
// registry version (a deleted document: its deletion).
func settled(t *testing.T, a *app.App, tenant string) {
	t.Helper()
	c := app.NewClient(a.URL(), "")
	require.NoError(t, c.WaitFor(t.Context(), 3*time.Minute, func() (bool, error) {
		srcs, err := a.Stores.ListSources(t.Context(), tenant)
		if err != nil || len(srcs) == 0 {
			return false, err
		}
		for _, s := range srcs {
			rec, err := a.Stores.Source(t.Context(), tenant, s.DocID)
			switch {
			case errors.Is(err, store.ErrNotFound):
				return false, fmt.Errorf("%s@%d not applied yet", s.DocID, s.Version)
			case err != nil:
				return false, err
			case rec.Version != s.Version:
				return false, fmt.Errorf("%s applied at %d, registry at %d", s.DocID, rec.Version, s.Version)
			}
		}
		return true, nil
	}))
}

// canonicalGraph writes a graph without what depends on version numbers:
// text units by their position in the document, not their id (which
// hashes the version).
func canonicalGraph(t *testing.T, a *app.App, tenant string) []string {
	t.Helper()
	g, err := a.Stores.Snapshot(t.Context(), tenant)
	require.NoError(t, err)
	pos := map[string]int{}
	records := map[string]store.SourceRecord{}
	units := func(doc string, ids []string) string {
		if _, ok := records[doc]; !ok {
			rec, err := a.Stores.Source(t.Context(), tenant, doc)
			require.NoError(t, err)
			records[doc] = rec
			for i, u := range rec.TextUnits {
				pos[u.ID] = i
			}
		}
		var ps []int
		for _, id := range ids {
			p, ok := pos[id]
			require.True(t, ok, "text unit %s of %s is not in its record", id, doc)
			ps = append(ps, p)
		}
		slices.Sort(ps)
		return fmt.Sprint(ps)
	}
	var out []string
	for _, e := range g.Entities {
		out = append(out, fmt.Sprintf("entity %s type=%s name=%q", e.ID, e.Type, e.Name))
		for _, f := range e.Sources {
			out = append(out, fmt.Sprintf("  fragment %s name=%q rank=%d desc=%q weight=%g units=%s", f.DocID, f.Name,
				f.NameRank, f.Description, f.Weight, units(f.DocID, f.TextUnits)))
		}
	}
	for _, e := range g.Edges {
		out = append(out, fmt.Sprintf("edge %s", e.ID))
		for _, s := range e.Supports {
			out = append(out, fmt.Sprintf("  support %s desc=%q weight=%g units=%s", s.DocID, s.Description, s.Weight,
				units(s.DocID, s.TextUnits)))
		}
	}
	return out
}

func post(t *testing.T, c *app.Client, d app.Document) {
	t.Helper()
	_, err := c.PostDocument(t.Context(), d)
	require.NoError(t, err, d.ID)
}

func deleteDoc(t *testing.T, c *app.Client, id string) {
	t.Helper()
	require.NoError(t, c.Do(t.Context(), http.MethodDelete, "/v1/documents/"+url.PathEscape(id), "", nil, nil), id)
}

// TestIngestOrderDoesNotChangeTheGraph ingests real postmortems twice: once
// cleanly, once in reverse order with earlier versions (another
// document's text, then half of its own), deletions and re-creations, and
// a document that comes and goes naming what the others name. The two
// graphs must be the same: entities, names, fragments, edges and supports.
func TestIngestOrderDoesNotChangeTheGraph(t *testing.T) {
	docs := determinismDocs(t)
	run := func(t *testing.T, cfg func() app.Config) {
		clean := startApp(t, cfg())
		cc := app.NewClient(clean.URL(), "")
		for _, d := range docs {
			post(t, cc, d)
		}
		settled(t, clean, "default")
		want := canonicalGraph(t, clean, "default")
		require.Greater(t, len(want), 3*len(docs), "the postmortems name things")

		messy := startApp(t, cfg())
		mc := app.NewClient(messy.URL(), "")
		// A document that names what the others name, then goes away.
		var shared strings.Builder
		for _, d := range docs {
			shared.WriteString(d.Text[:min(len(d.Text), 1500)])
			shared.WriteString("\n\n")
		}
		post(t, mc, app.Document{ID: "scratch.shared", Text: shared.String(), DocType: "incident"})
		for i := len(docs) - 1; i >= 0; i-- {
			d := docs[i]
			other := docs[(i+1)%len(docs)]
			post(t, mc, app.Document{ID: d.ID, Title: other.Title, Text: other.Text, DocType: "incident"})
			post(t, mc, app.Document{ID: d.ID, Title: d.Title, Text: d.Text[:len(d.Text)/2], DocType: d.DocType})
			if i%3 == 0 {
				deleteDoc(t, mc, d.ID)
			}
		}
		settled(t, messy, "default")
		deleteDoc(t, mc, "scratch.shared")
		for i := len(docs) - 1; i >= 0; i-- {
			post(t, mc, docs[i])
		}
		settled(t, messy, "default")
		require.Equal(t, want, canonicalGraph(t, messy, "default"))
		rep, err := messy.Stores.Audit(t.Context(), "default")
		require.NoError(t, err)
		require.Zero(t, rep.OrphanEdges+rep.OrphanEntities+rep.IndexMismatches, "%v", rep.Problems)
	}
	t.Run("embedded", func(t *testing.T) {
		run(t, func() app.Config { return app.Config{} })
	})
	t.Run("redis", func(t *testing.T) {
		n := 0
		run(t, func() app.Config {
			n++
			prefix := fmt.Sprintf("kgdet-%d-%d", time.Now().UnixNano(), n)
			t.Cleanup(func() { cleanRedis(t, prefix) })
			return app.Config{RedisURL: redisURL(), RedisPrefix: prefix}
		})
	})
}
