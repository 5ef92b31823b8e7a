package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

// writeTree writes files (slash paths relative to dir).
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runOut runs a command line and returns its stdout and stderr.
func runOut(ctx context.Context, args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := runIO(ctx, args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return 1
	}
	return 0
}

// wiki is a folder as people keep one: two teams with the same file names,
// nested runbooks, and the files a repository carries that are not content.
func wiki(t *testing.T) string {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"team-a/2024/incident.md":     "# Redis primary lost its replica\n\nThe orders cache on redis-primary failed over to the replica in zone b.\n",
		"team-b/2024/incident.md":     "# Kafka broker disk full\n\nThe billing pipeline stalled when kafka-broker-3 ran out of disk.\n",
		"Runbooks/Redis/failover.md":  "Promote the replica, then repoint the orders cache.\n\n## Steps\n\n1. check lag\n",
		"README.md":                   "# About this wiki\n",
		"LICENSE":                     "Permission is hereby granted\n",
		"CONTRIBUTING.md":             "# How to write a page\n",
		".git/HEAD":                   "ref: refs/heads/main\n",
		".obsidian/workspace.md":      "# editor state\n",
		"templates/postmortem.md":     "# Title\n\n## Impact\n",
		"team-a/incident-template.md": "# Incident template\n",
		"drafts/wip.md":               "# not ready\n",
		".kgignore":                   "# drafts are not published\ndrafts/\n*.tmp\n",
		"team-b/notes.tmp":            "scratch\n",
		"diagram.png":                 "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00",
	})
	return dir
}

