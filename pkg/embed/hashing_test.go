package embed_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/embed"
)

func cos(a, b []float32) float64 {
	var d float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
	}
	return d // both unit length
}

func TestHashingShape(t *testing.T) {
	h := embed.NewHashing(0)
	require.Equal(t, 384, h.Dimensions())
	require.Equal(t, "hashing-v1-384", h.Name())
	vs, err := h.Embed(t.Context(), []string{"Expired certificate broke login", "", "   ", "東京のデータセンター"})
	require.NoError(t, err)
	require.Len(t, vs, 4)
	for i, v := range vs {
		require.Len(t, v, 384)
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		require.InDelta(t, 1, math.Sqrt(n), 1e-5, "vector %d is unit length", i)
	}
	require.Equal(t, vs[1], vs[2], "texts without words share one vector")
	again, err := embed.NewHashing(384).Embed(t.Context(), []string{"Expired certificate broke login"})
	require.NoError(t, err)
	require.Equal(t, vs[0], again[0], "deterministic across instances")
	require.Len(t, embed.NewHashing(16).Vector("x"), 16)
}

func TestHashingSimilarity(t *testing.T) {
	h := embed.NewHashing(384)
	q := h.Vector("expired certificate")
	near := h.Vector("The TLS certificate expired and broke the login flow")
	plural := h.Vector("renewing certificates before expiry")
	far := h.Vector("DNS misconfiguration after the config push")
	require.Greater(t, cos(q, near), cos(q, far)+0.2)
	require.Greater(t, cos(q, plural), cos(q, far), "trigrams relate certificate and certificates")
	// Word pairs count: the same words in the same order beat a shuffle.
	require.Greater(t, cos(q, h.Vector("expired certificate on the gateway")), cos(q, h.Vector("certificate on the gateway expired")))
	// Case, width and punctuation do not matter.
	require.InDelta(t, 1, cos(h.Vector("Expired, CERTIFICATE!"), h.Vector("expired certificate")), 1e-6)
	require.InDelta(t, 1, cos(h.Vector("ｃｅｒｔ"), h.Vector("cert")), 1e-6, "NFKC folds full-width letters")
}

// TestHashingKnowsNoSynonyms pins down the documented limitation: words
// that share no surface form are unrelated, whatever they mean.
func TestHashingKnowsNoSynonyms(t *testing.T) {
	h := embed.NewHashing(384)
	require.Less(t, math.Abs(cos(h.Vector("outage"), h.Vector("incident"))), 0.3)
	require.Less(t, math.Abs(cos(h.Vector("car"), h.Vector("automobile"))), 0.3)
}

func TestHashingCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := embed.NewHashing(8).Embed(ctx, []string{"a"})
	require.ErrorIs(t, err, context.Canceled)
}

func TestWords(t *testing.T) {
	require.Equal(t, []string{"inc", "118", "dns", "misconfig", "東京"}, embed.Words("INC-118: DNS misconfig (東京)"))
	require.Empty(t, embed.Words(" -- !! "))
}
