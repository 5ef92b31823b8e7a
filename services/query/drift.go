package query

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
)

// DriftTree is how a DRIFT answer was built: the primer (community reports
// closest to the question) and one local search per follow-up question.
// Every step reads through the same request view, so the same admission
// holds everywhere in the tree.
type DriftTree struct {
	Primer    DriftPrimer   `json:"primer"`
	FollowUps []DriftBranch `json:"follow_ups"`
	// FollowUpsBy is "offline" (from the primer's entities and themes) or
	// "llm:<model>".
	FollowUpsBy string `json:"follow_ups_by"`
	// LLMFallback is set when an LLM step failed (a failed call or an
	// unusable answer); LLMFailedAt names it ("follow_ups", "follow_up N",
	// "merge"). That step and every later one were built offline.
	LLMFallback bool   `json:"llm_fallback,omitempty"`
	LLMFailedAt string `json:"llm_failed_at,omitempty"`
}

// DriftPrimer is the report primer of a DRIFT answer.
type DriftPrimer struct {
	Reports   []string   `json:"reports"`
	Answer    string     `json:"answer"`
	Citations []citation `json:"citations"`
}

// DriftBranch is one follow-up question and its local answer.
type DriftBranch struct {
	Question  string       `json:"question"`
	From      string       `json:"from"` // what the follow-up was built from
	Answer    string       `json:"answer"`
	Entities  []entityJSON `json:"entities"`
	Citations []citation   `json:"citations"`
}

// Primer and follow-up bounds.
const (
	driftPrimerReports = 3
	driftPrimerDocs    = 5
)

// FollowUpSchema is the structured-output schema of LLM follow-ups.
var FollowUpSchema = json.RawMessage(`{
 "type":"object","additionalProperties":false,"required":["follow_ups"],
 "properties":{"follow_ups":{"type":"array","items":{"type":"string"}}}}`)

const followUpSystemPrompt = `You plan the investigation of an on-call engineer's question over an incident knowledge
graph. From the question and the community reports given, write short follow-up questions, each about one
concrete system, failure or incident the reports name, whose answers together answer the question.`

// drift answers as GraphRAG's DRIFT search does: a primer from the
// community reports closest to the question, follow-up questions built
// from the primer's entities and themes (or by the LLM), a local search
// for the question itself and for each follow-up, and one merged answer:
// the sentences of all branches' passages that best answer the original
// question, each cited (or, with an LLM, its answer from those passages).
//
// With an LLM the follow-ups, each follow-up's answer and the merged
// answer are its; the first LLM step that fails (a failed call or an
// unusable answer) and every later one are built offline, so a failing
// endpoint is asked once per answer, and the tree says where it failed.
func (s *Service) drift(v *view, req QueryRequest, budget int) (QueryResponse, error) {
	began := time.Now()
	resp := QueryResponse{Mode: ModeDrift, Entities: []entityJSON{}, Context: []ContextItem{}, Citations: []citation{},
		BudgetTokens: budget, Timings: map[string]float64{}, AnswerBy: "offline"}
	tree := &DriftTree{FollowUps: []DriftBranch{}, FollowUpsBy: "offline"}
	resp.Drift = tree
	ai := &driftLLM{s: s, v: v, tree: tree, on: s.cfg.LLM != nil}

	d, err := v.derived()
	if err != nil {
		return QueryResponse{}, err
	}
	reports, err := v.admittedReportsIn(d)
	if err != nil {
		return QueryResponse{}, err
	}
	primer := primerReports(req.Question, reports, req.Level, d.reportWords())
	tree.Primer = primerOf(primer)
	resp.Timings["primer_ms"] = ms(time.Since(began))

	titles, err := v.docTitles()
	if err != nil {
		return QueryResponse{}, err
	}
	var units []ContextItem
	haveUnit := map[string]bool{}
	seenEntity := map[string]bool{}
	branchBudget := max(budget/2, 1)
	search := func(q string, extractive bool) (QueryResponse, error) {
		lr, err := s.local(v, QueryRequest{Mode: ModeLocal, Question: q, Level: req.Level, extractive: extractive}, branchBudget)
		if err != nil {
			return lr, err
		}
		for _, e := range lr.Entities {
			if !seenEntity[e.ID] {
				seenEntity[e.ID] = true
				resp.Entities = append(resp.Entities, e)
			}
		}
		for _, it := range lr.Context {
			if it.Kind == KindTextUnit && !haveUnit[it.ID] {
				haveUnit[it.ID] = true
				units = append(units, it)
			}
		}
		return lr, nil
	}
	// The question itself is searched first (for its context only: its
	// answer is the merged one); the follow-ups widen it.
	root, err := search(req.Question, true)
	if err != nil {
		return QueryResponse{}, err
	}
	followUps, err := s.driftFollowUps(v, ai, req.Question, primer, root.Entities)
	if err != nil {
		return QueryResponse{}, err
	}
	for i, fu := range followUps {
		lr, err := search(fu.question, !ai.usable())
		if err != nil {
			return QueryResponse{}, err
		}
		if ai.usable() && !strings.HasPrefix(lr.AnswerBy, "llm:") {
			// local counted and logged the failure already.
			ai.fail(fmt.Sprintf("follow_up %d", i+1))
		}
		tree.FollowUps = append(tree.FollowUps, DriftBranch{Question: fu.question, From: fu.from, Answer: lr.Answer,
			Entities: lr.Entities, Citations: lr.Citations})
	}
	resp.Timings["follow_ups_ms"] = ms(time.Since(began)) - resp.Timings["primer_ms"]

	// Merge: the passages of every branch, ranked against the original
	// question, within the budget.
	rank, err := v.unitRanking(req.Question)
	if err != nil {
		return QueryResponse{}, err
	}
	// Each unit's share once, not at every comparison.
	shares := make(map[string]float64, len(units))
	for _, it := range units {
		shares[it.ID] = unitShare(rank, it)
	}
	slices.SortStableFunc(units, func(a, b ContextItem) int {
		return cmp.Compare(shares[b.ID], shares[a.ID])
	})
	left := budget
	for _, it := range units {
		if it.Tokens <= left {
			left -= it.Tokens
			resp.Context = append(resp.Context, it)
		}
	}
	resp.UsedTokens = budget - left
	if err := s.driftMerge(ai, req.Question, rank, &resp, titles); err != nil {
		return QueryResponse{}, err
	}
	resp.Timings["retrieval_ms"] = ms(time.Since(began))
	return resp, nil
}

