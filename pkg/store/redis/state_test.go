package redis_test

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/redis"
	"github.com/kgstream/kgstream/pkg/store/storetest"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

// dumpTenant returns every key of a tenant but its stripes and coarse
// stripes (random tokens), sorted, each as dumpKey renders it after the key (less the
// tenant's prefix) and its type.
func dumpTenant(t *testing.T, c *goredis.Client, prefix, tenant string) string {
	ctx := t.Context()
	base := prefix + ":{" + tenant + "}:"
	var lines []string
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		rest, ok := strings.CutPrefix(key, base)
		if !ok || strings.HasPrefix(rest, "gv:") || strings.HasPrefix(rest, "gc:") {
			continue
		}
		typ, content := dumpKey(t, c, key)
		for _, line := range content {
			lines = append(lines, rest+" "+typ+" "+line)
		}
	}
	require.NoError(t, iter.Err())
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// dumpKey returns the type of key and what it holds, in lines: a string's
// value; a set's members, sorted, quoted, on one line; a hash's fields,
// one a line, sorted, each quoted and followed by its value. A value is
// shown decoded, after the compression it was stored with (plain, s2 or
// zstd; see store.CompressionOf), so the lines do not depend on the
// compressors' output, only on what is stored and how.
func dumpKey(t *testing.T, c *goredis.Client, key string) (typ string, lines []string) {
	ctx := t.Context()
	typ, err := c.Type(ctx, key).Result()
	require.NoError(t, err)
	switch typ {
	case "string":
		v, err := c.Get(ctx, key).Result()
		require.NoError(t, err)
		lines = append(lines, dumpValue(t, v))
	case "set":
		ms, err := c.SMembers(ctx, key).Result()
		require.NoError(t, err)
		slices.Sort(ms)
		var b strings.Builder
		for i, m := range ms {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%q", m)
		}
		lines = append(lines, b.String())
	case "hash":
		h, err := c.HGetAll(ctx, key).Result()
		require.NoError(t, err)
		for _, f := range slices.Sorted(maps.Keys(h)) {
			lines = append(lines, fmt.Sprintf("%q %s", f, dumpValue(t, h[f])))
		}
	default:
		lines = append(lines, "")
	}
	return typ, lines
}

// dumpValue renders a stored value: the name of its compression, then
// its decoded bytes, as they are if they are text on one line (JSON),
// else quoted.
func dumpValue(t *testing.T, v string) string {
	plain, err := store.DecompressValue([]byte(v))
	require.NoError(t, err)
	name := map[store.Compression]string{
		store.NoCompression:    "plain",
		store.FastCompression:  "s2",
		store.SmallCompression: "zstd",
	}[store.CompressionOf([]byte(v))]
	if utf8.Valid(plain) && !bytes.ContainsAny(plain, "\n\r") {
		return name + " " + string(plain)
	}
	return fmt.Sprintf("%s %q", name, plain)
}

// TestApplyStoredState applies a fixed sequence of changes (documents
// sharing entities and edges, so supports spill; edits, respellings, a type
// change, deletions, a large edit) and
// compares everything the tenant then holds with
// testdata/applied-state.txt. The keys and values an apply writes are the
// stored format: however the writes are sent, they must not change
// (go test -update rewrites the file, for a deliberate change of format).
func TestApplyStoredState(t *testing.T) {
	ctx := t.Context()
	s, c, prefix := freshStore(t, redis.WithClock(func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }))
	const tenant = "acme"
	apply := func(doc string, version int64, contrib store.Contributions) {
		t.Helper()
		res, err := s.Apply(ctx, tenant, doc, version, contrib)
		require.NoError(t, err)
		require.Equal(t, store.Applied, res.Outcome, "%s version %d", doc, version)
	}
	del := func(doc string, version int64) {
		t.Helper()
		_, err := s.Delete(ctx, tenant, doc, version)
		require.NoError(t, err)
	}
	// 40 entities for 60 documents: most edges have several supports, some
	// more than a head holds inline.
	corpus := storetest.BenchCorpus{Docs: 60, EdgesPerDoc: 10, Entities: 40}
	for i := range corpus.Docs {
		apply(corpus.DocID(i), 1, corpus.Doc(i))
	}
	for i := range 20 { // edits: another document's contributions
		apply(corpus.DocID(i), 2, corpus.Doc(corpus.Docs+i))
	}
	for i := 20; i < 30; i++ {
		del(corpus.DocID(i), 2)
	}
	for i := range 8 {
		apply(fmt.Sprintf("hub-%d", i), 1, storetest.HubDoc(i, 1))
	}
	apply("hub-2", 2, storetest.HubDoc(2, 2)) // another spelling of the hub
	apply("lone", 1, store.Contributions{
		TextUnits: []events.TextUnit{{ID: "u", Text: "t"}},
		Entities:  []store.EntityContribution{{ID: "x:lone", Type: "tool", Name: "Lone", TextUnits: []string{"u"}}},
	})
	apply("lone", 2, store.Contributions{ // the type of an entity only it holds
		TextUnits: []events.TextUnit{{ID: "u", Text: "t"}},
		Entities:  []store.EntityContribution{{ID: "x:lone", Type: "team", Name: "Lone again", TextUnits: []string{"u"}}},
	})
	// A large edit: many members to each of a few sets.
	big := func(from, to int) store.Contributions {
		c := store.Contributions{TextUnits: []events.TextUnit{{ID: "u", Text: "t"}}}
		for i := from; i < to; i++ {
			part := store.EntityContribution{ID: fmt.Sprintf("part:%03d", i), Type: "part",
				Name: fmt.Sprintf("Part %d", i), NameRank: 1 + i%2, TextUnits: []string{"u"}}
			target := corpus.Doc(i % corpus.Docs).Entities[0]
			target.TextUnits = []string{"u"}
			c.Entities = append(c.Entities, part, target)
			c.Edges = append(c.Edges, store.EdgeContribution{Source: part.ID, Relation: "in", Target: target.ID,
				Weight: float64(i % 3), TextUnits: []string{"u"}})
		}
		return c
	}
	apply("big", 1, big(0, 120))
	apply("big", 2, big(40, 140))

	got := dumpTenant(t, c, prefix, tenant)
	path := filepath.Join("testdata", "applied-state.txt")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		t.Logf("wrote %s", path)
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}
