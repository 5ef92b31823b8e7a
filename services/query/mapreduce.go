package query

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// GlobalPoint is one rated point of the LLM map step: a statement that
// answers part of the question, its importance (0-100) and the reports it
// rests on (ids of the batch it came from only).
type GlobalPoint struct {
	Description string   `json:"description"`
	Score       int      `json:"score"`
	ReportIDs   []string `json:"report_ids"`
}

// MapSchema is the structured-output schema of the map step.
var MapSchema = json.RawMessage(`{
 "type":"object","additionalProperties":false,"required":["points"],
 "properties":{"points":{"type":"array","items":{"type":"object","additionalProperties":false,
  "required":["description","score","report_ids"],
  "properties":{"description":{"type":"string"},
   "score":{"type":"integer","minimum":0,"maximum":100},
   "report_ids":{"type":"array","items":{"type":"string"}}}}}}}`)

// ReduceSchema is the structured-output schema of the reduce step.
var ReduceSchema = json.RawMessage(`{
 "type":"object","additionalProperties":false,"required":["answer","report_ids"],
 "properties":{"answer":{"type":"string"},"report_ids":{"type":"array","items":{"type":"string"}}}}`)

// MapReducePromptVersion changes whenever the map or reduce prompt does.
const MapReducePromptVersion = "global-v1"

const mapSystemPrompt = `You help answer a question about an organisation's incidents from community reports of its
knowledge graph. From the reports given, list the points that answer the question. Each point has a
description, a score from 0 (irrelevant) to 100 (central to the answer), and the ids of the reports it
rests on, exactly as given. Use only the reports; cite only their ids; return no point rather than guess.`

const reduceSystemPrompt = `You write the final answer to a question from rated points that analysts extracted from
community reports. Use only the points; prefer higher scores; say plainly what the points do not cover.
Cite the report ids the answer rests on, exactly as given with the points.`

// errLLMAnswer marks an LLM answer that cannot be used (shape, citations).
var errLLMAnswer = errors.New("unusable LLM answer")

// llmMapReduce answers a global question with the LLM: the map step rates
// points in each batch of admitted reports, the reduce step writes the
// answer from the best points that fit the budget. A point or an answer may
// cite only report ids that were in its input; other ids are dropped, and
// an answer left citing none is refused. Citations are the cited reports'
// sources, never taken from the model.
func (s *Service) llmMapReduce(v *view, question string, batches [][]store.Report, budget int, resp *QueryResponse) error {
	byID := map[string]store.Report{}
	var points []GlobalPoint
	for i, batch := range batches {
		in := make(map[string]bool, len(batch))
		for _, r := range batch {
			in[r.ID], byID[r.ID] = true, r
		}
		var out struct {
			Points *[]GlobalPoint `json:"points"`
		}
		if err := s.complete(v, mapSystemPrompt, mapPrompt(question, batch), "global_map", MapSchema, &out); err != nil {
			return fmt.Errorf("mapping batch %d: %w", i+1, err)
		}
		if out.Points == nil {
			return fmt.Errorf("mapping batch %d: %w: no points field", i+1, errLLMAnswer)
		}
		for _, p := range *out.Points {
			p.Description = strings.TrimSpace(p.Description)
			p.ReportIDs = knownIDs(p.ReportIDs, in)
			if p.Description == "" || p.Score <= 0 || p.Score > 100 || len(p.ReportIDs) == 0 {
				continue
			}
			points = append(points, p)
		}
	}
	if len(points) == 0 {
		resp.Answer = "No admitted community report answers this question."
		return nil
	}
	slices.SortStableFunc(points, func(a, b GlobalPoint) int { return cmp.Compare(b.Score, a.Score) })
	var kept []GlobalPoint
	left := budget
	for _, p := range points {
		if t := ApproxTokens(p.Description) + 4*len(p.ReportIDs); t <= left || len(kept) == 0 {
			left -= t
			kept = append(kept, p)
		}
	}
	inReduce := map[string]bool{}
	for _, p := range kept {
		for _, id := range p.ReportIDs {
			inReduce[id] = true
		}
	}
	var out struct {
		Answer    *string  `json:"answer"`
		ReportIDs []string `json:"report_ids"`
	}
	if err := s.complete(v, reduceSystemPrompt, reducePrompt(question, kept), "global_reduce", ReduceSchema, &out); err != nil {
		return fmt.Errorf("reducing: %w", err)
	}
	if out.Answer == nil || strings.TrimSpace(*out.Answer) == "" {
		return fmt.Errorf("reducing: %w: empty answer", errLLMAnswer)
	}
	cited := knownIDs(out.ReportIDs, inReduce)
	if len(cited) == 0 {
		return fmt.Errorf("reducing: %w: the answer cites no report of its input", errLLMAnswer)
	}
	seen := map[citation]bool{}
	var cites []citation
	for _, id := range cited {
		for _, ref := range byID[id].Sources {
			if !seen[ref] {
				seen[ref] = true
				cites = append(cites, ref)
			}
		}
	}
	slices.SortFunc(cites, func(a, b citation) int {
		return cmp.Or(cmp.Compare(a.DocID, b.DocID), cmp.Compare(a.Version, b.Version), cmp.Compare(a.TextUnit, b.TextUnit))
	})
	resp.Answer = strings.TrimSpace(*out.Answer) + "\nReports: " + strings.Join(cited, ", ") + "."
	resp.Citations = cites
	resp.Global.Points = kept
	return nil
}

