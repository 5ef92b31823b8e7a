package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/kgstream/kgstream/pkg/resolve"
)

func entitiesCmd(g *globals) *cobra.Command {
	var mention, as, aliases string
	unmerge := &cobra.Command{
		Use:   "unmerge TYPE:NAME --mention SPELLING [--as NAME] --aliases FILE",
		Short: "Split a wrongly merged spelling off an entity (adds a split rule to the alias table, then re-resolves)",
		Args:  nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReresolve(cmd.Context(), g, args[0], &resolve.SplitEntry{Mention: mention, As: as}, aliases)
		},
	}
	unmerge.Flags().StringVar(&mention, "mention", "", "the spelling to split off")
	unmerge.Flags().StringVar(&as, "as", "", "the name of the entity it becomes (default: the mention itself, kept apart by a suffix)")
	unmerge.Flags().StringVar(&aliases, "aliases", os.Getenv("KG_ALIASES_FILE"), "the alias table the server watches (the split rule is added there)")
	reresolve := &cobra.Command{
		Use:   "reresolve TYPE:NAME",
		Short: "Re-resolve the stored extractions that mention an entity (after an alias change)",
		Args:  nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReresolve(cmd.Context(), g, args[0], nil, "")
		},
	}
	return group("entities", "Entity maintenance: unmerge, reresolve", unmerge, reresolve)
}

// runReresolve adds split (when not nil) to the alias file, then asks the
// server to re-resolve the sources of ref.
func runReresolve(ctx context.Context, g *globals, ref string, split *resolve.SplitEntry, aliases string) error {
	id, err := resolve.ParseRef(ref)
	if err != nil {
		return usageError("%v", err)
	}
	w := g.stdout
	if split != nil {
		if split.Mention == "" || aliases == "" {
			return usageError("unmerge needs --mention and --aliases (the reviewed alias table the server loads)")
		}
		typ, _ := resolve.SplitID(id)
		name := split.As
		if name == "" {
			name = split.Mention + " (split)"
		}
		if resolve.Key(name) == strings.SplitN(id, ":", 2)[1] {
			return usageError("--as %q keys to %s itself; choose a name that differs in letters or digits", name, id)
		}
		if err := addSplit(aliases, resolve.SplitEntry{Type: typ, Mention: split.Mention, As: name}); err != nil {
			return err
		}
		fmt.Fprintf(w, "added to %s: mentions spelt %q of type %s resolve to %s:%s\n", aliases, split.Mention, typ, typ, resolve.Key(name))
	}
	body, _ := json.Marshal(map[string]string{"entity": ref})
	var out struct {
		Entity  string   `json:"entity"`
		Sources []string `json:"sources"`
		Skipped []string `json:"skipped"`
		Queued  bool     `json:"queued"`
	}
	if err := g.client().Do(ctx, http.MethodPost, "/v1/entities/reresolve", "application/json", body, &out); err != nil {
		return serverError(g, err)
	}
	if g.json {
		return writeJSON(w, out)
	}
	fmt.Fprintf(w, "%s: %d sources re-published for resolution %v\n", out.Entity, len(out.Sources), out.Sources)
	if out.Queued {
		fmt.Fprintln(w, "the event stream did not take the request yet: the server keeps it and publishes it when it does")
	}
	if len(out.Skipped) > 0 {
		fmt.Fprintf(w, "skipped (no stored extraction; re-ingest them): %v\n", out.Skipped)
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