// driftLLM follows the LLM steps of one DRIFT answer.
type driftLLM struct {
	s    *Service
	v    *view
	tree *DriftTree
	on   bool // an LLM is configured
}

// usable reports whether the next step may ask the LLM: one is
// configured and no earlier step of this answer failed.
func (d *driftLLM) usable() bool { return d.on && !d.tree.LLMFallback }

// fail records that step failed: it and every later step are offline.
func (d *driftLLM) fail(step string) {
	d.tree.LLMFallback, d.tree.LLMFailedAt = true, step
}

// failed handles a failed LLM step: a cancelled request is an error;
// anything else is counted, logged and recorded, and the answer goes on
// offline.
func (d *driftLLM) failed(step string, err error) error {
	if d.v.ctx.Err() != nil {
		return d.v.ctx.Err()
	}
	d.s.llmFallbacks.Inc()
	d.s.log.Warn("LLM step of a DRIFT answer failed, building the rest offline", "tenant", d.v.tenant, "step", step, "error", err)
	d.fail(step)
	return nil
}

// driftFollowUps returns the follow-up questions: the LLM's when it is
// usable and writes some, the offline ones otherwise.
func (s *Service) driftFollowUps(v *view, ai *driftLLM, question string, primer []store.Report, mapped []entityJSON) ([]followUp, error) {
	name := func(id string) (string, bool, error) {
		ve, err := v.entity(id)
		return ve.out.Name, ve.ok, err
	}
	if ai.usable() && len(primer) > 0 {
		qs, err := s.llmFollowUps(v, question, primer)
		if err == nil && len(qs) == 0 {
			err = fmt.Errorf("%w: no follow-up question", errLLMAnswer)
		}
		if err == nil {
			ai.tree.FollowUpsBy = "llm:" + s.cfg.LLM.Model()
			return qs, nil
		}
		if err := ai.failed("follow_ups", err); err != nil {
			return nil, err
		}
	}
	return offlineFollowUps(question, primer, mapped, s.cfg.DriftFollowUps, name)
}

