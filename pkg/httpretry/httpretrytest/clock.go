// Package httpretrytest gives tests of rate-limited clients a simulated
// clock: a wait moves simulated time forward at once, so a test can check
// what a limiter admits by simulated time without waiting for real time.
package httpretrytest

import (
	"context"
	"sync"
	"time"
)

// Clock is a simulated httpretry.Clock. Its zero value starts at the zero
// time; it is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the simulated time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// SleepUntil moves the simulated time to t (if it is later) and returns at
// once, or ctx's error when ctx has ended.
func (c *Clock) SleepUntil(ctx context.Context, t time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	return nil
}
