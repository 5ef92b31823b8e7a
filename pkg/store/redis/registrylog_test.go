package redis_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/store/storetest"
)

// TestRegistryLogGaps: a store written before the registry log existed,
// and a write of such a build after recorded ones (storetest.RegistryLogGaps).
func TestRegistryLogGaps(t *testing.T) {
	s, c, prefix := freshStore(t)
	keys := prefix + ":{acme}:"
	storetest.RegistryLogGaps(t, s,
		func() {
			require.NoError(t, c.Del(t.Context(), keys+"reg-log", keys+"reg-log-from", keys+"reg-log-last").Err())
		},
		func(string) { require.NoError(t, c.Incr(t.Context(), keys+"reg-gen").Err()) })
}