// driftMerge writes the merged answer from resp's context: the LLM's when
// usable (citing the items it rests on), else the extractive one, which
// also lists the primer and the follow-ups and cites the whole tree.
func (s *Service) driftMerge(ai *driftLLM, question string, rank unitRanking, resp *QueryResponse, titles map[string]string) error {
	tree := resp.Drift
	if ai.usable() && len(resp.Context) > 0 {
		err := s.llmAnswer(ai.v, "drift_answer", question, resp, titles)
		if err == nil {
			return nil
		}
		if err := ai.failed("merge", err); err != nil {
			return err
		}
	}
	if tree.LLMFallback {
		resp.AnswerBy = "offline (LLM unusable)"
	}
	var b strings.Builder
	var cites []citation
	for _, ss := range selectSentences(question, rank, nil, resp.Context, maxAnswerSentences) {
		c := resp.Context[ss.item].Citations
		fmt.Fprintf(&b, "%s %s\n", quote(ss.text), unitTag(c))
		cites = append(cites, c...)
	}
	if tree.Primer.Answer != "" {
		fmt.Fprintf(&b, "Primer: %s\n", tree.Primer.Answer)
	}
	for _, br := range tree.FollowUps {
		fmt.Fprintf(&b, "Follow-up: %s (%d citations)\n", br.Question, len(dedupeDocs(br.Citations)))
	}
	for _, it := range resp.Context {
		cites = append(cites, it.Citations...)
	}
	cites = append(cites, tree.Primer.Citations...)
	for _, br := range tree.FollowUps {
		cites = append(cites, br.Citations...)
	}
	resp.Citations = dedupe(cites)
	if line := sourcesLine(resp.Citations, titles, driftPrimerDocs); line != "" {
		b.WriteString(line)
	}
	resp.Answer = strings.TrimRight(b.String(), "\n")
	if resp.Answer == "" {
		resp.Answer = "Nothing you can read answers this question."
	}
	return nil
}

func unitShare(r unitRanking, it ContextItem) float64 {
	has := map[string]bool{}
	for _, w := range wordsOf(it.Text) {
		has[w] = true
	}
	return r.share(func(w string) bool { return has[w] }) + float64(it.Score)/10
}

func dedupeDocs(cs []citation) map[string]bool {
	out := map[string]bool{}
	for _, c := range cs {
		out[c.DocID] = true
	}
	return out
}

// primerReports are the admitted reports closest to the question by the
// IDF-weighted share of its words in their title, summary and findings,
// ties by rating. reports are the admitted reports by community; words
// indexes every report of the set they were taken from, so a question
// reads the reports holding its words, not the text of every report.
// When no admitted report (of level, if given) holds a word of the
// question ("logins" where the reports say "login"), the highest rated
// ones prime it, as GraphRAG's DRIFT always starts from its top reports:
// a primer left empty would leave the follow-ups to the question's
// entities alone.
func primerReports(question string, reports map[string]store.Report, level *int, words *reportWords) []store.Report {
	qw := contentWords(question)
	// admitted reports whether the report at i is its community's admitted
	// one: the one the scores and document frequencies count.
	admitted := func(i int32) bool {
		r := &words.reports[i]
		w, ok := reports[r.Community]
		return ok && w.ID == r.ID
	}
	scores := map[int32]float64{}
	for _, w := range qw {
		df := 0
		for _, i := range words.postings[w] {
			if admitted(i) {
				df++
			}
		}
		// In the question's word order, as a scan of each report adds
		// them, so the sums are the same floats.
		for _, i := range words.postings[w] {
			if admitted(i) && (level == nil || words.reports[i].Level == *level) {
				scores[i] += 1 / float64(df)
			}
		}
	}
	type scored struct {
		r     store.Report
		score float64
	}
	rs := make([]scored, 0, len(scores))
	for i, sc := range scores {
		rs = append(rs, scored{words.reports[i], sc})
	}
	if len(rs) == 0 {
		for _, r := range reports {
			if level == nil || r.Level == *level {
				rs = append(rs, scored{r, 0})
			}
		}
	}
	slices.SortFunc(rs, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.r.Rating, a.r.Rating), cmp.Compare(a.r.ID, b.r.ID))
	})
	var out []store.Report
	for i, r := range rs {
		if i == driftPrimerReports {
			break
		}
		out = append(out, r.r)
	}
	return out
}

// reportWords indexes the words of reports' title, summary and finding
// summaries (wordsOf): postings are, per word, the indexes into reports
// of those holding it, ascending, each once. A report id found twice is
// indexed once.
type reportWords struct {
	reports  []store.Report
	postings map[string][]int32
}

func newReportWords(rs []store.Report) *reportWords {
	x := &reportWords{postings: map[string][]int32{}}
	seenID := make(map[string]bool, len(rs))
	var ws []string
	for _, r := range rs {
		if seenID[r.ID] {
			continue
		}
		seenID[r.ID] = true
		i := int32(len(x.reports))
		x.reports = append(x.reports, r)
		ws = appendWords(ws[:0], r.Title)
		ws = appendWords(ws, r.Summary)
		for _, f := range r.Findings {
			ws = appendWords(ws, f.Summary)
		}
		for _, w := range ws {
			if p := x.postings[w]; len(p) == 0 || p[len(p)-1] != i {
				x.postings[w] = append(p, i)
			}
		}
	}
	return x
}

