// Package errkind classifies errors by what a caller can do about them:
// fix the request (Invalid), look elsewhere (NotFound), reread and retry
// (Conflict), ask with other rights (Forbidden, Unauthorized), retry later
// (Unavailable) or send less (TooLarge). Stores, decoders and services mark
// their sentinels with a kind; the HTTP layer maps kinds to statuses in one
// table, so no store needs to know about HTTP and no handler needs to know
// every store's sentinels.
//
// A Kind is itself an error, so errors.Is(err, errkind.NotFound) asks
// whether err is of that kind:
//
//	var ErrNotFound = errkind.New(errkind.NotFound, "not found")
//	errors.Is(fmt.Errorf("reading %q: %w", id, ErrNotFound), errkind.NotFound) // true
package errkind

import (
	"errors"
	"fmt"
)

// Kind is a class of errors. The zero Kind, Other, is an error of no known
// class (to the HTTP layer, an internal error).
type Kind uint8

// The kinds.
const (
	// Other is an error of no known kind.
	Other Kind = iota
	// Invalid means the request or an argument is malformed; retrying the
	// same request cannot help.
	Invalid
	// NotFound means what was named does not exist (or is not visible to
	// the caller, which is told the same).
	NotFound
	// Conflict means the state moved under the request: a stale version, a
	// concurrent writer.
	Conflict
	// Forbidden means the caller is known but may not do this.
	Forbidden
	// Unauthorized means the caller is not authenticated.
	Unauthorized
	// Unavailable means a dependency (store, stream) is down or timed out;
	// the same request may succeed later.
	Unavailable
	// TooLarge means the request or what it would produce exceeds a limit.
	TooLarge
)

// Kinds lists every kind but Other, in order.
var Kinds = []Kind{Invalid, NotFound, Conflict, Forbidden, Unauthorized, Unavailable, TooLarge}

var names = [...]string{
	Other:        "other",
	Invalid:      "invalid",
	NotFound:     "not found",
	Conflict:     "conflict",
	Forbidden:    "forbidden",
	Unauthorized: "unauthorized",
	Unavailable:  "unavailable",
	TooLarge:     "too large",
}

// String names the kind.
func (k Kind) String() string {
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("kind %d", k)
}

// Error makes a Kind usable as the target of errors.Is.
func (k Kind) Error() string { return k.String() }

// kinded is what Of looks for in a chain.
type kinded interface{ ErrorKind() Kind }

// ErrorKind returns k: a bare Kind in a chain is of its own kind.
func (k Kind) ErrorKind() Kind { return k }

// Of returns the kind of err: that of the outermost error in its chain that
// has one, Other when none has.
func Of(err error) Kind {
	var k kinded
	if errors.As(err, &k) {
		return k.ErrorKind()
	}
	return Other
}

// sentinel is an error of a kind, compared by identity.
type sentinel struct {
	kind Kind
	msg  string
}

func (s *sentinel) Error() string        { return s.msg }
func (s *sentinel) ErrorKind() Kind      { return s.kind }
func (s *sentinel) Is(target error) bool { return target == s.kind }

// New returns a sentinel error of kind with text msg: errors.Is matches it
// by identity, as with errors.New, and also matches kind.
func New(kind Kind, msg string) error { return &sentinel{kind: kind, msg: msg} }

// Error is an error of a kind with a public code and message, as a service
// returns it to say why a request was refused. Cause, when set, is the
// underlying error: errors.Is and errors.As reach it, and it is in Error()
// for logs, but the HTTP layer never shows it to a client for a kind it
// answers with 5xx (it may hold a store's address).
type Error struct {
	Kind Kind
	// Code is the stable machine-readable code (e.g. "stale_version");
	// empty means the kind's default.
	Code string
	// Message is for people.
	Message string
	Cause   error
	// causeInMessage: Message already holds the cause's text (Errorf
	// with %w), so it is no message for a 5xx answer.
	causeInMessage bool
}

// Errorf returns an *Error of kind with code and a formatted message. A %w
// verb makes its argument the Cause, and its text part of the message: use
// it for refusals (4xx), whose cause is the client's to see.
func Errorf(kind Kind, code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	cause := errors.Unwrap(err)
	return &Error{Kind: kind, Code: code, Message: err.Error(), Cause: cause, causeInMessage: cause != nil}
}

// Wrap returns an *Error of kind with code, whose Cause is err and whose
// Message is message alone: what a client may be shown of an outage.
func Wrap(kind Kind, code string, err error, message string) *Error {
	return &Error{Kind: kind, Code: code, Message: message, Cause: err}
}

func (e *Error) Error() string {
	if e.Cause == nil || e.causeInMessage {
		return e.Message
	}
	return e.Message + ": " + e.Cause.Error()
}

// Public returns the message a client may see whatever the kind: Message,
// unless it holds the cause's text.
func (e *Error) Public() (string, bool) {
	return e.Message, e.Message != "" && !e.causeInMessage
}

// ErrorKind returns e.Kind.
func (e *Error) ErrorKind() Kind { return e.Kind }

// Is matches e's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }
