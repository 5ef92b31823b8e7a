package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	gitignore "github.com/sabhiram/go-gitignore"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

// ingestOptions are the flags of `kgstream ingest`.
type ingestOptions struct {
	tenant, docType, source, idPrefix string
	groups, include, exclude          []string
	all, dryRun, deleteMissing        bool
	manifest                          string
}

func ingestCmd(g *globals) *cobra.Command {
	var o ingestOptions
	c := &cobra.Command{
		Use:   "ingest PATH...",
		Short: "Send files (or .jsonl documents) to the gateway; a folder is walked recursively",
		Long: `Send files to the gateway. A document's id is its path relative to the PATH given, with '/'
and without the file's extension (team-a/2024/incident.md -> team-a/2024/incident), after
--id-prefix; a file given itself is named by its file name. Its title is the first Markdown
heading (else the first line). A .jsonl file holds one document per line, with its own id.

Skipped unless --all: hidden files and folders, binary files, LICENSE, README, CONTRIBUTING,
CODE_OF_CONDUCT and similar files, templates (a name with "template", a templates folder).
Always honoured: --include and --exclude globs (doublestar syntax, matched against the relative
path, or the file name for a pattern without '/'), and the patterns of a .kgignore file (gitignore
syntax) at the top of each PATH.

--delete-missing makes ingest a sync: documents this command sent before under the same server,
tenant, prefix and folders, whose files are gone, are deleted. The ids sent are kept in a manifest
(--manifest, default under the user's cache directory) because the API has no document listing.`,
		Example: `  kgstream ingest ./postmortems --doc-type incident --id-prefix pm/
  kgstream ingest ./wiki --exclude 'drafts/**' --dry-run
  kgstream ingest ./wiki --id-prefix wiki/ --delete-missing`,
		Args: nArgs(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runIngest(cmd.Context(), g, o, args)
		},
	}
	f := c.Flags()
	f.StringVar(&o.tenant, "tenant", "", "tenant (default: the token's)")
	f.StringVar(&o.docType, "doc-type", "", "document type for the offline extractor (incident, page, runbook)")
	f.StringVar(&o.source, "source", "", "source system name")
	f.StringArrayVar(&o.groups, "acl-group", nil, "restrict the documents to this group (repeatable); default public")
	f.StringVar(&o.idPrefix, "id-prefix", "", "prefix of every document id (wiki/ makes wiki/team-a/page)")
	f.StringArrayVar(&o.include, "include", nil, "only files matching this glob (repeatable)")
	f.StringArrayVar(&o.exclude, "exclude", nil, "skip files matching this glob (repeatable)")
	f.BoolVar(&o.all, "all", false, "do not skip hidden, binary, LICENSE/README/CONTRIBUTING and template files")
	f.BoolVar(&o.dryRun, "dry-run", false, "print what would be sent (and deleted) and send nothing")
	f.BoolVar(&o.deleteMissing, "delete-missing", false, "delete the documents sent before whose files are gone")
	f.StringVar(&o.manifest, "manifest", "", "file keeping the ids sent, for --delete-missing (default: under the user cache dir)")
	return c
}

// fileDoc is one document read from disk, with where it came from.
type fileDoc struct {
	doc  app.Document
	from string
}

// skipNames are files that describe a repository rather than being its
// content (upper-cased, extension dropped).
var skipNames = []string{"LICENSE", "LICENCE", "COPYING", "NOTICE", "README", "CONTRIBUTING", "CODE_OF_CONDUCT", "SECURITY", "CHANGELOG", "CODEOWNERS"}

func isSkippedName(name string) bool {
	base := strings.ToUpper(strings.TrimSuffix(name, path.Ext(name)))
	for _, s := range skipNames {
		if base == s || strings.HasPrefix(base, s+"-") || strings.HasPrefix(base, s+"_") {
			return true
		}
	}
	return strings.Contains(strings.ToLower(name), "template")
}

