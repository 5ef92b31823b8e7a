package embedded

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	json "github.com/segmentio/encoding/json"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/storetest"
)

// dumpFile returns every bucket's sequence and every key with its value
// decompressed, by bucket path, so two files can be compared for content
// whatever their encoding.
func dumpFile(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	out := map[string]string{}
	var walk func(prefix string, b *bolt.Bucket)
	walk = func(prefix string, b *bolt.Bucket) {
		out[prefix+"#seq"] = fmt.Sprint(b.Sequence())
		require.NoError(t, b.ForEach(func(k, v []byte) error {
			if v == nil {
				walk(prefix+"/"+string(k), b.Bucket(k))
				return nil
			}
			plain, err := store.DecompressValue(v)
			require.NoError(t, err)
			if json.Valid(plain) {
				var buf bytes.Buffer
				require.NoError(t, json.Compact(&buf, plain))
				plain = buf.Bytes()
			}
			out[prefix+"/"+string(k)] = string(plain)
			return nil
		}))
	}
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			walk(string(name), b)
			return nil
		})
	}))
	return out
}

// TestCompactKeepsEveryValue: a store written partly by an older build
// (a plain JSON value), edited and with documents deleted, is
// compacted: every bucket, sequence, key and value (decompressed) is the
// same, the plain values are now compressed, the file is smaller, and a
// deleted document's text is not in the file.
func TestCompactKeepsEveryValue(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "kgstream.db")
	s, err := Open(path, Options{NoSync: true})
	require.NoError(t, err)
	for i := range 60 {
		c := storetest.HubDoc(i, 1)
		c.TextUnits = []events.TextUnit{{ID: "u", Text: strings.Repeat(fmt.Sprintf("The broker of doc %d restarted. ", i), 20)}}
		_, err := s.Apply(ctx, "acme", fmt.Sprintf("doc-%03d", i), 1, c)
		require.NoError(t, err)
		_, err = s.Announce(ctx, "acme", store.Announcement{DocID: fmt.Sprintf("doc-%03d", i), Version: 1,
			ACL: provenance.ACL{Public: true}})
		require.NoError(t, err)
	}
	// A small document (its record stays plain JSON) holding a marker, then
	// deleted.
	const marker = "zebra-marker-7731"
	_, err = s.Apply(ctx, "acme", "doc-gone", 1, store.Contributions{TextUnits: []events.TextUnit{{ID: "u", Text: marker}}})
	require.NoError(t, err)
	_, err = s.Delete(ctx, "acme", "doc-gone", 2)
	require.NoError(t, err)
	for i := range 20 { // edits and deletions free pages
		_, err := s.Delete(ctx, "acme", fmt.Sprintf("doc-%03d", i), 2)
		require.NoError(t, err)
	}
	// A value an older build wrote: plain JSON.
	var plainRecord []byte
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		g, err := openGraph(tx, "acme", false)
		require.NoError(t, err)
		v, err := store.DecompressValue(g.sources.Get([]byte("doc-050")))
		require.NoError(t, err)
		plainRecord = bytes.Clone(v)
		return g.sources.Put([]byte("doc-050"), plainRecord)
	}))
	require.NoError(t, s.Close())
	before := dumpFile(t, path)

	st, err := Compact(ctx, path)
	require.NoError(t, err)
	require.Less(t, st.BytesAfter, st.BytesBefore)
	require.Positive(t, st.Recoded)
	require.Positive(t, st.Values)

	after := dumpFile(t, path)
	require.Equal(t, before, after)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.False(t, bytes.Contains(data, []byte(marker)), "the deleted document's text is still in the file")
	require.False(t, bytes.Contains(data, plainRecord), "the record is still stored as plain JSON")

	s, err = Open(path, Options{})
	require.NoError(t, err)
	defer s.Close()
	hub, err := s.Entity(ctx, "acme", "service:hub")
	require.NoError(t, err)
	require.Len(t, hub.Sources, 40)
	rep, err := s.Audit(ctx, "acme")
	require.NoError(t, err)
	require.Empty(t, rep.Problems)
}

// TestCompactRefusesAnOpenStore: while a process has the store open,
// Compact fails and leaves the file as it was.
func TestCompactRefusesAnOpenStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kgstream.db")
	s, err := Open(path, Options{NoSync: true})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Apply(t.Context(), "acme", "doc-1", 1, storetest.HubDoc(1, 1))
	require.NoError(t, err)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	_, err = Compact(t.Context(), path)
	require.Error(t, err)
	afterData, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, afterData)
	_, err = os.Stat(path + ".compact")
	require.True(t, os.IsNotExist(err), "a partial copy was left behind")
}

// TestOpenUpgradesLayoutOne: a layout 1 file (plain JSON values) opens and
// is marked layout 3 (TestOpenConvertsWholeLayout converts one with a
// graph); the refusal of unknown layouts is
// TestOpenRefusesOtherLayout.
func TestOpenUpgradesLayoutOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	s, err := Open(path, Options{})
	require.NoError(t, err)
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(keyLayout), []byte(layoutUncompressed))
	}))
	require.NoError(t, s.Close())
	s, err = Open(path, Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		require.Equal(t, layoutVersion, string(tx.Bucket([]byte(bucketMeta)).Get([]byte(keyLayout))))
		return nil
	}))
}

