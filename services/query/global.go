package query

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
)

// GlobalStats says how a global answer was built. It counts admitted
// material only: reports the caller may not read are dropped before the
// map step and are neither shown nor counted.
type GlobalStats struct {
	Selection   string   `json:"selection"` // "level" or "dynamic"
	Level       *int     `json:"level,omitempty"`
	ReportsUsed int      `json:"reports_used"`
	Batches     int      `json:"batches"`
	ThemeTypes  []string `json:"theme_types"`
	FellBack    bool     `json:"fell_back_to_local,omitempty"`
	// MapReduce is "offline" or "llm:<model>": what mapped and reduced.
	MapReduce string `json:"map_reduce,omitempty"`
	// LLMFallback is set when the LLM map/reduce failed (a failed call, a
	// malformed answer, no valid citation) and the offline one answered.
	LLMFallback bool `json:"llm_fallback,omitempty"`
	// Points are the rated points of the LLM map step that fed the reduce,
	// highest score first, each citing reports of the map input only.
	Points []GlobalPoint `json:"points,omitempty"`
	// Themes are the exact counts the answer states, as /v1/aggregate
	// counts them (subject type, relation, target).
	Themes []GlobalTheme `json:"themes"`
	// Coverage says how many subjects have a theme at all.
	Coverage *Coverage `json:"coverage,omitempty"`
}

// GlobalTheme is one theme of a global answer with its exact count: the
// group of GET /v1/aggregate?type=SubjectType&rel=Relation for Target.
type GlobalTheme struct {
	Target      entityJSON `json:"target"`
	SubjectType string     `json:"subject_type"`
	Relation    string     `json:"relation"`
	Count       int        `json:"count"`
	Members     []string   `json:"members"`
	// Reports are the admitted reports whose findings speak of the theme.
	Reports []string `json:"reports,omitempty"`

	memberCites []citation // one per member document version
}