func TestCollectSkipsAndNames(t *testing.T) {
	dir := wiki(t)
	docs, skipped, err := collect([]string{dir}, ingestOptions{idPrefix: "wiki/"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	titles := map[string]string{}
	for _, d := range docs {
		got = append(got, d.doc.ID)
		titles[d.doc.ID] = d.doc.Title
	}
	sort.Strings(got)
	want := []string{"wiki/Runbooks/Redis/failover", "wiki/team-a/2024/incident", "wiki/team-b/2024/incident"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ids = %v, want %v", got, want)
	}
	if titles["wiki/team-a/2024/incident"] != "Redis primary lost its replica" || titles["wiki/Runbooks/Redis/failover"] != "Steps" {
		t.Fatalf("titles = %v", titles)
	}
	// README, LICENSE, CONTRIBUTING, the template file, notes.tmp (.kgignore),
	// .kgignore itself and the PNG are counted as skipped; hidden and ignored folders are
	// not walked at all.
	if skipped != 7 {
		t.Fatalf("skipped = %d, want 7", skipped)
	}
	// --all lifts the default skips but not .kgignore.
	docs, _, err = collect([]string{dir}, ingestOptions{all: true})
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]bool{}
	for _, d := range docs {
		all[d.doc.ID] = true
	}
	for _, id := range []string{"README", "LICENSE", ".git/HEAD", "templates/postmortem", "diagram"} {
		if !all[id] {
			t.Errorf("--all left out %s", id)
		}
	}
	if all["drafts/wip"] || all["team-b/notes"] {
		t.Errorf("--all ignored .kgignore: %v", all)
	}
	// Include and exclude globs.
	docs, _, err = collect([]string{dir}, ingestOptions{include: []string{"team-*/**"}, exclude: []string{"team-b/**"}})
	if err != nil || len(docs) != 1 || docs[0].doc.ID != "team-a/2024/incident" {
		t.Fatalf("globs: %v %v", docs, err)
	}
	docs, _, err = collect([]string{dir}, ingestOptions{exclude: []string{"incident.md"}})
	if err != nil || len(docs) != 1 || docs[0].doc.ID != "Runbooks/Redis/failover" {
		t.Fatalf("a file-name glob: %v %v", docs, err)
	}
	// Two files that would be one document are refused before anything is sent.
	writeTree(t, dir, map[string]string{"team-a/2024/incident.txt": "the same id\n"})
	if _, _, err := collect([]string{dir}, ingestOptions{}); err == nil || !strings.Contains(err.Error(), `"team-a/2024/incident"`) {
		t.Fatalf("colliding ids: %v", err)
	}
}

func TestMarkdownTitle(t *testing.T) {
	for text, want := range map[string]string{
		"# Title\nbody":              "Title",
		"intro line\n\n## Second ##": "Second",
		"#hashtag\nplain":            "#hashtag",
		"  \n\nfirst line\nsecond":   "first line",
		"####### seven\n":            "####### seven",
	} {
		if got := markdownTitle(text); got != want {
			t.Errorf("markdownTitle(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestPostOutcome(t *testing.T) {
	if !(postOutcome{Unchanged: true}).sameAsBefore() || !(postOutcome{Duplicate: true}).sameAsBefore() || (postOutcome{Version: 2}).sameAsBefore() {
		t.Fatal("sameAsBefore")
	}
}

var summary = regexp.MustCompile(`(\d+) accepted, (\d+) unchanged, (\d+) deleted, (\d+) rejected`)

// TestIngestFolderAgainstAllInOne ingests a nested folder whose teams use
// the same file names into a running all-in-one: three distinct documents,
// a dry run that sends nothing, a sync that deletes the removed file only,
// and one clear failure when the server is down.
func TestIngestFolderAgainstAllInOne(t *testing.T) {
	a, err := app.Start(context.Background(), app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0",
		Quiet: 50 * time.Millisecond, MaxDelay: time.Second,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	ctx := t.Context()
	dir := wiki(t)
	man := filepath.Join(t.TempDir(), "manifest.json")
	base := []string{"--server", a.URL(), "--manifest", man, "--id-prefix", "wiki/"}
	c := app.NewClient(a.URL(), "")
	documents := func() int {
		var st struct {
			Documents int `json:"documents"`
		}
		_ = c.Do(ctx, "GET", "/v1/status", "", nil, &st)
		return st.Documents
	}

	out, _, err := runOut(ctx, append([]string{"ingest", dir, "--dry-run"}, base...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"wiki/team-a/2024/incident", "wiki/team-b/2024/incident", "wiki/Runbooks/Redis/failover"} {
		if !strings.Contains(out, "would send "+id+" ") {
			t.Fatalf("dry run does not list %s:\n%s", id, out)
		}
	}
	if !strings.Contains(out, `"Kafka broker disk full"`) || !strings.Contains(out, "3 to send") || strings.Contains(out, "README") {
		t.Fatalf("dry run:\n%s", out)
	}
	if _, err := os.Stat(man); !errors.Is(err, os.ErrNotExist) || documents() != 0 {
		t.Fatalf("the dry run wrote a manifest (%v) or sent documents (%d)", err, documents())
	}

	out, _, err = runOut(ctx, append([]string{"ingest", dir, "--doc-type", "page"}, base...)...)
	if err != nil || !strings.Contains(out, "3 accepted, 0 unchanged, 0 deleted, 0 rejected") {
		t.Fatalf("ingest: %v\n%s", err, out)
	}
	if err := c.WaitFor(ctx, 30*time.Second, func() (bool, error) { return documents() == 3, nil }); err != nil {
		t.Fatalf("three distinct documents: %v (have %d)", err, documents())
	}
	cited := func(question string) []string {
		out, _, err := runOut(ctx, "query", "basic", question, "--server", a.URL(), "--json")
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		var ids []string
		for _, m := range regexp.MustCompile(`"doc_id": "([^"]+)"`).FindAllStringSubmatch(out, -1) {
			ids = append(ids, m[1])
		}
		return ids
	}
	if err := c.WaitFor(ctx, 30*time.Second, func() (bool, error) {
		a, b := strings.Join(cited("kafka broker disk billing pipeline"), " "), strings.Join(cited("redis primary replica orders cache"), " ")
		return strings.Contains(a, "wiki/team-b/2024/incident") && strings.Contains(b, "wiki/team-a/2024/incident"), nil
	}); err != nil {
		t.Fatalf("each team's incident answers its own question: %v", err)
	}

	// Unchanged files again: the gateway answers each "unchanged".
	out, _, err = runOut(ctx, append([]string{"ingest", dir, "--doc-type", "page"}, base...)...)
	if err != nil || !strings.Contains(out, "0 accepted, 3 unchanged, 0 deleted, 0 rejected") {
		t.Fatalf("re-ingest: %v\n%s", err, out)
	}

	// The sync: team-b's file is gone; only its document is deleted.
	if err := os.Remove(filepath.Join(dir, "team-b", "2024", "incident.md")); err != nil {
		t.Fatal(err)
	}
	out, _, err = runOut(ctx, append([]string{"ingest", dir, "--doc-type", "page", "--delete-missing", "--dry-run"}, base...)...)
	if err != nil || !strings.Contains(out, "would delete wiki/team-b/2024/incident\n") || !strings.Contains(out, "2 to send, 1 to delete") {
		t.Fatalf("dry-run sync: %v\n%s", err, out)
	}
	out, _, err = runOut(ctx, append([]string{"ingest", dir, "--doc-type", "page", "--delete-missing"}, base...)...)
	if m := summary.FindStringSubmatch(out); err != nil || m == nil || m[3] != "1" || m[4] != "0" {
		t.Fatalf("sync: %v\n%s", err, out)
	}
	if err := c.WaitFor(ctx, 30*time.Second, func() (bool, error) { return documents() == 2, nil }); err != nil {
		t.Fatalf("after the sync: %v (have %d documents)", err, documents())
	}
	if err := c.WaitFor(ctx, 30*time.Second, func() (bool, error) {
		return strings.Contains(strings.Join(cited("redis primary replica orders cache"), " "), "wiki/team-a/2024/incident") &&
			!strings.Contains(strings.Join(cited("kafka broker disk billing pipeline"), " "), "wiki/team-b/2024/incident"), nil
	}); err != nil {
		t.Fatalf("the namesake in team-a must stay and team-b's go: %v", err)
	}
	// Nothing more to delete the next time.
	out, _, err = runOut(ctx, append([]string{"ingest", dir, "--doc-type", "page", "--delete-missing"}, base...)...)
	if m := summary.FindStringSubmatch(out); err != nil || m == nil || m[3] != "0" {
		t.Fatalf("second sync: %v\n%s", err, out)
	}

	// Server down: one clear message, non-zero exit, nothing else tried.
	_, stderr, err := runOut(ctx, "ingest", dir, "--server", "http://127.0.0.1:1", "--manifest", filepath.Join(t.TempDir(), "m.json"))
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "cannot reach the kgstream server at http://127.0.0.1:1") ||
		!strings.Contains(err.Error(), "stopped after 0 of 2") || strings.Contains(stderr, "rejected") {
		t.Fatalf("server down: %v\n%s", err, stderr)
	}
	// A run stopped by the server going away keeps what the manifest knew.
	_, _, err = runOut(ctx, "ingest", dir, "--server", "http://127.0.0.1:1", "--manifest", man, "--id-prefix", "wiki/", "--delete-missing")
	data, rerr := os.ReadFile(man)
	if exitCode(err) != 1 || rerr != nil || !strings.Contains(string(data), `"wiki/team-a/2024/incident"`) || !strings.Contains(string(data), `"wiki/Runbooks/Redis/failover"`) {
		t.Fatalf("manifest after a stopped run: %v %v\n%s", err, rerr, data)
	}
}

// TestCollectJSONL: a .jsonl file is one document per line, with its own
// ids (after --id-prefix); an unknown field is refused with its line.
func TestCollectJSONL(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"export/pages.jsonl": `{"id":"Runbooks/Redis","title":"Redis","text":"fail over"}` + "\n\n" +
		`{"id":"INC-7","text":"disk full","doc_type":"incident"}` + "\n"})
	docs, _, err := collect([]string{dir}, ingestOptions{idPrefix: "x/"})
	if err != nil || len(docs) != 2 || docs[0].doc.ID != "x/Runbooks/Redis" || docs[0].doc.Title != "Redis" || docs[1].doc.DocType != "incident" {
		t.Fatalf("jsonl: %+v %v", docs, err)
	}
	writeTree(t, dir, map[string]string{"export/pages.jsonl": `{"id":"a","text":"b"}` + "\n" + `{"id":"c","txt":"d"}` + "\n"})
	if _, _, err := collect([]string{dir}, ingestOptions{}); err == nil || !strings.Contains(err.Error(), "pages.jsonl:2") || !strings.Contains(err.Error(), "txt") {
		t.Fatalf("bad jsonl line: %v", err)
	}
}
