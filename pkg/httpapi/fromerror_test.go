package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/errkind"
	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/store"
)

func TestFromError(t *testing.T) {
	dial := fmt.Errorf("dial tcp 10.0.0.7:6379: %w", syscall.ECONNREFUSED)
	cases := []struct {
		name    string
		err     error
		status  int
		code    string
		message string
	}{
		{"invalid", errkind.Invalid, 400, "invalid_field", "invalid"},
		{"not found", errkind.NotFound, 404, "not_found", "not found"},
		{"conflict", errkind.Conflict, 409, "conflict", "conflict"},
		{"forbidden", errkind.Forbidden, 403, "forbidden", "forbidden"},
		{"unauthorized", errkind.Unauthorized, 401, "unauthenticated", "unauthorized"},
		{"too large", errkind.TooLarge, 413, "too_large", "too large"},
		{"unavailable", errkind.Unavailable, 503, "unavailable", "a service this request needs is unavailable; retry the request"},
		{"wrapped store sentinel", fmt.Errorf("recording %q: %w", "d", fmt.Errorf("%w: version 0 must be >= 1", store.ErrInvalid)),
			400, "invalid_field", `recording "d": invalid argument: version 0 must be >= 1`},
		{"stale version", fmt.Errorf("announcing: %w", store.ErrStaleVersion), 409, "conflict", "announcing: stale version"},
		{"not found sentinel", store.ErrNotFound, 404, "not_found", "not found"},
		{"a service's code", errkind.Errorf(errkind.NotFound, "unknown_document", "document %q is unknown", "d"),
			404, "unknown_document", `document "d" is unknown`},
		{"a service's code, wrapped", fmt.Errorf("deleting: %w", errkind.Errorf(errkind.Conflict, "stale_version", "%w: 3 < 4", store.ErrStaleVersion)),
			409, "stale_version", "stale version: 3 < 4"},
		{"unknown error", errors.New("nil map write at 0xc000123456"), 500, "internal", "internal error"},
		{"unknown error, wrapped", fmt.Errorf("answering: %w", dial), 500, "internal", "internal error"},
		{"store error with its address", errkind.Errorf(errkind.Unavailable, "", "reading sources: %w", dial),
			503, "unavailable", "a service this request needs is unavailable; retry the request"},
		{"store error with its address, a service's code", fmt.Errorf("posting: %w",
			errkind.Wrap(errkind.Unavailable, "registry_unavailable", dial, "recording the document: the registry is unavailable; retry the request")),
			503, "registry_unavailable", "recording the document: the registry is unavailable; retry the request"},
		{"an HTTP error as it is", fmt.Errorf("x: %w", httpapi.Errorf(http.StatusTeapot, "teapot", "short and stout")), 418, "teapot", "short and stout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := httpapi.FromError(c.err)
			require.Equal(t, c.status, got.Status)
			require.Equal(t, c.code, got.Code)
			require.Equal(t, c.message, got.Message)
			if c.status >= 500 {
				require.NotContains(t, got.Message, "10.0.0.7")
				require.NotContains(t, got.Message, "0xc000")
			}
		})
	}
	require.Nil(t, httpapi.FromError(nil))
}

// TestStatusOfEveryKind: every kind has its own status, and no kind but
// Other and Unavailable answers 5xx.
func TestStatusOfEveryKind(t *testing.T) {
	seen := map[int]errkind.Kind{}
	for _, k := range append([]errkind.Kind{errkind.Other}, errkind.Kinds...) {
		status, code := httpapi.StatusOf(k)
		require.NotEmpty(t, code, "%s", k)
		prev, dup := seen[status]
		require.False(t, dup, "%s and %s share status %d", k, prev, status)
		seen[status] = k
		require.Equal(t, k == errkind.Other || k == errkind.Unavailable, status >= 500, "%s: %d", k, status)
	}
	status, _ := httpapi.StatusOf(errkind.Kind(200))
	require.Equal(t, 500, status, "an unknown kind is internal")
}

// TestWriteErrorHidesAndLogsDetail: the body of a 5xx carries the code and
// a generic message; the detail goes to the log.
func TestWriteErrorHidesAndLogsDetail(t *testing.T) {
	var logged []string
	log := newRecordingLogger(&logged)
	rec := httptest.NewRecorder()
	httpapi.WriteError(rec, log, errkind.Errorf(errkind.Unavailable, "store_unavailable", "reading: dial tcp 10.0.0.7:6379: %w", syscall.ECONNREFUSED))
	require.Equal(t, 503, rec.Code)
	require.JSONEq(t, `{"error":{"code":"store_unavailable","message":"a service this request needs is unavailable; retry the request"}}`, rec.Body.String())
	require.Len(t, logged, 1)
	require.Contains(t, logged[0], "10.0.0.7:6379")

	logged = nil
	rec = httptest.NewRecorder()
	httpapi.WriteError(rec, log, fmt.Errorf("%w: bad id", store.ErrInvalid))
	require.Equal(t, 400, rec.Code)
	require.JSONEq(t, `{"error":{"code":"invalid_field","message":"invalid argument: bad id"}}`, rec.Body.String())
	require.Empty(t, logged, "a refusal is no failure to log")
}

// recordingHandler keeps each record's message and attributes as one line.
type recordingHandler struct{ lines *[]string }

func (h recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordingHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	*h.lines = append(*h.lines, b.String())
	return nil
}
func (h recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordingHandler) WithGroup(string) slog.Handler      { return h }

func newRecordingLogger(lines *[]string) *slog.Logger {
	return slog.New(recordingHandler{lines: lines})
}

// TestEncodedIsWrittenAsWriteJSONWrites: a body encoded once and written
// later is byte for byte what WriteJSON writes for the value.
func TestEncodedIsWrittenAsWriteJSONWrites(t *testing.T) {
	v := map[string]any{"groups": []any{map[string]any{"name": "<a & b>", "count": 3}}}
	direct := httptest.NewRecorder()
	httpapi.WriteJSON(direct, http.StatusOK, v)
	enc, err := httpapi.EncodeJSON(v)
	require.NoError(t, err)
	kept := httptest.NewRecorder()
	httpapi.WriteJSON(kept, http.StatusOK, enc)
	require.Equal(t, direct.Body.String(), kept.Body.String())
	require.Equal(t, "application/json", kept.Header().Get("Content-Type"))
	require.Contains(t, kept.Body.String(), "<a & b>", "no HTML escaping, as WriteJSON")
	_, err = httpapi.EncodeJSON(func() {})
	require.Error(t, err)
}
