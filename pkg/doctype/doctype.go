// Package doctype is the set of document types kgstream knows: the entity
// type a document becomes, the spellings that mean one, and the inference
// of a missing type from the text. The gateway checks a document's
// doc_type with it before accepting the document; the extractor types
// the document's entity with it.
package doctype

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/errkind"
	"github.com/kgstream/kgstream/pkg/resolve"
)

// ErrUnknown marks a doc_type that is neither a configured type nor
// a synonym of one: a free-form value must not create a new entity type.
var ErrUnknown = errkind.New(errkind.Invalid, "unknown doc_type")

// Set is the configured set of document types: the entity type a
// document becomes, and the spellings that mean one of them.
type Set struct {
	// Types are the accepted types (resolve.Type spelling).
	Types []string
	// Synonyms map other spellings to a type ("postmortem" -> "incident").
	Synonyms map[string]string
}

// Default are the document types kgstream knows.
func Default() Set {
	return Set{
		Types: []string{"incident", "page", "runbook", "ticket", "change", "catalog", "document"},
		Synonyms: map[string]string{
			"postmortem": "incident", "post_mortem": "incident", "incident_report": "incident", "outage": "incident",
			"rca": "incident", "root_cause_analysis": "incident", "retrospective": "incident",
			"wiki": "page", "wiki_page": "page", "article": "page", "doc": "document", "issue": "ticket",
			"playbook": "runbook", "change_request": "change",
		},
	}
}

// Decision is the type a document is given and how.
type Decision struct {
	Type string `json:"doc_type"`
	// Inferred is set when the document came without a doc_type and its
	// type was read from its text.
	Inferred bool `json:"inferred,omitempty"`
}

// Resolve checks a document's doc_type against the configured types: a
// type or a synonym gives its type; an empty one is inferred from the
// title and text (Infer); anything else is ErrUnknown. The
// gateway calls it before accepting a document, so the 202 can say which
// type was taken and a free-form value is refused.
func (d Set) Resolve(docType, title, text string) (Decision, error) {
	t := resolve.Type(docType)
	if t == "" {
		return Decision{Type: Infer(title, text), Inferred: true}, nil
	}
	if slices.Contains(d.Types, t) {
		return Decision{Type: t}, nil
	}
	if s, ok := d.Synonyms[t]; ok {
		return Decision{Type: s}, nil
	}
	return Decision{}, fmt.Errorf("%w %q: use one of %s", ErrUnknown, docType, strings.Join(d.Types, ", "))
}

