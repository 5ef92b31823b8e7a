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
// evaluation over the three public corpora, with doc_type incident and
// without a doc_type: at least 90% of each corpus's incidents connect to
// an entity besides themselves, none of the listed junk entities appears,
// and the causes of the labelled documents score at least the measured
// figures (rounded down), so a regression fails: on the tuning set
// (testdata/corpus-labels.json) the cues were tuned on, and on the three
// held-out sets (testdata/corpus-labels-heldout.json,
// corpus-labels-heldout2.json and corpus-labels-heldout3.json) they never
// were.
func TestCorpusEvalOnLabelledSet(t *testing.T) {
	type floor struct{ causeP, causeR, classified float64 }
	for _, tc := range []struct {
		labels  string
		docType string
		floors  map[string]floor
	}{
		{"corpus-labels.json", "incident", map[string]floor{
			"cloud-incidents":    {0.99, 0.99, 0.72},
			"dfds-postmortems":   {0.96, 0.86, 0.87},
			"wikitech-incidents": {0.99, 0.94, 0.77},
		}},
		{"corpus-labels.json", "", map[string]floor{
			"cloud-incidents":    {0.99, 0.99, 0.72},
			"dfds-postmortems":   {0.96, 0.86, 0.87},
			"wikitech-incidents": {0.99, 0.94, 0.77},
		}},
		{"corpus-labels-heldout.json", "incident", map[string]floor{
			"cloud-incidents":    {0.82, 0.87, 0.72},
			"dfds-postmortems":   {0, 0, 0.87},
			"wikitech-incidents": {0.83, 0.74, 0.77},
		}},
		{"corpus-labels-heldout.json", "", map[string]floor{
			"cloud-incidents":    {0.82, 0.87, 0.72},
			"dfds-postmortems":   {0, 0, 0.87},
			"wikitech-incidents": {0.83, 0.74, 0.77},
		}},
		{"corpus-labels-heldout2.json", "incident", map[string]floor{
			"cloud-incidents":    {0.84, 0.84, 0.72},
			"wikitech-incidents": {0.84, 0.81, 0.77},
		}},
		{"corpus-labels-heldout2.json", "", map[string]floor{
			"cloud-incidents":    {0.84, 0.84, 0.72},
			"wikitech-incidents": {0.84, 0.81, 0.77},
		}},
		{"corpus-labels-heldout3.json", "incident", map[string]floor{
			"cloud-incidents":    {0.95, 0.99, 0.72},
			"wikitech-incidents": {0.95, 0.82, 0.77},
		}},
		{"corpus-labels-heldout3.json", "", map[string]floor{
			"cloud-incidents":    {0.95, 0.99, 0.72},
			"wikitech-incidents": {0.95, 0.82, 0.77},
		}},
	} {
		t.Run(tc.labels+"/"+tc.docType, func(t *testing.T) {
			labels, err := eval.LoadCorpusLabels("../testdata/" + tc.labels)
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(labels.Docs), 45)
			x, err := offline.New(offline.Config{})
			require.NoError(t, err)
			c, err := chunk.New(tok(t), chunk.DefaultTokens, chunk.DefaultOverlap)
			require.NoError(t, err)
			figs, err := eval.Corpora{Extractor: x, Chunker: c, Dir: corporaDir, DocType: tc.docType, Generic: x.GenericMode}.Run(t.Context(), labels)
			require.NoError(t, err)
			require.Len(t, figs, len(tc.floors))
			for _, f := range figs {
				t.Logf("%s: %d docs, connected %.3f, classified %.3f; systems P %.3f R %.3f; causes P %.3f R %.3f", f.Corpus, f.Docs,
					f.ConnectedShare(), f.ClassifiedShare(), f.Systems.Precision(), f.Systems.Recall(), f.Causes.Precision(), f.Causes.Recall())
				fl := tc.floors[f.Corpus]
				require.GreaterOrEqual(t, f.ConnectedShare(), 0.9, f.Corpus)
				require.GreaterOrEqual(t, f.ClassifiedShare(), fl.classified, f.Corpus)
				require.GreaterOrEqual(t, f.Causes.Precision(), fl.causeP, f.Corpus)
				require.GreaterOrEqual(t, f.Causes.Recall(), fl.causeR, f.Corpus)
				for _, top := range f.Top {
					require.NotContains(t, []string{"service:inservice", "service:selfservice", "service:varservice",
						"component:donedb", "component:createdatabase", "service:servicetoservice"}, top.ID, "junk entity")
				}
			}
		})
	}
}