// Coverage: of Subjects visible entities of SubjectType, Covered have at
// least one theme of ThemeType.
type Coverage struct {
	SubjectType string `json:"subject_type"`
	ThemeType   string `json:"theme_type"`
	Subjects    int    `json:"subjects"`
	Covered     int    `json:"covered"`
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

// global answers a global question by map-reduce over admitted community
// reports: admission first, then selection (a level, or dynamic selection
// from the roots down), then a map over token-bounded batches of reports
// extracting themes with their supporting documents, then a reduce ranking
// themes by the number of distinct documents that support them.
func (s *Service) global(v *view, req QueryRequest, budget int) (QueryResponse, error) {
	began := time.Now()
	resp := QueryResponse{Mode: ModeGlobal, Entities: []entityJSON{}, Context: []ContextItem{}, Citations: []citation{},
		BudgetTokens: budget, Timings: map[string]float64{}}
	d, err := v.derived()
	if err != nil {
		return resp, err
	}
	admitted, err := v.admittedByCommunity(d)
	if err != nil {
		return resp, err
	}
	themes := themeTypes(req.Question)
	stats := &GlobalStats{ThemeTypes: sortedKeys(themes)}
	if len(stats.ThemeTypes) == 0 {
		stats.ThemeTypes = []string{}
	}
	resp.Global = stats

	if req.Level != nil {
		stats.Selection, stats.Level = "level", req.Level
	} else {
		stats.Selection = "dynamic"
	}
	plan, err := v.globalPlan(d, admitted, themes, req.Level)
	if err != nil {
		return resp, err
	}
	selected := plan.selected
	stats.ReportsUsed = len(selected)
	// The plan is shared with later requests: the response gets its own
	// theme list (whose member lists stay shared, read only).
	themeList, cov := slices.Clone(plan.themes), plan.coverage()
	stats.Themes, stats.Coverage = themeList, cov
	if len(selected) == 0 && len(themeList) == 0 {
		// Nothing corpus-wide the caller may read answers: local search
		// over what they may read instead.
		local, err := s.local(v, req, budget)
		if err != nil {
			return resp, err
		}
		stats.FellBack = true
		local.Global = stats
		local.Answer = "No community report you may read answers this question, so this answer comes from local search instead.\n" + local.Answer
		return local, nil
	}

	// Map: token-bounded batches of reports, each yielding theme points.
	batches := reportBatches(selected, budget, d.tokens)
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
	counts := s.themeLines(themeList, cov, &resp)
	if s.cfg.LLM != nil && len(selected) > 0 {
		llmBegan := time.Now()
		err := s.llmMapReduce(v, req.Question, batches, budget, &resp)
		resp.Timings["llm_ms"] = ms(time.Since(llmBegan))
		if err == nil {
			stats.MapReduce = "llm:" + s.cfg.LLM.Model()
			if counts != "" {
				resp.Answer += "\nExact counts: " + counts
				resp.Citations = dedupe(append(resp.Citations, themeCitations(&resp)...))
			}
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
	}
	// The offline answer cites its themes' members only: the plan's list,
	// shared read only (clipped, so an append copies it).
	resp.Citations = plan.cites
	if counts == "" {
		resp.Answer = "No theme of this question is linked to anything you can read."
		resp.Timings["retrieval_ms"] = ms(time.Since(began))
		return resp, nil
	}
	resp.Answer = fmt.Sprintf("Recurring themes, by the exact number of documents linked to each (evidence: %d community reports):\n", len(selected)) + counts
	resp.Timings["retrieval_ms"] = ms(time.Since(began))
	return resp, nil
}

// globalPlan is what a global question's answer is made from that depends
// only on its theme types and level, not on its words: the reports chosen
// for the map step, the exact themes and the coverage line, and the
// themes' citations. It is the same for every question of one caller at
// one registry generation, graph and set of reports (it counts with
// /v1/aggregate's kept groups), so it is kept with the tenant's graph
// reads like those; read only once kept.
type globalPlan struct {
	d        *derivedSet // the reports it was made from
	selected []store.Report
	themes   []GlobalTheme
	cov      *Coverage
	// cites are the themes' member citations, each once, in theme order
	// (themeCitations of a response that cites nothing else).
	cites []citation
}

// coverage returns a copy of the plan's coverage (nil when it has none).
func (p *globalPlan) coverage() *Coverage {
	if p.cov == nil {
		return nil
	}
	c := *p.cov
	return &c
}

// globalPlan returns the plan of a global question with these theme types
// and level, kept per caller and registry generation with the tenant's
// graph reads, and made again when the reports have changed.
func (v *view) globalPlan(d *derivedSet, admitted map[string]bool, themes map[string]bool, level *int) (*globalPlan, error) {
	g, err := v.graphSet()
	if err != nil {
		return nil, err
	}
	key, keep, err := v.aggregateKey("", Hop{})
	if err != nil {
		return nil, err
	}
	key.typ = "global\x00" + strings.Join(sortedKeys(themes), "\x00")
	if level != nil {
		key.rel = strconv.Itoa(*level)
	}
	if keep {
		if p, ok := keptAt(g, &g.plans, key); ok && p.d == d {
			return p, nil
		}
	}
	p, err := v.planGlobal(d, admitted, themes, level)
	if err != nil || !keep {
		return p, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.plans[key]; ok && old.d == d {
		return old, nil
	}
	g.plans = keepKeyed(g.plans, key, p)
	return p, nil
}

// planGlobal makes the plan of globalPlan: the reports of the relevant
// communities (at level, else chosen from the roots down), best rated
// first, then the exact themes.
func (v *view) planGlobal(d *derivedSet, admitted map[string]bool, themes map[string]bool, level *int) (*globalPlan, error) {
	cs, reports := d.communities, d.byCommunity
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
		_, ok := reports[c.ID]
		return ok && admitted[c.ID]
	}
	if level != nil {
		for _, c := range cs {
			if c.Level == *level && consider(c) && relevant(c) {
				selected = append(selected, reports[c.ID])
			}
		}
	} else {
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
	list, cov, err := v.exactThemes(themes, selected, reports, admitted)
	if err != nil {
		return nil, err
	}
	p := &globalPlan{d: d, selected: slices.Clip(selected), themes: list, cov: cov}
	p.cites = slices.Clip(withThemeCitations([]citation{}, list))
	return p, nil
}

// defaultThemeRelations are the relations counted for a theme type when no
// admitted report's findings name one.
var defaultThemeRelations = map[string]string{"failure_mode": "failure"}

// exactThemes counts the themes of a global question exactly, with
// /v1/aggregate's code: the theme types' relations are read from the
// admitted reports' findings (document-type subject, theme-type target),
// each (subject type, relation) is aggregated over the whole visible
// graph, and each theme keeps its largest group. The reports whose
// findings name a theme are its evidence. Themes are ranked by count.
func (v *view) exactThemes(themes map[string]bool, selected []store.Report, reports map[string]store.Report, admitted map[string]bool) ([]GlobalTheme, *Coverage, error) {
	type pair struct{ subj, rel, target string }
	pairs := map[pair]bool{}
	evidence := map[string][]string{} // theme id -> report ids
	// The reports in a fixed order, the best rated first: a theme names
	// the first few as its evidence, and the map's order changed them
	// from one request to the next.
	ordered := make([]store.Report, 0, len(reports))
	for cid, r := range reports {
		if admitted[cid] {
			ordered = append(ordered, r)
		}
	}
	slices.SortFunc(ordered, func(a, b store.Report) int {
		return cmp.Or(cmp.Compare(b.Rating, a.Rating), cmp.Compare(a.ID, b.ID))
	})
	for _, r := range ordered {
		for _, f := range r.Findings {
			for _, e := range f.Edges {
				src, rel, dst := splitEdgeID(e)
				st, _ := resolve.SplitID(src)
				dt, _ := resolve.SplitID(dst)
				if !documentTypes[st] || !isTheme(themes, dt) {
					continue
				}
				pairs[pair{st, rel, dt}] = true
				if !slices.Contains(evidence[dst], r.ID) {
					evidence[dst] = append(evidence[dst], r.ID)
				}
			}
		}
	}
	for t := range themes {
		if rel, ok := defaultThemeRelations[t]; ok {
			pairs[pair{"incident", rel, t}] = true
		}
	}
	inSelected := map[string]bool{}
	for _, r := range selected {
		inSelected[r.ID] = true
	}
	best := map[string]GlobalTheme{}
	var cov *Coverage
	var covered map[string]bool
	keys := make([]pair, 0, len(pairs))
	for p := range pairs {
		keys = append(keys, p)
	}
	slices.SortFunc(keys, func(a, b pair) int {
		return cmp.Or(cmp.Compare(a.subj, b.subj), cmp.Compare(a.rel, b.rel), cmp.Compare(a.target, b.target))
	})
	for _, p := range keys {
		groups, kept, err := v.keptGroups(p.subj, Hop{Relation: p.rel, Dir: store.Out})
		if err != nil {
			return nil, nil, err
		}
		var cores []themeCore
		if kept != nil {
			cores = kept.themeCores()
		}
		for i, g := range groups {
			if g.Target.Type != p.target || !isTheme(themes, g.Target.Type) {
				continue
			}
			if prev, ok := best[g.Target.ID]; ok && prev.Count >= g.Count {
				continue
			}
			core := themeCore{}
			if cores != nil {
				core = cores[i]
			} else {
				core = newThemeCore(g)
			}
			// The core's lists are shared with later requests: read only.
			th := GlobalTheme{Target: g.Target, SubjectType: p.subj, Relation: p.rel, Count: g.Count,
				Members: core.names, memberCites: core.cites}
			for _, m := range g.Members {
				if p.subj == "incident" && g.Target.Type == "failure_mode" {
					if covered == nil {
						covered = make(map[string]bool, len(g.Members)*2)
					}
					covered[m.ID] = true
				}
			}
			// Evidence: the selected reports first, at most maxThemeReports.
			for _, sel := range []bool{true, false} {
				for _, rid := range evidence[g.Target.ID] {
					if inSelected[rid] == sel && len(th.Reports) < maxThemeReports {
						th.Reports = append(th.Reports, rid)
					}
				}
			}
			best[g.Target.ID] = th
		}
		if p.subj == "incident" && p.target == "failure_mode" && cov == nil {
			n, err := v.visibleCount("incident")
			if err != nil {
				return nil, nil, err
			}
			cov = &Coverage{SubjectType: "incident", ThemeType: "failure_mode", Subjects: n}
		}
	}
	if cov != nil {
		cov.Covered = len(covered)
	}
	out := make([]GlobalTheme, 0, len(best))
	for _, t := range best {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b GlobalTheme) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Target.Name, b.Target.Name), cmp.Compare(a.Target.ID, b.Target.ID))
	})
	return out, cov, nil
}

