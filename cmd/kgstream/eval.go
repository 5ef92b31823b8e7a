package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kgstream/kgstream/pkg/catalog"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/taxonomy"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/eval"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// evalOptions are the flags of `kgstream eval extraction`.
type evalOptions struct {
	gold, docs, catalog, docType, patterns, taxonomy string
	labels, corpora                                  string
	nounPhrases, allRelations, verbose, json         bool
	showErrors                                       bool
}

// evalCmd is the `kgstream eval` group: offline scoring commands.
func evalCmd(g *globals) *cobra.Command {
	var o evalOptions
	ex := &cobra.Command{
		Use:   "extraction (--gold FILE | --labels FILE --corpora DIR)",
		Short: "Score the offline extractor against gold triples, or whole corpora against labelled causes and systems",
		Args:  nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (o.gold == "") == (o.labels == "") || (o.labels != "") != (o.corpora != "") {
				return usageError("eval extraction needs --gold FILE, or --labels FILE with --corpora DIR; see kgstream eval extraction --help")
			}
			o.json = g.json
			return evalExtraction(cmd.Context(), o, g.stdout)
		},
	}
	f := ex.Flags()
	f.StringVar(&o.gold, "gold", "", "gold triples: JSON object doc id -> [{source, source_type, relation, target, target_type}]")
	f.StringVar(&o.docs, "docs", "", "directory of the documents, one file per doc id (<id>.txt or <id>.md; default: docs/ beside the gold file)")
	f.StringVar(&o.catalog, "catalog", "", "Backstage catalog YAML whose entities the extractor knows (default: catalog-info.yaml beside the gold file, if any)")
	f.StringVar(&o.docType, "doc-type", "incident", "document type of every document")
	f.StringVar(&o.patterns, "patterns", "", "relation patterns YAML (default: the built-in patterns)")
	f.StringVar(&o.taxonomy, "taxonomy", "", "failure-mode taxonomy YAML (default: the built-in taxonomy)")
	f.BoolVar(&o.nounPhrases, "noun-phrases", false, "add noun-phrase co-occurrence (also for incidents)")
	f.BoolVar(&o.allRelations, "all-relations", false, "score every extracted relation, not only those the gold set uses")
	f.BoolVar(&o.verbose, "verbose", false, "list missed and spurious triples")
	f.BoolVar(&o.showErrors, "show-errors", false, "with --labels: per document whose cause is wrong or missing, print id, label, prediction and the deciding sentence")
	f.StringVar(&o.labels, "labels", "", "labelled corpus documents (cause and systems per document): score whole corpora instead of gold triples")
	f.StringVar(&o.corpora, "corpora", "", "directory holding the labelled corpora (with --labels)")
	return group("eval", "Evaluation commands: extraction against gold triples, answers against a question set", ex, evalAnswersCmd(g))
}

type evalRow struct {
	Relation  string  `json:"relation"`
	TP        int     `json:"tp"`
	FP        int     `json:"fp"`
	FN        int     `json:"fn"`
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
	F1        float64 `json:"f1"`
}

type evalReport struct {
	Documents int       `json:"documents"`
	Relations []string  `json:"relations"`
	Rows      []evalRow `json:"rows"`
	Missed    []string  `json:"missed,omitempty"`
	Spurious  []string  `json:"spurious,omitempty"`
}

func row(rel string, s eval.Score) evalRow {
	return evalRow{Relation: rel, TP: s.TP, FP: s.FP, FN: s.FN, Precision: s.Precision(), Recall: s.Recall(), F1: s.F1()}
}