// reportWords returns the word index of d's reports, made on first use.
func (d *derivedSet) reportWords() *reportWords {
	d.wordsOnce.Do(func() { d.words = newReportWords(d.reports) })
	return d.words
}

// primerOf summarises the primer reports: title and summary of each, the
// first documents it rests on named.
func primerOf(rs []store.Report) DriftPrimer {
	p := DriftPrimer{Reports: []string{}, Citations: []citation{}}
	var parts []string
	for _, r := range rs {
		p.Reports = append(p.Reports, r.ID)
		p.Citations = append(p.Citations, r.Sources...)
		docs := make([]string, 0, driftPrimerDocs)
		for _, ref := range r.Sources {
			if len(docs) == driftPrimerDocs {
				break
			}
			if !slices.Contains(docs, ref.DocID) {
				docs = append(docs, ref.DocID)
			}
		}
		more := ""
		if n := len(dedupeDocs(r.Sources)); n > len(docs) {
			more = fmt.Sprintf(" and %d more", n-len(docs))
		}
		parts = append(parts, fmt.Sprintf("%s: %s [%s%s]", r.Title, truncate(r.Summary, 240), strings.Join(docs, ", "), more))
	}
	p.Citations = dedupe(p.Citations)
	p.Answer = strings.Join(parts, " | ")
	return p
}

type followUp struct {
	question string
	from     string
}

// offlineFollowUps builds follow-up questions from the primer's entities
// and themes: the theme targets of its findings first (failure modes,
// components), those most findings name first, then the entities the
// question itself mapped to, each asked in the context of the original
// question.
func offlineFollowUps(question string, primer []store.Report, mapped []entityJSON, n int,
	name func(id string) (string, bool, error)) ([]followUp, error) {
	count := map[string]int{}
	for _, r := range primer {
		for _, f := range r.Findings {
			for _, e := range f.Edges {
				_, _, dst := splitEdgeID(e)
				if t, _ := resolve.SplitID(dst); t != "" && !documentTypes[t] {
					count[dst]++
				}
			}
			for _, id := range f.Entities {
				if t, _ := resolve.SplitID(id); t != "" && !documentTypes[t] {
					count[id]++
				}
			}
		}
	}
	ids := make([]string, 0, len(count))
	for id := range count {
		ids = append(ids, id)
	}
	theme := func(id string) int {
		if t, _ := resolve.SplitID(id); t == "failure_mode" {
			return 0
		}
		return 1
	}
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Or(cmp.Compare(theme(a), theme(b)), cmp.Compare(count[b], count[a]), cmp.Compare(a, b))
	})
	for _, e := range mapped {
		if _, dup := count[e.ID]; !dup && !documentTypes[e.Type] {
			count[e.ID] = 0
			ids = append(ids, e.ID)
		}
	}
	var out []followUp
	for _, id := range ids {
		if len(out) == n {
			break
		}
		t, _ := resolve.SplitID(id)
		n, ok, err := name(id)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		out = append(out, followUp{
			question: fmt.Sprintf("%s, regarding %s (%s)?", strings.TrimRight(question, "?"), n, strings.ReplaceAll(t, "_", " ")),
			from:     id,
		})
	}
	return out, nil
}

// llmFollowUps asks the LLM for follow-up questions from the primer
// reports (admitted, so nothing else reaches the model).
func (s *Service) llmFollowUps(v *view, question string, primer []store.Report) ([]followUp, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Question: %s\n\nReports:\n", question)
	for _, r := range primer {
		fmt.Fprintf(&b, "\n[%s] %s\n%s\n", r.ID, r.Title, r.Summary)
		for _, f := range r.Findings {
			fmt.Fprintf(&b, "- %s\n", f.Summary)
		}
	}
	fmt.Fprintf(&b, "\nWrite at most %d follow-up questions.", s.cfg.DriftFollowUps)
	var out struct {
		FollowUps []string `json:"follow_ups"`
	}
	if err := s.complete(v, followUpSystemPrompt, b.String(), "drift_follow_ups", FollowUpSchema, &out); err != nil {
		return nil, err
	}
	// Kept: non-empty questions within the question limit, once each, up
	// to DriftFollowUps of them.
	var qs []followUp
	seen := map[string]bool{}
	for _, q := range out.FollowUps {
		q = strings.TrimSpace(q)
		k := strings.ToLower(q)
		if q != "" && len(q) <= s.cfg.MaxQuestionBytes && !seen[k] && len(qs) < s.cfg.DriftFollowUps {
			seen[k] = true
			qs = append(qs, followUp{question: q, from: "llm"})
		}
	}
	return qs, nil
}
