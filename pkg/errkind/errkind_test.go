package errkind_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/catalog"
	"github.com/kgstream/kgstream/pkg/doctype"
	"github.com/kgstream/kgstream/pkg/errkind"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/taxonomy"
	"github.com/kgstream/kgstream/pkg/vector"
)

// TestSentinelsHaveTheirKind: every package's sentinels are of their kind,
// wrapped or not, and still match themselves and only themselves.
func TestSentinelsHaveTheirKind(t *testing.T) {
	cases := []struct {
		name string
		err  error
		kind errkind.Kind
	}{
		{"store.ErrNotFound", store.ErrNotFound, errkind.NotFound},
		{"store.ErrStaleVersion", store.ErrStaleVersion, errkind.Conflict},
		{"store.ErrConflict", store.ErrConflict, errkind.Conflict},
		{"store.ErrInvalid", store.ErrInvalid, errkind.Invalid},
		{"events.ErrInvalidEvent", events.ErrInvalidEvent, errkind.Invalid},
		{"events.ErrUnknownSchema", events.ErrUnknownSchema, errkind.Invalid},
		{"provenance.ErrInvalidTenant", provenance.ErrInvalidTenant, errkind.Invalid},
		{"provenance.ErrInvalidDocID", provenance.ErrInvalidDocID, errkind.Invalid},
		{"resolve.ErrInvalidRef", resolve.ErrInvalidRef, errkind.Invalid},
		{"resolve.ErrInvalidAliases", resolve.ErrInvalidAliases, errkind.Invalid},
		{"vector.ErrInvalid", vector.ErrInvalid, errkind.Invalid},
		{"vector.ErrClosed", vector.ErrClosed, errkind.Unavailable},
		{"catalog.ErrInvalidCatalog", catalog.ErrInvalidCatalog, errkind.Invalid},
		{"doctype.ErrUnknown", doctype.ErrUnknown, errkind.Invalid},
		{"taxonomy.ErrInvalid", taxonomy.ErrInvalid, errkind.Invalid},
		{"auth.ErrUnauthenticated", auth.ErrUnauthenticated, errkind.Unauthorized},
	}
	for _, c := range cases {
		wrapped := fmt.Errorf("applying source %q: %w", "d", fmt.Errorf("%w: version 0 must be >= 1", c.err))
		for _, err := range []error{c.err, wrapped} {
			require.Equal(t, c.kind, errkind.Of(err), "%s: %v", c.name, err)
			require.ErrorIs(t, err, c.kind, c.name)
			require.ErrorIs(t, err, c.err, c.name)
			for _, k := range errkind.Kinds {
				if k != c.kind {
					require.NotErrorIs(t, err, k, "%s is %s", c.name, k)
				}
			}
		}
		for _, other := range cases {
			if other.err != c.err {
				require.NotErrorIs(t, c.err, other.err, "%s is %s", c.name, other.name)
			}
		}
	}
	// The texts stay what callers and logs have always seen.
	require.Equal(t, "invalid argument", store.ErrInvalid.Error())
	require.Equal(t, "invalid event", events.ErrInvalidEvent.Error())
}

func TestOf(t *testing.T) {
	require.Equal(t, errkind.Other, errkind.Of(nil))
	require.Equal(t, errkind.Other, errkind.Of(errors.New("boom")))
	require.Equal(t, errkind.Unavailable, errkind.Of(fmt.Errorf("reading: %w", errkind.Unavailable)))
	// The outermost kind wins: a service may re-classify what it wraps.
	outer := errkind.Wrap(errkind.Unavailable, "registry_unavailable", store.ErrInvalid, "the registry is unavailable")
	require.Equal(t, errkind.Unavailable, errkind.Of(outer))
	require.ErrorIs(t, outer, store.ErrInvalid, "the cause stays reachable")
}

func TestErrorTexts(t *testing.T) {
	cause := errors.New("dial tcp 10.0.0.7:6379: connection refused")
	w := errkind.Wrap(errkind.Unavailable, "registry_unavailable", cause, "recording the document: the registry is unavailable")
	require.Equal(t, "recording the document: the registry is unavailable: dial tcp 10.0.0.7:6379: connection refused", w.Error(),
		"the log sees the cause")
	msg, ok := w.Public()
	require.True(t, ok)
	require.Equal(t, "recording the document: the registry is unavailable", msg)

	e := errkind.Errorf(errkind.Invalid, "invalid_document", "checking the event: %w", events.ErrInvalidEvent)
	require.Equal(t, "checking the event: invalid event", e.Error())
	require.ErrorIs(t, e, events.ErrInvalidEvent)
	require.ErrorIs(t, e, errkind.Invalid)
	_, ok = e.Public()
	require.False(t, ok, "a message holding its cause's text is no public message of an outage")

	plain := errkind.Errorf(errkind.NotFound, "unknown_document", "document %q is unknown", "d")
	require.Nil(t, plain.Unwrap())
	require.Equal(t, `document "d" is unknown`, plain.Error())

	for _, k := range append([]errkind.Kind{errkind.Other}, errkind.Kinds...) {
		require.NotEmpty(t, k.Error())
		require.NotContains(t, k.Error(), "kind ", "every kind is named")
	}
}
