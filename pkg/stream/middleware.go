package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/kgstream/kgstream/pkg/events"
)

// Middleware wraps a Handler with behaviour every message goes through
// (recovery, decoding, routing).
type Middleware func(Handler) Handler

// Chain wraps h in mw, the first outermost: Chain(h, a, b) runs a, then b,
// then h.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// Recover turns a panic of next into a Permanent error, so the message is
// dead-lettered with the panic as its reason instead of crashing the
// process. Run applies it to every handler.
func Recover(next Handler) Handler {
	return func(ctx context.Context, m *Message) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = Permanent(fmt.Errorf("handler panicked: %v", r))
			}
		}()
		return next(ctx, m)
	}
}

// Event is what Typed decodes into: a pointer to one of pkg/events'
// event types, which carry their tenant in their header.
type Event interface {
	events.Validator
	EventTenant() string
}

// Typed adapts fn, which takes a decoded event, to a Handler: the body is
// decoded strictly and validated (events.Decode; a failure is permanent)
// and the event's tenant must be the one its subject names, else the
// message is refused as a Permanent error before fn sees it: an event can
// never act on another tenant's data than the subject it travelled on.
func Typed[T any, P interface {
	*T
	Event
}](fn func(ctx context.Context, m *Message, ev P) error) Handler {
	return func(ctx context.Context, m *Message) error {
		ev, err := DecodeTyped[T, P](m)
		if err != nil {
			return err
		}
		return fn(ctx, m, ev)
	}
}

// DecodeTyped is Typed's decoding for a handler of several messages at
// once (a BatchHandler): m's body decoded strictly into a new T and
// validated, its tenant checked against the subject's; every failure is
// permanent.
func DecodeTyped[T any, P interface {
	*T
	Event
}](m *Message) (P, error) {
	ev := P(new(T))
	if err := events.Decode(m.Data, ev); err != nil {
		return nil, Permanent(err)
	}
	if got := ev.EventTenant(); got != m.Tenant {
		return nil, Permanent(fmt.Errorf("%w: event of tenant %q on subject %q of tenant %q",
			ErrTenantMismatch, got, m.Subject, m.Tenant))
	}
	return ev, nil
}

// ErrTenantMismatch is returned (wrapped, Permanent) by a Typed handler for
// an event whose tenant is not its subject's.
var ErrTenantMismatch = fmt.Errorf("%w: tenant does not match the subject", events.ErrInvalidEvent)

// Mux routes each message to the handler of its kind; a kind without one
// is a Permanent error (ErrUnknownKind).
func Mux(routes map[events.Kind]Handler) Handler {
	routes = maps.Clone(routes)
	return func(ctx context.Context, m *Message) error {
		h, ok := routes[m.Kind]
		if !ok {
			return Permanent(fmt.Errorf("%w: %q (subject %q)", ErrUnknownKind, m.Kind, m.Subject))
		}
		return h(ctx, m)
	}
}

// ErrUnknownKind is returned (wrapped, Permanent) by a Mux for a message of
// a kind it has no handler for.
var ErrUnknownKind = errors.New("no handler for the event kind")
