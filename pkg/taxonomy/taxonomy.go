// Package taxonomy is kgstream's failure-mode taxonomy: named classes of
// incident root cause (an expired certificate, an unstaged config push, a
// full disk...) with the cue phrases that signal them in postmortem prose,
// and the rule that picks an incident's failure modes from the cues found.
//
// The default taxonomy (taxonomy.yaml, embedded) is a generic SRE one;
// tenants may load their own with Parse. Cues are RE2 regular expressions
// matched case-insensitively within a sentence. A cue is ignored when it
// is negated or hedged ("no certificate had expired", "DNS was ruled out",
// "we suspected the network", "an unrelated race condition") or stated as
// a rule ("when there is such a config change, ...").
//
// Select implements the one-primary-cause rule: an incident gets ONE
// failure mode, the most specific one its text shows (lowest tier, then
// highest cue weight, then earliest), plus every other mode whose cue sits
// in a sentence that asserts causes outright ("root cause", "contributing
// factor", "compounded by"). A postmortem that mentions an upgrade in
// passing while describing a certificate expiry is about the expiry.
package taxonomy

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/kgstream/kgstream/pkg/errkind"
	"gopkg.in/yaml.v3"
)

//go:embed taxonomy.yaml
var defaultYAML []byte

// DefaultYAML returns the embedded default taxonomy document.
func DefaultYAML() []byte { return bytes.Clone(defaultYAML) }

// ErrInvalid marks a taxonomy document that cannot be used.
var ErrInvalid = errkind.New(errkind.Invalid, "invalid failure-mode taxonomy")

// Taxonomy is a parsed set of failure modes. It is immutable and safe for
// concurrent use.
type Taxonomy struct {
	Version int
	Modes   []Mode

	negBefore, negAfter, negClause, negSentence, assertion *regexp.Regexp
	effectBefore, effectAfter, effectReason, effectExposed *regexp.Regexp
	remedy, remedyKeeps                                    *regexp.Regexp
	undetermined                                           *regexp.Regexp
	// The expressions run on the parts of a sentence around each cue
	// found (and undetermined, on the text around each "cause"), of which
	// only whether they match is asked, as alternatives (alternation.go).
	negAfterAlts, effectBeforeAlts, effectAfterAlts, remedyAlts, undeterminedAlts *alternatives

	// The prefilter (prefilter.go): one automaton over every mode's
	// keywords and every cue's required literals, and per mode and cue
	// the ids of its patterns.
	auto      *automaton
	nPatterns int
	keywordIx [][]int32     // mode -> keyword pattern ids (nil: none)
	literalIx [][][][]int32 // mode -> cue -> sets of literal pattern ids, one of each set required (nil: always run)
	prefixIx  [][][]int32   // mode -> cue -> ids of the literals every match starts with one of (nil: none known)
	// The sentence expressions' literals (sentence.go): per pattern the
	// literal sets it belongs to (bit i: set i), per expression its sets.
	setMask []uint32
	exprSet [nExprs][]uint32

	// scratch holds Find's buffers (*findScratch) between calls: Find runs
	// once a sentence, and allocating them each time was most of what the
	// offline extractor allocated.
	scratch sync.Pool
}

// findScratch is what Find works in: which patterns the scan found and
// where each first starts, and the literals it placed.
type findScratch struct {
	found []bool
	first []int32
	occ   []occurrence
}

// Mode is one failure mode.
type Mode struct {
	// Name is the canonical name, the failure_mode entity's name.
	Name string
	// Parent is the generic mode this one refines ("expired certificate"
	// -> "certificate expiry"); empty for a generic mode.
	Parent string
	// Tier ranks specificity: 1 names a mechanism, 2 a broad class or a
	// trigger. Lower wins when a text shows several modes.
	Tier        int
	Description string
	// Keywords, when set, are lower-case substrings one of which every
	// cue's match contains: a sentence with none is not searched (cheap
	// prefilter; most sentences name no failure).
	Keywords []string
	Cues     []Cue
}

// Cue is one phrase signalling a mode.
type Cue struct {
	Pattern  string
	Requires string  // must also match in the sentence, when set
	Excludes string  // must not match in the sentence, when set
	Weight   float64 // default 1
	// NegationInside checks the match itself for negation words too (for
	// cues with a free-text gap such as "certificate ... expired", which
	// could span "certificate had not expired").
	NegationInside bool
	// Explicit marks a cue that names the cause with a judgment ("a bad
	// upgrade"): its mode outranks modes inferred from symptoms.
	Explicit bool

	re, req, exc *regexp.Regexp
	// reWords, reqWords and excWords are re, req and exc as word lists,
	// for ASCII sentences (nil: not one).
	reWords, reqWords, excWords *WordList
}