// themeCore is what a global theme takes from its aggregate group: the
// members' names, and their document versions, each once.
type themeCore struct {
	names []string
	cites []citation
}

func newThemeCore(g groupJSON) themeCore {
	c := themeCore{names: make([]string, 0, len(g.Members)), cites: make([]citation, 0, len(g.Members))}
	seen := make(map[citation]struct{}, len(g.Members))
	for _, m := range g.Members {
		c.names = append(c.names, m.Name)
		for _, mc := range m.Citations {
			dv := citation{DocID: mc.DocID, Version: mc.Version}
			if _, dup := seen[dv]; !dup {
				seen[dv] = struct{}{}
				c.cites = append(c.cites, dv)
			}
		}
	}
	return c
}

// maxThemeMembers bounds the members a theme line names, maxThemeReports
// the reports it names as evidence; the count and the citations stay exact.
const (
	maxThemeMembers = 10
	maxThemeReports = 3
)

// themeLines renders the themes ("1. expired certificate (failure_mode): 3
// documents [INC-101, INC-112, INC-121]"), at most MaxAnswerFacts, then the
// coverage line, and adds the themes' entities to the response.
func (s *Service) themeLines(themes []GlobalTheme, cov *Coverage, resp *QueryResponse) string {
	var b strings.Builder
	for i, t := range themes {
		if i == s.cfg.MaxAnswerFacts {
			fmt.Fprintf(&b, "(%d more themes.)\n", len(themes)-i)
			break
		}
		names := t.Members
		more := ""
		if len(names) > maxThemeMembers {
			names, more = names[:maxThemeMembers], fmt.Sprintf(" and %d more", len(t.Members)-maxThemeMembers)
		}
		noun := "documents"
		if t.Count == 1 {
			noun = "document"
		}
		ev := ""
		if len(t.Reports) > 0 {
			ev = "; reports " + strings.Join(t.Reports, ", ")
		}
		fmt.Fprintf(&b, "%d. %s (%s): %d %s [%s%s] (%s %s%s)\n", i+1, t.Target.Name, t.Target.Type, t.Count, noun,
			strings.Join(names, ", "), more, t.SubjectType, t.Relation, ev)
		resp.Entities = append(resp.Entities, t.Target)
	}
	if cov != nil {
		noun := strings.ReplaceAll(cov.SubjectType, "_", " ") + "s"
		fmt.Fprintf(&b, "Coverage: %d of %d %s have a detected cause; %d have none.\n", cov.Covered, cov.Subjects, noun, cov.Subjects-cov.Covered)
	}
	return strings.TrimRight(b.String(), "\n")
}

