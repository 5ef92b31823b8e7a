package offline

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/doctype"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/taxonomy"
)

// RelFailure is the relation from an incident to its failure mode.
const RelFailure = "failure"

// RelIsA relates a finer failure mode to its generic mode, so an
// aggregate can be asked at either level.
const RelIsA = "is_a"

// TypeFailureMode is the entity type of failure modes.
const TypeFailureMode = "failure_mode"

// FailureStage classifies an incident document with a failure-mode
// taxonomy: incident -failure-> failure_mode for its primary mode (and any
// mode the text asserts as a cause outright, see taxonomy.Select), each
// supported by the text unit and sentence of the cue, and failure_mode
// -is_a-> its generic mode.
//
// It reads the cause, not the symptom: a cue weighs twice in a section
// titled root cause, cause, contributing factors or what went wrong, half
// in timeline, impact, detection or mitigation, and nothing in lessons
// learned, action items or next steps, nor in an action item's line
// anywhere (a task checkbox, a tracker status); a cue inside a quoted error
// message or log line does not count, nor one in a line pasted from a
// chat transcript, a log, an alert or a stack trace, nor one in a
// sentence holding program output (a memory address, a source location).
type FailureStage struct {
	Taxonomy *taxonomy.Taxonomy
	// DocTypes are the document types classified (resolve.Type spelling).
	DocTypes []string
}

var _ Stage = (*FailureStage)(nil)

// Name implements Stage.
func (s *FailureStage) Name() string { return "taxonomy" }

// Extract implements Stage.
func (s *FailureStage) Extract(_ context.Context, a *Analysis, out *Output) error {
	if s.Taxonomy == nil || !slices.Contains(s.DocTypes, a.DocType()) {
		return nil
	}
	sections := Sections(a.Doc.Text)
	all, where := s.weighedHits(a, sections)
	undetermined := s.undetermined(a.Doc.Text, sections)
	if undetermined {
		// The text says the cause is unknown: its symptoms name none.
		// A cue judging the cause outright ("a faulty release") still does.
		keep := 0
		for i, h := range all {
			if h.Explicit {
				all[keep], where[keep] = h, where[i]
				keep++
			}
		}
		all, where = all[:keep], where[:keep]
	}
	selected := taxonomy.Select(all)
	if len(selected) == 0 && !undetermined {
		s.fromTitle(a, out)
		return nil
	}
	for _, sel := range selected {
		i := slices.IndexFunc(all, func(h taxonomy.Hit) bool { return h.Start == sel.Start && h.Mode == sel.Mode && h.Cue == sel.Cue })
		u := a.Units[where[i].unit]
		h := where[i].Hit
		s.emit(a, out, u, h.Mode, h.Weight, evidence(u.Text, h.Sentence), h.Sentence)
	}
	return nil
}

// emit writes the document's failure mode: the mode, the document's
// failure relationship to it (described by description, citing sentence
// of u) and, for a fine mode, its generic parent with the is_a between
// them.
func (s *FailureStage) emit(a *Analysis, out *Output, u Unit, mode string, weight float64, description string, sentence taxonomy.Span) {
	de := a.DocEntity
	out.Entity(events.RawEntity{Name: mode, Type: TypeFailureMode, TextUnit: u.ID,
		Description: fmt.Sprintf("failure mode %q", mode)})
	out.Relationship(u.Cite(events.RawRelationship{Source: de.Name, SourceType: de.Type, Relation: RelFailure,
		Target: mode, TargetType: TypeFailureMode, Description: description,
		Strength: min(weight, 1)}, sentence))
	if g := s.Taxonomy.Generic(mode); g != mode {
		out.Entity(events.RawEntity{Name: g, Type: TypeFailureMode, TextUnit: u.ID,
			Description: fmt.Sprintf("failure mode %q", g)})
		out.Relationship(u.Cite(events.RawRelationship{Source: mode, SourceType: TypeFailureMode, Relation: RelIsA,
			Target: g, TargetType: TypeFailureMode, Description: fmt.Sprintf("%q is a kind of %q", mode, g),
			Strength: 1}, sentence))
	}
}

// locatedHit is a cue found in a unit: the hit with offsets into the
// unit's text, and the unit's index.
type locatedHit struct {
	taxonomy.Hit
	unit int
}

