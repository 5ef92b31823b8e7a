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
		regexp.MustCompile(`(?i)\b(root cause|cause[ds]? by|contributing factors?|what went wrong|underlying (cause|issue)|was caused|due to)\b`),
		regexp.MustCompile(`(?i)\b(timeline|\d{1,2}:\d{2}( ?UTC| ?PDT| ?PST)?|detected|alerted|paged)\b`),
		regexp.MustCompile(`(?i)\b(resolution|resolved|mitigat\w*|restored|rolled back|recovered|fixed|workaround)\b`),
		regexp.MustCompile(`(?i)\b(incident|outage|postmortem|post-mortem|disruption|downtime|degradation|service event|unavailable|unreachable|(was|were|went) down|5xx|5\d\d errors?|errors?|failed|failures?|crash\w*)\b`),
	}
})

// Infer reads a document's type from its text: a postmortem names
// an impact, a cause, a timeline and a resolution; a text with outage
// words and two of those four parts (or three of the four) is an
// incident, anything else a document.
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
	return "document"
}