// themeCitations are the citations of the themes' members (one per member
// document version), after those the response already has.
func themeCitations(resp *QueryResponse) []citation {
	if resp.Global == nil {
		return slices.Clone(resp.Citations)
	}
	return withThemeCitations(resp.Citations, resp.Global.Themes)
}

// withThemeCitations is cites followed by the themes' member citations
// not among them, each once.
func withThemeCitations(cites []citation, themes []GlobalTheme) []citation {
	// Sized once: the members of every theme cite thousands of documents.
	n := len(cites)
	for _, t := range themes {
		n += len(t.memberCites)
	}
	out := make([]citation, 0, n)
	seen := make(map[citation]struct{}, n)
	out = append(out, cites...)
	for _, c := range cites {
		seen[c] = struct{}{}
	}
	for _, t := range themes {
		for _, m := range t.memberCites {
			if _, dup := seen[m]; !dup {
				seen[m] = struct{}{}
				out = append(out, m)
			}
		}
	}
	return out
}

// reportBatches splits reports, in order, into batches of at most budget
// tokens each (a report larger than the budget makes a batch of its own).
func reportBatches(reports []store.Report, budget int, tokens func(store.Report) int) [][]store.Report {
	var out [][]store.Report
	for start := 0; start < len(reports); {
		used, end := 0, start
		for end < len(reports) {
			n := tokens(reports[end])
			if end > start && used+n > budget {
				break
			}
			used += n
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
	src, rest, ok := strings.Cut(id, "|")
	if !ok {
		return "", "", ""
	}
	rel, dst, ok = strings.Cut(rest, "|")
	if !ok {
		return "", "", ""
	}
	return src, rel, dst
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
