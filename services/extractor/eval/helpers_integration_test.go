//go:build integration

package eval_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/services/extractor/chunk"
)

// corporaDir holds the public corpora the labelled set names.
const corporaDir = "../../../../shared/corpora"

func tok(t *testing.T) *chunk.Tokenizer {
	t.Helper()
	tk, err := chunk.NewTokenizer()
	require.NoError(t, err)
	return tk
}
