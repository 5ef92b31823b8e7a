package httpretry_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kgstream/kgstream/pkg/httpretry"
	"github.com/kgstream/kgstream/pkg/httpretry/httpretrytest"
)

func TestLimiterHoldsConcurrencyAndTokenRate(t *testing.T) {
	clock := httpretrytest.NewClock(time.Unix(0, 0))
	m := httpretry.NewMetrics(prometheus.NewRegistry())
	const tpm, limit, per = 1200, 3, 100
	lim, err := httpretry.NewLimiter("llm", httpretry.Limits{MaxConcurrency: limit, TokensPerMinute: tpm, Clock: clock}, m)
	if err != nil {
		t.Fatal(err)
	}
	start := clock.Now()
	var (
		inFlight, maxInFlight atomic.Int32
		mu                    sync.Mutex
		admitted              []time.Duration // simulated time of each admission
		wg                    sync.WaitGroup
	)
	for range 30 {
		wg.Go(func() {
			release, err := lim.Acquire(context.Background(), per)
			if err != nil {
				t.Error(err)
				return
			}
			n := inFlight.Add(1)
			for {
				cur := maxInFlight.Load()
				if n <= cur || maxInFlight.CompareAndSwap(cur, n) {
					break
				}
			}
			mu.Lock()
			admitted = append(admitted, clock.Now().Sub(start))
			mu.Unlock()
			// Hold the slot a little (not an assertion), so that requests
			// would pile up past the limit if it did not hold.
			for hold := time.Now(); inFlight.Load() <= limit && time.Since(hold) < 20*time.Millisecond; {
				time.Sleep(time.Millisecond)
			}
			inFlight.Add(-1)
			release(per)
		})
	}
	wg.Wait()
	if got := maxInFlight.Load(); got > limit {
		t.Fatalf("%d requests in flight at once, limit %d", got, limit)
	}
	// Token bucket: by simulated time s, at most one minute's worth plus the
	// rate times s were admitted.
	for i, at := range admitted {
		n := 0
		for _, b := range admitted {
			if b <= at {
				n++
			}
		}
		if allowed := tpm + int(float64(tpm)*at.Minutes()); n*per > allowed+per {
			t.Fatalf("admission %d at %s: %d tokens admitted, rate allows %d", i, at, n*per, allowed)
		}
	}
	if testutil.ToFloat64(m.Waits.WithLabelValues("llm", "tokens")) == 0 {
		t.Fatal("no request waited for tokens")
	}
	if got := testutil.ToFloat64(m.Tokens.WithLabelValues("llm")); got != 30*per {
		t.Fatalf("tokens charged = %v, want %d", got, 30*per)
	}

	// Usage beyond the estimate is a debt the next request waits for.
	before := clock.Now()
	release, err := lim.Acquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	release(601)
	release, err = lim.Acquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	release(0)
	if waited := clock.Now().Sub(before); waited < 30*time.Second {
		t.Fatalf("after a 600-token debt at %d tokens a minute the next request waited %s of simulated time", tpm, waited)
	}
}

func TestLimiterStopsWaitingWithTheContext(t *testing.T) {
	lim, err := httpretry.NewLimiter("embed", httpretry.Limits{MaxConcurrency: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	release, err := lim.Acquire(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := lim.Acquire(ctx, 0); err == nil {
		t.Fatal("Acquire waited past its context")
	}
	release(0)
	if release, err = lim.Acquire(context.Background(), 0); err != nil {
		t.Fatal("the slot was not freed:", err)
	}
	release(0)
	var none *httpretry.Limiter
	if _, err := none.Acquire(ctx, 10); err != nil {
		t.Fatal("a nil limiter limits nothing:", err)
	}
}

func TestLimitsFromEnv(t *testing.T) {
	env := map[string]string{"KG_LLM_MAX_CONCURRENCY": "4", "KG_LLM_TOKENS_PER_MINUTE": "90000"}
	l, err := httpretry.LimitsFromEnv(func(k string) string { return env[k] }, "KG_LLM", httpretry.Limits{})
	if err != nil || l.MaxConcurrency != 4 || l.TokensPerMinute != 90000 {
		t.Fatalf("%+v, %v", l, err)
	}
	env["KG_LLM_MAX_CONCURRENCY"] = "-2"
	if _, err := httpretry.LimitsFromEnv(func(k string) string { return env[k] }, "KG_LLM", httpretry.Limits{}); err == nil {
		t.Fatal("a negative limit was accepted")
	}
}

// pausingClock is a simulated clock whose next Now, once armed, waits
// until released: a request that has read the time but not yet reserved.
type pausingClock struct {
	*httpretrytest.Clock
	mu      sync.Mutex
	armed   bool
	reading chan struct{} // closed when the armed Now is waiting
	resume  chan struct{}
}

func (c *pausingClock) Now() time.Time {
	now := c.Clock.Now()
	c.mu.Lock()
	pause := c.armed
	c.armed = false
	c.mu.Unlock()
	if pause {
		close(c.reading)
		<-c.resume
	}
	return now
}

// A request that read the time before others reserved and slept must not
// be credited the interval they already spent: the rate holds whatever
// order concurrent requests read the clock and reserve in.
func TestLimiterHoldsTheRateWhenAReadOfTheClockIsOvertaken(t *testing.T) {
	const tpm, per = 1200, 600
	clock := &pausingClock{Clock: httpretrytest.NewClock(time.Unix(0, 0)), reading: make(chan struct{}), resume: make(chan struct{})}
	start := clock.Now()
	lim, err := httpretry.NewLimiter("llm", httpretry.Limits{TokensPerMinute: tpm, Clock: clock}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		admitted []time.Duration
	)
	acquire := func() {
		release, err := lim.Acquire(context.Background(), per)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		admitted = append(admitted, clock.Now().Sub(start))
		mu.Unlock()
		release(0)
	}
	// The bucket's minute is spent at once.
	release, err := lim.Acquire(context.Background(), tpm)
	if err != nil {
		t.Fatal(err)
	}
	release(0)
	admitted = append(admitted, 0)

	var first, others sync.WaitGroup
	clock.mu.Lock()
	clock.armed = true
	clock.mu.Unlock()
	first.Go(acquire) // reads the time, then waits
	<-clock.reading
	others.Go(func() { acquire(); acquire() }) // one after the other
	// Let the others reserve (and move the clock) if the limiter lets
	// them past the paused read; then let that read go on.
	done := make(chan struct{})
	go func() { others.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(200 * time.Millisecond):
	}
	close(clock.resume)
	first.Wait()
	others.Wait()
	if len(admitted) != 4 {
		t.Fatalf("%d admissions, want 4", len(admitted))
	}
	for i, at := range admitted {
		n := 0
		for j, b := range admitted {
			if b <= at {
				n += per
				if j == 0 {
					n += tpm - per
				}
			}
		}
		if allowed := tpm + int(float64(tpm)*at.Minutes()); n > allowed {
			t.Fatalf("admission %d at %s: %d tokens admitted, rate allows %d (admissions at %v)", i, at, n, allowed, admitted)
		}
	}
}
