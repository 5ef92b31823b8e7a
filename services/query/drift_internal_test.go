package query

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/store"
)

// primerReportsScan is the primer as it was chosen before reportWords:
// every admitted report's text split and scored for each question.
func primerReportsScan(question string, reports map[string]store.Report, level *int) []store.Report {
	words := contentWords(question)
	df := map[string]int{}
	texts := map[string]map[string]bool{}
	for id, r := range reports {
		has := map[string]bool{}
		text := r.Title + " " + r.Summary
		for _, f := range r.Findings {
			text += " " + f.Summary
		}
		for _, w := range wordsOf(text) {
			has[w] = true
		}
		texts[id] = has
		for _, w := range words {
			if has[w] {
				df[w]++
			}
		}
	}
	type scored struct {
		r     store.Report
		score float64
	}
	var rs []scored
	for id, r := range reports {
		if level != nil && r.Level != *level {
			continue
		}
		sc := 0.0
		for _, w := range words {
			if texts[id][w] {
				sc += 1 / float64(df[w])
			}
		}
		if sc > 0 {
			rs = append(rs, scored{r, sc})
		}
	}
	if len(rs) == 0 { // no report holds a word of the question: the top rated
		for _, r := range reports {
			if level == nil || r.Level == *level {
				rs = append(rs, scored{r, 0})
			}
		}
	}
	slices.SortFunc(rs, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.r.Rating, a.r.Rating), cmp.Compare(a.r.ID, b.r.ID))
	})
	var out []store.Report
	for i, r := range rs {
		if i == driftPrimerReports {
			break
		}
		out = append(out, r.r)
	}
	return out
}

// TestPrimerReportsFromTheWordIndex checks the primer read through the
// reports' word index against a scan of every admitted report's text:
// random reports (several per community, of three levels, words drawn
// from a small vocabulary with case, punctuation and non-ASCII), random
// admitted subsets (one report per community, as admitReports keeps),
// random questions, with and without a level.
func TestPrimerReportsFromTheWordIndex(t *testing.T) {
	vocab := []string{"latency", "Latency", "SLO", "slo-breach", "DNS", "dns", "resolver", "timeouts", "timeout", "inference-api",
		"Überlast", "überlast", "capacity", "the", "of", "a", "7", "42", "cert", "expired", "rollback", "deploys", "deploy", "région"}
	text := func(r *rand.Rand, n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(vocab[r.IntN(len(vocab))])
			b.WriteString([]string{" ", ", ", ". ", "/", " (", ") "}[r.IntN(6)])
		}
		return b.String()
	}
	for seed := range 300 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		var rs []store.Report
		for i := range 1 + r.IntN(60) {
			rep := store.Report{ID: fmt.Sprintf("r%03d", i), Community: fmt.Sprintf("c%02d", r.IntN(25)), Level: r.IntN(3),
				Title: text(r, r.IntN(4)), Summary: text(r, r.IntN(12)), Rating: float64(r.IntN(3)),
				UpdatedAt: time.Unix(int64(r.IntN(5)), 0)}
			for range r.IntN(3) {
				rep.Findings = append(rep.Findings, store.Finding{Summary: text(r, r.IntN(6))})
			}
			rs = append(rs, rep)
		}
		words := newReportWords(rs)
		// The admitted reports: per community, one of its reports that
		// the caller may read, if any.
		admitted := map[string]store.Report{}
		for _, rep := range rs {
			if r.IntN(4) == 0 {
				continue
			}
			if prev, ok := admitted[rep.Community]; !ok || rep.UpdatedAt.After(prev.UpdatedAt) {
				admitted[rep.Community] = rep
			}
		}
		for q := range 10 {
			question := text(r, 1+r.IntN(6))
			var level *int
			if q%3 == 0 {
				l := r.IntN(3)
				level = &l
			}
			want := primerReportsScan(question, admitted, level)
			got := primerReports(question, admitted, level, words)
			require.Equal(t, ids(want), ids(got), "seed %d, question %q, level %v", seed, question, level)
		}
	}
}

func ids(rs []store.Report) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// A question that shares no word with any admitted report is primed with
// the highest rated ones (of its level, when it names one), not with none;
// one that shares a word is primed with the reports holding it only.
func TestPrimerFallsBackToTheTopRatedReports(t *testing.T) {
	rs := []store.Report{
		{ID: "r-a", Community: "a", Level: 0, Title: "Certificate expiry on token-issuer", Rating: 6},
		{ID: "r-b", Community: "b", Level: 0, Title: "Basket cache filled up", Rating: 9},
		{ID: "r-c", Community: "c", Level: 1, Title: "Checkout and payments", Rating: 8},
		{ID: "r-d", Community: "d", Level: 0, Title: "Pricing flag push", Rating: 2},
		{ID: "r-e", Community: "e", Level: 0, Title: "Image resizer pool", Rating: 6},
	}
	admitted := map[string]store.Report{}
	for _, r := range rs {
		admitted[r.Community] = r
	}
	words := newReportWords(rs)
	require.Equal(t, []string{"r-b", "r-c", "r-a"}, ids(primerReports("Why did logins fail?", admitted, nil, words)),
		"by rating, then id")
	zero := 0
	require.Equal(t, []string{"r-b", "r-a", "r-e"}, ids(primerReports("Why did logins fail?", admitted, &zero, words)),
		"of the level asked")
	require.Equal(t, []string{"r-a"}, ids(primerReports("When did the certificate expire?", admitted, nil, words)),
		"a shared word keeps the primer to the reports holding it")
	require.Empty(t, primerReports("Why did logins fail?", map[string]store.Report{}, nil, words), "no admitted report, no primer")
}