type fileCue struct {
	Pattern        string  `yaml:"pattern"`
	Requires       string  `yaml:"requires"`
	Excludes       string  `yaml:"excludes"`
	Weight         float64 `yaml:"weight"`
	NegationInside bool    `yaml:"negation_inside"`
	Explicit       bool    `yaml:"explicit"`
}

type fileMode struct {
	Name        string    `yaml:"name"`
	Parent      string    `yaml:"parent"`
	Tier        int       `yaml:"tier"`
	Description string    `yaml:"description"`
	Keywords    []string  `yaml:"keywords"`
	Cues        []fileCue `yaml:"cues"`
}

type file struct {
	Version  int        `yaml:"version"`
	Modes    []fileMode `yaml:"modes"`
	Negation struct {
		Before string `yaml:"before"`
		After  string `yaml:"after"`
		Clause string `yaml:"clause"`
		// Sentence marks a sentence that states a general rule ("When a
		// user modifies a load balancer, the control plane changes its
		// configuration"): no cue in it tells what happened.
		Sentence string `yaml:"sentence"`
	} `yaml:"negation"`
	Assertion string `yaml:"assertion"`
	// Undetermined says the incident's cause is unknown ("the cause is
	// still unknown"): see Taxonomy.Undetermined.
	Undetermined string `yaml:"undetermined"`
	Effect       struct {
		Before      string `yaml:"before"`
		After       string `yaml:"after"`
		Reason      string `yaml:"reason"`
		Exposed     string `yaml:"exposed"`
		Remedy      string `yaml:"remedy"`
		RemedyKeeps string `yaml:"remedy_keeps"`
	} `yaml:"effect"`
}

// Default parses the embedded default taxonomy.
func Default() (*Taxonomy, error) { return Parse(defaultYAML) }

// Load reads and parses a taxonomy file.
func Load(path string) (*Taxonomy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading taxonomy: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	return t, nil
}

func compile(what, expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	src := "(?i)" + expr
	if anchoredAlternation(src) {
		// Written once outside the alternation, ^ lets the matcher try
		// the start of the text only, instead of failing at every byte.
		src = "(?i)^(?:" + expr + ")"
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, what, err)
	}
	return re, nil
}

// anchoredAlternation reports whether expr is an alternation each of
// whose branches starts at the beginning of the text ("^a|^b"): it
// matches where "^(?:a|b)" does, which Go's regexp tries at the start
// only (it tries the former at every byte, each attempt failing at ^).
func anchoredAlternation(expr string) bool {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return false
	}
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	return re.Op == syntax.OpAlternate && beginsText(re)
}

// beginsText reports whether every match of re starts with \A.
func beginsText(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginText:
		return true
	case syntax.OpCapture:
		return beginsText(re.Sub[0])
	case syntax.OpConcat:
		return len(re.Sub) > 0 && beginsText(re.Sub[0])
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			if !beginsText(sub) {
				return false
			}
		}
		return true
	}
	return false
}

