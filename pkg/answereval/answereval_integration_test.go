//go:build integration

package answereval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const corpora = "../../../shared/corpora" // beside the checkout

// TestQuestionSetIsValid checks the repository's question sets: the
// tuning set at least 30 questions, at least ten per corpus; the held-out
// set at least 25, at least five per corpus; in both, every gold document
// a file of its corpus, and every fact stated somewhere in one of its gold
// documents (a fact no document states could never be answered).
func TestQuestionSetIsValid(t *testing.T) {
	for _, set := range []struct {
		path           string
		min, perCorpus int
	}{{"testdata/questions.json", 30, 10}, {"testdata/heldout.json", 25, 5}} {
		t.Run(filepath.Base(set.path), func(t *testing.T) { requireValidSet(t, set.path, set.min, set.perCorpus) })
	}
}

func requireValidSet(t *testing.T, path string, least, perCorpus int) {
	qs, err := Load(path)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(qs), least)
	per := map[string]int{}
	for _, q := range qs {
		per[q.Corpus]++
		entries, err := os.ReadDir(filepath.Join(corpora, q.Corpus))
		require.NoError(t, err, q.ID)
		stated := false
		for _, g := range q.Gold {
			found := false
			for _, e := range entries {
				if strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())) != g {
					continue
				}
				found = true
				text, err := os.ReadFile(filepath.Join(corpora, q.Corpus, e.Name()))
				require.NoError(t, err)
				stated = stated || q.StatesFact(string(text))
			}
			require.True(t, found, "%s: gold %q is no document of %s", q.ID, g, q.Corpus)
		}
		require.True(t, stated, "%s: no gold document states the fact %q", q.ID, q.Fact)
	}
	for _, c := range []string{"dfds-postmortems", "cloud-incidents", "wikitech-incidents"} {
		require.GreaterOrEqual(t, per[c], perCorpus, c)
	}
}
