package httpretry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Limits bound the calls a process makes to one endpoint.
type Limits struct {
	// MaxConcurrency bounds the requests in flight at once (0: no bound).
	MaxConcurrency int
	// TokensPerMinute bounds the tokens sent per minute, counted from each
	// request's estimate before it is sent and corrected by the usage the
	// answer reports (0: no bound). One minute's worth may be spent at once.
	TokensPerMinute int
	// Clock is the limiter's time source (default: the real clock).
	Clock Clock
}

// Validate checks the limits.
func (l Limits) Validate() error {
	if l.MaxConcurrency < 0 || l.TokensPerMinute < 0 {
		return errors.New("limits must not be negative")
	}
	return nil
}

// LimitsFromEnv reads <prefix>_MAX_CONCURRENCY and
// <prefix>_TOKENS_PER_MINUTE (e.g. KG_LLM_MAX_CONCURRENCY); unset keeps
// the value in def.
func LimitsFromEnv(getenv func(string) string, prefix string, def Limits) (Limits, error) {
	for _, v := range []struct {
		name string
		dst  *int
	}{{prefix + "_MAX_CONCURRENCY", &def.MaxConcurrency}, {prefix + "_TOKENS_PER_MINUTE", &def.TokensPerMinute}} {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return Limits{}, fmt.Errorf("%s=%q is not a non-negative integer", v.name, s)
		}
		*v.dst = n
	}
	return def, nil
}

// Clock is the time source of a Limiter; tests give it a simulated one.
type Clock interface {
	Now() time.Time
	// SleepUntil returns at t or when ctx ends (with its error).
	SleepUntil(ctx context.Context, t time.Time) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) SleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// Metrics count the waits, throttles and retries of kgstream's HTTP
// clients, by endpoint ("llm", "embed").
type Metrics struct {
	// Waits counts requests held by a limit, by endpoint and limit
	// (concurrency, tokens).
	Waits *prometheus.CounterVec
	// WaitSeconds is how long held requests waited, by endpoint and limit.
	WaitSeconds *prometheus.HistogramVec
	// InFlight is the requests in flight, by endpoint.
	InFlight *prometheus.GaugeVec
	// Tokens counts the tokens charged against the rate, by endpoint.
	Tokens *prometheus.CounterVec
	// Retries counts retried attempts, by endpoint and reason (throttled
	// for a 429, error otherwise).
	Retries *prometheus.CounterVec
}

// NewMetrics registers the client metrics on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_http_limit_waits_total",
			Help: "Requests to an endpoint held by its concurrency or token limit, by endpoint and limit.",
		}, []string{"endpoint", "limit"}),
		WaitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kgstream_http_limit_wait_seconds",
			Help:    "Time requests held by a limit waited, by endpoint and limit.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"endpoint", "limit"}),
		InFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgstream_http_in_flight",
			Help: "Requests in flight to an endpoint.",
		}, []string{"endpoint"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_http_tokens_total",
			Help: "Tokens charged against an endpoint's token rate (estimates corrected by reported usage).",
		}, []string{"endpoint"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_http_retries_total",
			Help: "Retried requests to an endpoint, by endpoint and reason (throttled: 429; error: any other).",
		}, []string{"endpoint", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.Waits, m.WaitSeconds, m.InFlight, m.Tokens, m.Retries)
	}
	return m
}

// Limiter holds the requests to one endpoint to its Limits. Every client
// of the endpoint in a process must share one Limiter. A nil *Limiter
// limits nothing. It is safe for concurrent use.
type Limiter struct {
	endpoint string
	sem      chan struct{}
	rate     *rate.Limiter
	burst    int
	clock    Clock
	m        *Metrics

	// mu orders the reservations: each reads the clock and reserves under
	// it, so the rate limiter sees times that never go back. (A
	// reservation at a time before the limiter's last one moves its last
	// refill back, and the next one is credited the same interval twice.)
	mu sync.Mutex
}

