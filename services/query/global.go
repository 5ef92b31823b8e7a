package query

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
)

// GlobalStats says how a global answer was built: how many reports the
// selection considered, how many were dropped because the caller may not
// read everything they were built from (dropped BEFORE the map step, so
// nothing of them reaches the answer), and whether the answer fell back to
// local search because too many were dropped.
type GlobalStats struct {
	Selection         string   `json:"selection"` // "level" or "dynamic"
	Level             *int     `json:"level,omitempty"`
	ReportsConsidered int      `json:"reports_considered"`
	ReportsDropped    int      `json:"reports_dropped"`
	ReportsUsed       int      `json:"reports_used"`
	Batches           int      `json:"batches"`
	ThemeTypes        []string `json:"theme_types"`
	FellBack          bool     `json:"fell_back_to_local,omitempty"`
	// MapReduce is "offline" or "llm:<model>": what mapped and reduced.
	MapReduce string `json:"map_reduce,omitempty"`
	// LLMFallback is set when the LLM map/reduce failed (a failed call, a
	// malformed answer, no valid citation) and the offline one answered.
	LLMFallback bool `json:"llm_fallback,omitempty"`
	// Points are the rated points of the LLM map step that fed the reduce,
	// highest score first, each citing reports of the map input only.
	Points []GlobalPoint `json:"points,omitempty"`
}

// themeCues maps question words to the entity types whose members are the
// themes of a global question ("what are our recurring root causes" asks
// for failure modes). Without a cue every non-document type is a theme.
var themeCues = []struct {
	cue string
	typ string
}{
	{"cause", "failure_mode"}, {"failure", "failure_mode"}, {"why", "failure_mode"}, {"reason", "failure_mode"},
	{"root", "failure_mode"}, {"service", "service"}, {"team", "team"}, {"owner", "team"},
	{"component", "component"}, {"region", "region"}, {"release", "release"}, {"datastore", "datastore"},
}

// documentTypes are the types of entities that stand for documents: they
// are the evidence, never the theme.
var documentTypes = map[string]bool{"incident": true, "document": true, "page": true, "runbook": true, "catalog": true}

func themeTypes(question string) map[string]bool {
	q := strings.ToLower(question)
	out := map[string]bool{}
	for _, c := range themeCues {
		if strings.Contains(q, c.cue) {
			out[c.typ] = true
		}
	}
	return out
}

func isTheme(types map[string]bool, typ string) bool {
	if len(types) == 0 {
		return !documentTypes[typ]
	}
	return types[typ]
}

// themePoint is what the map step extracts from one report: a theme entity
// and the documents (with versions) that support it there.
type themePoint struct {
	theme string
	docs  map[string]int64
}

