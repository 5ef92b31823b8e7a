package eval

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// causeByText is an extractor that classifies a document by a word of
// its text, citing the sentence that holds it.
type causeByText map[string]string

func (c causeByText) Extract(_ context.Context, doc *events.DocChanged, _ []events.TextUnit) ([]events.RawEntity, []events.RawRelationship, error) {
	ents := []events.RawEntity{offline.DocEntity(doc)}
	var rels []events.RawRelationship
	for word, mode := range c {
		if strings.Contains(doc.Text, word) {
			rels = append(rels, events.RawRelationship{Source: doc.DocID, Relation: offline.RelFailure, Target: mode,
				TargetType: offline.TypeFailureMode, Description: doc.Text})
		}
	}
	return ents, rels, nil
}

func TestCorporaRunListsCauseErrors(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "c"), 0o755))
	for name, text := range map[string]string{
		"a.txt": "The disk filled up.",    // right
		"b.txt": "The deploy went badly.", // wrong: labelled dns
		"c.txt": "Nothing to see.",        // missed
		"d.txt": "The deploy went fine.",  // labelled none
		"e.txt": "A deploy went out.",     // accepted: also deploy
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "c", name), []byte(text), 0o644))
	}
	labels := &CorpusLabels{Docs: []CorpusLabel{
		{Corpus: "c", File: "a.txt", ID: "a", Cause: "resource exhaustion"},
		{Corpus: "c", File: "b.txt", ID: "b", Cause: "dns"},
		{Corpus: "c", File: "c.txt", ID: "c", Cause: "network"},
		{Corpus: "c", File: "d.txt", ID: "d"},
		{Corpus: "c", File: "e.txt", ID: "e", Cause: "resource exhaustion", Also: []string{"deploy"}},
	}}
	tk, err := chunk.NewTokenizer()
	require.NoError(t, err)
	ch, err := chunk.New(tk, chunk.DefaultTokens, chunk.DefaultOverlap)
	require.NoError(t, err)
	x := causeByText{"disk": "disk full", "deploy": "bad deploy"}
	generic := func(m string) string {
		return map[string]string{"disk full": "resource exhaustion", "bad deploy": "deploy"}[m]
	}
	figs, err := Corpora{Extractor: x, Chunker: ch, Dir: dir, DocType: "incident", Generic: generic}.Run(t.Context(), labels)
	require.NoError(t, err)
	require.Len(t, figs, 1)
	require.Equal(t, []CauseError{
		{ID: "b", Label: "dns", Predicted: "deploy", Mode: "bad deploy", Evidence: "The deploy went badly."},
		{ID: "c", Label: "network"},
		{ID: "d", Predicted: "deploy", Mode: "bad deploy", Evidence: "The deploy went fine."},
	}, figs[0].CauseErrors)
	require.Equal(t, 2, figs[0].Causes.TP)

	var out bytes.Buffer
	for _, e := range figs[0].CauseErrors {
		writeCauseError(&out, e)
	}
	require.Equal(t, "b: labelled dns, predicted deploy (bad deploy)\n    The deploy went badly.\n"+
		"c: labelled network, predicted nothing\n"+
		"d: labelled (none), predicted deploy (bad deploy)\n    The deploy went fine.\n", out.String())
}
