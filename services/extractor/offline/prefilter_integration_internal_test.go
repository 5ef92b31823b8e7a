//go:build integration

package offline

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kgstream/kgstream/services/extractor/chunk"
)

// TestPrefiltersPassEveryMatch: on every line and sentence of the corpus
// files, the cheap tests that skip a regexp never skip one that matches,
// and labelMatches finds the section labels the regexp finds in the
// whole line.
func TestPrefiltersPassEveryMatch(t *testing.T) {
	var labels, machine, lines, sentences int
	for _, text := range append(corpusTexts(t), prefilterCases...) {
		for _, line := range strings.Split(text, "\n") {
			lines++
			want := sectionLabel().FindAllStringSubmatchIndex(line, -1)
			labels += len(want)
			if got := labelMatches(line); !reflect.DeepEqual(got, want) {
				t.Errorf("labelMatches(%q) = %v, the regexp finds %v", line, got, want)
			}
		}
		for _, s := range chunk.Sentences(text) {
			sentences++
			if machineOutput().MatchString(text[s.Start:s.End]) {
				machine++
				if !mayBeMachine(text[s.Start:s.End]) {
					t.Errorf("mayBeMachine skips %q", text[s.Start:s.End])
				}
			}
		}
	}
	t.Logf("%d lines, %d with a label; %d sentences, %d of program output", lines, labels, sentences, machine)
	if labels < 100 || machine < 10 {
		t.Fatal("too few matches to test the prefilters")
	}
}

// prefilterCases are spellings the corpora may lack.
var prefilterCases = []string{
	"Root cause: x: Cause: y. Cause: z\n: Cause:\n  • Impact :: Timeline: a. Summary:\n• Cause : y\nThe end. Next Steps:\tz\nFollow-ups: a\nfollow ups : b\nROOT CAUSES AND MITIGATION: c\nCAUſE: d",
	"Traceback (most recent call last)\nat com.foo.Bar.baz(Bar.java:12)\nFoo::bar() called from x\nin /srv/a.php on line 97\n0xdeadbeef01",
	"Exception in thread \"main\" x\nsrc/main.go:42 panicked",
}