// Parse parses a taxonomy document (the format of taxonomy.yaml).
func Parse(data []byte) (*Taxonomy, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: decoding: %w", ErrInvalid, err)
	}
	if len(f.Modes) == 0 {
		return nil, fmt.Errorf("%w: no modes", ErrInvalid)
	}
	t := &Taxonomy{Version: f.Version}
	var err error
	if t.negBefore, err = compile("negation.before", f.Negation.Before); err != nil {
		return nil, err
	}
	if t.negAfter, err = compile("negation.after", f.Negation.After); err != nil {
		return nil, err
	}
	if t.negClause, err = compile("negation.clause", f.Negation.Clause); err != nil {
		return nil, err
	}
	if t.negSentence, err = compile("negation.sentence", f.Negation.Sentence); err != nil {
		return nil, err
	}
	if t.assertion, err = compile("assertion", f.Assertion); err != nil {
		return nil, err
	}
	if t.undetermined, err = compile("undetermined", f.Undetermined); err != nil {
		return nil, err
	}
	if t.effectBefore, err = compile("effect.before", f.Effect.Before); err != nil {
		return nil, err
	}
	if t.effectAfter, err = compile("effect.after", f.Effect.After); err != nil {
		return nil, err
	}
	if t.effectReason, err = compile("effect.reason", f.Effect.Reason); err != nil {
		return nil, err
	}
	if t.effectExposed, err = compile("effect.exposed", f.Effect.Exposed); err != nil {
		return nil, err
	}
	if t.remedy, err = compile("effect.remedy", f.Effect.Remedy); err != nil {
		return nil, err
	}
	if t.remedyKeeps, err = compile("effect.remedy_keeps", f.Effect.RemedyKeeps); err != nil {
		return nil, err
	}
	t.negAfterAlts, t.effectBeforeAlts = splitAlternation(t.negAfter), splitAlternation(t.effectBefore)
	t.effectAfterAlts, t.remedyAlts = splitAlternation(t.effectAfter), splitAlternation(t.remedy)
	t.undeterminedAlts = splitAlternation(t.undetermined)
	names := map[string]bool{}
	for i, fm := range f.Modes {
		name := strings.Join(strings.Fields(fm.Name), " ")
		if name == "" {
			return nil, fmt.Errorf("%w: modes[%d] has no name", ErrInvalid, i)
		}
		if names[strings.ToLower(name)] {
			return nil, fmt.Errorf("%w: mode %q listed twice", ErrInvalid, name)
		}
		names[strings.ToLower(name)] = true
		if fm.Tier < 1 {
			return nil, fmt.Errorf("%w: mode %q: tier must be >= 1", ErrInvalid, name)
		}
		if len(fm.Cues) == 0 {
			return nil, fmt.Errorf("%w: mode %q has no cues", ErrInvalid, name)
		}
		m := Mode{Name: name, Parent: strings.Join(strings.Fields(fm.Parent), " "), Tier: fm.Tier, Description: fm.Description}
		for _, k := range fm.Keywords {
			if k = strings.ToLower(strings.TrimSpace(k)); k != "" {
				m.Keywords = append(m.Keywords, k)
			}
		}
		for j, fc := range fm.Cues {
			c := Cue{Pattern: fc.Pattern, Requires: fc.Requires, Excludes: fc.Excludes, Weight: fc.Weight,
				NegationInside: fc.NegationInside, Explicit: fc.Explicit}
			if c.Weight == 0 {
				c.Weight = 1
			}
			if c.Weight < 0 || fc.Pattern == "" {
				return nil, fmt.Errorf("%w: mode %q cue %d: a pattern and a positive weight are required", ErrInvalid, name, j)
			}
			where := fmt.Sprintf("mode %q cue %d", name, j)
			if c.re, err = compile(where, fc.Pattern); err != nil {
				return nil, err
			}
			if c.req, err = compile(where+" requires", fc.Requires); err != nil {
				return nil, err
			}
			if c.exc, err = compile(where+" excludes", fc.Excludes); err != nil {
				return nil, err
			}
			if l := ParseWordList(fc.Pattern); l != nil && l.Finds() {
				c.reWords = l
			}
			if fc.Requires != "" {
				c.reqWords = ParseWordList(fc.Requires)
			}
			if fc.Excludes != "" {
				c.excWords = ParseWordList(fc.Excludes)
			}
			m.Cues = append(m.Cues, c)
		}
		t.Modes = append(t.Modes, m)
	}
	var exprs [nExprs]string
	exprs[exprAssertion], exprs[exprNegClause] = f.Assertion, f.Negation.Clause
	exprs[exprNegSentence], exprs[exprNegBefore], exprs[exprNegAfter] = f.Negation.Sentence, f.Negation.Before, f.Negation.After
	exprs[exprEffectBefore] = f.Effect.Before
	exprs[exprEffectAfter], exprs[exprExposed], exprs[exprReason] = f.Effect.After, f.Effect.Exposed, f.Effect.Reason
	exprs[exprRemedy], exprs[exprRemedyKeeps] = f.Effect.Remedy, f.Effect.RemedyKeeps
	t.buildPrefilter(exprs)
	// Two levels: a parent is a mode of the taxonomy without a parent.
	for _, m := range t.Modes {
		if m.Parent == "" {
			continue
		}
		p, ok := t.Mode(m.Parent)
		if !ok {
			return nil, fmt.Errorf("%w: mode %q: parent %q is not a mode", ErrInvalid, m.Name, m.Parent)
		}
		if p.Parent != "" || strings.EqualFold(p.Name, m.Name) {
			return nil, fmt.Errorf("%w: mode %q: parent %q must be a generic mode (one without a parent)", ErrInvalid, m.Name, m.Parent)
		}
	}
	return t, nil
}

