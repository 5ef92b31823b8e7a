//go:build integration

package app_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
)

// corpusText joins the files of the named corpora (in name order) until the
// text is n bytes long, cutting at a line end.
func corpusText(t *testing.T, n int, dirs ...string) string {
	t.Helper()
	var sb strings.Builder
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join("../../../../shared/corpora", dir, "*"))
		require.NoError(t, err)
		require.NotEmpty(t, files, "corpus %s must be at ../shared beside the checkout", dir)
		sort.Strings(files)
		for _, f := range files {
			if filepath.Base(f) == "LICENSE" {
				continue
			}
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			sb.Write(data)
			sb.WriteString("\n\n")
			if sb.Len() >= n {
				s := sb.String()[:n]
				return s[:strings.LastIndexByte(s, '\n')+1]
			}
		}
	}
	t.Fatalf("the corpora %v hold fewer than %d bytes", dirs, n)
	return ""
}

// TestLargeDocumentsApplyEndToEnd sends a 3.5 MB document and a 900 KB
// document whose extraction event is larger than 1 MiB through the
// all-in-one, with the embedded and with the Redis stores: both are
// applied, nothing is dead-lettered.
func TestLargeDocumentsApplyEndToEnd(t *testing.T) {
	t.Run("embedded", func(t *testing.T) { largeDocumentsApply(t, app.Config{}) })
	t.Run("redis", func(t *testing.T) {
		prefix := fmt.Sprintf("kgtest-large-%d", time.Now().UnixNano())
		t.Cleanup(func() { cleanRedis(t, prefix) })
		largeDocumentsApply(t, app.Config{RedisURL: redisURL(), RedisPrefix: prefix})
	})
}

func largeDocumentsApply(t *testing.T, cfg app.Config) {
	a := startApp(t, cfg)
	c := app.NewClient(a.URL(), "")
	ctx := t.Context()
	docs := []app.Document{
		{ID: "large-mixed", Title: "Many incidents", DocType: "incident",
			Text: corpusText(t, 3_500_000, "wikitech-incidents", "cloud-incidents", "dfds-postmortems", "github-status-stream")},
		{ID: "large-wikitech", Title: "Wikitech incidents", DocType: "incident",
			Text: corpusText(t, 900_000, "wikitech-incidents")},
	}
	for _, d := range docs {
		acc, err := c.PostDocument(ctx, d)
		require.NoError(t, err, "posting %s (%d bytes)", d.ID, len(d.Text))
		require.Equal(t, int64(1), acc.Version)
	}
	for _, d := range docs {
		eventually(t, 10*time.Minute, d.ID+" applied", func() bool {
			src, err := a.Stores.Source(ctx, "default", d.ID)
			return err == nil && src.Version == 1
		})
		src, err := a.Stores.Source(ctx, "default", d.ID)
		require.NoError(t, err)
		require.NotEmpty(t, src.Entities, "%s applied without entities", d.ID)
		require.NotEmpty(t, src.Edges, "%s applied without edges", d.ID)
		t.Logf("%s: %d bytes of text, %d entities, %d edges", d.ID, len(d.Text), len(src.Entities), len(src.Edges))
	}
	// The 900 KB document's extraction is larger than a NATS message: it
	// travelled by reference.
	cons, err := a.Bus.JetStream().OrderedConsumer(ctx, a.Bus.StreamName(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{a.Bus.Subjects().For(events.KindExtracted, "default")}})
	require.NoError(t, err)
	found := false
	for !found {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err, "the extraction of large-wikitech is not on the stream")
		data, err := a.Bus.EventData(ctx, m)
		require.NoError(t, err)
		var ev events.Extracted
		require.NoError(t, events.Decode(data, &ev))
		if ev.DocID != "large-wikitech" {
			continue
		}
		found = true
		require.True(t, stream.ByReference(m), "the extraction travelled inline")
		require.Greater(t, len(data), 1<<20, "the extraction event is %d bytes", len(data))
		t.Logf("large-wikitech: %d bytes of text, extraction event %d bytes", len(docs[1].Text), len(data))
	}
	st := status(t, c, false)
	require.Zero(t, st.DeadLetters)
	require.Greater(t, st.Entities, 0)
}
