package query_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/query"
)

// lexVocab holds inflections that stem together ("nodes", "node"),
// digits, stopwords and one-letter words, so questions meet units in
// every way the tokenizer allows.
var lexVocab = []string{"node", "nodes", "certificate", "certificates", "expired", "expire", "gateway", "redis",
	"cache", "dns", "pool", "exhaustion", "kafka", "broker", "brokers", "metrics", "missing", "proxy", "restart",
	"restarted", "restarting", "deploy", "rollback", "disk", "full", "latency", "timeout", "queue", "1008", "42",
	"x", "the", "of", "what", "why", "on", "labvirt1008", "billing", "alert", "page"}

func lexWords(r *rand.Rand, n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = lexVocab[r.IntN(len(lexVocab))]
	}
	return strings.Join(ws, " ")
}

// lexContributions is a document version of 1..6 units of random words,
// with a title of random words (or none, so the doc id is the title).
func lexContributions(r *rand.Rand, doc string) store.Contributions {
	c := store.Contributions{DocType: "note"}
	if r.IntN(3) > 0 {
		c.Title = lexWords(r, 1+r.IntN(3))
	}
	for u := range 1 + r.IntN(6) {
		c.TextUnits = append(c.TextUnits, events.TextUnit{ID: fmt.Sprintf("u%d", u), Text: lexWords(r, 3+r.IntN(15)) + "."})
	}
	return c
}

var lexACLs = []provenance.ACL{provenance.PublicACL(), {Groups: []string{"g1"}}, {Groups: []string{"g2"}},
	{Principals: []string{"p7"}}, {Groups: []string{"g1", "g2"}}}

var lexCallers = []provenance.Caller{
	{Tenant: "lex", Principal: "nobody"},
	{Tenant: "lex", Principal: "one", Groups: []string{"g1"}},
	{Tenant: "lex", Principal: "two", Groups: []string{"g1", "g2"}},
	{Tenant: "lex", Principal: "p7", Groups: []string{"g2"}},
}

// lexDocID names doc d; a few ids hold '#' or words of the vocabulary.
func lexDocID(d int) string {
	switch d % 50 {
	case 7:
		return fmt.Sprintf("doc#%03d", d)
	case 13:
		return fmt.Sprintf("kafka broker %03d", d)
	}
	return fmt.Sprintf("doc-%03d", d)
}

// requireSameRankings ranks many random questions (with random priors,
// some naming units that do not exist or documents the caller cannot
// read) for every caller through the index and by the full scan.
func requireSameRankings(t *testing.T, svc *query.Service, r *rand.Rand, docs int) (nonEmpty int) {
	t.Helper()
	for range 60 {
		q := "What happened to " + lexWords(r, 1+r.IntN(4)) + "?"
		priors := map[string]float64{}
		for range r.IntN(5) {
			priors[fmt.Sprintf("%s#u%d", lexDocID(r.IntN(docs)), r.IntN(7))] = r.Float64()
		}
		limit := []int{1, 5, 40, 1000}[r.IntN(4)]
		for _, c := range lexCallers {
			ix, sc, err := query.RankBothWays(t.Context(), svc, c, q, priors, limit)
			require.NoError(t, err)
			require.Equal(t, sc, ix, "caller %s, question %q", c.Principal, q)
			if fmt.Sprint(ix.Units) != "[]" {
				nonEmpty++
			}
		}
	}
	return nonEmpty
}

