package query

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// passageSentence is one sentence of a context passage, with the section
// heading it sits under.
type passageSentence struct {
	text    string
	heading string
	item    int // index of the passage in the context
}

// splitPassage splits a passage into sentences: Markdown headings start
// sections (and are not sentences), table rows and list items are
// sentences of their own, and a hard-wrapped line that goes on in lower
// case continues the sentence before it.
func splitPassage(text string) []passageSentence {
	var out []passageSentence
	heading := ""
	var para []string
	flush := func() {
		if len(para) == 0 {
			return
		}
		for _, s := range splitSentences(strings.Join(para, " ")) {
			out = append(out, passageSentence{text: s, heading: heading})
		}
		para = para[:0]
	}
	for _, line := range strings.Split(text, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case l == "":
			flush()
		case strings.HasPrefix(l, "#"):
			flush()
			heading = strings.TrimSpace(strings.TrimLeft(l, "#"))
		case strings.HasPrefix(l, "|"):
			flush()
			cells := strings.FieldsFunc(l, func(r rune) bool { return r == '|' })
			var keep []string
			for _, c := range cells {
				if c = strings.TrimSpace(c); c != "" && strings.Trim(c, ":- ") != "" {
					keep = append(keep, c)
				}
			}
			if len(keep) > 0 {
				out = append(out, passageSentence{text: strings.Join(keep, " — "), heading: heading})
			}
		case strings.HasPrefix(l, "- ") || strings.HasPrefix(l, "* ") || strings.HasPrefix(l, "• "):
			flush()
			para = append(para, strings.TrimSpace(l[2:]))
			if strings.HasPrefix(l, "• ") {
				para[len(para)-1] = strings.TrimSpace(strings.TrimPrefix(l, "• "))
			}
		default:
			r, _ := firstRune(l)
			if len(para) > 0 && !unicode.IsLower(r) && endsSentence(para[len(para)-1]) {
				flush()
			}
			para = append(para, l)
		}
	}
	flush()
	return out
}

func firstRune(s string) (rune, bool) {
	for _, r := range s {
		return r, true
	}
	return 0, false
}

func endsSentence(s string) bool {
	s = strings.TrimRight(s, `"')*_`)
	return strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") || strings.HasSuffix(s, ":")
}

