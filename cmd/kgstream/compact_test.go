package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	vecembedded "github.com/kgstream/kgstream/pkg/vector/embedded"
)

// TestCompactCommand: `kgstream compact` rewrites a stopped server's store
// and vector index, which then read as before; a missing store and a store
// in use are clear errors.
func TestCompactCommand(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, daemon.StoreFile)
	s, err := embedded.Open(path, embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		_, err := s.Apply(ctx, "acme", fmt.Sprintf("doc-%03d", i), 1, store.Contributions{
			TextUnits: []events.TextUnit{{ID: "u", Text: strings.Repeat(fmt.Sprintf("Disk %d filled up. ", i), 30)}},
			Entities:  []store.EntityContribution{{ID: "service:db", Type: "service", Name: "db", TextUnits: []string{"u"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 150 {
		if _, err := s.Delete(ctx, "acme", fmt.Sprintf("doc-%03d", i), 2); err != nil {
			t.Fatal(err)
		}
	}
	// In use: refused, nothing changed.
	if _, _, err := runOut(ctx, "compact", "--data", dir); exitCode(err) != 1 {
		t.Fatalf("compact of an open store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ix, err := vecembedded.Open(filepath.Join(dir, daemon.VectorFile), vecembedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}

	out, _, err := runOut(ctx, "--json", "compact", "--data", dir)
	if err != nil {
		t.Fatalf("compact: %v\n%s", err, out)
	}
	var res []compactResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 2 {
		t.Fatalf("compact --json: %v %q", err, out)
	}
	if res[0].File != path || res[0].BytesAfter >= res[0].BytesBefore || res[0].Values == 0 {
		t.Fatalf("store compaction: %+v", res[0])
	}
	s, err = embedded.Open(path, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := s.Entity(ctx, "acme", "service:db")
	if err != nil || len(e.Sources) != 50 {
		t.Fatalf("after compaction: %v, %d sources", err, len(e.Sources))
	}

	_, _, err = runOut(ctx, "compact", "--data", filepath.Join(dir, "nowhere"))
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "no store in") {
		t.Fatalf("compact of a missing store: %v", err)
	}
}
