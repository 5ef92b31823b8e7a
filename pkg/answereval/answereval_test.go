package answereval

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const corpora = "../../../shared/corpora" // beside the checkout

// TestQuestionSetIsValid checks the repository's question set: at least 30
// questions, at least ten per corpus, every gold document a file of its
// corpus, and every fact stated somewhere in one of its gold documents (a
// fact no document states could never be answered).
func TestQuestionSetIsValid(t *testing.T) {
	qs, err := Load("testdata/questions.json")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(qs), 30)
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
		require.GreaterOrEqual(t, per[c], 10, c)
	}
}

func TestParseRefusesBadSets(t *testing.T) {
	for name, body := range map[string]string{
		"empty":       `[]`,
		"no gold":     `[{"id":"a","question":"q?","fact":"x"}]`,
		"bad regex":   `[{"id":"a","question":"q?","gold":["d"],"fact":"("}]`,
		"repeated id": `[{"id":"a","question":"q?","gold":["d"],"fact":"x"},{"id":"a","question":"r?","gold":["d"],"fact":"x"}]`,
		"unknown key": `[{"id":"a","question":"q?","gold":["d"],"fact":"x","extra":1}]`,
	} {
		_, err := Parse([]byte(body))
		require.Error(t, err, name)
	}
}

type tableAsker map[string]Answer

func (t tableAsker) Ask(_ context.Context, mode, q string) (Answer, error) { return t[mode+"|"+q], nil }

func TestRunScoresGoldAndFact(t *testing.T) {
	qs, err := Parse([]byte(`[
	 {"id":"a","question":"Why A?","gold":["doc-a"],"fact":"expired cert"},
	 {"id":"b","question":"Why B?","gold":["doc-b"],"fact":"disk full"}]`))
	require.NoError(t, err)
	a := tableAsker{
		"local|Why A?": {Text: "The Expired Cert broke it.", Docs: []string{"x", "y", "doc-a"}},
		"local|Why B?": {Text: NothingMatches + " an entity.", Docs: []string{"x", "y", "z", "doc-b"}},
	}
	outs, scores, err := Run(t.Context(), a, qs, []string{"local"})
	require.NoError(t, err)
	require.Len(t, outs, 2)
	require.Equal(t, ModeScore{Mode: "local", Questions: 2, GoldAt3: 1, Fact: 1, Nothing: 1,
		P50Millis: scores[0].P50Millis, P99Millis: scores[0].P99Millis}, scores[0])
	require.True(t, outs[0].GoldAt3)
	require.False(t, outs[1].GoldAt3, "doc-b is the fourth cited document")
}
