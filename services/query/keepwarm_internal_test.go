package query

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUntilQuietWaitsForTheFirstTenant: the quiet timer is armed for the
// tenant that changed first, whatever the others did since.
func TestUntilQuietWaitsForTheFirstTenant(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	owed := map[string]time.Time{"busy": now, "idle": now.Add(-4 * time.Second)}
	require.Equal(t, namesQuietAfter-4*time.Second, untilQuiet(owed, now), "the idle tenant's deadline, not the busy one's")
	owed["idle"] = now.Add(-time.Minute)
	require.Zero(t, untilQuiet(owed, now), "past due: at once")
	require.Equal(t, namesQuietAfter, untilQuiet(map[string]time.Time{"busy": now}, now))
}
