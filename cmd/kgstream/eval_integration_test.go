//go:build integration

package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEvalExtractionCommand scores the offline extractor over two seed
// postmortems against a small gold file of our own: the table and --json
// agree, and the gold file is required.
func TestEvalExtractionCommand(t *testing.T) {
	seed := "../../../shared/corpora/seed-postmortems"
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"gold.json": `{
 "INC-101": [{"source":"INC-101","source_type":"incident","relation":"mentions","target":"checkout-api","target_type":"service"}],
 "INC-104": [{"source":"INC-104","source_type":"incident","relation":"mentions","target":"no-such-service","target_type":"service"}]}`})
	args := []string{"eval", "extraction", "--gold", filepath.Join(dir, "gold.json"), "--docs", filepath.Join(seed, "docs"),
		"--catalog", filepath.Join(seed, "catalog-info.yaml")}
	out, _, err := runOut(t.Context(), args...)
	if err != nil || !strings.Contains(out, "2 documents, relations mentions") || !regexp.MustCompile(`(?m)^all\s+\d+\s+\d+\s+1\s`).MatchString(out) {
		t.Fatalf("eval extraction: %v\n%s", err, out)
	}
	out, _, err = runOut(t.Context(), append(args, "--json")...)
	var rep evalReport
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Documents != 2 || rep.Rows[len(rep.Rows)-1].FN != 1 {
		t.Fatalf("eval extraction --json: %v\n%s", err, out)
	}
	if _, _, err := runOut(t.Context(), "eval", "extraction"); exitCode(err) != 2 || !strings.Contains(err.Error(), "--gold") {
		t.Fatalf("without --gold: %v", err)
	}
}
