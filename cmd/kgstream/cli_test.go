package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCommandLine: help per command exits 0, flags go anywhere, version and
// completion work, bad logging flags are usage errors.
func TestCommandLine(t *testing.T) {
	ctx := t.Context()
	for _, args := range [][]string{{"ingest", "--help"}, {"help", "query"}, {"query", "paths", "-h"}, {"up", "--help"}, {"mcp", "--help"}, {"--help"}} {
		out, _, err := runOut(ctx, args...)
		if err != nil || !strings.Contains(out, "Usage:") {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	out, _, _ := runOut(ctx, "ingest", "--help")
	for _, flag := range []string{"--id-prefix", "--include", "--exclude", "--all", "--dry-run", "--delete-missing", "--server", "--token", "--json", "--log-format", "--log-level"} {
		if !strings.Contains(out, flag) {
			t.Errorf("ingest --help lacks %s", flag)
		}
	}
	out, _, err := runOut(ctx, "version")
	if err != nil || !strings.HasPrefix(out, "kgstream ") || !strings.Contains(out, "go1.") {
		t.Fatalf("version: %v %q", err, out)
	}
	out, _, err = runOut(ctx, "--json", "version")
	var bi buildInfo
	if err != nil || json.Unmarshal([]byte(out), &bi) != nil || bi.Version == "" || !strings.HasPrefix(bi.GoVersion, "go1.") {
		t.Fatalf("version --json: %v %q", err, out)
	}
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		out, _, err := runOut(ctx, "completion", sh)
		if err != nil || !strings.Contains(out, "kgstream") || len(out) < 500 {
			t.Fatalf("completion %s: %v (%d bytes)", sh, err, len(out))
		}
	}
	// A global flag before the command and a command's flag after its
	// arguments both parse.
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.md": "# A\n"})
	out, _, err = runOut(ctx, "--server", "http://127.0.0.1:1", "ingest", dir, "--dry-run", "--id-prefix", "x/")
	if err != nil || !strings.Contains(out, "would send x/a ") {
		t.Fatalf("flags anywhere: %v\n%s", err, out)
	}
	// The server down is one clear message for a query too.
	_, _, err = runOut(ctx, "query", "communities", "--server", "http://127.0.0.1:1")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "cannot reach the kgstream server at http://127.0.0.1:1") {
		t.Fatalf("query with the server down: %v", err)
	}
	// A negative --give-way is a usage error, before anything starts.
	_, _, err = runOut(ctx, "up", "--data", t.TempDir(), "--give-way", "-1s")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "--give-way") {
		t.Fatalf("up --give-way -1s: want a usage error naming the flag, got %v", err)
	}
}
