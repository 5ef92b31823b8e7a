package status_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
)

// indexReads counts the documents whose contribution indexes status reads.
type indexReads struct {
	*embedded.Store
	mu   sync.Mutex
	read []string
}

func (s *indexReads) SourceIndexes(ctx context.Context, tenant string, ids []string) (map[string]store.SourceIndex, error) {
	s.mu.Lock()
	s.read = append(s.read, ids...)
	s.mu.Unlock()
	return s.Store.SourceIndexes(ctx, tenant, ids)
}

func (s *indexReads) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.read
	s.read = nil
	return out
}

// TestReadableCountsKeepIndexesWhileFollowing: while the collector is
// told of every graph change (Following, DocChanged), the counts of a
// caller who may read only some documents read again only the indexes of
// the documents changed since: a new document, one resolved again at the
// same version (its index changes, its version does not), every document
// of a tenant a change named none of; not following, every one; the
// counts are those of a collector that keeps nothing, every time.
func TestReadableCountsKeepIndexesWhileFollowing(t *testing.T) {
	ctx := t.Context()
	es, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { es.Close() })
	st := &indexReads{Store: es}
	ents := func(ids ...string) []store.EntityContribution {
		var out []store.EntityContribution
		for _, id := range ids {
			out = append(out, store.EntityContribution{ID: id, Type: "service", Name: id[8:]})
		}
		return out
	}
	put := func(doc string, v int64, acl provenance.ACL, c store.Contributions) {
		t.Helper()
		_, err := st.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: v, ACL: acl})
		require.NoError(t, err)
		res, err := st.Apply(ctx, "acme", doc, v, c)
		require.NoError(t, err)
		require.Equal(t, store.Applied, res.Outcome)
	}
	put("pub-1", 1, provenance.PublicACL(), store.Contributions{Entities: ents("service:a", "service:b"),
		Edges: []store.EdgeContribution{{Source: "service:a", Relation: "calls", Target: "service:b", Weight: 1}}})
	put("pub-2", 1, provenance.PublicACL(), store.Contributions{Entities: ents("service:c")})
	put("hush-1", 1, provenance.ACL{Groups: []string{"sec"}}, store.Contributions{Entities: ents("service:vault")})

	c, err := status.NewCollector(st, nil, nil, nil, nil)
	require.NoError(t, err)
	c.Following(true)
	rita := provenance.Caller{Tenant: "acme", Principal: "rita"}
	type counts struct{ Documents, Applied, Entities, Edges int }
	// check asks for rita's counts, compares them with a collector that
	// keeps nothing, and returns the documents whose indexes were read.
	check := func(want counts) []string {
		t.Helper()
		r, err := c.CollectFor(ctx, rita, false)
		require.NoError(t, err)
		got := counts{r.Documents, r.Applied, r.Entities, r.Edges}
		read := st.take()
		fresh, err := status.NewCollector(es, nil, nil, nil, nil)
		require.NoError(t, err)
		f, err := fresh.CollectFor(ctx, rita, false)
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Equal(t, counts{f.Documents, f.Applied, f.Entities, f.Edges}, got, "as a collector that keeps nothing")
		return read
	}
	require.ElementsMatch(t, []string{"pub-1", "pub-2"}, check(counts{2, 2, 3, 1}))

	put("pub-3", 1, provenance.PublicACL(), store.Contributions{Entities: ents("service:d")})
	c.DocChanged("acme", "pub-3")
	require.Equal(t, []string{"pub-3"}, check(counts{3, 3, 4, 1}), "the new document only")

	// Resolved again at its version: the registry does not change.
	res, err := st.Apply(ctx, "acme", "pub-1", 1, store.Contributions{Resolution: 1, Entities: ents("service:a", "service:e")})
	require.NoError(t, err)
	require.Equal(t, store.Applied, res.Outcome)
	c.DocChanged("acme", "pub-1")
	require.Equal(t, []string{"pub-1"}, check(counts{3, 3, 4, 0}), "the document resolved again only")

	// A status request between an apply and its event may count the index
	// before it; once the event has come the counts are exact again, with
	// no other change of the tenant.
	res, err = st.Apply(ctx, "acme", "pub-2", 1, store.Contributions{Resolution: 1, Entities: ents("service:c", "service:h")})
	require.NoError(t, err)
	require.Equal(t, store.Applied, res.Outcome)
	_, err = c.CollectFor(ctx, rita, false)
	require.NoError(t, err)
	st.take()
	c.DocChanged("acme", "pub-2")
	require.Equal(t, []string{"pub-2"}, check(counts{3, 3, 5, 0}), "counted again once the event came")

	// A change naming no document: every index of the tenant again (the
	// registry write makes the counts computed again).
	c.DocChanged("acme", "")
	_, err = st.SetACL(ctx, "acme", "hush-1", provenance.ACL{Groups: []string{"sec", "audit"}})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"pub-1", "pub-2", "pub-3"}, check(counts{3, 3, 5, 0}))

	// Not following: nothing kept.
	c.Following(false)
	put("pub-4", 1, provenance.PublicACL(), store.Contributions{Entities: ents("service:f")})
	require.ElementsMatch(t, []string{"pub-1", "pub-2", "pub-3", "pub-4"}, check(counts{4, 4, 6, 0}))
	put("pub-5", 1, provenance.PublicACL(), store.Contributions{Entities: ents("service:g")})
	require.Len(t, check(counts{5, 5, 7, 0}), 5)
}
