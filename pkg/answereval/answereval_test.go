package answereval

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

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

// TestHeldOutSetIsSeparate: the held-out set loads and shares no question
// (by id or wording) with the tuning set.
func TestHeldOutSetIsSeparate(t *testing.T) {
	tuning, err := Load("testdata/questions.json")
	require.NoError(t, err)
	held, err := Load("testdata/heldout.json")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(held), 25)
	seen := map[string]bool{}
	for _, q := range tuning {
		seen[q.ID], seen[strings.ToLower(q.Question)] = true, true
	}
	for _, q := range held {
		require.False(t, seen[q.ID], "%s is a tuning question id", q.ID)
		require.False(t, seen[strings.ToLower(q.Question)], "%s is a tuning question", q.ID)
	}
}
