package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// CorpusLabel is one hand-labelled document of a public corpus: the
// generic cause its text names and the systems involved.
type CorpusLabel struct {
	Corpus string `json:"corpus"`
	File   string `json:"file"`
	ID     string `json:"id"`
	// Cause is the generic failure mode of the root cause, empty when the
	// document states none.
	Cause string `json:"cause"`
	// Also lists other generic modes a careful reader would accept.
	Also    []string `json:"also,omitempty"`
	Systems []string `json:"systems"`
}

// CorpusLabels is a labelled set (testdata/corpus-labels.json).
type CorpusLabels struct {
	About []string      `json:"about"`
	Docs  []CorpusLabel `json:"docs"`
}

// LoadCorpusLabels reads a labelled set.
func LoadCorpusLabels(path string) (*CorpusLabels, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading corpus labels: %w", err)
	}
	var l CorpusLabels
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("decoding corpus labels %s: %w", path, err)
	}
	for i, d := range l.Docs {
		if d.Corpus == "" || d.File == "" || d.ID == "" {
			return nil, fmt.Errorf("decoding corpus labels %s: document %d needs corpus, file and id", path, i)
		}
	}
	return &l, nil
}

// Extractor is what an evaluation runs: extractor.Extractor's Extract.
type Extractor interface {
	Extract(ctx context.Context, doc *events.DocChanged, units []events.TextUnit) ([]events.RawEntity, []events.RawRelationship, error)
}

// Corpora configures an evaluation of the offline extractor over
// whole corpora against a labelled set.
type Corpora struct {
	Extractor Extractor
	Chunker   *chunk.Chunker
	// Dir holds one directory per corpus.
	Dir string
	// DocType is every document's doc_type ("" leaves it to inference).
	DocType string
	// Generic maps an extracted failure mode to its generic mode (nil:
	// the name itself).
	Generic func(mode string) string
}

// CorpusFigures are one corpus's figures.
type CorpusFigures struct {
	Corpus string `json:"corpus"`
	// Docs is the number of documents of the corpus; Connected of them
	// have at least one extracted entity besides themselves and failure
	// modes; Classified have a failure mode.
	Docs       int `json:"docs"`
	Connected  int `json:"connected"`
	Classified int `json:"classified"`
	// Labelled documents, and their entity (system) and cause scores.
	Labelled int   `json:"labelled"`
	Systems  Score `json:"systems"`
	Causes   Score `json:"causes"`
	// CauseErrors lists the labelled documents whose primary cause is
	// wrong or missing, in label order.
	CauseErrors []CauseError `json:"cause_errors,omitempty"`
	// Top lists the most widespread entities (name and document count).
	Top []EntityCount `json:"top,omitempty"`
}

// EntityCount is an entity and the number of documents naming it.
type EntityCount struct {
	ID   string `json:"id"`
	Docs int    `json:"docs"`
	// Discovered is set for a name found by its shape, not a gazetteer.
	Discovered bool `json:"discovered,omitempty"`
}

// ConnectedShare is Connected/Docs.
func (f CorpusFigures) ConnectedShare() float64 { return share(f.Connected, f.Docs) }

// ClassifiedShare is Classified/Docs.
func (f CorpusFigures) ClassifiedShare() float64 { return share(f.Classified, f.Docs) }

