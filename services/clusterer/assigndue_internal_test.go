package clusterer

import (
	"testing"
	"time"
)

// TestAssignDue: provisional placement runs at a tick unless the last one
// started less than assignSpacing times its duration ago, and when kicked
// also not within a Tick of the last.
func TestAssignDue(t *testing.T) {
	const tick = 500 * time.Millisecond
	for _, c := range []struct {
		name        string
		since, took time.Duration
		kicked      bool
		want        bool
	}{
		{"never ran", time.Hour, 0, false, true},
		{"never ran, kicked", time.Hour, 0, true, true},
		{"cheap, at a tick", 10 * time.Millisecond, time.Millisecond, false, true},
		{"cheap, kicked within a tick", 100 * time.Millisecond, time.Millisecond, true, false},
		{"cheap, kicked after a tick", tick, time.Millisecond, true, true},
		{"costly, at a tick, too soon", time.Second, 200 * time.Millisecond, false, false},
		{"costly, kicked, too soon", time.Second, 200 * time.Millisecond, true, false},
		{"costly, spaced", 2 * time.Second, 200 * time.Millisecond, false, true},
		{"costly, spaced, kicked", 2 * time.Second, 200 * time.Millisecond, true, true},
	} {
		if got := assignDue(c.since, c.took, tick, c.kicked); got != c.want {
			t.Errorf("%s: assignDue(%v, %v, %v, %v) = %v, want %v", c.name, c.since, c.took, tick, c.kicked, got, c.want)
		}
	}
}