func evalExtraction(ctx context.Context, o evalOptions, w io.Writer) error {
	if o.labels != "" {
		// The corpora are scored with the built-in gazetteer only; a
		// taxonomy or pattern file replaces the built-in one.
		cfg := offline.Config{NounPhrases: offline.NounPhraseConfig{Enabled: o.nounPhrases, IncludeIncidents: true}}
		var err error
		if o.patterns != "" {
			if cfg.Patterns, err = offline.LoadPatterns(o.patterns); err != nil {
				return err
			}
		}
		if o.taxonomy != "" {
			if cfg.Taxonomy, err = taxonomy.Load(o.taxonomy); err != nil {
				return err
			}
		}
		return eval.CorporaCommand(ctx, eval.CorporaOptions{Labels: o.labels, Dir: o.corpora,
			DocType: o.docType, Verbose: o.verbose, ShowErrors: o.showErrors, JSON: o.json, Config: cfg}, w)
	}
	gold, err := eval.LoadGold(o.gold)
	if err != nil {
		return err
	}
	base := filepath.Dir(o.gold)
	if o.docs == "" {
		o.docs = filepath.Join(base, "docs")
	}
	cfg := offline.Config{NounPhrases: offline.NounPhraseConfig{Enabled: o.nounPhrases, IncludeIncidents: true}}
	if o.catalog == "" {
		if _, err := os.Stat(filepath.Join(base, "catalog-info.yaml")); err == nil {
			o.catalog = filepath.Join(base, "catalog-info.yaml")
		}
	}
	if o.catalog != "" {
		g, err := catalogGazetteer(o.catalog)
		if err != nil {
			return err
		}
		cfg.Gazetteer = g
	}
	if o.patterns != "" {
		if cfg.Patterns, err = offline.LoadPatterns(o.patterns); err != nil {
			return err
		}
	}
	if o.taxonomy != "" {
		if cfg.Taxonomy, err = taxonomy.Load(o.taxonomy); err != nil {
			return err
		}
	}
	x, err := offline.New(cfg)
	if err != nil {
		return err
	}
	tok, err := chunk.NewTokenizer()
	if err != nil {
		return err
	}
	chunker, err := chunk.New(tok, chunk.DefaultTokens, chunk.DefaultOverlap)
	if err != nil {
		return err
	}

	ids := make([]string, 0, len(gold))
	for id := range gold {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	got := map[string][]events.RawRelationship{}
	for _, id := range ids {
		text, err := readDoc(o.docs, id)
		if err != nil {
			return err
		}
		doc := &events.DocChanged{Header: events.Header{Tenant: "eval"}, DocID: id, Version: 1, DocType: o.docType, Text: text}
		_, rels, err := x.Extract(ctx, doc, chunker.Chunk(id, 1, text))
		if err != nil {
			return fmt.Errorf("extracting %s: %w", id, err)
		}
		got[id] = rels
	}

	rels := gold.Relations()
	if o.allRelations {
		set := map[string]bool{}
		for _, r := range rels {
			set[r] = true
		}
		for _, rs := range got {
			for _, r := range rs {
				set[resolve.Type(r.Relation)] = true
			}
		}
		rels = rels[:0]
		for r := range set {
			rels = append(rels, r)
		}
		sort.Strings(rels)
	}
	all := eval.ScoreTriples(gold, got, rels)
	rep := evalReport{Documents: len(ids), Relations: rels}
	for _, r := range rels {
		rep.Rows = append(rep.Rows, row(r, eval.ScoreTriples(gold, got, []string{r})))
	}
	rep.Rows = append(rep.Rows, row("all", all))
	if o.verbose {
		rep.Missed, rep.Spurious = all.Missed, all.Spurious
	}
	if o.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(w, "offline extraction vs %s: %d documents, relations %s\n", o.gold, len(ids), strings.Join(rels, ", "))
	fmt.Fprintf(w, "%-14s %5s %5s %5s %9s %7s %6s\n", "relation", "tp", "fp", "fn", "precision", "recall", "f1")
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "%-14s %5d %5d %5d %9.3f %7.3f %6.3f\n", r.Relation, r.TP, r.FP, r.FN, r.Precision, r.Recall, r.F1)
	}
	for _, m := range rep.Missed {
		fmt.Fprintln(w, "missed   ", m)
	}
	for _, s := range rep.Spurious {
		fmt.Fprintln(w, "spurious ", s)
	}
	return nil
}

// readDoc reads the document of id from dir: <id>, <id>.txt or <id>.md.
func readDoc(dir, id string) (string, error) {
	if strings.ContainsAny(id, `/\`) || id == ".." {
		return "", fmt.Errorf("doc id %q is not a file name", id)
	}
	for _, name := range []string{id + ".txt", id + ".md", id} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil {
			return strings.TrimSpace(string(data)), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("reading document %s: %w", id, err)
		}
	}
	return "", fmt.Errorf("no document file for gold doc %s in %s", id, dir)
}

// catalogGazetteer makes a gazetteer of a catalog file's entities.
func catalogGazetteer(path string) (offline.StaticGazetteer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading catalog: %w", err)
	}
	st, _, err := catalog.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("parsing catalog %s: %w", path, err)
	}
	var g offline.StaticGazetteer
	for _, e := range st.Entities {
		key := e.Key
		if key == "" {
			key = e.Name
		}
		g = append(g, offline.Entry{ID: resolve.ID(e.Type, key), Type: e.Type, Name: e.Name, Key: resolve.Key(key)})
	}
	return g, nil
}