// buildPrefilter indexes the keywords and cue literals of t's modes and
// the literals of the sentence expressions exprs.
func (t *Taxonomy) buildPrefilter(exprs [nExprs]string) {
	var patterns []string
	ids := map[string]int32{}
	id := func(p string) int32 {
		if i, ok := ids[p]; ok {
			return i
		}
		i := int32(len(patterns))
		ids[p] = i
		patterns = append(patterns, p)
		return i
	}
	t.keywordIx = make([][]int32, len(t.Modes))
	t.literalIx = make([][][][]int32, len(t.Modes))
	t.prefixIx = make([][][]int32, len(t.Modes))
	for mi, m := range t.Modes {
		for _, k := range m.Keywords {
			t.keywordIx[mi] = append(t.keywordIx[mi], id(k))
		}
		t.literalIx[mi] = make([][][]int32, len(m.Cues))
		t.prefixIx[mi] = make([][]int32, len(m.Cues))
		for ci, c := range m.Cues {
			// A set holding a single byte ("a" of "(recent|a|the)\s+change")
			// is found in almost every sentence and tells nearly nothing,
			// while the automaton stops at every such byte: it is left out
			// (a cue without sets runs on every sentence its keywords are
			// in, one without prefixes is searched from the start).
			if l := prefixLiterals(c.Pattern); !hasShort(l) {
				for _, l := range l {
					t.prefixIx[mi][ci] = append(t.prefixIx[mi][ci], id(l))
				}
			}
			for _, set := range LiteralSets(c.Pattern) {
				if hasShort(set) {
					continue
				}
				ids := make([]int32, len(set))
				for i, l := range set {
					ids[i] = id(l)
				}
				t.literalIx[mi][ci] = append(t.literalIx[mi][ci], ids)
			}
		}
	}
	// Each literal set of an expression is a bit of the patterns in it
	// (as many sets as the mask has bits; an expression with more runs
	// unfiltered).
	var masks []uint32
	nSets := 0
	for e, expr := range exprs {
		sets := exprLiteralSets(expr)
		if nSets+len(sets) > 32 {
			continue
		}
		for _, set := range sets {
			bit := uint32(1) << nSets
			nSets++
			t.exprSet[e] = append(t.exprSet[e], bit)
			for _, l := range set {
				i := id(l)
				for int(i) >= len(masks) {
					masks = append(masks, 0)
				}
				masks[i] |= bit
			}
		}
	}
	t.setMask = make([]uint32, len(patterns))
	copy(t.setMask, masks)
	t.auto = newAutomaton(patterns)
	t.nPatterns = len(patterns)
}

// allFound reports whether a pattern of every set was found.
func allFound(found []bool, sets [][]int32) bool {
	for _, ids := range sets {
		if !anyFound(found, ids) {
			return false
		}
	}
	return true
}

func anyFound(found []bool, ids []int32) bool {
	for _, i := range ids {
		if found[i] {
			return true
		}
	}
	return false
}

// Undetermined reports whether text (a sentence, or a few around the
// word "cause") says the incident's cause is unknown: "the cause is still
// unknown", "it is unclear what caused the outage". A document saying so
// names no cause, whatever symptoms it describes; every pattern of it
// holds the word "cause", so a caller need only look near that word.
func (t *Taxonomy) Undetermined(text string) bool {
	return t.undetermined != nil && t.undeterminedAlts.MatchString(text)
}

// Generic returns the generic mode a mode belongs to: its parent, or the
// mode itself when it is generic (or unknown).
func (t *Taxonomy) Generic(name string) string {
	m, ok := t.Mode(name)
	if !ok {
		return name
	}
	if m.Parent != "" {
		p, _ := t.Mode(m.Parent)
		return p.Name
	}
	return m.Name
}

// Mode returns the mode named name (compared case-insensitively).
func (t *Taxonomy) Mode(name string) (Mode, bool) {
	for _, m := range t.Modes {
		if strings.EqualFold(m.Name, name) {
			return m, true
		}
	}
	return Mode{}, false
}

// Span is a byte range of a text.
type Span struct{ Start, End int }

// Hit is one cue found in a text.
type Hit struct {
	Mode string
	// Family is the mode's generic mode (the mode itself when generic).
	Family string
	Tier   int
	Weight float64
	// Start and End are the cue's match, byte offsets into the text.
	Start, End int
	// Sentence is the sentence the cue was found in.
	Sentence Span
	// Cue is the matching cue's pattern.
	Cue string
	// Negated is set when the cue is negated or hedged; Select ignores it.
	Negated bool
	// Asserted is set when the sentence asserts causes outright.
	Asserted bool
	// Explicit is set when the cue names the cause with a judgment.
	Explicit bool
	// Effect is set when the sentence presents the cue as an effect
	// ("..., causing the queue to be overloaded", "the data loss affected
	// every table") or as part of the remedy ("engineers made a
	// configuration change to mitigate the issue"): its Weight is
	// EffectWeight times the cue's.
	Effect bool
}