func isTemplateDir(name string) bool {
	n := strings.ToLower(name)
	return n == "templates" || n == "_templates" || n == "template"
}

// isBinary reports data that is not text: a NUL byte in its first 8 KiB or
// invalid UTF-8.
func isBinary(data []byte) bool {
	head := data
	if len(head) > 8<<10 {
		head = head[:8<<10]
	}
	return bytes.IndexByte(head, 0) >= 0 || !utf8.Valid(data)
}

// matchGlob matches a doublestar pattern against a relative path, or
// against the file name when the pattern has no '/'.
func matchGlob(pattern, rel string) bool {
	if ok, _ := doublestar.Match(pattern, rel); ok {
		return true
	}
	if !strings.Contains(pattern, "/") {
		ok, _ := doublestar.Match(pattern, path.Base(rel))
		return ok
	}
	return false
}

// markdownTitle is the text of the first ATX heading (# Title), else the
// first non-empty line.
func markdownTitle(text string) string {
	first := ""
	for _, line := range strings.Split(text, "\n") {
		l := strings.TrimSpace(line)
		if l == "" {
			continue
		}
		if first == "" {
			first = l
		}
		if strings.HasPrefix(l, "#") {
			h := strings.TrimLeft(l, "#")
			if len(l)-len(h) <= 6 && (h == "" || h[0] == ' ' || h[0] == '\t') {
				if t := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(h), "#")); t != "" {
					return t
				}
			}
		}
	}
	return first
}

// collect reads the documents under the paths, applying the skip rules,
// globs and .kgignore files. skipped counts what was left out.
func collect(paths []string, o ingestOptions) (docs []fileDoc, skipped int, err error) {
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, 0, fmt.Errorf("reading %s: %w", p, err)
		}
		root := p
		if !info.IsDir() {
			root = filepath.Dir(p)
		}
		var ign *gitignore.GitIgnore
		if kg := filepath.Join(root, ".kgignore"); info.IsDir() {
			if _, err := os.Stat(kg); err == nil {
				if ign, err = gitignore.CompileIgnoreFile(kg); err != nil {
					return nil, 0, fmt.Errorf("reading %s: %w", kg, err)
				}
			}
		}
		err = filepath.WalkDir(p, func(fp string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, fp)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if fp == p {
					return nil
				}
				if ign != nil && ign.MatchesPath(rel+"/") {
					return filepath.SkipDir
				}
				if !o.all && (strings.HasPrefix(d.Name(), ".") || isTemplateDir(d.Name())) {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			given := fp == p // a file named on the command line is taken as asked
			if !given {
				if (ign != nil && ign.MatchesPath(rel)) || d.Name() == ".kgignore" {
					skipped++
					return nil
				}
				if !o.all && (strings.HasPrefix(d.Name(), ".") || isSkippedName(d.Name())) {
					skipped++
					return nil
				}
			}
			for _, x := range o.exclude {
				if matchGlob(x, rel) {
					skipped++
					return nil
				}
			}
			if len(o.include) > 0 {
				in := false
				for _, x := range o.include {
					in = in || matchGlob(x, rel)
				}
				if !in {
					skipped++
					return nil
				}
			}
			data, err := os.ReadFile(fp)
			if err != nil {
				return err
			}
			if strings.HasSuffix(fp, ".jsonl") {
				ds, err := readJSONL(fp, data)
				if err != nil {
					return err
				}
				for _, d := range ds {
					d.ID = o.idPrefix + d.ID
					docs = append(docs, fileDoc{doc: d, from: fp})
				}
				return nil
			}
			if !o.all && isBinary(data) {
				skipped++
				return nil
			}
			text := string(data)
			id := strings.TrimSuffix(rel, path.Ext(rel))
			docs = append(docs, fileDoc{doc: app.Document{ID: o.idPrefix + id, Title: markdownTitle(text), Text: text}, from: fp})
			return nil
		})
		if err != nil {
			return nil, 0, fmt.Errorf("reading %s: %w", p, err)
		}
	}
	seen := map[string]string{}
	for _, d := range docs {
		if prev, ok := seen[d.doc.ID]; ok {
			return nil, 0, &exitError{code: 1, msg: fmt.Sprintf("%s and %s would both be document %q; rename one, or --exclude one of them (nothing sent)", prev, d.from, d.doc.ID)}
		}
		seen[d.doc.ID] = d.from
	}
	return docs, skipped, nil
}