// TestSourceRecordCodecs: an apply writes a document's record with S2,
// a record an older build wrote with zstd reads the same, and Compact
// rewrites S2 records with zstd, leaving what Source returns as it was.
func TestSourceRecordCodecs(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "kgstream.db")
	s, err := Open(path, Options{NoSync: true})
	require.NoError(t, err)
	for i := range 2 {
		c := storetest.HubDoc(i, 1)
		c.TextUnits = []events.TextUnit{{ID: "u", Text: strings.Repeat(fmt.Sprintf("The broker of doc %d restarted. ", i), 20)}}
		c.Raw = []byte(`{"doc_id":"doc-` + fmt.Sprint(i) + `","text":"` + strings.Repeat("the broker restarted ", 20) + `"}`)
		_, err := s.Apply(ctx, "acme", fmt.Sprintf("doc-%d", i), 1, c)
		require.NoError(t, err)
	}
	stored := func(doc string) []byte {
		var v []byte
		require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
			g, err := openGraph(tx, "acme", false)
			require.NoError(t, err)
			v = bytes.Clone(g.sources.Get([]byte(doc)))
			return nil
		}))
		return v
	}
	want := map[string]store.SourceRecord{}
	for _, doc := range []string{"doc-0", "doc-1"} {
		require.Equal(t, store.FastCompression, store.CompressionOf(stored(doc)), doc)
		want[doc], err = s.Source(ctx, "acme", doc)
		require.NoError(t, err)
	}
	// doc-1 as an older build wrote it: zstd.
	plain, err := store.DecompressValue(stored("doc-1"))
	require.NoError(t, err)
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		g, err := openGraph(tx, "acme", false)
		require.NoError(t, err)
		return g.sources.Put([]byte("doc-1"), store.CompressValue(plain, store.SmallCompression))
	}))
	require.Equal(t, store.SmallCompression, store.CompressionOf(stored("doc-1")))
	got, err := s.Source(ctx, "acme", "doc-1")
	require.NoError(t, err)
	require.Equal(t, want["doc-1"], got)
	s = compactAndOpen(t, s, path)
	for _, doc := range []string{"doc-0", "doc-1"} {
		require.Equal(t, store.SmallCompression, store.CompressionOf(stored(doc)), doc)
		got, err := s.Source(ctx, "acme", doc)
		require.NoError(t, err)
		require.Equal(t, want[doc], got, doc)
	}
}

// TestCommunityCodecs: a re-clustering (ReplaceCommunities) and a
// provisional placement (UpdateCommunities) write communities with S2, a
// community an older build wrote with zstd reads the same, and Compact
// rewrites them with zstd, leaving what Communities returns as it was.
func TestCommunityCodecs(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "kgstream.db")
	s, err := Open(path, Options{NoSync: true})
	require.NoError(t, err)
	community := func(id string, n int) store.Community {
		c := store.Community{ID: "c0-" + id, MemberHash: id, Run: 1}
		for i := range n {
			c.Members = append(c.Members, fmt.Sprintf("incident:%s-%03d", id, i))
			c.Sources = append(c.Sources, provenance.SourceRef{DocID: fmt.Sprintf("doc-%03d", i), Version: 1})
		}
		return c
	}
	require.NoError(t, s.ReplaceCommunities(ctx, "acme", 1, []store.Community{community("a", 50), community("b", 50)}))
	require.NoError(t, s.UpdateCommunities(ctx, "acme", 1, []store.Community{community("b", 60)}))
	stored := func(id string) []byte {
		var v []byte
		require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
			b, err := tenantBucket(tx, bucketCommunities, "acme", false)
			require.NoError(t, err)
			v = bytes.Clone(b.Bucket([]byte(subItems)).Get([]byte(id)))
			return nil
		}))
		return v
	}
	for _, id := range []string{"c0-a", "c0-b"} {
		require.Equal(t, store.FastCompression, store.CompressionOf(stored(id)), id)
	}
	want, err := s.Communities(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, want[1].Members, 60)
	// c0-a as an older build wrote it: zstd.
	plain, err := store.DecompressValue(stored("c0-a"))
	require.NoError(t, err)
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		b, err := tenantBucket(tx, bucketCommunities, "acme", false)
		require.NoError(t, err)
		return b.Bucket([]byte(subItems)).Put([]byte("c0-a"), store.CompressValue(plain, store.SmallCompression))
	}))
	require.Equal(t, store.SmallCompression, store.CompressionOf(stored("c0-a")))
	got, err := s.Communities(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, want, got)
	s = compactAndOpen(t, s, path)
	for _, id := range []string{"c0-a", "c0-b"} {
		require.Equal(t, store.SmallCompression, store.CompressionOf(stored(id)), id)
	}
	got, err = s.Communities(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// compactAndOpen closes s, compacts its file at path and opens it again
// (closed at the end of the test).
func compactAndOpen(t *testing.T, s *Store, path string) *Store {
	t.Helper()
	require.NoError(t, s.Close())
	_, err := Compact(t.Context(), path)
	require.NoError(t, err)
	s, err = Open(path, Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}
