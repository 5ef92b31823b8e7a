// Package httpretry is the retry policy kgstream's HTTP clients (the LLM
// and embeddings endpoints) share: which failures are worth another try,
// how long to wait (the server's Retry-After, else full-jitter exponential
// backoff), and how to report a non-2xx answer.
package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Sentinel errors callers branch on.
var (
	// ErrRetriesExhausted wraps the last error after the final attempt.
	ErrRetriesExhausted = errors.New("retries exhausted")
	// ErrBadResponse means a 2xx answer that could not be used; retrying
	// the same request would not help.
	ErrBadResponse = errors.New("bad response")
)

// StatusError is a non-2xx answer.
type StatusError struct {
	// Service names the client in the message ("llm", "embed").
	Service    string
	StatusCode int
	// Body is an excerpt of the response body.
	Body string
	// RetryAfter is the delay the server asked for (0 if none).
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: status %d %s: %s", e.Service, e.StatusCode, http.StatusText(e.StatusCode), e.Body)
}

// Temporary reports whether a retry may succeed: 408, 429 and 5xx.
func (e *StatusError) Temporary() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusRequestTimeout || e.StatusCode >= 500
}

// NewStatusError builds the StatusError of an answer.
func NewStatusError(service string, resp *http.Response, body []byte) *StatusError {
	return &StatusError{Service: service, StatusCode: resp.StatusCode, Body: Excerpt(string(body), 512),
		RetryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
}

type timeoutError struct{ err error }

func (e timeoutError) Error() string { return "attempt timed out: " + e.err.Error() }
func (e timeoutError) Unwrap() error { return e.err }

// Timeout marks err as one attempt's own deadline passing (retried), as
// opposed to the caller's context ending (not retried).
func Timeout(err error) error { return timeoutError{err} }

// Transient reports whether err is worth another attempt.
func Transient(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Temporary()
	}
	var te timeoutError
	if errors.As(err, &te) {
		return true
	}
	if errors.Is(err, ErrBadResponse) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	// A connection closed mid-response is worth another try too.
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// Policy says how often and how long to retry.
type Policy struct {
	MaxRetries    int
	MinBackoff    time.Duration
	MaxBackoff    time.Duration
	MaxRetryAfter time.Duration
	Logger        *slog.Logger
}

// Delay is the wait before retry number attempt+1: the server's
// Retry-After when it sent one (capped), else full-jitter exponential
// backoff (the jitter spreads the retries of many workers hitting one rate
// limit).
func (p Policy) Delay(attempt int, err error) time.Duration {
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > 0 {
		return min(se.RetryAfter, p.MaxRetryAfter)
	}
	d := p.MinBackoff << min(attempt, 30)
	if d <= 0 || d > p.MaxBackoff {
		d = p.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

// Do runs attempt until it succeeds, fails with a non-transient error, the
// retries are used up, or ctx ends; it returns the number of attempts made.
// url names the endpoint in errors.
func (p Policy) Do(ctx context.Context, url string, attempt func(n int) error) (int, error) {
	var last error
	for n := 0; ; n++ {
		err := attempt(n)
		if err == nil {
			return n + 1, nil
		}
		if ctx.Err() != nil {
			return n + 1, fmt.Errorf("calling %s: %w", url, ctx.Err())
		}
		if !Transient(err) {
			return n + 1, fmt.Errorf("calling %s: %w", url, err)
		}
		last = err
		if n >= p.MaxRetries {
			return n + 1, fmt.Errorf("calling %s: %w after %d attempts: %w", url, ErrRetriesExhausted, n+1, last)
		}
		d := p.Delay(n, err)
		if p.Logger != nil {
			p.Logger.Warn("request failed, retrying", "url", url, "attempt", n+1, "delay", d, "error", err)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return n + 1, fmt.Errorf("calling %s: %w (last error: %w)", url, ctx.Err(), last)
		case <-t.C:
		}
	}
}

// ParseRetryAfter parses a Retry-After value: delay-seconds (fractions
// allowed) or an HTTP date.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// Excerpt shortens s to at most n bytes (on a rune boundary) for error
// messages, marking the cut.
func Excerpt(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d bytes)", len(s))
}
