package query_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/services/query"
)

// BenchmarkLocalRanking compares local search's unit ranking through the
// unit index with the full scan it replaced, on a tenant of 10,000
// documents of 8 units of 40 words each (80,000 units) drawn from 2,000
// words by a Zipf law (s=1.1), titled with 3 such words, under three
// ACLs of which the caller reads two (about 6,700 documents, 53,000
// units). One op is one question in a new request view: listing and
// admitting the sources, weighing the words, ranking; the unit cache is
// warm. rankonly leaves the listing and admission out: the documents
// are loaded once, and each op weighs and ranks. Questions: common words, rare words, a mix, the title
// of one document.
func BenchmarkLocalRanking(b *testing.B) {
	const (
		docs   = 10000
		units  = 8
		words  = 40
		vocab  = 2000
		tenant = "bench"
	)
	st, err := embedded.Open(filepath.Join(b.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	ctx := b.Context()
	rng := rand.New(rand.NewPCG(3, 4))
	zipf := rand.NewZipf(rng, 1.1, 1, vocab-1)
	text := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = fmt.Sprintf("w%04d", zipf.Uint64())
		}
		return strings.Join(ws, " ")
	}
	acls := []provenance.ACL{provenance.PublicACL(), {Groups: []string{"g1"}}, {Groups: []string{"g2"}}}
	var title string // of a document the caller reads
	for d := range docs {
		doc := fmt.Sprintf("D-%05d", d)
		c := store.Contributions{Title: text(3), DocType: "note"}
		if d == 42 {
			title = c.Title
		}
		for u := range units {
			c.TextUnits = append(c.TextUnits, events.TextUnit{ID: fmt.Sprintf("u%d", u), Text: text(words) + "."})
		}
		if _, err := st.Announce(ctx, tenant, store.Announcement{DocID: doc, Version: 1, ACL: acls[d%3], Title: c.Title}); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Apply(ctx, tenant, doc, 1, c); err != nil {
			b.Fatal(err)
		}
	}
	a, err := newAuth()
	if err != nil {
		b.Fatal(err)
	}
	svc, err := query.New(query.Config{}, st, a, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	caller := provenance.Caller{Tenant: tenant, Principal: "p", Groups: []string{"g1"}}
	if _, err := query.RankLocally(ctx, svc, caller, "warm", false); err != nil {
		b.Fatal(err)
	}
	questions := map[string]string{
		"common": "What happened to w0001 and w0002 on w0005?",
		"rare":   "Why did w1500 fail after w1877?",
		"mixed":  "How did w0003 affect w0400 and w1200?",
		"title":  "What went wrong in " + title + "?",
	}
	ranker, err := query.RankerOf(ctx, svc, caller)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"common", "rare", "mixed", "title"} {
		for _, way := range []string{"scan", "index"} {
			b.Run("request/"+name+"/"+way, func(b *testing.B) {
				for range b.N {
					if _, err := query.RankLocally(ctx, svc, caller, questions[name], way == "scan"); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("rankonly/"+name+"/"+way, func(b *testing.B) {
				for range b.N {
					ranker(questions[name], way == "scan")
				}
			})
		}
	}
}