func readJSONL(name string, data []byte) ([]app.Document, error) {
	var docs []app.Document
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var doc app.Document
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		docs = append(docs, doc)
	}
	return docs, sc.Err()
}

// postOutcome is the gateway's answer to one document.
type postOutcome struct {
	ID        string `json:"id"`
	Version   int64  `json:"version"`
	Unchanged bool   `json:"unchanged"`
	Duplicate bool   `json:"duplicate"`
}

// sameAsBefore reports an answer that made no new version: the document is
// identical to the current one (200 unchanged) or a retry of a version the
// gateway has (duplicate).
func (p postOutcome) sameAsBefore() bool { return p.Unchanged || p.Duplicate }

// isUnreachable reports a failure to talk to the server at all (refused,
// unresolvable, timed out), as opposed to an answer refusing the request.
func isUnreachable(err error) bool {
	var ae *app.APIError
	if err == nil || errors.As(err, &ae) {
		return false
	}
	var ue *url.Error
	return errors.As(err, &ue)
}

// manifest keeps the ids one ingest sent, for --delete-missing.
type manifest struct {
	Server string   `json:"server"`
	Tenant string   `json:"tenant,omitempty"`
	Prefix string   `json:"prefix"`
	Roots  []string `json:"roots"`
	IDs    []string `json:"ids"`
}

func manifestPath(g *globals, o ingestOptions, roots []string) (string, error) {
	if o.manifest != "" {
		return o.manifest, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the manifest directory (set --manifest): %w", err)
	}
	h := sha256.Sum256([]byte(strings.Join(append([]string{g.server, o.tenant, o.idPrefix}, roots...), "\x00")))
	return filepath.Join(dir, "kgstream", "ingest", hex.EncodeToString(h[:8])+".json"), nil
}

func readManifest(p string) (manifest, error) {
	var m manifest
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("reading manifest: %w", err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("decoding manifest %s: %w", p, err)
	}
	return m, nil
}

func writeManifest(p string, m manifest) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	data, _ := json.MarshalIndent(m, "", "  ")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	return os.Rename(tmp, p)
}