// global answers a global question by map-reduce over admitted community
// reports: admission first, then selection (a level, or dynamic selection
// from the roots down), then a map over token-bounded batches of reports
// extracting themes with their supporting documents, then a reduce ranking
// themes by the number of distinct documents that support them.
func (s *Service) global(v *view, req QueryRequest, budget int) (QueryResponse, error) {
	began := time.Now()
	resp := QueryResponse{Mode: ModeGlobal, Entities: []entityJSON{}, Context: []ContextItem{}, Citations: []citation{},
		BudgetTokens: budget, Timings: map[string]float64{}}
	cs, err := v.s.st.Communities(v.ctx, v.tenant)
	if err != nil {
		return resp, fmt.Errorf("reading communities: %w", err)
	}
	all, err := v.s.st.Reports(v.ctx, v.tenant)
	if err != nil {
		return resp, fmt.Errorf("reading reports: %w", err)
	}
	reports := map[string]store.Report{} // by community
	var ids []string
	for _, r := range all {
		if prev, ok := reports[r.Community]; !ok || r.UpdatedAt.After(prev.UpdatedAt) {
			reports[r.Community] = r
		}
		for _, ref := range r.Sources {
			ids = append(ids, ref.DocID)
		}
	}
	if err := v.adm.Prefetch(ids); err != nil {
		return resp, err
	}
	admitted := map[string]bool{}
	for cid, r := range reports {
		ok, err := v.adm.Derived(r.Sources)
		if err != nil {
			return resp, err
		}
		admitted[cid] = ok
	}
	themes := themeTypes(req.Question)
	stats := &GlobalStats{ThemeTypes: sortedKeys(themes)}
	if len(stats.ThemeTypes) == 0 {
		stats.ThemeTypes = []string{}
	}
	resp.Global = stats

	relevant := func(c store.Community) bool {
		for _, m := range c.Members {
			if t, _ := resolve.SplitID(m); isTheme(themes, t) {
				return true
			}
		}
		r, ok := reports[c.ID]
		if !ok {
			return false
		}
		for _, f := range r.Findings {
			for _, e := range f.Edges {
				if isTheme(themes, edgeTargetType(e)) {
					return true
				}
			}
		}
		return false
	}
	var selected []store.Report
	consider := func(c store.Community) bool {
		if _, ok := reports[c.ID]; !ok {
			return false
		}
		stats.ReportsConsidered++
		if !admitted[c.ID] {
			stats.ReportsDropped++
			return false
		}
		return true
	}
	if req.Level != nil {
		stats.Selection, stats.Level = "level", req.Level
		for _, c := range cs {
			if c.Level == *req.Level && consider(c) && relevant(c) {
				selected = append(selected, reports[c.ID])
			}
		}
	} else {
		stats.Selection = "dynamic"
		byID := make(map[string]store.Community, len(cs))
		for _, c := range cs {
			byID[c.ID] = c
		}
		// Rate from the roots down. An admitted, irrelevant community is
		// pruned with its subtree (its members are a superset of its
		// children's, so they cannot be relevant either). A relevant one is
		// replaced by its relevant children when it has some. A community
		// whose report is absent or not admitted is skipped, but its
		// children are rated in its place, so no relevant child is lost
		// because its parent could not be used.
		var visit func(c store.Community) []store.Report
		visit = func(c store.Community) []store.Report {
			usable := consider(c)
			if usable && !relevant(c) {
				return nil
			}
			var fromChildren []store.Report
			for _, ch := range c.Children {
				if cc, ok := byID[ch]; ok {
					fromChildren = append(fromChildren, visit(cc)...)
				}
			}
			if len(fromChildren) > 0 || !usable {
				return fromChildren
			}
			return []store.Report{reports[c.ID]}
		}
		for _, c := range cs {
			if c.Parent == "" {
				selected = append(selected, visit(c)...)
			}
		}
	}
	slices.SortFunc(selected, func(a, b store.Report) int {
		return cmp.Or(cmp.Compare(b.Rating, a.Rating), cmp.Compare(a.ID, b.ID))
	})
	stats.ReportsUsed = len(selected)
	if stats.ReportsConsidered > 0 && float64(stats.ReportsDropped) > s.cfg.GlobalFallbackDropRatio*float64(stats.ReportsConsidered) {
		local, err := s.local(v, req, budget)
		if err != nil {
			return resp, err
		}
		stats.FellBack = true
		local.Global = stats
		local.Answer = fmt.Sprintf("Most community reports (%d of %d) are built on documents you may not read, so this answer comes from local search instead.\n%s",
			stats.ReportsDropped, stats.ReportsConsidered, local.Answer)
		return local, nil
	}

	// Map: token-bounded batches of reports, each yielding theme points.
	batches := reportBatches(selected, budget)
	stats.Batches = len(batches)
	for _, batch := range batches {
		for _, r := range batch {
			text := r.Title + ": " + r.Summary
			resp.Context = append(resp.Context, ContextItem{Kind: KindReport, ID: r.ID, Text: text,
				Citations: slices.Clone(r.Sources), Tokens: ApproxTokens(text)})
		}
	}
	for _, it := range resp.Context {
		resp.UsedTokens += it.Tokens
	}
	stats.MapReduce = "offline"
	if s.cfg.LLM != nil && len(selected) > 0 {
		llmBegan := time.Now()
		err := s.llmMapReduce(v, req.Question, batches, budget, &resp)
		resp.Timings["llm_ms"] = ms(time.Since(llmBegan))
		if err == nil {
			stats.MapReduce = "llm:" + s.cfg.LLM.Model()
			resp.Timings["retrieval_ms"] = ms(time.Since(began))
			return resp, nil
		}
		if v.ctx.Err() != nil {
			return resp, err
		}
		s.llmFallbacks.Inc()
		s.log.Warn("LLM map/reduce failed, answering with the offline one", "tenant", v.tenant, "error", err)
		stats.LLMFallback = true
		stats.Points = nil
		resp.Citations = []citation{}
	}
	var points []themePoint
	for _, batch := range batches {
		for _, r := range batch {
			points = append(points, mapReport(r, themes)...)
		}
	}
	// Reduce: merge points by theme, rank by distinct supporting documents.
	merged := map[string]map[string]int64{}
	for _, p := range points {
		if merged[p.theme] == nil {
			merged[p.theme] = map[string]int64{}
		}
		for d, ver := range p.docs {
			merged[p.theme][d] = ver
		}
	}
	type ranked struct {
		e    entityJSON
		docs []citation
	}
	var rs []ranked
	for id, docs := range merged {
		ve, err := v.entity(id)
		if err != nil {
			return resp, err
		}
		if !ve.ok {
			continue
		}
		r := ranked{e: ve.out}
		for d, ver := range docs {
			r.docs = append(r.docs, citation{DocID: d, Version: ver})
		}
		slices.SortFunc(r.docs, func(a, b citation) int { return cmp.Compare(a.DocID, b.DocID) })
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(len(b.docs), len(a.docs)), cmp.Compare(a.e.Name, b.e.Name))
	})
	if len(rs) == 0 {
		resp.Answer = "No admitted community report answers this question."
		resp.Timings["retrieval_ms"] = ms(time.Since(began))
		return resp, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Recurring themes across %d community reports, by the number of documents that support them:\n", len(selected))
	seen := map[citation]bool{}
	for i, r := range rs {
		if i == s.cfg.MaxAnswerFacts {
			break
		}
		names := make([]string, len(r.docs))
		for j, d := range r.docs {
			names[j] = d.DocID
			if !seen[d] {
				seen[d] = true
				resp.Citations = append(resp.Citations, d)
			}
		}
		noun := "documents"
		if len(r.docs) == 1 {
			noun = "document"
		}
		fmt.Fprintf(&b, "%d. %s (%s): %d %s [%s]\n", i+1, r.e.Name, r.e.Type, len(r.docs), noun, strings.Join(names, ", "))
		resp.Entities = append(resp.Entities, r.e)
	}
	resp.Answer = strings.TrimRight(b.String(), "\n")
	resp.Timings["retrieval_ms"] = ms(time.Since(began))
	return resp, nil
}