// weighedHits finds the cues of a's units that count, each weighed by its
// section: all with document offsets, where with unit offsets and unit.
//
// The taxonomy finds cues sentence by sentence, so it is searched one
// sentence at a time, and only in the sentences where a cue could count
// (countingSentences): leaving out a sentence leaves out its cues and
// nothing else. A sentence the document repeats (units overlap) is
// searched once.
func (s *FailureStage) weighedHits(a *Analysis, sections SectionMap) (all []taxonomy.Hit, where []locatedHit) {
	found := map[string][]taxonomy.Hit{} // sentence text -> its cues
	// Units overlap: a cue found twice at one document offset counts once.
	// The key holds the cue too, so that a weaker cue of the mode starting
	// at the same word ("deployment of") does not hide a stronger one
	// ("deployment of ... brought down").
	type cueAt struct {
		mode  string
		start int
		cue   string
	}
	seen := map[cueAt]bool{}
	for i, u := range a.Units {
		var hits []taxonomy.Hit
		for _, sp := range countingSentences(u, sections) {
			hits = s.appendSentenceHits(hits, u.Text, sp, found)
		}
		if len(hits) == 0 {
			continue
		}
		quoted := quotedSpans(u.Text)
		lines := lineMatches{}
		for _, h := range hits {
			if overlapsSpans(quoted, h.Start, h.End) || lines.overlap(u.Text, h.Start, h.End) {
				continue
			}
			dh := h
			dh.Start += u.Start
			dh.End += u.Start
			k := cueAt{h.Mode, dh.Start, h.Cue}
			if seen[k] {
				continue
			}
			seen[k] = true
			f := sections.Weight(dh.Start)
			if f == 0 {
				continue
			}
			dh.Weight *= f
			h.Weight = dh.Weight
			all = append(all, dh)
			where = append(where, locatedHit{h, i})
		}
	}
	return all, where
}

// appendSentenceHits appends to hits the cues of sentence sp of text, as
// Taxonomy.Find(text, []taxonomy.Span{sp}) finds them: found holds the
// cues of the sentences searched already, by text, with offsets into the
// sentence.
func (s *FailureStage) appendSentenceHits(hits []taxonomy.Hit, text string, sp taxonomy.Span, found map[string][]taxonomy.Hit) []taxonomy.Hit {
	sent := text[sp.Start:sp.End]
	rel, ok := found[sent]
	if !ok {
		rel = s.Taxonomy.Find(sent, nil)
		found[sent] = rel
	}
	for _, h := range rel {
		h.Start += sp.Start
		h.End += sp.Start
		h.Sentence = sp
		hits = append(hits, h)
	}
	return hits
}

// lineMatches holds, by the offset a line of a text starts at, the spans
// of the line pasted from elsewhere (pastedLine) or listing an action
// item (actionItem): a cue there does not count. They are computed
// only for the lines holding a cue.
type lineMatches map[int][]span

// overlap reports whether text[start:end] overlaps a pasted line or an
// action item. Both are found line by line, so only the lines holding
// [start, end) (the line of start when it is empty) need to be matched.
func (lm lineMatches) overlap(text string, start, end int) bool {
	for ls := strings.LastIndexByte(text[:start], '\n') + 1; ls <= max(start, end-1) && ls <= len(text); {
		le := strings.IndexByte(text[ls:], '\n')
		if le < 0 {
			le = len(text)
		} else {
			le += ls
		}
		ss, ok := lm[ls]
		if !ok {
			for _, re := range [...]*regexp.Regexp{pastedLine(), actionItem()} {
				ss = appendLineMatch(ss, re, ls, text[ls:le])
			}
			lm[ls] = ss
		}
		if overlapsSpans(ss, start, end) {
			return true
		}
		ls = le + 1
	}
	return false
}

// countingSentences returns the sentences of u in which a failure cue
// could count, for taxonomy.Find: not one holding program output
// (machineSentence), nor one lying wholly in a section whose cues weigh
// nothing. A unit without sentences is one sentence, its whole text, as
// Find searches it given none.
func countingSentences(u Unit, sections SectionMap) []taxonomy.Span {
	if u.Sentences == nil {
		if machineSentence(u.Text) {
			return nil
		}
		return []taxonomy.Span{{Start: 0, End: len(u.Text)}}
	}
	out := make([]taxonomy.Span, 0, len(u.Sentences))
	for _, sp := range u.Sentences {
		if sp.Start < 0 || sp.End > len(u.Text) || sp.Start >= sp.End {
			continue // Find skips it
		}
		if sections.silent(u.Start+sp.Start, u.Start+sp.End) || machineSentence(u.Text[sp.Start:sp.End]) {
			continue
		}
		out = append(out, sp)
	}
	return out
}