// postmortemParts are the parts a postmortem has, each found by its
// heading or label words.
var postmortemParts = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(impact|impacted|affected|unavailable|customers? (saw|experienced|could not)|users? (saw|experienced|could not|were unable))\b`),
		regexp.MustCompile(`(?i)\b(root causes?|cause[ds]? by|contributing factors?|what went wrong|underlying (cause|issue)|was caused|due to)\b`),
		// A clock time, also inside an ISO date-time ("2014-11-14T01:00").
		regexp.MustCompile(`(?i)(\b|\d{4}-\d{2}-\d{2}T)(timeline|\d{1,2}:\d{2}( ?UTC| ?PDT| ?PST)?|detected|alerted|paged)\b`),
		regexp.MustCompile(`(?i)\b(resolution|resolved|mitigat\w*|restored|rolled back|recovered|fixed|workaround)\b`),
		regexp.MustCompile(`(?i)\b(incident|outage|postmortem|post-mortem|disruption|downtime|degradation|service event|unavailable|unreachable|(was|were|went) down|5xx|5\d\d errors?|errors?|failed|failures?|crash\w*)\b`),
	}
})

// incidentSignals are what marks a written-up incident even when it
// names fewer of the postmortem parts: a title or first heading that
// calls it one, a timeline of timestamped entries, the questions and
// follow-up lists of a retrospective, and sentences that report a past
// failure.
type incidentSignals struct {
	title, datedTitle, timelineEntry, retrospective, pastFailure, causeStated, thisOne, failureEnd, incidentID, lasted, atTime, labels, heading, symptom *regexp.Regexp
}

var signals = sync.OnceValue(func() incidentSignals {
	return incidentSignals{
		// No word boundary at the start: titles are often CamelCase
		// ("AllWikisOutage").
		title: regexp.MustCompile(`(?i)(outage|incident|post-?mortem|disruption|downtime|service event|service interruption|root cause analysis)`),
		// A title that carries its date ("20160509-CirrusSearch",
		// "2023-01-05 database"): a report of what happened that day.
		datedTitle: regexp.MustCompile(`(^|\D)(19|20)\d{2}-?(0[1-9]|1[0-2])-?(0[1-9]|[12]\d|3[01])(\D|$)`),
		// A line that starts (after a bullet) with a time or a dated
		// time: "• 11:01 - ...", "2016-05-09T21:43 ...", "1600 UTC: ...",
		// "~2.40 ...", "• Mar 06 13:18 UTC - ...". A version number
		// (1.27.0) is not one.
		timelineEntry: regexp.MustCompile(`(?m)^[ \t]*(?:[•*\-–|][ \t]*)?~?(?:\d{4}-\d{2}-\d{2}(?:[T ]|, )?|(?i:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t|tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.? \d{1,2}(?:st|nd|rd|th)?,?(?: \d{4},?)? )?(?:\d{1,2}[:.]\d{2}(?:[:.]\d{2})?|\d{4} ?UTC)(?:[ \t,:\-–|]|$)`),
		// A line that is only a report's heading ("## Contributing
		// Factors", "What went well?", "Impact:").
		heading:       regexp.MustCompile(`(?im)^[ \t#*]*(summary|timeline|impact|root causes?|causes?|contributing factors?|detection|resolution|recovery|mitigation|conclusions?|lessons learned|action items?|actionables?|follow-?ups?|what went well|what went wrong|where did we get lucky)[ \t*]*[:?]?[ \t]*$`),
		retrospective: regexp.MustCompile(`(?i)\b(what went well|what went wrong|where did we get lucky|lessons? learned|action ?items?|actionables?|follow-?ups?|next steps to prevent|prevent (this|it) from happening again|prevent (future )?recurrences?|post-?mortem|root causes?|contributing factors?)\b`),
		// "At 20:21 UTC", "between 15:07 and 17:25 PDT", "at 2014-11-18 14:42".
		atTime: regexp.MustCompile(`(?i)\b(at|from|between|since|until|around|by|about) ~?(\d{4}-\d{2}-\d{2}[T ]?)?\d{1,2}[:.]\d{2}\b`),
		// Labels and headings of a report: "Cause: ...", "The symptoms
		// we saw", "Duration: ...", "this incident".
		labels: regexp.MustCompile(`(?im)(^[ \t•*\-#]*(summary|cause|root cause|duration|impact|symptoms?|detection|resolution|conclusions?|timeline|lessons learned)\b|\bthe (cause|symptoms?)\b|\b(this|site) (incident|outage)\b)`),
		// What a failure looked like while it went on: a report dated in
		// its title that tells of one in the past tense is an incident's
		// even when it names no outage.
		// Also lag and a used-up resource, a process that died or
		// flapped, lost data, a service that stopped serving, and
		// requests answered with 4xx ("users were served 404s").
		symptom: regexp.MustCompile(`(?i)\b(overload\w*|timeouts?|timed out|flap(s|ped|ping)?|stuck|hung|slow(ed|ness)?|(high|heavy) (cpu )?load|latenc(y|ies)|lag(s|ged|ging)?|saturat\w*|used up|exhausted|unable to|loss of|data loss|killed|died|dying|(stopp\w*|ceased|no longer) (to )?(respond|serv|send|process|accept|function)\w*|broke|broken|dropped|dropping|read[- ]only|spikes?|paged|vandali[sz]\w*|compromised|5\d\d(s|s? errors?)?|4xx|4\d\ds)\b`),
		// A failure in the past tense, also one that went on ("the code
		// was dropping events") or a thing found wrong ("there were two
		// things wrong with it").
		pastFailure: regexp.MustCompile(`(?i)\b((was|were|had been|went) (down|unavailable|unreachable|degraded|affected|impacted|broken|slow|lost)|(experienced|suffered|caused|causing|crashed|aborted|stopped|lagged|resulted in|resulting in|led to|leading to|traced to|outage lasted|service interruption|elevated (error )?rates?|slowdown|slowed down|compromised|(were|was) (being )?dropped|(was|were) (dropping|losing|rejecting|discarding|corrupting)|there (was|were) (\w+ ){0,2}?wrong with|lost (connectivity|connections?|data)|(did|was|were) not (able to|validate|work|respond)|(was|were) unable to|(was|were) not (written|processed|delivered|served|logged|shipped|sent)|(got|was|were) killed|ran out|could not|couldn't)\b|(failed|failing) (for|to|with|because))`),
		// A cause stated in the past tense ("The cause was a change ...",
		// "The root cause has been determined to be ..."): something
		// happened, though not necessarily a failure.
		causeStated: regexp.MustCompile(`(?i)\bthe (root )?cause (was|were|has been|had been|turned out)\b`),
		// "During this outage", "this incident": the text tells of one
		// outage that happened, not of outages in general.
		thisOne: regexp.MustCompile(`(?i)\bthis (incident|outage)\b`),
		// A title whose last words name a failure ("port saturation",
		// "API slowdown", "search API down"), read by endsWithFailure.
		// How long something lasted, in minutes or hours, after a verb
		// in the past tense: "rejected all requests for 12 minutes",
		// "were empty for about 3 hours". After "is", "are", "be" or
		// "get" the verb is a passive present ("are cached for 5
		// minutes"): readLasted drops it.
		lasted: regexp.MustCompile(`(?i)\b(?:(is|are|be|been|being|gets?) )?(?:\w+ed|was|were)\b[^.;:!?]{0,80}?\bfor (?:about |over |nearly |almost |roughly |around |~)?\d+ (?:minutes?|mins?|hours?|hrs?)\b`),
		// An incident tracker's identifier ("INC-207", "INC0012345"),
		// in capitals.
		incidentID: regexp.MustCompile(`\bINC-?\d+\b`),
		failureEnd: regexp.MustCompile(`(?i)(^|\s)(\w+ )?(down|outage|slowdown|saturation|saturated|overload|overloaded|crash|crashed|unavailable|unreachable|degradation|degraded|failure|disruption|vandalism)$`),
	}
})