// mapReport extracts the theme points of one report: for each finding, the
// theme-typed targets of its edges, supported by the documents the finding
// cites. Document-type entities (the incidents themselves) are evidence.
func mapReport(r store.Report, themes map[string]bool) []themePoint {
	var out []themePoint
	for _, f := range r.Findings {
		docs := map[string]int64{}
		for _, c := range f.Citations {
			docs[c.DocID] = c.Version
		}
		for _, e := range f.Edges {
			if !isTheme(themes, edgeTargetType(e)) {
				continue
			}
			_, _, target := splitEdgeID(e)
			out = append(out, themePoint{theme: target, docs: docs})
		}
	}
	return out
}

// reportBatches splits reports, in order, into batches of at most budget
// tokens each (a report larger than the budget makes a batch of its own).
func reportBatches(reports []store.Report, budget int) [][]store.Report {
	var out [][]store.Report
	for start := 0; start < len(reports); {
		used, end := 0, start
		for end < len(reports) && (end == start || used+reportTokens(reports[end]) <= budget) {
			used += reportTokens(reports[end])
			end++
		}
		out = append(out, reports[start:end])
		start = end
	}
	return out
}

func reportTokens(r store.Report) int {
	n := ApproxTokens(r.Title + " " + r.Summary)
	for _, f := range r.Findings {
		n += ApproxTokens(f.Summary)
	}
	return n
}

func splitEdgeID(id string) (src, rel, dst string) {
	parts := strings.SplitN(id, "|", 3)
	if len(parts) != 3 {
		return "", "", ""
	}
	return parts[0], parts[1], parts[2]
}

func edgeTargetType(id string) string {
	_, _, dst := splitEdgeID(id)
	t, _ := resolve.SplitID(dst)
	return t
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
