//go:build integration

package offline

import (
	"testing"

	"github.com/kgstream/kgstream/pkg/taxonomy"
	"github.com/kgstream/kgstream/services/extractor/chunk"
)

// TestCueWordListsMatchAsTheCues: every sentence of the corpora a word
// list applies to (taxonomy.WordListApplies; most are ASCII) is cued by a
// default relation cue's word list exactly where the cue's regexp matches
// it.
func TestCueWordListsMatchAsTheCues(t *testing.T) {
	p, err := DefaultPatterns()
	if err != nil {
		t.Fatal(err)
	}
	lists, sentences := 0, 0
	for _, text := range corpusTexts(t) {
		for _, sp := range chunk.Sentences(text) {
			sent := text[sp.Start:sp.End]
			if !taxonomy.WordListApplies(sent) {
				continue
			}
			sentences++
			for _, pt := range p.list {
				for i, w := range pt.cueWords {
					if w == nil {
						continue
					}
					lists++
					if got, want := w.Match(sent), pt.cues[i].MatchString(sent); got != want {
						t.Fatalf("%s cue %s on %q: %v, want %v", pt.name, pt.cues[i], sent, got, want)
					}
				}
			}
		}
	}
	if lists < 10*sentences {
		t.Fatalf("%d word-list matches on %d sentences: the default cues are no longer word lists", lists, sentences)
	}
}
