//go:build integration

package chunk

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTokenEndsEqualTiktokenOnCorpora: tokenEnds splits every file of the
// public corpora beside the checkout (each line of a JSON-lines file
// apart) as tiktoken-go does.
func TestTokenEndsEqualTiktokenOnCorpora(t *testing.T) {
	tk, err := testTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	err = filepath.Walk("../../../../shared/corpora", func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		texts := []string{string(b)}
		if strings.HasSuffix(p, ".jsonl") {
			texts = strings.Split(string(b), "\n")
		}
		for _, s := range texts {
			if utf8.ValidString(s) {
				checkTokenEnds(t, tk, s)
				n++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 1500 {
		t.Fatalf("%d texts: the corpora are required", n)
	}
	t.Logf("%d texts", n)
}