// EffectWeight is how much a cue counts where its sentence presents it as
// an effect of something else rather than as a cause.
const EffectWeight = 0.5

// Find returns every cue of every mode found in text, sentence by
// sentence (nil sentences: the whole text is one), in text order.
func (t *Taxonomy) Find(text string, sentences []Span) []Hit {
	if sentences == nil {
		sentences = []Span{{0, len(text)}}
	}
	var hits []Hit
	fs, _ := t.scratch.Get().(*findScratch)
	if fs == nil {
		fs = &findScratch{found: make([]bool, t.nPatterns), first: make([]int32, t.nPatterns)}
	}
	defer t.scratch.Put(fs)
	found, first := fs.found, fs.first
	sc := sentence{occ: fs.occ[:0]}
	defer func() { fs.occ = sc.occ[:0] }()
	for _, s := range sentences {
		if s.Start < 0 || s.End > len(text) || s.Start >= s.End {
			continue
		}
		sent := text[s.Start:s.End]
		clear(found)
		exact := t.scanSentence(&sc, sent, found, first) // exact: literals cannot decide, run every cue
		for mi, m := range t.Modes {
			if len(m.Keywords) > 0 && !anyFound(found, t.keywordIx[mi]) {
				continue
			}
			for ci, c := range m.Cues {
				if sets := t.literalIx[mi][ci]; sets != nil && !exact && !allFound(found, sets) {
					continue
				}
				var locs [][]int
				if c.reWords != nil && sc.plain {
					locs = c.reWords.FindAll(sent)
				} else if from, ok := t.searchFrom(&sc, mi, ci, found, first); ok {
					locs = c.re.FindAllStringIndex(sent[from:], -1)
					for _, loc := range locs {
						loc[0] += from
						loc[1] += from
					}
				}
				if len(locs) == 0 {
					continue
				}
				if c.req != nil && !matches(c.req, c.reqWords, &sc) {
					continue
				}
				if c.exc != nil && matches(c.exc, c.excWords, &sc) {
					continue
				}
				asserted := t.asserted(&sc)
				for _, loc := range locs {
					hits = append(hits, t.hit(&sc, m, c, s, loc, asserted))
				}
			}
		}
	}
	slices.SortStableFunc(hits, func(a, b Hit) int { return a.Start - b.Start })
	return hits
}

// searchFrom returns where the search for cue ci of mode mi in the
// sentence sc may start, false when it cannot match: in an ASCII
// sentence, a byte before the first of the literals its matches start
// with (found and first, from the scan), so that the word boundary there
// is still told by the byte before it; elsewhere, the start.
func (t *Taxonomy) searchFrom(sc *sentence, mi, ci int, found []bool, first []int32) (int, bool) {
	ids := t.prefixIx[mi][ci]
	if ids == nil || !sc.ascii {
		return 0, true
	}
	p := int32(-1)
	for _, id := range ids {
		if found[id] && (p < 0 || first[id] < p) {
			p = first[id]
		}
	}
	return max(int(p)-1, 0), p >= 0
}

// matches reports whether re, or its word list words (nil: none), matches
// the sentence.
func matches(re *regexp.Regexp, words *WordList, sc *sentence) bool {
	if words != nil && sc.plain {
		return words.Match(sc.text)
	}
	return re.MatchString(sc.text)
}

// hit is the hit of cue c of mode m at loc of sentence s (sc its text).
func (t *Taxonomy) hit(sc *sentence, m Mode, c Cue, s Span, loc []int, asserted bool) Hit {
	cs := loc[0] - len(clauseBefore(sc.text, loc[0])) // the start of the cue's clause
	h := Hit{Mode: m.Name, Family: family(m), Tier: m.Tier, Weight: c.Weight,
		Start: s.Start + loc[0], End: s.Start + loc[1], Sentence: s, Cue: c.Pattern,
		Negated: t.negated(sc, cs, loc[0], loc[1], c.NegationInside), Asserted: asserted,
		Explicit: c.Explicit, Effect: t.effect(sc, cs, loc[0], loc[1])}
	if h.Effect {
		h.Weight *= EffectWeight
	}
	return h
}

func family(m Mode) string {
	if m.Parent != "" {
		return m.Parent
	}
	return m.Name
}

