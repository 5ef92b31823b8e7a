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
