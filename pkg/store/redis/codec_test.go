package redis_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/store/storetest"
)

// TestValuesAreStoredCompressed: see storetest.ValueEncoding.
func TestValuesAreStoredCompressed(t *testing.T) {
	ctx := t.Context()
	s, c, prefix := freshStore(t)
	base := prefix + ":{acme}:g:"
	get := func(kind string) func(string) []byte {
		return func(id string) []byte {
			data, err := c.Get(ctx, base+kind+id).Bytes()
			require.NoError(t, err)
			return data
		}
	}
	storetest.ValueEncoding(t, s, storetest.RawValues{
		Source: get("src:"),
		PutSource: func(id string, data []byte) {
			require.NoError(t, c.Set(ctx, base+"src:"+id, data, 0).Err())
		},
	})
}