// TestUnitIndexRanksAsTheScan builds 300 documents of five ACLs, then
// deletes, edits, leaves edits pending and revokes, comparing the
// ranking through the unit index with the full scan of every readable
// unit after each step: the same weights, units, order and scores.
func TestUnitIndexRanksAsTheScan(t *testing.T) {
	st := openStore(t)
	const tenant, docs = "lex", 300
	r := rand.New(rand.NewPCG(11, 17))
	for d := range docs {
		c := lexContributions(r, lexDocID(d))
		announceApply(t, st, tenant, lexDocID(d), 1, lexACLs[d%len(lexACLs)], c)
	}
	a, err := newAuth()
	require.NoError(t, err)
	svc, err := query.New(query.Config{}, st, a, nil, nil)
	require.NoError(t, err)
	require.Positive(t, requireSameRankings(t, svc, r, docs))
	versions, live, _ := query.IndexStats(svc, tenant)
	require.Equal(t, docs, versions, "every document is cached once a caller reading all of them asked")
	require.Positive(t, live)

	ctx := t.Context()
	for d := 0; d < docs; d += 9 { // deleted: registry and store
		_, err := st.MarkDeleted(ctx, tenant, lexDocID(d))
		require.NoError(t, err)
		_, err = st.Delete(ctx, tenant, lexDocID(d), 2)
		require.NoError(t, err)
	}
	for d := 1; d < docs; d += 6 { // edited to version 2
		announceApply(t, st, tenant, lexDocID(d), 2, lexACLs[(d+1)%len(lexACLs)], lexContributions(r, lexDocID(d)))
	}
	for d := 2; d < docs; d += 10 { // edit announced, not applied yet
		if d%9 == 0 {
			continue
		}
		_, err := st.Announce(ctx, tenant, store.Announcement{DocID: lexDocID(d), Version: 2, ACL: lexACLs[d%len(lexACLs)]})
		require.NoError(t, err)
	}
	require.Positive(t, requireSameRankings(t, svc, r, docs))
	for d := 3; d < docs; d += 4 { // revoked and re-permitted
		if d%9 == 0 {
			continue
		}
		_, err := st.SetACL(ctx, tenant, lexDocID(d), lexACLs[(d+2)%len(lexACLs)])
		require.NoError(t, err)
	}
	require.Positive(t, requireSameRankings(t, svc, r, docs))
	_, _, dead := query.IndexStats(svc, tenant)
	require.Positive(t, dead, "replaced versions leave dead postings until a rebuild")

	// Editing most documents again makes dead postings outnumber live
	// ones: the index is rebuilt, and ranks as the scan still.
	for d := 0; d < docs; d++ {
		if d%9 != 0 && d%10 != 2 {
			announceApply(t, st, tenant, lexDocID(d), 3, lexACLs[d%len(lexACLs)], lexContributions(r, lexDocID(d)))
		}
	}
	require.Positive(t, requireSameRankings(t, svc, r, docs))
	_, live, dead = query.IndexStats(svc, tenant)
	require.LessOrEqual(t, dead, live)
}

// TestUnitIndexRanksAcrossAChange loads a request's documents, then has
// other requests replace cached versions (and rebuild the index) before
// that request ranks: it still ranks its own snapshot as the scan does.
func TestUnitIndexRanksAcrossAChange(t *testing.T) {
	st := openStore(t)
	const tenant, docs = "lex", 60
	r := rand.New(rand.NewPCG(5, 23))
	for d := range docs {
		announceApply(t, st, tenant, lexDocID(d), 1, lexACLs[d%2], lexContributions(r, lexDocID(d)))
	}
	a, err := newAuth()
	require.NoError(t, err)
	svc, err := query.New(query.Config{}, st, a, nil, nil)
	require.NoError(t, err)
	caller := lexCallers[2]
	version := int64(1)
	for round := range 3 {
		edited := 5 + round*25 // round 1 and 2 replace most versions: a rebuild
		change := func() error {
			version++
			v := version
			for d := range edited {
				if _, err := st.Announce(t.Context(), tenant, store.Announcement{DocID: lexDocID(d), Version: v, ACL: lexACLs[d%2]}); err != nil {
					return err
				}
				if _, err := st.Apply(t.Context(), tenant, lexDocID(d), v, lexContributions(r, lexDocID(d))); err != nil {
					return err
				}
			}
			// Another request caches the new versions.
			_, _, err := query.RankBothWays(t.Context(), svc, caller, "nodes", nil, 5)
			return err
		}
		for _, q := range []string{"Why did the certificate expire on labvirt1008?", "kafka brokers metrics missing", "x of 42 nodes"} {
			ix, sc, err := query.RankAcrossChange(t.Context(), svc, caller, q, change)
			require.NoError(t, err)
			require.Equal(t, sc, ix, "round %d, question %q", round, q)
			require.NotEqual(t, "[]", fmt.Sprint(ix.Units))
		}
	}
}