// undetermined reports whether text says, outside its follow-up sections,
// that the incident's cause is unknown (taxonomy.Undetermined): only the
// few sentences around each "cause" are matched, most texts having few,
// and the text is scanned once per spelling of the word.
func (s *FailureStage) undetermined(text string, sections SectionMap) bool {
	const before, after = 80, 120
	for _, w := range [...]string{"cause", "Cause", "CAUSE"} {
		for off := 0; ; {
			i := strings.Index(text[off:], w)
			if i < 0 {
				break
			}
			i += off
			off = i + len(w)
			if i >= 2 && (text[i-2:i] == "be" || text[i-2:i] == "Be") || sections.Weight(i) == 0 {
				continue // "because"
			}
			if win := text[max(0, i-before):min(len(text), i+after)]; mayBeUndetermined(win) && s.Taxonomy.Undetermined(win) {
				return true
			}
		}
	}
	return false
}

// mayBeUndetermined is a cheap test that text may say a cause is unknown:
// every such statement holds one of these words.
func mayBeUndetermined(text string) bool {
	for _, w := range [...]string{"unknown", "unclear", "undetermined", "unable", "mystery", "not", "n't", "no ", "No "} {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}

// titleWords splits a document title into words: a leading date or
// number dropped, hyphens and underscores made spaces, a lower-case letter
// followed by an upper-case one split ("PartialNetworkOutage").
func titleWords(title string) string {
	return strings.TrimLeftFunc(doctype.TitleWords(title), func(r rune) bool { return unicode.IsDigit(r) || unicode.IsSpace(r) })
}

// fromTitle classifies a document whose text names no cause by its title
// ("Fibre cut", "Disk failure"): the title is the author's summary. The
// relationship cites the first sentence of the first unit.
func (s *FailureStage) fromTitle(a *Analysis, out *Output) {
	title := titleWords(a.Doc.Title)
	if title == "" || len(a.Units) == 0 {
		return
	}
	sel := taxonomy.Select(s.Taxonomy.Find(title, nil))
	if len(sel) == 0 {
		return
	}
	u := a.Units[0]
	s.emit(a, out, u, sel[0].Mode, sel[0].Weight, fmt.Sprintf("title %q", a.Doc.Title), u.Sentence(0))
}

// actionItem matches a line that is an action item of a follow-up list,
// wherever the list stands: a task checkbox ("- [ ] alert on ...", "[x]
// ..."), a tracker status ("• Status: Done ...", "Status: Unresolved
// ..."), a "TODO:" or "AI:" label. It says what is to be done (or was
// done after the incident), not what went wrong. Run on one line at a
// time, anchored at its start.
var actionItem = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[ \t]*(?:[•*+\-][ \t]*|\d{1,2}[.)][ \t]*)?(?:\[[ xX]\]|(?i:status)[ \t]*:[ \t]*(?i:done|unresolved|in progress|open|declined|resolved|stalled|invalid|todo|to do|pending)\b|(?:TODO|AI|Action item|Action)[ \t]*:)[^\n]*$`)
})

// SectionKind classifies a section of a postmortem by its title.
type SectionKind int

// Section kinds, by how much a failure cue in them counts.
const (
	SectionOther    SectionKind = iota // untitled or unknown: weight 1
	SectionCause                       // root cause, contributing factors: 2
	SectionSummary                     // summary, what happened: 1
	SectionContext                     // timeline, impact, detection, mitigation: 0.5
	SectionFollowUp                    // lessons, action items, next steps: 0
)

// Section is where a section starts (a byte offset) and its kind.
type Section struct {
	Start int
	Kind  SectionKind
}

// SectionMap lists a document's sections in order.
type SectionMap []Section

// sectionLine finds a section title that is a whole line: a markdown
// heading or a bold line. sectionLabel finds an inline label such as
// "Root cause:" or "ROOT CAUSE:" at a line or sentence start, or a
// capitalised one after a list flattened into a paragraph ("... in the
// scale unit Next steps: ..."). Both run on
// one line at a time (titles never span lines): anchored at the line's
// start, and the label only on lines with a colon, which is many times
// faster than searching the whole text with one multi-line pattern. A
// label may open a list item ("• Cause: ...").
var (
	sectionLine = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:#{1,6}[ \t]*([^\n]+)$|\*\*([^*\n]+)\*\*[ \t]*:?[ \t]*$)`)
	})
	sectionLabel = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?:(?:^[ \t]*(?:[•*+\-][ \t]*)?|[.!?][ \t]+)((?i:(?:preliminary|final) root causes?(?: and mitigation)?|summary root cause|root causes?(?: and mitigation)?|(?:the )?underlying cause|contributing factors?|what went wrong|cause|trigger|summary of impact|summary|impact|customer impact|detailed description of impact|timeline|detection|mitigation|resolution|recovery|workaround|next steps|remediation and prevention|lessons learned|action items|follow[- ]ups?))|[ \t]((?:Preliminary r|R)oot causes?|Mitigation|Workaround|Next [Ss]teps|Lessons [Ll]earned|Action [Ii]tems|Follow[- ][Uu]ps?))[ \t]*:`)
	})
)

// sectionCaps finds a title written in capitals without a colon inside a
// paragraph ("... availability. ROOT CAUSE The control plane ..."), as
// status pages flatten their headings. It runs on one line at a time, and
// only on lines holding one of its titles.
var sectionCaps = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:^[ \t]*|[.!?][ \t]+)(ROOT CAUSES?|ISSUE SUMMARY|DETAILED DESCRIPTION OF IMPACT|REMEDIATION AND PREVENTION)[ \t]+[A-Z0-9]`)
})