// timelineEntries is how many timestamped timeline lines s has, up to max.
func (g incidentSignals) timelineEntries(s string, max int) int {
	return len(g.timelineEntry.FindAllStringIndex(s, max))
}

// headings is how many different report headings text has.
func (g incidentSignals) headings(text string) int {
	seen := map[string]bool{}
	for _, m := range g.heading.FindAllStringSubmatch(text, 32) {
		seen[strings.ToLower(m[1])] = true
	}
	return len(seen)
}

// readLasted reports whether text says how long something lasted in the
// past tense.
func (g incidentSignals) readLasted(text string) bool {
	for _, m := range g.lasted.FindAllStringSubmatch(text, 8) {
		if m[1] == "" {
			return true
		}
	}
	return false
}

// particles make "down" a verb's ("scale down", "shut down"), not a
// failure's.
var particles = map[string]bool{"scale": true, "scaled": true, "scaling": true, "shut": true, "shutting": true,
	"wind": true, "step": true, "cool": true, "tear": true, "turn": true, "turning": true, "count": true, "slow": true, "break": true}

// TitleWords splits a document title into words: hyphens and underscores
// made spaces, a lower-case letter followed by an upper-case one split
// ("PartialNetworkOutage" is "Partial Network Outage").
func TitleWords(title string) string {
	var b strings.Builder
	prev := rune(0)
	for _, r := range title {
		switch {
		case r == '-' || r == '_':
			r = ' '
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			b.WriteByte(' ')
		}
		b.WriteRune(r)
		prev = r
	}
	return b.String()
}

// endsWithFailure reports whether a title ends by naming a failure, its words
// split at hyphens, underscores and CamelCase ("PortSaturation").
func (g incidentSignals) endsWithFailure(title string) bool {
	m := g.failureEnd.FindStringSubmatch(strings.TrimSpace(TitleWords(title)))
	return m != nil && !(strings.EqualFold(m[3], "down") && particles[strings.ToLower(strings.TrimSpace(m[2]))])
}

