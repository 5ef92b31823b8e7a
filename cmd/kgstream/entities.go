package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/resolve"
)

// cmdEntities runs `kgstream entities unmerge|reresolve`.
func cmdEntities(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "unmerge" && args[0] != "reresolve") {
		return &exitError{code: 2, msg: "usage: kgstream entities unmerge TYPE:NAME --mention SPELLING [--as NAME] --aliases FILE | entities reresolve TYPE:NAME"}
	}
	sub := args[0]
	fs := flag.NewFlagSet("entities "+sub, flag.ContinueOnError)
	server, token := clientFlags(fs)
	mention := fs.String("mention", "", "unmerge: the spelling to split off")
	as := fs.String("as", "", "unmerge: the name of the entity it becomes (default: the mention itself, kept apart by a suffix)")
	aliases := fs.String("aliases", os.Getenv("KG_ALIASES_FILE"), "unmerge: the alias table the server watches (the split rule is added there)")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &exitError{code: 2, msg: "usage: kgstream entities " + sub + " TYPE:NAME ..."}
	}
	ref := pos[0]
	id, err := resolve.ParseRef(ref)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	if sub == "unmerge" {
		if *mention == "" || *aliases == "" {
			return &exitError{code: 2, msg: "unmerge needs --mention and --aliases (the reviewed alias table the server loads)"}
		}
		typ, _ := resolve.SplitID(id)
		name := *as
		if name == "" {
			name = *mention + " (split)"
		}
		if resolve.Key(name) == strings.SplitN(id, ":", 2)[1] {
			return &exitError{code: 2, msg: fmt.Sprintf("--as %q keys to %s itself; choose a name that differs in letters or digits", name, id)}
		}
		if err := addSplit(*aliases, resolve.SplitEntry{Type: typ, Mention: *mention, As: name}); err != nil {
			return err
		}
		fmt.Printf("added to %s: mentions spelt %q of type %s resolve to %s:%s\n", *aliases, *mention, typ, typ, resolve.Key(name))
	}
	body, _ := json.Marshal(map[string]string{"entity": ref})
	var out struct {
		Entity  string   `json:"entity"`
		Sources []string `json:"sources"`
		Skipped []string `json:"skipped"`
	}
	if err := app.NewClient(*server, *token).Do(ctx, http.MethodPost, "/v1/entities/reresolve", "application/json", body, &out); err != nil {
		return err
	}
	fmt.Printf("%s: %d sources re-published for resolution %v\n", out.Entity, len(out.Sources), out.Sources)
	if len(out.Skipped) > 0 {
		fmt.Printf("skipped (no stored extraction; re-ingest them): %v\n", out.Skipped)
	}
	return nil
}

// addSplit appends a split rule to the alias file, keeping its comments
// and layout (people review it), checks that the result still parses, and
// replaces the file atomically so the server's watcher never reads half a
// file.
func addSplit(path string, e resolve.SplitEntry) error {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("reading alias file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("parsing alias file %s: %w", path, err)
	}
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("alias file %s: the top level must be a mapping", path)
	}
	var splits *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "splits" {
			splits = root.Content[i+1]
		}
	}
	if splits == nil {
		splits = &yaml.Node{Kind: yaml.SequenceNode}
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "splits"}, splits)
	}
	var entry yaml.Node
	if err := entry.Encode(e); err != nil {
		return err
	}
	splits.Content = append(splits.Content, &entry)
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return err
	}
	if _, err := resolve.ParseAliases(out); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".aliases-*")
	if err != nil {
		return fmt.Errorf("writing alias file: %w", err)
	}
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("writing alias file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
