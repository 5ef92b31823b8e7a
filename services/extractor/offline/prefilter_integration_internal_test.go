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
	strings.Repeat("A long line of text without any label at all, ", 6) + "and then. Root cause: x; " + strings.Repeat("more, ", 30) +
		"•  \t Preliminary root causes and mitigation: y " + strings.Repeat("z", 130) + " Cause: " + strings.Repeat(" ", 150) + "Cause:" +
		strings.Repeat("\t", 130) + "• Impact  :  " + strings.Repeat("w ", 70) + "! \t PRELIMINARY ROOT CAUſEſ AND MITIGATION \t:",
	strings.Repeat(" ", 200) + "Cause: a" + strings.Repeat("b", 118) + "Cause: " + strings.Repeat("x", 121) + "\u2022Cause:" +
		strings.Repeat("é", 70) + "? ROOT CAUSE: " + strings.Repeat("\u212a", 50) + ". Detailed description of impact:",
	"\u2022" + strings.Repeat(" ", 130) + "Summary: x",
	// A window starting at the white space before the bullet: the line's
	// start is elsewhere.
	"abc     \u2022" + strings.Repeat(" ", 130) + "cause: x\nabc     -" + strings.Repeat("\t", 130) + "impact:",
	"It failed at x.y(z) twice. It stopped at that time. Then at Foo$1.<init>(Foo) and at a.b.c.d(e). Seen at 10.30 (UTC).",
}

// TestCuedEqualsEveryCueRegexp: on every sentence of the corpus files, a
// pattern's cue test with its literal prefilter says what running every
// cue regexp says.
func TestCuedEqualsEveryCueRegexp(t *testing.T) {
	p, err := DefaultPatterns()
	if err != nil {
		t.Fatal(err)
	}
	var sentences []string
	for _, text := range append(corpusTexts(t), prefilterCases...) {
		for _, s := range chunk.Sentences(text) {
			sentences = append(sentences, text[s.Start:s.End])
		}
	}
	sentences = append(sentences, "Requests for 5 MINUTES", "it TIMED  OUT", "the ſtopped service", "HTTP 503s", "")
	for _, pt := range p.list {
		if len(pt.cues) == 0 {
			continue
		}
		withLits := 0
		for _, ls := range pt.cueLits {
			if ls != nil {
				withLits++
			}
		}
		cued := 0
		for _, s := range sentences {
			want := false
			for _, re := range pt.cues {
				want = want || re.MatchString(s)
			}
			if got := pt.cued(s); got != want {
				t.Errorf("%s: cued(%q) = %v, the regexps say %v", pt.name, s, got, want)
			}
			if want {
				cued++
			}
		}
		t.Logf("%s: %d of %d cues with literals, %d of %d sentences cued", pt.name, withLits, len(pt.cues), cued, len(sentences))
	}
}