// prefixWords is how many words before a cue may negate it: enough for
// "no certificate had expired" or "did not see any expired certificate",
// few enough that a negation earlier in a long clause does not reach.
const prefixWords = 5

// A clause break ends a clause for negation scope: one of ,;:() or one of
// clauseWords between two white-space bytes, matched as the expression
// `(?i)[,;:()]|\s(but|however|although|though|whereas|while|and then)\s`
// matches it (nextClauseBreak; TestClauseBreaksAsTheExpression), every
// hit of every cue looking for the last one before it.

// clauseWords are the words that break a clause, in the expression's
// order.
var clauseWords = [...]string{"but", "however", "although", "though", "whereas", "while", "and then"}

// nextClauseBreak returns the first clause break [i, j) of s at or after
// from, and i < 0 when there is none.
func nextClauseBreak(s string, from int) (i, j int) {
	for i = from; i < len(s); i++ {
		switch s[i] {
		case ',', ';', ':', '(', ')':
			return i, i + 1
		case ' ', '\t', '\n', '\f', '\r':
			if n := clauseWord(s[i+1:]); n > 0 && i+1+n < len(s) && asciiSpace(s[i+1+n]) {
				return i, i + 2 + n
			}
		}
	}
	return -1, -1
}

// clauseWord returns the length of the clause word s starts with
// (compared as (?i) compares: ASCII letters either case, and "ſ" is an s),
// or 0.
func clauseWord(s string) int {
	for _, w := range clauseWords {
		j := 0 // in s
		k := 0 // in w
		for k < len(w) && j < len(s) {
			c := s[j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c == w[k] {
				j, k = j+1, k+1
				continue
			}
			if w[k] == 's' && strings.HasPrefix(s[j:], "\u017f") {
				j, k = j+len("\u017f"), k+1
				continue
			}
			break
		}
		if k == len(w) {
			return j
		}
	}
	return 0
}

// asciiSpace reports whether c is in \s: [\t\n\f\r ].
func asciiSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

// clauseBefore is the part of sent before start in the clause of start.
func clauseBefore(sent string, start int) string {
	clause := sent[:start]
	last := -1
	for from := 0; ; {
		i, j := nextClauseBreak(clause, from)
		if i < 0 {
			break
		}
		last, from = j, j
	}
	if last >= 0 {
		clause = clause[last:]
	}
	return clause
}

// effect reports whether the sentence presents the cue at start:end (in
// the clause from cs) as an effect
// (an effect.before phrase earlier in its clause, an effect.after phrase
// right after it, an effect.reason clause before its own) or as a remedy (an effect.remedy phrase in its clause,
// or opening the sentence: "To mitigate, engineers updated the records"
// tells the remedy in every clause), unless the cue itself matches
// effect.remedy_keeps: rolling back a deploy names the deploy as the cause.
func (t *Taxonomy) effect(sc *sentence, cs, start, end int) bool {
	sent := sc.text
	// A latent defect that something triggered ("requests that triggered
	// a bug which caused ...") is the cause the sentence names, not an
	// effect: effect.exposed matches the clause up to the cue's end.
	exposed := t.effectExposed != nil && t.may(sc, exprExposed, cs, end) && t.effectExposed.MatchString(sent[cs:end])
	if !exposed && t.effectBefore != nil && t.may(sc, exprEffectBefore, cs, start) && t.effectBeforeAlts.MatchString(sent[cs:start]) {
		return true
	}
	if t.effectAfter != nil && t.may(sc, exprEffectAfter, end, len(sent)) && t.effectAfterAlts.MatchString(sent[end:]) {
		return true
	}
	// "Because the store lacked the data, the balancers were
	// misconfigured": a clause after the reason the sentence gives.
	if t.effectReason != nil && t.may(sc, exprReason, 0, start) && t.effectReason.MatchString(sent[:start]) {
		return true
	}
	if t.remedy == nil || t.remedyKeeps != nil && t.may(sc, exprRemedyKeeps, start, end) && t.remedyKeeps.MatchString(sent[start:end]) {
		return false
	}
	// The cue's clause: from the clause's start to the cue's end, then on
	// to the clause's end.
	if t.may(sc, exprRemedy, cs, len(sent)) {
		if ae := end + len(clauseAfter(sent, end)); t.may(sc, exprRemedy, cs, ae) && t.remedyAlts.MatchString(sent[cs:ae]) {
			return true
		}
	}
	// A sentence that opens with the remedy ("To mitigate, engineers
	// updated the DNS records") tells the remedy in all its clauses.
	return t.remedyLeads(sc)
}

// remedyLeads reports whether the sentence, an inline label ("Mitigation:
// ") left out, opens with an effect.remedy phrase (nothing but non-letters
// before it). It is worked out once a sentence.
func (t *Taxonomy) remedyLeads(sc *sentence) bool {
	if !sc.leadKnown {
		sc.leadKnown = true
		// The label is anchored at the start: lead is a tail of sent, to
		// be looked at only when sent holds the remedy's literals.
		if sent := sc.text; t.may(sc, exprRemedy, 0, len(sent)) {
			lead := leadingLabel.ReplaceAllString(sent, "")
			if from := len(sent) - len(lead); t.may(sc, exprRemedy, from, len(sent)) {
				m := t.remedy.FindStringIndex(lead)
				sc.lead = m != nil && strings.IndexFunc(lead[:m[0]], unicode.IsLetter) < 0
			}
		}
	}
	return sc.lead
}

// leadingLabel is an inline label opening a sentence ("Mitigation: ").
var leadingLabel = regexp.MustCompile(`^\W*[A-Z][\w ]{0,30}:\s*`)

// clauseAfter is the part of sent after end in the clause of end.
func clauseAfter(sent string, end int) string {
	rest := sent[end:]
	if i, _ := nextClauseBreak(rest, 0); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// negated reports whether the cue at start:end (in the clause from cs)
// is negated or hedged.
func (t *Taxonomy) negated(sc *sentence, cs, start, end int, inside bool) bool {
	sent := sc.text
	// A sentence stating a general rule ("when a user modifies ...") tells
	// nothing that happened, wherever the cue stands in it.
	if t.ruleSentence(sc) {
		return true
	}
	clause := sent[cs:start]
	// A conditional ("when there is such a change") scopes over the whole
	// clause after it, however many words on.
	if t.negClause != nil && t.may(sc, exprNegClause, cs, start) && t.negClause.MatchString(clause) {
		return true
	}
	if t.negBefore != nil {
		prefix := lastWords(clause, prefixWords)
		if t.may(sc, exprNegBefore, start-len(prefix), start) && t.negBefore.MatchString(prefix) {
			return true
		}
		if inside && t.may(sc, exprNegBefore, start, end) && t.negBefore.MatchString(sent[start:end]) {
			return true
		}
	}
	if t.negAfter != nil && t.may(sc, exprNegAfter, end, len(sent)) && t.negAfterAlts.MatchString(sent[end:]) {
		return true
	}
	return false
}

// ruleSentence reports whether negation.sentence matches the sentence,
// worked out once a sentence.
func (t *Taxonomy) ruleSentence(sc *sentence) bool {
	if !sc.ruleKnown {
		sc.ruleKnown = true
		sc.rule = t.negSentence != nil && t.may(sc, exprNegSentence, 0, len(sc.text)) && t.negSentence.MatchString(sc.text)
	}
	return sc.rule
}

// asserted reports whether the assertion expression matches the
// sentence, worked out once a sentence.
func (t *Taxonomy) asserted(sc *sentence) bool {
	if !sc.assertKnown {
		sc.assertKnown = true
		sc.assert = t.assertion != nil && t.may(sc, exprAssertion, 0, len(sc.text)) && t.assertion.MatchString(sc.text)
	}
	return sc.assert
}

// lastWords returns the tail of s holding its last n words.
func lastWords(s string, n int) string {
	count := 0
	inWord := false
	for i := len(s) - 1; i >= 0; i-- {
		space := unicode.IsSpace(rune(s[i]))
		if !space && !inWord {
			inWord = true
			count++
		}
		if space && inWord {
			inWord = false
			if count == n {
				return s[i+1:]
			}
		}
	}
	return s
}

// Select applies the one-primary-cause rule to the hits of one incident
// and returns one hit per chosen mode, primary first, negated hits
// ignored; a mode's hit is its first asserted one, else its first.
//
// The primary cause is chosen by family (a generic mode with its finer
// modes), among the families the text names as a cause (an explicit cue,
// or a hit in an asserting sentence) when there are any, else among all:
// the highest summed cue weight (callers weigh hits by where they are,
// see FailureStage), then the most specific tier, then the earliest hit.
// Within the family the primary mode is its finer mode of the highest
// weight (then lowest tier, then earliest) when one was found, else the
// generic mode. Another mode is added only when one of its hits sits in a
// sentence that asserts causes outright (Hit.Asserted), in text order.
func Select(hits []Hit) []Hit {
	type agg struct {
		first    Hit
		score    float64
		named    bool
		asserted *Hit
	}
	var order []string
	modes := map[string]*agg{}
	for _, h := range hits {
		if h.Negated || h.Weight <= 0 {
			continue
		}
		a := modes[h.Mode]
		if a == nil {
			a = &agg{first: h}
			modes[h.Mode] = a
			order = append(order, h.Mode)
		}
		a.score += h.Weight
		a.named = a.named || h.Explicit || h.Asserted
		if h.Asserted && a.asserted == nil {
			hc := h
			a.asserted = &hc
		}
	}
	if len(order) == 0 {
		return nil
	}
	type fam struct {
		score      float64
		weights    []float64
		named      bool
		tier, rank int // best tier, first hit's rank in order
	}
	var famOrder []string
	fams := map[string]*fam{}
	for i, name := range order {
		a := modes[name]
		f := family(Mode{Name: name, Parent: parentOf(a.first)})
		fa := fams[f]
		if fa == nil {
			fa = &fam{tier: a.first.Tier, rank: i}
			fams[f] = fa
			famOrder = append(famOrder, f)
		}
		fa.named = fa.named || a.named
		fa.tier = min(fa.tier, a.first.Tier)
	}
	// A family's hits at one place (a finer mode's cue and its generic
	// mode's inside it) count once, at the highest weight.
	type place struct {
		fam        string
		start, end int
	}
	var places []place
	var weights []float64
	for _, h := range hits {
		if h.Negated || h.Weight <= 0 {
			continue
		}
		f := family(Mode{Name: h.Mode, Parent: parentOf(h)})
		i := slices.IndexFunc(places, func(p place) bool { return p.fam == f && p.start < h.End && h.Start < p.end })
		if i < 0 {
			places = append(places, place{f, h.Start, h.End})
			weights = append(weights, h.Weight)
			continue
		}
		weights[i] = max(weights[i], h.Weight)
	}
	for i, p := range places {
		fams[p.fam].weights = append(fams[p.fam].weights, weights[i])
	}
	for _, fa := range fams {
		fa.score = familyScore(fa.weights)
	}
	// A family whose evidence is one weak cue ("throttled" once) is no
	// cause at all.
	famOrder = slices.DeleteFunc(famOrder, func(n string) bool { return fams[n].score < minFamilyScore })
	if len(famOrder) == 0 {
		return nil
	}
	candidates := famOrder
	if named := slices.DeleteFunc(slices.Clone(famOrder), func(n string) bool { return !fams[n].named }); len(named) > 0 {
		candidates = named
	}
	best := candidates[0]
	for _, name := range candidates[1:] {
		a, b := fams[name], fams[best]
		if a.score > b.score || a.score == b.score && a.tier < b.tier {
			best = name
		}
	}
	primary := ""
	for _, name := range order {
		a := modes[name]
		if family(Mode{Name: name, Parent: parentOf(a.first)}) != best {
			continue
		}
		if primary == "" {
			primary = name
			continue
		}
		p := modes[primary]
		pGeneric, aGeneric := p.first.Family == primary, a.first.Family == name
		switch {
		case pGeneric != aGeneric:
			if pGeneric {
				primary = name
			}
		case a.score != p.score:
			if a.score > p.score {
				primary = name
			}
		case a.first.Tier < p.first.Tier:
			primary = name
		}
	}
	out := []Hit{modes[primary].first}
	if a := modes[primary].asserted; a != nil {
		out[0] = *a
	}
	for _, name := range order {
		if a := modes[name]; name != primary && a.asserted != nil {
			out = append(out, *a.asserted)
		}
	}
	return out
}

// repeatDecay is how much each further hit of a family counts relative to
// the one before (hits ranked by weight): a symptom the timeline repeats
// ten times ("throttled", "overloaded") must not outweigh the one sentence
// that names the cause.
const repeatDecay = 0.5

// minFamilyScore is the least score a family needs to be a cause.
const minFamilyScore = 0.3

// familyScore sums a family's hit weights, the strongest first, each next
// one counting repeatDecay times the one before it.
func familyScore(weights []float64) float64 {
	ws := slices.Clone(weights)
	slices.SortFunc(ws, func(a, b float64) int {
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	score, f := 0.0, 1.0
	for _, w := range ws {
		score += w * f
		f *= repeatDecay
	}
	return score
}

// parentOf is the parent of a hit's mode (empty when generic).
func parentOf(h Hit) string {
	if h.Family == "" || h.Family == h.Mode {
		return ""
	}
	return h.Family
}
