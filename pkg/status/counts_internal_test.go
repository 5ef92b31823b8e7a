package status

import (
	"fmt"
	"testing"
)

// TestCountCacheBoundsAndKeepsTheNewest: the cache holds at most
// maxCachedCallers callers (the newest put is kept when full), and a count
// computed at earlier generations never replaces one computed later.
func TestCountCacheBoundsAndKeepsTheNewest(t *testing.T) {
	var cc countCache
	for i := range maxCachedCallers + 10 {
		cc.put(fmt.Sprint("caller-", i), countEntry{at: generations{1, 1, 0}, rep: Report{Documents: i}})
	}
	if n := len(cc.entries); n != maxCachedCallers {
		t.Fatalf("%d callers kept, want at most %d", n, maxCachedCallers)
	}
	last := fmt.Sprint("caller-", maxCachedCallers+9)
	if e, ok := cc.entries[last]; !ok || e.rep.Documents != maxCachedCallers+9 {
		t.Fatalf("the newest put is not kept: %+v, %v", e, ok)
	}
	cc.put(last, countEntry{at: generations{2, 1, 0}, rep: Report{Documents: 1}})
	for _, older := range []generations{{1, 5, 0}, {3, 0, 0}} {
		cc.put(last, countEntry{at: older, rep: Report{Documents: 2}})
		if got := cc.entries[last]; got.rep.Documents != 1 {
			t.Fatalf("a count at %+v replaced one at {2 1}: %+v", older, got)
		}
	}
	cc.put(last, countEntry{at: generations{2, 2, 0}, rep: Report{Documents: 3}})
	if got := cc.entries[last]; got.rep.Documents != 3 {
		t.Fatalf("a count at later generations was not kept: %+v", got)
	}
}
