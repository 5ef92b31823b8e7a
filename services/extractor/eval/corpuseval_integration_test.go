//go:build integration

package eval_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/eval"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// TestCorpusEvalOnLabelledSet runs `kgstream eval extraction --labels`'s
// evaluation over the three public corpora: at least 90% of each corpus's
// incidents connect to an entity besides themselves, and the causes of
// the labelled documents (testdata/corpus-labels.json) score at least the
// measured figures (rounded down), so a regression fails.
func TestCorpusEvalOnLabelledSet(t *testing.T) {
	labels, err := eval.LoadCorpusLabels("../testdata/corpus-labels.json")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(labels.Docs), 60)
	x, err := offline.New(offline.Config{})
	require.NoError(t, err)
	c, err := chunk.New(tok(t), chunk.DefaultTokens, chunk.DefaultOverlap)
	require.NoError(t, err)
	figs, err := eval.Corpora{Extractor: x, Chunker: c, Dir: corporaDir, DocType: "incident", Generic: x.GenericMode}.Run(t.Context(), labels)
	require.NoError(t, err)
	floors := map[string]struct{ causeP, causeR, classified float64 }{
		"cloud-incidents":    {0.88, 0.93, 0.65},
		"dfds-postmortems":   {0.8, 0.64, 0.82},
		"wikitech-incidents": {0.57, 0.55, 0.73},
	}
	require.Len(t, figs, len(floors))
	for _, f := range figs {
		t.Logf("%s: %d docs, connected %.3f, classified %.3f; systems P %.3f R %.3f; causes P %.3f R %.3f", f.Corpus, f.Docs,
			f.ConnectedShare(), f.ClassifiedShare(), f.Systems.Precision(), f.Systems.Recall(), f.Causes.Precision(), f.Causes.Recall())
		fl := floors[f.Corpus]
		require.GreaterOrEqual(t, f.ConnectedShare(), 0.9, f.Corpus)
		require.GreaterOrEqual(t, f.ClassifiedShare(), fl.classified, f.Corpus)
		require.GreaterOrEqual(t, f.Causes.Precision(), fl.causeP, f.Corpus)
		require.GreaterOrEqual(t, f.Causes.Recall(), fl.causeR, f.Corpus)
		for _, top := range f.Top {
			require.NotContains(t, []string{"service:inservice", "service:selfservice", "service:varservice",
				"component:donedb", "component:createdatabase", "service:servicetoservice"}, top.ID, "junk entity")
		}
	}
}