// Sections finds the titled sections of text: per line, a title line, or
// else every label in it.
func Sections(text string) SectionMap {
	var out SectionMap
	eachLine(text, func(off int, line string) {
		var m []int
		if line != "" && (line[0] == '#' || line[0] == '*') { // sectionLine's first byte
			m = sectionLine().FindStringSubmatchIndex(line)
		}
		if m != nil {
			out = append(out, Section{Start: off + m[0], Kind: sectionKind(firstGroup(line, m))})
		} else {
			for _, m := range labelMatches(line) {
				out = append(out, Section{Start: off + m[0], Kind: sectionKind(firstGroup(line, m))})
			}
			if strings.Contains(line, "ROOT CAUSE") || strings.Contains(line, "ISSUE SUMMARY") ||
				strings.Contains(line, "DETAILED DESCRIPTION") || strings.Contains(line, "REMEDIATION AND") {
				for _, m := range sectionCaps().FindAllStringSubmatchIndex(line, -1) {
					out = append(out, Section{Start: off + m[0], Kind: sectionKind(firstGroup(line, m))})
				}
				slices.SortStableFunc(out, func(a, b Section) int { return a.Start - b.Start })
			}
		}
	})
	return out
}

// labelEnds are the last words of sectionLabel's labels, in lower case
// (TestLabelEndsAreTheLabelsLastWords reads them from the regexp).
var labelEnds = map[string]bool{"cause": true, "causes": true, "mitigation": true, "factor": true, "factors": true,
	"wrong": true, "trigger": true, "impact": true, "summary": true, "timeline": true, "detection": true,
	"resolution": true, "recovery": true, "workaround": true, "steps": true, "prevention": true, "learned": true,
	"items": true, "up": true, "ups": true}

// labelMatches is sectionLabel().FindAllStringSubmatchIndex(line, -1),
// the regexp run only where a label can end. A label ends at a colon and
// holds none, so each match lies between two colons and ends at the
// second: the line is matched one such segment at a time, and only where
// the word before the colon (spaces and tabs aside) ends a label
// (labelEnds; a word with a byte outside ASCII may case-fold to one, "ſ"
// to "s"). A segment is matched from the colon before it, which no match
// starts at, so that ^ still means the start of the line.
func labelMatches(line string) [][]int {
	var out [][]int
	from := 0
	for i := strings.IndexByte(line, ':'); i >= 0; {
		if labelBefore(line[:i]) {
			if m := labelMatch(line, from, i); m != nil {
				for k := range m {
					if m[k] >= 0 {
						m[k] += from
					}
				}
				out = append(out, m)
			}
		}
		from = i
		n := strings.IndexByte(line[i+1:], ':')
		if n < 0 {
			break
		}
		i += 1 + n
	}
	return out
}

