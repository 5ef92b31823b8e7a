package chunk_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/services/extractor/chunk"
)

func longText() string {
	var b strings.Builder
	for i := range 400 {
		// Multi-byte runes (é, ü, 東京, an emoji) put window boundaries
		// inside characters now and then.
		fmt.Fprintf(&b, "Paragraph %d: the café in Zürich routed 東京 traffic through ingress-%d 🚀 while cert-manager renewed certificates.\n", i, i%7)
	}
	return b.String()
}

func TestChunkOffsetsOverlapAndTokens(t *testing.T) {
	tk := tok(t)
	text := longText()
	total := tk.Count(text)
	const size, overlap = 300, 40
	c, err := chunk.New(tk, size, overlap)
	require.NoError(t, err)

	units := c.Chunk("DOC-1", 7, text)
	require.Greater(t, len(units), 10)
	// GraphRAG's windows: each starts size-overlap tokens after the last.
	require.Equal(t, (total-size+(size-overlap)-1)/(size-overlap)+1, len(units))
	require.Equal(t, 0, units[0].Start)
	require.Equal(t, len(text), units[len(units)-1].End)
	sum := 0
	for i, u := range units {
		require.Equal(t, text[u.Start:u.End], u.Text, "unit %d", i)
		require.True(t, utf8.ValidString(u.Text), "unit %d is valid UTF-8", i)
		require.Equal(t, chunk.TextUnitID("DOC-1", 7, i), u.ID)
		require.Len(t, u.ID, 16)
		if i < len(units)-1 {
			require.Equal(t, size, u.Tokens, "unit %d", i)
			next := units[i+1]
			require.Less(t, next.Start, u.End, "units %d and %d overlap", i, i+1)
			require.Greater(t, next.Start, u.Start)
			// The shared stretch is about overlap tokens (re-tokenising a
			// cut-out substring may merge a token or two differently).
			shared := tk.Count(text[next.Start:u.End])
			require.InDelta(t, overlap, shared, 3, "overlap of units %d and %d", i, i+1)
			sum += size - overlap
		} else {
			require.LessOrEqual(t, u.Tokens, size)
			sum += u.Tokens
		}
	}
	require.Equal(t, total, sum, "windows cover every token once, plus the overlaps")

	// Deterministic: a replay yields the same units; a new version new ids.
	require.Equal(t, units, c.Chunk("DOC-1", 7, text))
	require.NotEqual(t, units[0].ID, c.Chunk("DOC-1", 8, text)[0].ID)
	require.NotEqual(t, units[0].ID, c.Chunk("DOC-2", 7, text)[0].ID)
}

func TestChunkDefaults(t *testing.T) {
	tk := tok(t)
	c, err := chunk.New(tk, chunk.DefaultTokens, chunk.DefaultOverlap)
	require.NoError(t, err)
	units := c.Chunk("INC-101", 1, "INC-101: cert-manager could not renew the certificate.")
	require.Len(t, units, 1)
	require.Equal(t, 0, units[0].Start)
	require.Equal(t, tk.Count(units[0].Text), units[0].Tokens)
	require.Empty(t, c.Chunk("X", 1, ""))
	// Special-token spellings in a document are text, not control tokens.
	require.Len(t, c.Chunk("X", 1, "a <|endoftext|> b"), 1)

	_, err = chunk.New(tk, 10, 10)
	require.Error(t, err)
	_, err = chunk.New(nil, 10, 1)
	require.Error(t, err)
}

// tokenizer is loaded once per test binary: loading cl100k_base takes a
// moment.
var tokenizer = sync.OnceValues(chunk.NewTokenizer)

func tok(t *testing.T) *chunk.Tokenizer {
	t.Helper()
	tk, err := tokenizer()
	require.NoError(t, err)
	return tk
}

func TestChunkerHashesUnits(t *testing.T) {
	c, err := chunk.New(tok(t), 40, 5)
	require.NoError(t, err)
	text := longText()[:4000]
	for _, u := range c.Chunk("DOC-1", 1, text) {
		require.Equal(t, chunk.ContentHash(u.Text), u.Hash)
		require.Len(t, u.Hash, 64)
	}
}
