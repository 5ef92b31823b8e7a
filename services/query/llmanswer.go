package query

import (
	"encoding/json"
	"fmt"
	"strings"
)

// AnswerSchema is the structured-output schema of an LLM-written local
// answer: sentences, each citing the numbers of the context items it rests
// on.
var AnswerSchema = json.RawMessage(`{
 "type":"object","additionalProperties":false,"required":["sentences"],
 "properties":{"sentences":{"type":"array","items":{"type":"object","additionalProperties":false,
  "required":["text","citations"],
  "properties":{"text":{"type":"string"},"citations":{"type":"array","items":{"type":"integer"}}}}}}}`)

// AnswerPromptVersion changes whenever the answer prompt does.
const AnswerPromptVersion = "local-v1"

const answerSystemPrompt = `You answer an on-call engineer's question about incidents from numbered context items
(passages of postmortems, entities, relationships, community reports). Answer in a few plain sentences,
the direct answer first (for a "why" question, the cause). Every sentence cites the numbers of the items
it rests on. Use only the items; if they do not answer the question, say so in one sentence citing the
closest item.`

// llmAnswer has the LLM write the answer from the context already built
// (so it sees admitted material only). A sentence citing no item of the
// context, or only unknown numbers, is dropped; an answer left with no
// sentence is unusable and the caller answers extractively instead. The
// response's citations become those of the cited items. step names the
// structured output ("local_answer", "drift_answer").
func (s *Service) llmAnswer(v *view, step, question string, resp *QueryResponse, titles map[string]string) error {
	if len(resp.Context) == 0 {
		return fmt.Errorf("%w: no context to answer from", errLLMAnswer)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Question: %s\n\nContext items:\n", question)
	for i, it := range resp.Context {
		src := ""
		if len(it.Citations) > 0 {
			src = " from " + docName(it.Citations[0].DocID, titles[it.Citations[0].DocID])
		}
		fmt.Fprintf(&b, "\n[%d] (%s%s) %s\n", i+1, strings.ReplaceAll(it.Kind, "_", " "), src, it.Text)
	}
	b.WriteString("\nAnswer the question; cite item numbers with every sentence.")
	var out struct {
		Sentences *[]struct {
			Text      string `json:"text"`
			Citations []int  `json:"citations"`
		} `json:"sentences"`
	}
	if err := s.complete(v, answerSystemPrompt, b.String(), step, AnswerSchema, &out); err != nil {
		return err
	}
	if out.Sentences == nil {
		return fmt.Errorf("%w: no sentences field", errLLMAnswer)
	}
	var lines []string
	var cites []citation
	seen := map[citation]bool{}
	for _, st := range *out.Sentences {
		text := strings.TrimSpace(st.Text)
		var refs []citation
		for _, n := range st.Citations {
			if n < 1 || n > len(resp.Context) {
				continue
			}
			refs = append(refs, resp.Context[n-1].Citations...)
		}
		if text == "" || len(refs) == 0 {
			continue
		}
		lines = append(lines, text+" "+unitTag(dedupe(refs)))
		for _, c := range refs {
			if !seen[c] {
				seen[c] = true
				cites = append(cites, c)
			}
		}
	}
	if len(lines) == 0 {
		return fmt.Errorf("%w: no sentence cites the context", errLLMAnswer)
	}
	if line := sourcesLine(cites, titles, 5); line != "" {
		lines = append(lines, line)
	}
	resp.Answer = strings.Join(lines, "\n")
	resp.Citations = cites
	resp.AnswerBy = "llm:" + s.cfg.LLM.Model()
	return nil
}

func dedupe(cs []citation) []citation {
	var out []citation
	seen := map[citation]bool{}
	for _, c := range cs {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}
