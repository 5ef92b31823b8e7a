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

	"github.com/cenkalti/backoff/v4"
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
	// Limiter, when set, counts the retries in its metrics.
	Limiter *Limiter
}

// Delay is the wait before retry number attempt+1: the server's
// Retry-After when it sent one (capped at MaxRetryAfter), else full
// jitter, a uniform draw from [0, min(MaxBackoff, MinBackoff·2^attempt)]
// (the jitter spreads the retries of many workers hitting one rate limit).
func (p Policy) Delay(attempt int, err error) time.Duration {
	b := p.backOff()
	var d time.Duration
	for range attempt + 1 {
		d = b.exp.NextBackOff()
	}
	b.last = err
	return b.jitter(d)
}

// fullJitter is a backoff.BackOff: exponential without backoff's own
// randomisation, then drawn uniformly from [0, interval], unless the last
// answer said when to come back.
type fullJitter struct {
	exp           *backoff.ExponentialBackOff
	maxRetryAfter time.Duration
	last          error
}

func (p Policy) backOff() *fullJitter {
	exp := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.MinBackoff),
		backoff.WithMaxInterval(p.MaxBackoff),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0),
		backoff.WithMaxElapsedTime(0),
	)
	return &fullJitter{exp: exp, maxRetryAfter: p.MaxRetryAfter}
}

func (f *fullJitter) NextBackOff() time.Duration { return f.jitter(f.exp.NextBackOff()) }

func (f *fullJitter) jitter(d time.Duration) time.Duration {
	var se *StatusError
	if errors.As(f.last, &se) && se.RetryAfter > 0 {
		return min(se.RetryAfter, f.maxRetryAfter)
	}
	if d == backoff.Stop || d <= 0 {
		return d
	}
	return rand.N(d + 1)
}

func (f *fullJitter) Reset() { f.exp.Reset(); f.last = nil }

// Do runs attempt until it succeeds, fails with a non-transient error, the
// retries are used up, or ctx ends; it returns the number of attempts made.
// url names the endpoint in errors. The waits come from
// github.com/cenkalti/backoff/v4 with full jitter (see Delay).
func (p Policy) Do(ctx context.Context, url string, attempt func(n int) error) (int, error) {
	jit := p.backOff()
	var b backoff.BackOff = backoff.WithContext(backoff.WithMaxRetries(jit, uint64(max(p.MaxRetries, 0))), ctx)
	n := 0
	var last error
	err := backoff.RetryNotify(func() error {
		err := attempt(n)
		n++
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return backoff.Permanent(ctx.Err())
		}
		if !Transient(err) {
			return backoff.Permanent(err)
		}
		last, jit.last = err, err
		return err
	}, b, func(err error, d time.Duration) {
		p.Limiter.CountRetry(err)
		if p.Logger != nil {
			p.Logger.Warn("request failed, retrying", "url", url, "attempt", n, "delay", d, "error", err)
		}
	})
	switch {
	case err == nil:
		return n, nil
	case ctx.Err() != nil && last != nil:
		return n, fmt.Errorf("calling %s: %w (last error: %w)", url, ctx.Err(), last)
	case ctx.Err() != nil:
		return n, fmt.Errorf("calling %s: %w", url, ctx.Err())
	case last != nil && errors.Is(err, last) && Transient(err):
		return n, fmt.Errorf("calling %s: %w after %d attempts: %w", url, ErrRetriesExhausted, n, last)
	default:
		return n, fmt.Errorf("calling %s: %w", url, err)
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