// firstLine is the first non-empty line of text: the heading of a
// Markdown report.
func firstLine(text string) string {
	for line := range strings.SplitSeq(text, "\n") {
		if l := strings.TrimSpace(line); l != "" {
			return l
		}
	}
	return ""
}

// maxHeadingWords is the most words a line without a Markdown heading mark
// may have to read as a heading.
const maxHeadingWords = 12

// headingLine is line when it reads as a document's heading: a Markdown
// heading ("# Storage Incident #17002"), or a short line of at most
// maxHeadingWords words that does not end as a sentence does. Otherwise it
// is "": a first line that is a sentence ("This page explains what to do
// in an outage.") names no document.
func headingLine(line string) string {
	if strings.HasPrefix(line, "#") {
		return line
	}
	if len(strings.Fields(line)) > maxHeadingWords || strings.ContainsAny(line[len(line)-1:], ".!?;,") {
		return ""
	}
	return line
}

// namesIncident reports whether a title or heading calls its document an
// incident: one of the title words starting a word, a CamelCase word
// counting as one ("AllWikisOutage"), not inside another word
// ("coincidental").
func (g incidentSignals) namesIncident(s string) bool {
	for _, m := range g.title.FindAllStringIndex(s, -1) {
		if m[0] == 0 {
			return true
		}
		prev, _ := utf8.DecodeLastRuneInString(s[:m[0]])
		first, _ := utf8.DecodeRuneInString(s[m[0]:])
		if !unicode.IsLetter(prev) || unicode.IsLower(prev) && unicode.IsUpper(first) {
			return true
		}
	}
	return false
}

// Infer reads a document's type from its text: a postmortem names
// an impact, a cause, a timeline and a resolution; a text with outage
// words and two of those four parts (or three of the four) is an
// incident. So is a text with three of a report's headings (Summary,
// Timeline, Contributing factors, Lessons learned, Action items, ...),
// and a text that reports a past failure and is called an incident in
// its title or first heading (or named by an incident tracker's id
// there, "INC-207"), carries a date in its title, has a
// timeline of at least two timestamped entries, or has a retrospective's
// questions or follow-up list. A title with a date that ends by naming a
// failure ("20230105-Cache saturation") is an incident's, whatever the
// text. A cause stated in the past tense or a
// reference to "this outage" or how long something lasted ("for 12
// minutes") says something happened as a past failure
// or a timestamp does. Anything else is a document: a how-to or a service
// overview talks of failures that may happen, not of one that did.
func Infer(title, text string) string {
	s := title + "\n" + text
	parts := postmortemParts()
	n := 0
	for _, re := range parts[:4] {
		if re.MatchString(s) {
			n++
		}
	}
	if n >= 3 || n >= 2 && parts[4].MatchString(s) {
		return "incident"
	}
	g := signals()
	if g.headings(text) >= 3 {
		return "incident"
	}
	if g.datedTitle.MatchString(title) && g.endsWithFailure(title) {
		// A report of that day's failure, even when its page is empty.
		return "incident"
	}
	past := g.pastFailure.MatchString(text)
	cause := g.causeStated.MatchString(text)
	timeline := g.timelineEntries(text, 2) >= 2
	if !past && !cause && !timeline && !g.atTime.MatchString(text) && !g.thisOne.MatchString(text) && !g.readLasted(text) {
		// Nothing says something happened.
		return "document"
	}
	failed := past || parts[4].MatchString(s)
	report := g.retrospective.MatchString(text) || g.labels.MatchString(text)
	switch {
	case g.namesIncident(title) || g.namesIncident(headingLine(firstLine(text))),
		g.incidentID.MatchString(title) || g.incidentID.MatchString(headingLine(firstLine(text))):
		return "incident"
	case (past || cause) && g.datedTitle.MatchString(title) && (parts[4].MatchString(s) || g.symptom.MatchString(text) || parts[0].MatchString(text)):
		// A dated report of a past failure that names an outage word, a
		// symptom or what it affected.
		return "incident"
	case (timeline || report) && failed, timeline && report:
		return "incident"
	}
	return "document"
}