// maxLabel bounds the bytes of a label sectionLabel's groups match: at
// most maxLabelChars characters (TestLabelEndsAreTheLabelsLastWords), each
// of at most 3 bytes (the Kelvin sign matches k).
const (
	maxLabelChars = 40
	maxLabel      = 3 * maxLabelChars
)

// labelMatch is sectionLabel().FindStringSubmatchIndex(line[from:i+1]),
// line[i] a colon and line[from] the colon before it (or from 0), with
// offsets into line[from:]. A match ends at the colon: the label before
// it, white space between, and before the label white space and a bullet
// or a full stop (or the line's start). So no match starts before the
// window of the segment's last maxLabel bytes before the white space
// ending it, widened by white space, a bullet and white space; the
// segment, often a long line, is matched in that window only. There its
// first byte reads as the line's start: a match found starting there is
// looked for again in the whole segment.
func labelMatch(line string, from, i int) []int {
	spaceBefore := func(p int) int {
		for p > from && (line[p-1] == ' ' || line[p-1] == '\t') {
			p--
		}
		return p
	}
	w := spaceBefore(spaceBefore(i) - maxLabel)
	w = spaceBefore(w - len("•"))
	if w <= from {
		return sectionLabel().FindStringSubmatchIndex(line[from : i+1])
	}
	m := sectionLabel().FindStringSubmatchIndex(line[w : i+1])
	if m == nil {
		return nil
	}
	if m[0] == 0 {
		return sectionLabel().FindStringSubmatchIndex(line[from : i+1])
	}
	for k := range m {
		if m[k] >= 0 {
			m[k] += w - from
		}
	}
	return m
}

// labelBefore reports whether s, spaces and tabs trimmed from its end,
// may end with a label: its last word ends a label, or is not ASCII.
func labelBefore(s string) bool {
	j := len(s)
	for j > 0 && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	k := j
	ascii := true
	for k > 0 {
		c := s[k-1]
		if c >= utf8.RuneSelf {
			ascii = false
		} else if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			break
		}
		k--
	}
	return !ascii || j-k <= len("prevention") && labelEnds[strings.ToLower(s[k:j])]
}

// firstGroup is the text of the first group of a submatch index that
// matched.
func firstGroup(s string, m []int) string {
	for g := 1; 2*g+1 < len(m); g++ {
		if m[2*g] >= 0 {
			return s[m[2*g]:m[2*g+1]]
		}
	}
	return ""
}

func sectionKind(title string) SectionKind {
	t := strings.ToLower(title)
	has := func(ws ...string) bool {
		return slices.ContainsFunc(ws, func(w string) bool { return strings.Contains(t, w) })
	}
	switch {
	case has("lesson", "action item", "next step", "follow", "prevention", "went well", "lucky", "todo", "to do",
		"attendee", "stats", "reference", "link", "glossary", "improvement", "questions", "discussion"):
		return SectionFollowUp
	case has("cause", "contributing", "went wrong", "why", "trigger", "analysis", "rca", "what happened", "explanation",
		"technical", "details", "underlying"):
		return SectionCause
	case has("summary", "overview", "tl;dr", "description", "background", "introduction"):
		if has("impact") {
			return SectionContext
		}
		return SectionSummary
	case has("timeline", "impact", "detection", "mitigation", "resolution", "recovery", "workaround", "symptom",
		"response", "remediation", "status", "update"):
		return SectionContext
	}
	return SectionOther
}

// silent reports whether a failure cue at any offset of [start, end)
// weighs nothing: the section holding start weighs nothing and no section
// starts after it before end.
func (m SectionMap) silent(start, end int) bool {
	if m.Weight(start) != 0 {
		return false
	}
	for _, s := range m {
		if s.Start > start && s.Start < end {
			return false
		}
	}
	return true
}

// Weight is how much a failure cue at offset counts.
func (m SectionMap) Weight(offset int) float64 {
	kind := SectionOther
	for _, s := range m {
		if s.Start > offset {
			break
		}
		kind = s.Kind
	}
	switch kind {
	case SectionCause:
		return 2
	case SectionContext:
		return 0.5
	case SectionFollowUp:
		return 0
	}
	return 1
}