func share(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// corpusFile reports whether name is a document of a corpus directory
// (not its README, licence or template).
func corpusFile(name string) bool {
	l := strings.ToLower(name)
	return l != "readme.md" && l != "license" && !strings.Contains(l, "template") && !strings.HasPrefix(l, ".")
}

// CorpusDocID is the document id of a corpus file: the name without its
// extension, or the part before " - " of a "PM2020-001 - Title.md" name.
func CorpusDocID(name string) string {
	id := strings.TrimSuffix(strings.TrimSuffix(name, ".md"), ".txt")
	if i := strings.Index(id, " - "); i > 0 {
		id = id[:i]
	}
	return strings.TrimSpace(id)
}

// Run extracts every document of the labelled corpora and scores them.
func (c Corpora) Run(ctx context.Context, labels *CorpusLabels) ([]CorpusFigures, error) {
	byCorpus := map[string][]CorpusLabel{}
	var corpora []string
	for _, d := range labels.Docs {
		if _, ok := byCorpus[d.Corpus]; !ok {
			corpora = append(corpora, d.Corpus)
		}
		byCorpus[d.Corpus] = append(byCorpus[d.Corpus], d)
	}
	sort.Strings(corpora)
	generic := c.Generic
	if generic == nil {
		generic = func(m string) string { return m }
	}
	var out []CorpusFigures
	for _, corpus := range corpora {
		dir := filepath.Join(c.Dir, corpus)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("reading corpus %s: %w", corpus, err)
		}
		f := CorpusFigures{Corpus: corpus}
		type result struct {
			entities []string // ids besides the document and failure modes
			modes    []string // failure modes, primary first
			evidence string   // the sentence of the primary mode's cue
		}
		results := map[string]result{}
		docsOf := map[string]int{}
		discovered := map[string]bool{}
		for _, e := range entries {
			if e.IsDir() || !corpusFile(e.Name()) {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", e.Name(), err)
			}
			id := CorpusDocID(e.Name())
			doc := &events.DocChanged{Header: events.Header{Tenant: "eval"}, DocID: id, Version: 1,
				DocType: c.DocType, Title: strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())), Text: string(data)}
			ents, rels, err := c.Extractor.Extract(ctx, doc, c.Chunker.Chunk(id, 1, doc.Text))
			if err != nil {
				return nil, fmt.Errorf("extracting %s: %w", e.Name(), err)
			}
			var r result
			self := ""
			if len(ents) > 0 {
				self = offline.EntityID(ents[0])
			}
			seen := map[string]bool{}
			for _, en := range ents {
				eid := offline.EntityID(en)
				if eid == self || en.Type == offline.TypeFailureMode || seen[eid] {
					continue
				}
				seen[eid] = true
				r.entities = append(r.entities, eid)
				docsOf[eid]++
				if en.Key == "" {
					discovered[eid] = true
				}
			}
			for _, rel := range rels {
				if rel.Relation == offline.RelFailure && !slices.Contains(r.modes, rel.Target) {
					if len(r.modes) == 0 {
						r.evidence = rel.Description
					}
					r.modes = append(r.modes, rel.Target)
				}
			}
			f.Docs++
			if len(r.entities) > 0 {
				f.Connected++
			}
			if len(r.modes) > 0 {
				f.Classified++
			}
			results[e.Name()] = r
		}
		for _, l := range byCorpus[corpus] {
			r, ok := results[l.File]
			if !ok {
				return nil, fmt.Errorf("labelled document %s/%s is not in %s", corpus, l.File, dir)
			}
			f.Labelled++
			scoreSystems(&f.Systems, l, r.entities)
			scoreCause(&f.Causes, l, r.modes, generic)
			if e, ok := causeError(l, r.modes, r.evidence, generic); ok {
				f.CauseErrors = append(f.CauseErrors, e)
			}
		}
		for id, n := range docsOf {
			f.Top = append(f.Top, EntityCount{ID: id, Docs: n, Discovered: discovered[id]})
		}
		sort.Slice(f.Top, func(i, j int) bool {
			if f.Top[i].Docs != f.Top[j].Docs {
				return f.Top[i].Docs > f.Top[j].Docs
			}
			return f.Top[i].ID < f.Top[j].ID
		})
		out = append(out, f)
	}
	return out, nil
}

// systemKey is the comparison key of a system name: its normalisation
// key without a leading vendor word ("Azure Storage" and "Storage",
// "Amazon EBS" and "EBS" are one system) and without a plural s.
func systemKey(name string) string {
	k := resolve.Key(name)
	for _, v := range []string{"amazon", "aws", "azure", "microsoft", "google", "gcp", "googlecloud"} {
		if rest, ok := strings.CutPrefix(k, v); ok && len(rest) >= 2 {
			k = rest
			break
		}
	}
	if len(k) > 3 && strings.HasSuffix(k, "s") && !strings.HasSuffix(k, "ss") {
		k = k[:len(k)-1]
	}
	return k
}

func scoreSystems(s *Score, l CorpusLabel, ids []string) {
	want := map[string]string{}
	for _, sys := range l.Systems {
		want[systemKey(sys)] = sys
	}
	found := map[string]bool{}
	for _, id := range ids {
		_, key := resolve.SplitID(id)
		k := systemKey(key)
		if _, ok := want[k]; ok {
			if !found[k] {
				s.TP++
			}
			found[k] = true
			continue
		}
		s.FP++
		s.Spurious = append(s.Spurious, l.ID+": "+id)
	}
	for k, sys := range want {
		if !found[k] {
			s.FN++
			s.Missed = append(s.Missed, l.ID+": "+sys)
		}
	}
	sort.Strings(s.Missed)
	sort.Strings(s.Spurious)
}

// CauseError is a labelled document whose primary cause is wrong or
// missing: its label, the generic mode extracted (empty: none), the finer
// mode, and the sentence of the cue that decided.
type CauseError struct {
	ID        string   `json:"id"`
	Label     string   `json:"label"`
	Also      []string `json:"also,omitempty"`
	Predicted string   `json:"predicted,omitempty"`
	Mode      string   `json:"mode,omitempty"`
	Evidence  string   `json:"evidence,omitempty"`
}