// splitSentences cuts a paragraph after ". ", "! " or "? " when the next
// word starts with a capital or a digit, and at " • " bullets.
//
// It works on the paragraph's bytes: the sentences are substrings of the
// paragraph with its spaces collapsed, which is made only when it has a
// run of spaces to collapse.
func splitSentences(p string) []string {
	var out []string
	for _, part := range strings.Split(p, " • ") {
		s := collapseSpaces(part)
		start := 0
		for i := 0; i+2 < len(s); i++ {
			if c := s[i]; (c == '.' || c == '!' || c == '?') && s[i+1] == ' ' {
				r, _ := utf8.DecodeRuneInString(s[i+2:])
				if (unicode.IsUpper(r) || unicode.IsDigit(r)) && !abbreviation(s[start:i]) {
					out = append(out, strings.TrimSpace(s[start:i+1]))
					start = i + 2
				}
			}
		}
		if t := strings.TrimSpace(s[start:]); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// collapseSpaces is strings.Join(strings.Fields(s), " "), s itself when
// it has no space to remove or replace.
func collapseSpaces(s string) string {
	prevSpace := true // a leading space is removed
	for _, r := range s {
		space := unicode.IsSpace(r)
		if space && (prevSpace || r != ' ') {
			return strings.Join(strings.Fields(s), " ")
		}
		prevSpace = space
	}
	if prevSpace { // empty, or a trailing space
		return strings.Join(strings.Fields(s), " ")
	}
	return s
}

// abbreviations end the text before a cut that is no sentence end.
var abbreviations = []string{"e.g", "i.e", " vs", "etc", " approx", " no"}

// abbreviation reports a sentence-looking cut after "e.g", "i.e", "vs" or
// a single capital ("J. Smith"), given the text before the full stop.
func abbreviation(before string) bool {
	for _, a := range abbreviations {
		if len(before) >= len(a) && strings.EqualFold(before[len(before)-len(a):], a) {
			return true
		}
	}
	r, n := utf8.DecodeLastRuneInString(before)
	return n > 0 && n < len(before) && before[len(before)-n-1] == ' ' && unicode.IsUpper(r)
}

// causalRE finds sentences that state a cause explicitly.
var causalRE = regexp.MustCompile(`(?i)\b(root cause|caused|causing|cause[sd]? by|due to|because|as a result of|resulted in|led to|triggered|was the result|the result of|the issue was|the problem was|originat|stemm)`)

// failureRE finds sentences about something failing.
var failureRE = regexp.MustCompile(`(?i)\b(fail|failure|expired?|outage|crash|error|bug|misconfigur|overload|exhaust|broke|timeout|timed out|unavailable|deadlock|regression|loss|lost)`)

// causeHeadingRE and impactHeadingRE classify section headings and inline
// labels ("Root cause and mitigation: ...").
var (
	causeHeadingRE  = regexp.MustCompile(`(?i)(root cause|cause|trigger|what went wrong|what happened|summary|contributing factor)`)
	impactHeadingRE = regexp.MustCompile(`(?i)(impact|timeline|action items|lessons|next steps|stats|detection|resolution|follow.?up)`)
)

// causalQuestionRE finds questions asking for a cause.
var causalQuestionRE = regexp.MustCompile(`(?i)\b(why|caus|reason|root|trigger|what went wrong|what made|what stopped|how did .* (fail|break))`)

// Bounds of the extractive answer.
const (
	maxAnswerSentences = 4
	maxSentenceRunes   = 420
)

// scoredSentence is a sentence with its score against the question.
type scoredSentence struct {
	passageSentence
	score float64
	decay float64 // the passage's rank discount
	key   string  // the sentence's words, space-joined
}

// causalCandidates is how many of the best sentences by words get the
// causal cues scored.
const causalCandidates = 40

// causalScore is the bonus of a sentence for a question asking why: an
// explicit causal statement (not just a "Root cause:" label), else a
// failure word; a place under a cause heading or label; minus under an
// impact heading.
func causalScore(ps passageSentence, decay float64) float64 {
	score := 0.0
	label, rest, hasLabel := strings.Cut(ps.text, ":")
	hasLabel = hasLabel && len(label) < 40
	switch {
	case causalRE.MatchString(ps.text) && !(hasLabel && !causalRE.MatchString(rest)):
		score += 2.5 * decay
	case failureRE.MatchString(ps.text):
		score += 1.0 * decay
	}
	if causeHeadingRE.MatchString(ps.heading) || (hasLabel && causeHeadingRE.MatchString(label)) {
		score += 1.5 * decay
	}
	if impactHeadingRE.MatchString(ps.heading) || (hasLabel && impactHeadingRE.MatchString(label)) {
		score -= 0.5
	}
	return score
}

// selectSentences picks the sentences of the passages (context items of
// kind text unit, in rank order) that answer the question: scored by the
// IDF-weighted share of the question's words they hold (bounded, so long
// sentences do not win by size), the mapped entities they name, and, for
// a question asking why, an explicit causal statement or a place under a
// cause heading. A sentence adding fewer than three words to the question
// (a title, a restatement) loses.
func selectSentences(question string, rank unitRanking, names []string, items []ContextItem, limit int) []scoredSentence {
	causal := causalQuestionRE.MatchString(question)
	qwords := map[string]bool{}
	for _, w := range rank.words {
		qwords[w] = true
	}
	var nameWords [][]string
	for _, n := range names {
		if ws := contentWords(n); len(ws) > 0 && len(ws) <= 4 {
			nameWords = append(nameWords, ws)
		}
	}
	var all []scoredSentence
	seen := map[string]bool{}
	// words and has are each sentence's, reused from one to the next.
	var words []string
	has := map[string]bool{}
	passage := 0
	for i, it := range items {
		if it.Kind != KindTextUnit {
			continue
		}
		decay := 1 / (1 + 0.5*float64(passage))
		passage++
		for _, ps := range splitPassage(it.Text) {
			ps.item = i
			words = appendWords(words[:0], ps.text)
			if len(words) < 4 {
				continue
			}
			key := strings.Join(words, " ")
			if seen[key] {
				continue
			}
			seen[key] = true
			clear(has)
			extra := 0
			for _, w := range words {
				has[w] = true
				if !qwords[w] && !isContentStopword(w) {
					extra++
				}
			}
			score := 6 * rank.share(func(w string) bool { return has[w] })
			named := 0
			for _, ws := range nameWords {
				if !slices.ContainsFunc(ws, func(w string) bool { return !has[w] }) {
					named++
				}
			}
			score += 0.5 * float64(min(named, 3))
			if extra < 3 {
				score -= 2
			}
			if len(words) > 90 {
				score -= 1
			}
			score += 1.5 * decay
			all = append(all, scoredSentence{passageSentence: ps, score: score, decay: decay, key: key})
		}
	}
	if causal {
		// The causal cues are regular expressions: only the sentences that
		// could still win are scored by them.
		slices.SortStableFunc(all, func(a, b scoredSentence) int { return cmp.Compare(b.score, a.score) })
		if len(all) > causalCandidates {
			all = all[:causalCandidates]
		}
		for i := range all {
			all[i].score += causalScore(all[i].passageSentence, all[i].decay)
		}
	}
	slices.SortStableFunc(all, func(a, b scoredSentence) int { return cmp.Compare(b.score, a.score) })
	// A sentence repeated inside another (a summary's first sentence
	// quoted again under a label: "Summary of impact: Between ...") is
	// said once, by the better-scored of the two.
	kept := all[:0]
	for _, ss := range all {
		if len(kept) == limit {
			break
		}
		if !slices.ContainsFunc(kept, func(k scoredSentence) bool { return wordsWithin(k.key, ss.key) || wordsWithin(ss.key, k.key) }) {
			kept = append(kept, ss)
		}
	}
	return kept
}

// wordsWithin reports whether the space-joined word sequence a occurs in
// b at word boundaries.
func wordsWithin(a, b string) bool {
	for i := 0; ; {
		j := strings.Index(b[i:], a)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(a)
		if (j == 0 || b[j-1] == ' ') && (end == len(b) || b[end] == ' ') {
			return true
		}
		i = j + 1
	}
}

// relationPhrases read relations as words: "PM-202 failed because of
// expired certificate".
var relationPhrases = map[string]string{
	"failure":    "%s failed because of %s",
	"caused_by":  "%s was caused by %s",
	"causes":     "%s caused %s",
	"caused":     "%s caused %s",
	"impacted":   "%s impacted %s",
	"affected":   "%s affected %s",
	"involved":   "%s involved %s",
	"mentions":   "%s mentions %s",
	"owned_by":   "%s is owned by %s",
	"depends_on": "%s depends on %s",
	"calls":      "%s calls %s",
	"uses":       "%s uses %s",
	"co_occurs":  "%s is mentioned with %s",
	"runs_on":    "%s runs on %s",
	"part_of":    "%s is part of %s",
}

// relationText renders one relationship as a sentence without its period
// (each phrase's "%s" the names, in one string: fmt would box them).
func relationText(src, rel, tgt string) string {
	f, ok := relationPhrases[rel]
	if !ok {
		return src + " " + strings.ReplaceAll(rel, "_", " ") + " " + tgt
	}
	before, rest, _ := strings.Cut(f, "%s")
	middle, after, _ := strings.Cut(rest, "%s")
	return before + src + middle + tgt + after
}

// docName names a document by title and id: "KIAM Service disruption
// (PM2020-002)"; the id alone when there is no other title.
func docName(id, title string) string {
	title = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(title), "#"))
	if title == "" || strings.EqualFold(title, id) {
		return id
	}
	return fmt.Sprintf("%s (%s)", truncate(title, 90), id)
}

// quote trims a sentence for an answer.
func quote(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.NewReplacer("**", "", "`", "").Replace(s)
	if r := []rune(s); len(r) > maxSentenceRunes {
		return string(r[:maxSentenceRunes]) + "…"
	}
	return s
}

// sourcesLine lists the documents cited by the context, in first-cited
// order, by title and id: "Sources: KIAM Service disruption (PM2020-002 …)".
func sourcesLine(cites []citation, titles map[string]string, limit int) string {
	var names []string
	seen := map[string]bool{}
	more := 0
	for _, c := range cites {
		if seen[c.DocID] {
			continue
		}
		seen[c.DocID] = true
		if len(names) == limit {
			more++
			continue
		}
		names = append(names, docName(c.DocID, titles[c.DocID]))
	}
	if len(names) == 0 {
		return ""
	}
	line := "Sources: " + strings.Join(names, "; ")
	if more > 0 {
		line += fmt.Sprintf("; and %d more documents", more)
	}
	return line + "."
}