// NewLimiter returns the limiter of endpoint (its metrics label); m nil
// counts nothing.
func NewLimiter(endpoint string, l Limits, m *Metrics) (*Limiter, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("limiting %s: %w", endpoint, err)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	lim := &Limiter{endpoint: endpoint, clock: l.Clock, m: m}
	if lim.clock == nil {
		lim.clock = realClock{}
	}
	if l.MaxConcurrency > 0 {
		lim.sem = make(chan struct{}, l.MaxConcurrency)
	}
	if l.TokensPerMinute > 0 {
		lim.burst = l.TokensPerMinute
		lim.rate = rate.NewLimiter(rate.Limit(float64(l.TokensPerMinute)/60), l.TokensPerMinute)
	}
	m.InFlight.WithLabelValues(endpoint)
	m.Tokens.WithLabelValues(endpoint)
	return lim, nil
}

// Acquire waits until one request expected to use tokens may be sent: a
// concurrency slot is free and the token rate admits it. The returned
// release must be called once with the tokens the answer reported (0 if
// unknown); tokens beyond the estimate are charged then, delaying later
// requests. Acquire fails only when ctx ends.
func (l *Limiter) Acquire(ctx context.Context, tokens int) (release func(used int), err error) {
	if l == nil {
		return func(int) {}, nil
	}
	if l.sem != nil {
		select {
		case l.sem <- struct{}{}:
		default:
			start := l.clock.Now()
			l.m.Waits.WithLabelValues(l.endpoint, "concurrency").Inc()
			select {
			case l.sem <- struct{}{}:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			l.m.WaitSeconds.WithLabelValues(l.endpoint, "concurrency").Observe(l.clock.Now().Sub(start).Seconds())
		}
	}
	charged := 0
	if l.rate != nil {
		charged = min(max(tokens, 1), l.burst)
		now, r := l.reserve(charged)
		if d := r.DelayFrom(now); d > 0 {
			l.m.Waits.WithLabelValues(l.endpoint, "tokens").Inc()
			if err := l.clock.SleepUntil(ctx, now.Add(d)); err != nil {
				l.mu.Lock()
				r.CancelAt(l.clock.Now())
				l.mu.Unlock()
				l.free()
				return nil, err
			}
			l.m.WaitSeconds.WithLabelValues(l.endpoint, "tokens").Observe(d.Seconds())
		}
		l.m.Tokens.WithLabelValues(l.endpoint).Add(float64(charged))
	}
	l.m.InFlight.WithLabelValues(l.endpoint).Inc()
	var done bool
	return func(used int) {
		if done {
			return
		}
		done = true
		l.m.InFlight.WithLabelValues(l.endpoint).Dec()
		if extra := used - charged; l.rate != nil && extra > 0 {
			// A debt: the bucket goes below zero and later requests wait.
			l.reserve(min(extra, l.burst))
			l.m.Tokens.WithLabelValues(l.endpoint).Add(float64(min(extra, l.burst)))
		}
		l.free()
	}, nil
}

// reserve reserves n tokens at the clock's time, read under l.mu.
func (l *Limiter) reserve(n int) (time.Time, *rate.Reservation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	return now, l.rate.ReserveN(now, n)
}

func (l *Limiter) free() {
	if l.sem != nil {
		<-l.sem
	}
}

// CountRetry counts one retry of a request that failed with err.
func (l *Limiter) CountRetry(err error) {
	if l == nil {
		return
	}
	reason := "error"
	var se *StatusError
	if errors.As(err, &se) && se.StatusCode == 429 {
		reason = "throttled"
	}
	l.m.Retries.WithLabelValues(l.endpoint, reason).Inc()
}

// EstimateTokens is a rough token count of text (four bytes a token), the
// estimate a request is charged before its answer reports its usage.
func EstimateTokens(text string) int { return (len(text) + 3) / 4 }
