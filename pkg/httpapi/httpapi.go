// Package httpapi holds what every kgstream HTTP surface shares: JSON error
// bodies ({"error":{"code","message"}}), JSON responses, strict request
// decoding with a size limit, and the authentication middleware.
package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/errkind"
)

// Error is an HTTP error with a machine-readable code.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Details carries structured extras (e.g. ambiguity candidates).
	Details any `json:"details,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Errorf builds an *Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// WriteJSON writes v with status. It encodes with
// github.com/segmentio/encoding/json, which writes what encoding/json
// writes (TestWriteJSONWritesWhatEncodingJSONWrites) at a fraction of its
// CPU: an answer citing tens of thousands of documents is megabytes of
// JSON. One difference: a json.RawMessage is written as it is, not
// compacted (none of the responses holds one with white space).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	if raw, ok := v.(Encoded); ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(raw)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := fastjson.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// Encoded is a body EncodeJSON made: WriteJSON writes it as it is, so a
// response kept for several requests is encoded once.
type Encoded []byte

// EncodeJSON encodes v exactly as WriteJSON writes it.
func EncodeJSON(v any) (Encoded, error) {
	var b bytes.Buffer
	enc := fastjson.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return Encoded(b.Bytes()), nil
}

// kindStatus is the one mapping of error kinds to HTTP: the status and the
// default code of each kind. A handler may give a more specific code for a
// kind (errkind.Error.Code); the status is always the kind's.
var kindStatus = map[errkind.Kind]struct {
	status int
	code   string
}{
	errkind.Invalid:      {http.StatusBadRequest, "invalid_field"},
	errkind.NotFound:     {http.StatusNotFound, "not_found"},
	errkind.Conflict:     {http.StatusConflict, "conflict"},
	errkind.Forbidden:    {http.StatusForbidden, "forbidden"},
	errkind.Unauthorized: {http.StatusUnauthorized, "unauthenticated"},
	errkind.Unavailable:  {http.StatusServiceUnavailable, "unavailable"},
	errkind.TooLarge:     {http.StatusRequestEntityTooLarge, "too_large"},
	errkind.Other:        {http.StatusInternalServerError, "internal"},
}

// Generic messages of 5xx answers, which never carry an error's text.
const (
	msgInternal    = "internal error"
	msgUnavailable = "a service this request needs is unavailable; retry the request"
)

// StatusOf returns the HTTP status and default code of an error kind.
func StatusOf(k errkind.Kind) (int, string) {
	m, ok := kindStatus[k]
	if !ok {
		m = kindStatus[errkind.Other]
	}
	return m.status, m.code
}

// FromError turns any error into the HTTP error a client gets. An *Error in
// the chain is answered as it is. Otherwise the error's kind (errkind.Of)
// gives the status and the default code, an *errkind.Error its own code
// and message. A 4xx answer says what was wrong (the error's text); a 5xx
// answer never carries an error's text, which may name a store's address:
// it has the kind's generic message, or the public message of an
// *errkind.Error built with errkind.Wrap. FromError(nil) is nil.
func FromError(err error) *Error {
	if err == nil {
		return nil
	}
	var he *Error
	if errors.As(err, &he) {
		return he
	}
	status, code := StatusOf(errkind.Of(err))
	out := &Error{Status: status, Code: code, Message: err.Error()}
	var ke *errkind.Error
	hasKE := errors.As(err, &ke)
	if hasKE && ke.Code != "" {
		out.Code = ke.Code
	}
	if status < 500 {
		if hasKE {
			out.Message = ke.Message
		}
		return out
	}
	out.Message = msgInternal
	if status == http.StatusServiceUnavailable {
		out.Message = msgUnavailable
	}
	if hasKE {
		if m, ok := ke.Public(); ok {
			out.Message = m
		}
	}
	return out
}

// WriteError writes err as a JSON error (see FromError). The text of an
// error answered with 5xx is logged instead of shown.
func WriteError(w http.ResponseWriter, log *slog.Logger, err error) {
	he := FromError(err)
	if he == nil {
		he = &Error{Status: http.StatusInternalServerError, Code: "internal", Message: msgInternal}
	}
	var bare *Error
	if he.Status >= 500 && log != nil && !errors.As(err, &bare) {
		log.Error("request failed", "status", he.Status, "code", he.Code, "error", err)
	}
	WriteJSON(w, he.Status, map[string]any{"error": he})
}

// DecodeJSON decodes a JSON body strictly (unknown fields, trailing data and
// wrong types are 400) with a size limit (413).
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return Errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json, got %q", ct)
	}
	body, err := ReadBody(w, r, limit)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			return Errorf(http.StatusBadRequest, "invalid_field", "field %q must be %s, got %s", te.Field, te.Type, te.Value)
		case errors.As(err, &se):
			return Errorf(http.StatusBadRequest, "malformed_json", "malformed JSON at byte %d: %v", se.Offset, err)
		case errors.Is(err, io.EOF):
			return Errorf(http.StatusBadRequest, "empty_body", "request body is empty")
		default:
			return Errorf(http.StatusBadRequest, "malformed_json", "%v", err)
		}
	}
	if dec.More() {
		return Errorf(http.StatusBadRequest, "malformed_json", "trailing data after the JSON object")
	}
	return nil
}

// RequireJSON refuses (415) a request whose Content-Type is not
// application/json, a missing Content-Type included.
func RequireJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return Errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json, got %q", ct)
	}
	return nil
}

// ReadBody reads at most limit bytes of the body; more is a 413.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, Errorf(http.StatusRequestEntityTooLarge, "body_too_large", "request body exceeds %d bytes", limit)
		}
		return nil, Errorf(http.StatusBadRequest, "unreadable_body", "reading request body: %v", err)
	}
	return body, nil
}

// Authenticated wraps h so it runs with the caller in the request context;
// a missing or bad token is 401.
func Authenticated(a *auth.Authenticator, log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := a.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kgstream"`)
			WriteError(w, log, Errorf(http.StatusUnauthorized, "unauthenticated", "%v", err))
			return
		}
		h.ServeHTTP(w, r.WithContext(auth.WithCaller(r.Context(), c)))
	})
}