func runIngest(ctx context.Context, g *globals, o ingestOptions, paths []string) error {
	files, skipped, err := collect(paths, o)
	if err != nil {
		return err
	}
	roots := make([]string, 0, len(paths))
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("resolving %s: %w", p, err)
		}
		roots = append(roots, abs)
	}
	sort.Strings(roots)
	mpath, err := manifestPath(g, o, roots)
	if err != nil {
		return err
	}
	old, err := readManifest(mpath)
	if err != nil {
		return err
	}
	current := map[string]bool{}
	for i := range files {
		d := &files[i].doc
		if o.tenant != "" {
			d.Tenant = o.tenant
		}
		if d.DocType == "" {
			d.DocType = o.docType
		}
		if d.Source == "" {
			d.Source = o.source
		}
		if len(o.groups) > 0 && d.ACL == nil {
			d.ACL = map[string]any{"groups": o.groups}
		}
		current[d.ID] = true
	}
	var gone []string
	if o.deleteMissing {
		for _, id := range old.IDs {
			if !current[id] {
				gone = append(gone, id)
			}
		}
	}
	w := g.stdout
	if o.dryRun {
		for _, f := range files {
			fmt.Fprintf(w, "would send %s  %q  (%s, %d bytes)\n", f.doc.ID, f.doc.Title, f.from, len(f.doc.Text))
		}
		for _, id := range gone {
			fmt.Fprintf(w, "would delete %s\n", id)
		}
		fmt.Fprintf(w, "dry run: %d to send, %d to delete, %d skipped; nothing sent\n", len(files), len(gone), skipped)
		return nil
	}

	c := g.client()
	var bar *progressbar.ProgressBar
	if f, ok := g.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		bar = progressbar.NewOptions(len(files), progressbar.OptionSetWriter(g.stderr),
			progressbar.OptionSetDescription("ingesting"), progressbar.OptionShowCount())
	}
	var accepted, unchanged, deleted int
	var rejected, failedDeletes []string
	kept, deletedIDs := map[string]bool{}, map[string]bool{}
	// save records every id that may exist on the server for the next
	// sync: what was sent now, what failed to delete, earlier ids still in
	// the folder (rejected now), and, without --delete-missing or when the
	// run stopped early, every earlier id.
	save := func(complete bool) error {
		for _, id := range old.IDs {
			if !deletedIDs[id] && (current[id] || !o.deleteMissing || !complete) {
				kept[id] = true
			}
		}
		for _, id := range failedDeletes {
			kept[id] = true
		}
		return writeManifest(mpath, manifest{Server: g.server, Tenant: o.tenant, Prefix: o.idPrefix, Roots: roots, IDs: sortedKeys(kept)})
	}
	stopped := func(err error) error {
		if serr := save(false); serr != nil {
			return errors.Join(err, serr)
		}
		return err
	}
	for _, f := range files {
		body, err := json.Marshal(f.doc)
		if err != nil {
			return stopped(fmt.Errorf("encoding %s: %w", f.doc.ID, err))
		}
		var out postOutcome
		err = c.Do(ctx, http.MethodPost, "/v1/documents", "application/json", body, &out)
		switch {
		case ctx.Err() != nil:
			return stopped(ctx.Err())
		case isUnreachable(err):
			return stopped(&exitError{code: 1, msg: fmt.Sprintf("cannot reach the kgstream server at %s (set --server or KG_SERVER); "+
				"stopped after %d of %d documents: %v", g.server, accepted+unchanged+len(rejected), len(files), err)})
		case err != nil:
			rejected = append(rejected, f.doc.ID)
			fmt.Fprintf(g.stderr, "rejected %s (%s): %v\n", f.doc.ID, f.from, err)
		case out.sameAsBefore():
			unchanged++
			kept[f.doc.ID] = true
		default:
			accepted++
			kept[f.doc.ID] = true
		}
		if bar != nil {
			_ = bar.Add(1)
		}
	}
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(g.stderr)
	}
	for i, id := range gone {
		err := c.Do(ctx, http.MethodDelete, "/v1/documents/"+url.PathEscape(id), "", nil, nil)
		var ae *app.APIError
		switch {
		case err == nil || (errors.As(err, &ae) && ae.Status == http.StatusNotFound):
			// 404: already gone (or no longer the caller's to see).
			deleted++
			deletedIDs[id] = true
		case ctx.Err() != nil || isUnreachable(err):
			failedDeletes = append(failedDeletes, gone[i:]...)
			if ctx.Err() != nil {
				return stopped(ctx.Err())
			}
			return stopped(&exitError{code: 1, msg: fmt.Sprintf("cannot reach the kgstream server at %s while deleting: %v", g.server, err)})
		default:
			failedDeletes = append(failedDeletes, id)
			fmt.Fprintf(g.stderr, "could not delete %s: %v\n", id, err)
		}
	}
	if err := save(true); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d accepted, %d unchanged, %d deleted, %d rejected\n", accepted, unchanged, deleted, len(rejected))
	if len(rejected) > 0 || len(failedDeletes) > 0 {
		return &exitError{code: 1, msg: "rejected: " + strings.Join(append(rejected, failedDeletes...), ", ")}
	}
	return nil
}
