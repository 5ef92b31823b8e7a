//go:build integration

package query

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSplitSentencesOfTheCorporaAsByRunes: the byte version cuts every
// paragraph and line of the real corpora as the rune version did.
func TestSplitSentencesOfTheCorporaAsByRunes(t *testing.T) {
	var paras []string
	err := filepath.WalkDir("../../../shared/corpora", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, p := range strings.Split(string(raw), "\n\n") {
			paras = append(paras, strings.ReplaceAll(p, "\n", " "))
		}
		paras = append(paras, strings.Split(string(raw), "\n")...)
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, len(paras), 15000, "the corpora are read")
	for _, p := range paras {
		require.Equal(t, splitSentencesByRunes(p), splitSentences(p), "paragraph %q", p)
	}
}
