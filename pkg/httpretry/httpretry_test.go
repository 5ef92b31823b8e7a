package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"": 0, "3": 3 * time.Second, "0.5": 500 * time.Millisecond, "-1": 0, "soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
	} {
		if got := ParseRetryAfter(in, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestTransient(t *testing.T) {
	for err, want := range map[error]bool{
		&StatusError{StatusCode: 429}:                      true,
		&StatusError{StatusCode: 503}:                      true,
		&StatusError{StatusCode: 400}:                      false,
		Timeout(errors.New("deadline")):                    true,
		fmt.Errorf("decoding: %w", ErrBadResponse):         false,
		io.ErrUnexpectedEOF:                                true,
		errors.New("no"):                                   false,
		fmt.Errorf("x: %w", &StatusError{StatusCode: 500}): true,
	} {
		if got := Transient(err); got != want {
			t.Errorf("Transient(%v) = %v, want %v", err, got, want)
		}
	}
}

func TestDoRetriesThenGivesUp(t *testing.T) {
	p := Policy{MaxRetries: 2, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, MaxRetryAfter: time.Millisecond}
	calls := 0
	n, err := p.Do(context.Background(), "http://x", func(int) error {
		calls++
		return &StatusError{StatusCode: 429, RetryAfter: time.Hour}
	})
	if !errors.Is(err, ErrRetriesExhausted) || n != 3 || calls != 3 {
		t.Fatalf("n=%d calls=%d err=%v", n, calls, err)
	}
	if d := p.Delay(0, &StatusError{StatusCode: 429, RetryAfter: time.Hour}); d != time.Millisecond {
		t.Fatalf("Retry-After not capped: %v", d)
	}
	calls = 0
	n, err = p.Do(context.Background(), "http://x", func(int) error {
		calls++
		if calls < 2 {
			return io.ErrUnexpectedEOF
		}
		return nil
	})
	if err != nil || n != 2 {
		t.Fatalf("n=%d err=%v", n, err)
	}
	n, err = p.Do(context.Background(), "http://x", func(int) error { return &StatusError{StatusCode: 401} })
	if err == nil || n != 1 {
		t.Fatalf("a permanent error was retried: n=%d err=%v", n, err)
	}
}

func TestExcerpt(t *testing.T) {
	if got := Excerpt("ééééé", 3); got != "é… (10 bytes)" {
		t.Fatal(got)
	}
}

func TestDelayIsFullJitter(t *testing.T) {
	p := Policy{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, MaxRetryAfter: time.Minute}
	low := 0
	for range 2000 {
		d := p.Delay(2, io.EOF) // interval 400ms
		if d < 0 || d > 400*time.Millisecond {
			t.Fatalf("delay %s outside [0, 400ms]", d)
		}
		if d < 200*time.Millisecond {
			low++
		}
	}
	// Full jitter draws from the whole interval; equal jitter never goes
	// below half of it.
	if low < 800 || low > 1200 {
		t.Fatalf("%d of 2000 delays below half the interval, want about 1000", low)
	}
	if d := p.Delay(9, io.EOF); d > time.Second {
		t.Fatalf("delay %s above MaxBackoff", d)
	}
	if d := p.Delay(0, &StatusError{StatusCode: 429, RetryAfter: 7 * time.Second}); d != 7*time.Second {
		t.Fatalf("Retry-After not honoured: %s", d)
	}
}