// causeError reports the document of l as a cause error when its primary
// mode (the first of modes) is not the label nor an accepted one.
func causeError(l CorpusLabel, modes []string, evidence string, generic func(string) string) (CauseError, bool) {
	e := CauseError{ID: l.ID, Label: l.Cause, Also: l.Also}
	if len(modes) == 0 {
		return e, l.Cause != ""
	}
	e.Predicted, e.Mode, e.Evidence = generic(modes[0]), modes[0], evidence
	right := l.Cause != "" && (e.Predicted == l.Cause || slices.Contains(l.Also, e.Predicted))
	return e, !right
}

// scoreCause scores the primary failure mode (the first) at the generic
// level: right when it is the labelled cause or an accepted one.
func scoreCause(s *Score, l CorpusLabel, modes []string, generic func(string) string) {
	if len(modes) == 0 {
		if l.Cause != "" {
			s.FN++
			s.Missed = append(s.Missed, l.ID+": "+l.Cause)
		}
		return
	}
	g := generic(modes[0])
	if l.Cause != "" && (g == l.Cause || slices.Contains(l.Also, g)) {
		s.TP++
		return
	}
	s.FP++
	s.Spurious = append(s.Spurious, fmt.Sprintf("%s: %s (%s), labelled %q", l.ID, g, modes[0], l.Cause))
	if l.Cause != "" {
		s.FN++
		s.Missed = append(s.Missed, l.ID+": "+l.Cause)
	}
}

// CorporaOptions are the options of `kgstream eval extraction
// --labels`.
type CorporaOptions struct {
	Labels, Dir, DocType string
	Verbose, JSON        bool
	// ShowErrors prints, per labelled document whose cause is wrong or
	// missing, its id, label, prediction and the deciding sentence.
	ShowErrors bool
	// Config is the offline extractor's configuration (zero: defaults).
	Config offline.Config
}

// CorporaCommand runs the default offline extractor over the
// labelled corpora and prints per-corpus figures to w.
func CorporaCommand(ctx context.Context, o CorporaOptions, w io.Writer) error {
	labels, err := LoadCorpusLabels(o.Labels)
	if err != nil {
		return err
	}
	x, err := offline.New(o.Config)
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
	figs, err := Corpora{Extractor: x, Chunker: chunker, Dir: o.Dir, DocType: o.DocType, Generic: x.GenericMode}.Run(ctx, labels)
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(figs)
	}
	fmt.Fprintf(w, "offline extraction vs %s (doc_type %q)\n", o.Labels, o.DocType)
	fmt.Fprintf(w, "%-20s %5s %9s %10s %8s %7s %7s %7s %7s\n", "corpus", "docs", "connected", "classified", "labelled",
		"sys P", "sys R", "cause P", "cause R")
	for _, f := range figs {
		fmt.Fprintf(w, "%-20s %5d %9.3f %10.3f %8d %7.3f %7.3f %7.3f %7.3f\n", f.Corpus, f.Docs, f.ConnectedShare(),
			f.ClassifiedShare(), f.Labelled, f.Systems.Precision(), f.Systems.Recall(), f.Causes.Precision(), f.Causes.Recall())
	}
	if o.ShowErrors {
		for _, f := range figs {
			fmt.Fprintf(w, "\n== %s: %d cause errors\n", f.Corpus, len(f.CauseErrors))
			for _, e := range f.CauseErrors {
				writeCauseError(w, e)
			}
		}
	}
	if !o.Verbose {
		return nil
	}
	for _, f := range figs {
		fmt.Fprintf(w, "\n== %s\n", f.Corpus)
		for _, m := range f.Causes.Spurious {
			fmt.Fprintln(w, "cause wrong  ", m)
		}
		for _, m := range f.Causes.Missed {
			fmt.Fprintln(w, "cause missed ", m)
		}
		for _, m := range f.Systems.Missed {
			fmt.Fprintln(w, "system missed", m)
		}
		for _, m := range f.Systems.Spurious {
			fmt.Fprintln(w, "system extra ", m)
		}
		top := f.Top
		if len(top) > 400 {
			top = top[:400]
		}
		for _, t := range top {
			how := "known"
			if t.Discovered {
				how = "found"
			}
			fmt.Fprintf(w, "top %4d %s %s\n", t.Docs, how, t.ID)
		}
	}
	return nil
}

func writeCauseError(w io.Writer, e CauseError) {
	label := e.Label
	if label == "" {
		label = "(none)"
	}
	if len(e.Also) > 0 {
		label += " (also " + strings.Join(e.Also, ", ") + ")"
	}
	if e.Predicted == "" {
		fmt.Fprintf(w, "%s: labelled %s, predicted nothing\n", e.ID, label)
		return
	}
	fmt.Fprintf(w, "%s: labelled %s, predicted %s (%s)\n    %s\n", e.ID, label, e.Predicted, e.Mode, e.Evidence)
}