// complete asks the LLM and decodes its JSON answer strictly into out: an
// answer of another shape (unknown fields) is unusable, not half-read.
func (s *Service) complete(v *view, system, prompt, schema string, doc json.RawMessage, out any) error {
	c, err := s.cfg.LLM.Complete(v.ctx, []llm.Message{
		{Role: llm.RoleSystem, Content: system}, {Role: llm.RoleUser, Content: prompt},
	}, &llm.Schema{Name: schema, Schema: doc})
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(c.Content)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%w: %w: %s", errLLMAnswer, err, llm.Excerpt(c.Content, 200))
	}
	return nil
}

// knownIDs keeps the ids in allowed, once each, in order.
func knownIDs(ids []string, allowed map[string]bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if allowed[id] && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// mapPrompt renders one batch of admitted reports with their ids.
func mapPrompt(question string, batch []store.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Question: %s\n\nReports:\n", question)
	for _, r := range batch {
		fmt.Fprintf(&b, "\n[%s] %s (level %d, rating %.1f)\n%s\n", r.ID, r.Title, r.Level, r.Rating, r.Summary)
		// The report was admitted on its sources: a finding names only
		// documents among them, so nothing else reaches the model.
		admitted := make(map[string]bool, len(r.Sources))
		for _, ref := range r.Sources {
			admitted[ref.DocID] = true
		}
		for _, f := range r.Findings {
			fmt.Fprintf(&b, "- %s %s (documents: %s)\n", f.Summary, f.Explanation, docList(f.Citations, admitted))
		}
	}
	b.WriteString("\nReturn the points that answer the question, citing report ids in brackets above.")
	return b.String()
}

// reducePrompt renders the kept points.
func reducePrompt(question string, points []GlobalPoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Question: %s\n\nPoints (highest score first):\n", question)
	for i, p := range points {
		fmt.Fprintf(&b, "%d. (score %d; reports %s) %s\n", i+1, p.Score, strings.Join(p.ReportIDs, ", "), p.Description)
	}
	b.WriteString("\nWrite the answer and list the report ids it rests on.")
	return b.String()
}

// docList names the documents of refs that are in admitted, once each.
func docList(refs []provenance.SourceRef, admitted map[string]bool) string {
	var out []string
	seen := map[string]bool{}
	for _, r := range refs {
		if admitted[r.DocID] && !seen[r.DocID] {
			seen[r.DocID] = true
			out = append(out, r.DocID)
		}
	}
	return strings.Join(out, ", ")
}
