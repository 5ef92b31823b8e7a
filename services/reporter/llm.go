package reporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// Writer writes the report of one community from the graph around it.
type Writer interface {
	Write(ctx context.Context, c store.Community, g *Context) (store.Report, error)
	Name() string
}

// Context is what a writer may use: the community's members and every edge
// leaving a member, with the sources they rest on.
type Context struct {
	Members []store.Entity
	Edges   []store.Edge
}

// Sources is every (doc, version) of the context: what a report on it is
// built from, whatever the writer chose to cite.
func (x *Context) Sources() []provenance.SourceRef {
	set := map[provenance.SourceRef]bool{}
	for _, e := range x.Members {
		for _, f := range e.Sources {
			set[provenance.SourceRef{DocID: f.DocID, Version: f.Version}] = true
		}
	}
	for _, e := range x.Edges {
		for _, s := range e.Supports {
			set[provenance.SourceRef{DocID: s.DocID, Version: s.Version}] = true
		}
	}
	out := make([]provenance.SourceRef, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sortRefs(out)
	return out
}

// ErrNoValidFindings means an LLM report had no finding that cites an
// entity or relationship of its context.
var ErrNoValidFindings = errors.New("no finding cites a known entity or relationship")

// llmReport is GraphRAG's community report shape, with ids to cite.
type llmReport struct {
	Title             string       `json:"title"`
	Summary           string       `json:"summary"`
	Rating            float64      `json:"rating"`
	RatingExplanation string       `json:"rating_explanation"`
	Findings          []llmFinding `json:"findings"`
}

type llmFinding struct {
	Summary       string   `json:"summary"`
	Explanation   string   `json:"explanation"`
	Entities      []string `json:"entities"`
	Relationships []string `json:"relationships"`
}

// ReportSchema is the structured-output schema of an LLM community report.
var ReportSchema = json.RawMessage(`{
 "type":"object","additionalProperties":false,
 "required":["title","summary","rating","rating_explanation","findings"],
 "properties":{
  "title":{"type":"string"},
  "summary":{"type":"string"},
  "rating":{"type":"number","minimum":0,"maximum":10},
  "rating_explanation":{"type":"string"},
  "findings":{"type":"array","items":{"type":"object","additionalProperties":false,
    "required":["summary","explanation","entities","relationships"],
    "properties":{"summary":{"type":"string"},"explanation":{"type":"string"},
      "entities":{"type":"array","items":{"type":"string"}},
      "relationships":{"type":"array","items":{"type":"string"}}}}}
 }}`)

// ReportPromptVersion changes whenever the prompt does.
const ReportPromptVersion = "report-v1"

const reportSystemPrompt = `You write community reports for an incident knowledge graph, as Microsoft GraphRAG does.
Use ONLY the entities and relationships given. Every finding must cite the ids of the entities
and relationships it rests on, exactly as given (E-ids and R-ids). Do not state anything the
context does not support; keep negation and uncertainty. Rate the community's importance 0-10.`

// LLMWriter writes GraphRAG-shaped reports with an LLM and checks every
// finding against the ids it cites: a finding citing no id, or an id that
// is not in its context, is rejected. Citations are computed from the cited
// relationships' supports, never taken from the model.
type LLMWriter struct {
	client *llm.Client
}

// NewLLMWriter returns an LLMWriter.
func NewLLMWriter(client *llm.Client) *LLMWriter { return &LLMWriter{client: client} }

// Name implements Writer.
func (w *LLMWriter) Name() string { return "llm:" + w.client.Model() }

// Prompt renders a community's context with short ids the model cites.
func Prompt(c store.Community, x *Context) (string, map[string]string, map[string]store.Edge) {
	var b strings.Builder
	ents := map[string]string{}
	edges := map[string]store.Edge{}
	fmt.Fprintf(&b, "Community %s (level %d).\n\nEntities:\n", c.ID, c.Level)
	for i, e := range x.Members {
		id := fmt.Sprintf("E%d", i+1)
		ents[id] = e.ID
		desc := ""
		for _, f := range e.Sources {
			if f.Description != "" {
				desc = f.Description
				break
			}
		}
		fmt.Fprintf(&b, "%s | %s | %s | %s\n", id, e.Name, e.Type, desc)
	}
	b.WriteString("\nRelationships:\n")
	for i, e := range x.Edges {
		id := fmt.Sprintf("R%d", i+1)
		edges[id] = e
		desc := ""
		for _, s := range e.Supports {
			if s.Description != "" {
				desc = s.Description
				break
			}
		}
		fmt.Fprintf(&b, "%s | %s -%s-> %s | %s\n", id, e.Source, e.Relation, e.Target, desc)
	}
	return b.String(), ents, edges
}

// Write implements Writer.
func (w *LLMWriter) Write(ctx context.Context, c store.Community, x *Context) (store.Report, error) {
	prompt, ents, edges := Prompt(c, x)
	comp, err := w.client.Complete(ctx, []llm.Message{
		{Role: llm.RoleSystem, Content: reportSystemPrompt},
		{Role: llm.RoleUser, Content: prompt},
	}, &llm.Schema{Name: "community_report", Schema: ReportSchema})
	if err != nil {
		return store.Report{}, fmt.Errorf("writing report of %s: %w", c.ID, err)
	}
	var lr llmReport
	dec := json.NewDecoder(strings.NewReader(comp.Content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&lr); err != nil {
		return store.Report{}, fmt.Errorf("decoding report of %s: %w: %s", c.ID, err, llm.Excerpt(comp.Content, 200))
	}
	r := store.Report{ID: ReportID(c.ID), Community: c.ID, Level: c.Level, Title: strings.TrimSpace(lr.Title),
		Summary: strings.TrimSpace(lr.Summary), Rating: math.Max(0, math.Min(10, lr.Rating)),
		RatingExplanation: lr.RatingExplanation, Sources: x.Sources(), MemberHash: c.MemberHash,
		Writer: w.Name(), UpdatedAt: time.Now().UTC()}
	for _, f := range lr.Findings {
		fd, ok := checkFinding(f, ents, edges)
		if ok {
			r.Findings = append(r.Findings, fd)
		}
	}
	if len(r.Findings) == 0 {
		return store.Report{}, fmt.Errorf("report of %s: %w", c.ID, ErrNoValidFindings)
	}
	return r, nil
}

// checkFinding keeps a finding only if every id it cites is in the context
// and it cites at least one.
func checkFinding(f llmFinding, ents map[string]string, edges map[string]store.Edge) (store.Finding, bool) {
	out := store.Finding{Summary: strings.TrimSpace(f.Summary), Explanation: strings.TrimSpace(f.Explanation)}
	if out.Summary == "" || len(f.Entities)+len(f.Relationships) == 0 {
		return out, false
	}
	var cites []provenance.SourceRef
	for _, id := range f.Entities {
		eid, ok := ents[strings.TrimSpace(id)]
		if !ok {
			return out, false
		}
		out.Entities = append(out.Entities, eid)
	}
	for _, id := range f.Relationships {
		e, ok := edges[strings.TrimSpace(id)]
		if !ok {
			return out, false
		}
		out.Edges = append(out.Edges, e.ID)
		cites = append(cites, citations(e.Supports)...)
	}
	sort.Strings(out.Entities)
	sort.Strings(out.Edges)
	out.Citations = dedupRefs(cites)
	return out, true
}
