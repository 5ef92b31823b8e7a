//go:build integration

package eval_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/taxonomy"
	"github.com/kgstream/kgstream/services/extractor/eval"
)

// TestHeldOutLabelsAreValid checks the held-out labelled set
// (testdata/corpus-labels-heldout.json): every document exists in its
// corpus under the id the evaluation gives it, none is in the tuning set
// (testdata/corpus-labels.json) or listed twice, every corpus of the
// tuning set is represented, and every cause is a generic mode of the
// default taxonomy.
func TestHeldOutLabelsAreValid(t *testing.T) {
	tuning, err := eval.LoadCorpusLabels("../testdata/corpus-labels.json")
	require.NoError(t, err)
	heldOut, err := eval.LoadCorpusLabels("../testdata/corpus-labels-heldout.json")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(heldOut.Docs), 45)
	generic := genericModes(t)
	inTuning := map[string]bool{}
	tuningCorpora := map[string]bool{}
	for _, d := range tuning.Docs {
		inTuning[d.Corpus+"/"+d.File] = true
		inTuning[d.Corpus+"#"+d.ID] = true
		tuningCorpora[d.Corpus] = true
	}
	seen := map[string]bool{}
	perCorpus := map[string]int{}
	for _, d := range heldOut.Docs {
		key := d.Corpus + "/" + d.File
		require.False(t, seen[key], "%s listed twice", key)
		seen[key] = true
		require.False(t, inTuning[key], "%s is in the tuning set", key)
		require.False(t, inTuning[d.Corpus+"#"+d.ID], "id %s of %s is in the tuning set", d.ID, d.Corpus)
		checkLabelledDoc(t, d, generic)
		perCorpus[d.Corpus]++
	}
	for c := range tuningCorpora {
		require.Positive(t, perCorpus[c], "no held-out document of %s", c)
	}
}

// TestSecondHeldOutLabelsAreValid checks the second held-out labelled set
// (testdata/corpus-labels-heldout2.json): every document exists in its
// corpus under the id the evaluation gives it and is not an empty stub,
// none is in the tuning set or the first held-out set (by file or by id)
// or listed twice, cloud-incidents and wikitech-incidents have 30 each,
// and every cause and accepted alternative is a generic mode of the
// default taxonomy.
func TestSecondHeldOutLabelsAreValid(t *testing.T) {
	checkLaterHeldOutSet(t, "../testdata/corpus-labels-heldout2.json",
		"../testdata/corpus-labels.json", "../testdata/corpus-labels-heldout.json")
}

// TestThirdHeldOutLabelsAreValid checks the third held-out labelled set
// (testdata/corpus-labels-heldout3.json) as the second one is checked, and
// that it shares no document with the second one either.
func TestThirdHeldOutLabelsAreValid(t *testing.T) {
	checkLaterHeldOutSet(t, "../testdata/corpus-labels-heldout3.json",
		"../testdata/corpus-labels.json", "../testdata/corpus-labels-heldout.json",
		"../testdata/corpus-labels-heldout2.json")
}

// checkLaterHeldOutSet checks a held-out set chosen after the sets of
// earlier: every document exists in its corpus under the id the
// evaluation gives it and is not an empty stub, none is in an earlier set
// (by file or by id) or listed twice, cloud-incidents and
// wikitech-incidents have 30 each, and every cause and accepted
// alternative is a generic mode of the default taxonomy.
func checkLaterHeldOutSet(t *testing.T, path string, earlier ...string) {
	t.Helper()
	generic := genericModes(t)
	labelled := map[string]string{}
	for _, p := range earlier {
		set, err := eval.LoadCorpusLabels(p)
		require.NoError(t, err)
		for _, d := range set.Docs {
			labelled[d.Corpus+"/"+d.File] = p
			labelled[d.Corpus+"#"+d.ID] = p
		}
	}
	heldOut, err := eval.LoadCorpusLabels(path)
	require.NoError(t, err)
	seen := map[string]bool{}
	perCorpus := map[string]int{}
	for _, d := range heldOut.Docs {
		key := d.Corpus + "/" + d.File
		require.False(t, seen[key], "%s listed twice", key)
		seen[key] = true
		require.False(t, seen[d.Corpus+"#"+d.ID], "id %s of %s listed twice", d.ID, d.Corpus)
		seen[d.Corpus+"#"+d.ID] = true
		require.Empty(t, labelled[key], "%s is already labelled", key)
		require.Empty(t, labelled[d.Corpus+"#"+d.ID], "id %s of %s is already labelled", d.ID, d.Corpus)
		st := checkLabelledDoc(t, d, generic)
		require.GreaterOrEqual(t, st.Size(), int64(200), "%s is a stub", key)
		if d.Cause == "" {
			require.Empty(t, d.Also, "%s: alternatives without a cause", key)
		}
		perCorpus[d.Corpus]++
	}
	require.Equal(t, map[string]int{"cloud-incidents": 30, "wikitech-incidents": 30}, perCorpus)
}

// genericModes reports whether a mode is a generic mode of the default
// taxonomy.
func genericModes(t *testing.T) func(string) bool {
	t.Helper()
	tax, err := taxonomy.Default()
	require.NoError(t, err)
	return func(mode string) bool {
		m, ok := tax.Mode(mode)
		return ok && m.Parent == "" && m.Name == mode
	}
}

// checkLabelledDoc checks what every labelled document must be: a file of
// its corpus, under the id the evaluation gives it, whose cause and
// accepted alternatives are generic modes, no alternative being the cause.
// It returns the file's information.
func checkLabelledDoc(t *testing.T, d eval.CorpusLabel, generic func(string) bool) os.FileInfo {
	t.Helper()
	key := d.Corpus + "/" + d.File
	st, err := os.Stat(filepath.Join(corporaDir, d.Corpus, d.File))
	require.NoError(t, err, "%s is not in the corpora", key)
	require.False(t, st.IsDir(), key)
	require.Equal(t, eval.CorpusDocID(d.File), d.ID, "%s: id", key)
	if d.Cause != "" {
		require.True(t, generic(d.Cause), "%s: cause %q is not a generic mode", key, d.Cause)
	}
	for _, a := range d.Also {
		require.True(t, generic(a), "%s: accepted cause %q is not a generic mode", key, a)
		require.NotEqual(t, d.Cause, a, "%s: %q is the cause and an alternative", key, a)
	}
	return st
}
