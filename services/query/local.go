package query

import (
	"cmp"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
)

// Query modes of POST /v1/query.
const (
	ModeBasic  = "basic"
	ModeLocal  = "local"
	ModeGlobal = "global"
	ModeDrift  = "drift"
	ModeAuto   = "auto"
)

// Context item kinds of a local answer.
const (
	KindEntity       = "entity"
	KindRelationship = "relationship"
	KindTextUnit     = "text_unit"
	KindReport       = "report"
)

// maxNgram is the longest word n-gram matched against entity names.
const maxNgram = 5

// QueryRequest is the body of POST /v1/query.
type QueryRequest struct {
	Mode         string `json:"mode"`
	Question     string `json:"question"`
	Level        *int   `json:"level,omitempty"`
	BudgetTokens *int   `json:"budget_tokens,omitempty"`

	// extractive keeps the LLM out of a local answer (a DRIFT step that
	// only needs its context, or one after the LLM failed).
	extractive bool
}

// ContextItem is one admitted piece of an answer's context.
type ContextItem struct {
	Kind      string     `json:"kind"`
	ID        string     `json:"id"`
	Text      string     `json:"text"`
	Citations []citation `json:"citations"`
	Tokens    int        `json:"tokens"`
	// Score is a text unit's relevance to the question: its ranking score
	// (word share, named document, closeness by vector search).
	Score float32 `json:"score,omitempty"`
	// Supports is, for a relationship stated by more readable documents
	// than it cites (maxRelationCites), how many there are.
	Supports int `json:"supports,omitempty"`
}

// QueryResponse is the answer of POST /v1/query.
type QueryResponse struct {
	Mode   string `json:"mode"`
	Answer string `json:"answer"`
	// Entities are the entities the question was matched to.
	Entities     []entityJSON       `json:"entities"`
	Context      []ContextItem      `json:"context"`
	Citations    []citation         `json:"citations"`
	BudgetTokens int                `json:"budget_tokens"`
	UsedTokens   int                `json:"used_tokens"`
	Timings      map[string]float64 `json:"timings"`
	// Global is set for global answers.
	Global *GlobalStats `json:"global,omitempty"`
	// RoutedTo is the mode an auto question was answered in, and Route why.
	RoutedTo string `json:"routed_to,omitempty"`
	Route    string `json:"route,omitempty"`
	// Mapping says how local search mapped the question to each entity.
	Mapping []MappedEntity `json:"mapping,omitempty"`
	// AnswerBy is "offline" (extractive) or "llm:<model>".
	AnswerBy string `json:"answer_by,omitempty"`
	// Drift is set for DRIFT answers: the primer and the follow-up tree.
	Drift *DriftTree `json:"drift,omitempty"`
	// Basic is set for basic answers.
	Basic *BasicStats `json:"basic,omitempty"`
}

// ApproxTokens estimates the tokens of text as 4/3 per word, rounded up:
// close enough for English prose under common BPE tokenizers, and it needs
// no tokenizer at query time.
func ApproxTokens(text string) int {
	return tokensOfWords(countFields(text))
}

// countFields is len(strings.Fields(s)) without building the slice.
func countFields(s string) int {
	n, inField := 0, false
	for _, r := range s {
		space := r < utf8.RuneSelf && asciiSpace[r] || r >= utf8.RuneSelf && unicode.IsSpace(r)
		if !space && !inField {
			n++
		}
		inField = !space
	}
	return n
}

// asciiSpace are the ASCII bytes strings.Fields splits at.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// tokensOfWords is ApproxTokens of a text of n words.
func tokensOfWords(n int) int { return (n*4 + 2) / 3 }

func (s *Service) query(v *view, w http.ResponseWriter, r *http.Request) (any, error) {
	began := time.Now()
	var req QueryRequest
	if err := httpapi.DecodeJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return nil, err
	}
	budget, err := s.validateQuery(&req)
	if err != nil {
		return nil, err
	}
	var resp QueryResponse
	mode, routed, why := req.Mode, "", ""
	if mode == ModeAuto {
		mode, why = route(req.Question)
		routed = mode
	}
	switch mode {
	case ModeLocal:
		resp, err = s.local(v, req, budget)
	case ModeGlobal:
		resp, err = s.global(v, req, budget)
	case ModeBasic:
		resp, err = s.basic(v, req, budget)
	case ModeDrift:
		resp, err = s.drift(v, req, budget)
	case ModeAggregate:
		resp, err = s.countAnswer(v, req, budget)
	default:
		return nil, httpapi.Errorf(http.StatusNotImplemented, "not_implemented", "mode %q is not implemented", req.Mode)
	}
	if err != nil {
		return nil, err
	}
	resp.RoutedTo, resp.Route = routed, why
	resp.Timings["total_ms"] = ms(time.Since(began))
	return resp, nil
}

// ModeAggregate is what auto routes counting questions to: exact counts
// over the graph, as GET /v1/aggregate computes them.
const ModeAggregate = "aggregate"

// globalCues are question shapes about the whole corpus rather than about
// named things: they route to global search.
var globalCues = []string{"recurring", "top ", "overall", "trend", "themes", "across all",
	"in general", "what are our", "which kinds", "patterns"}

// countRE finds counting questions: they route to exact aggregates.
var countRE = regexp.MustCompile(`(?i)\b(how many|number of|count of|counts? (of|per|by)|most common|most frequent|per (failure|incident|type|team|service|component|region|cause|mode|month|year)|grouped by|broken down by|by (failure|type|team|service|component|region|cause|mode|month|year))`)

// route picks a mode for an auto question by its shape and says why:
// counting questions go to exact aggregates, corpus-wide questions to
// global, everything else to local (which maps any question to entities
// and passages).
func route(question string) (mode, why string) {
	if m := countRE.FindString(question); m != "" {
		return ModeAggregate, fmt.Sprintf("counting question (%q): exact counts over the graph, as GET /v1/aggregate returns them", strings.ToLower(m))
	}
	q := " " + strings.ToLower(question) + " "
	for _, c := range globalCues {
		if strings.Contains(q, c) {
			return ModeGlobal, fmt.Sprintf("corpus-wide question (%q): map-reduce over community reports", strings.TrimSpace(c))
		}
	}
	return ModeLocal, "question about specific things: local search over the entities and passages it maps to"
}

// countAnswer answers a counting question with exact counts: the themes
// the question names (failure modes, teams, services, ...), counted over
// every visible document as /v1/aggregate counts them, with members and
// the coverage line.
func (s *Service) countAnswer(v *view, req QueryRequest, budget int) (QueryResponse, error) {
	began := time.Now()
	resp := QueryResponse{Mode: ModeAggregate, Entities: []entityJSON{}, Context: []ContextItem{}, Citations: []citation{},
		BudgetTokens: budget, Timings: map[string]float64{}, AnswerBy: "offline"}
	themes := themeTypes(req.Question)
	if len(themes) == 0 {
		themes = map[string]bool{"failure_mode": true}
	}
	reports, err := v.admittedReports()
	if err != nil {
		return QueryResponse{}, err
	}
	admitted := map[string]bool{}
	for cid := range reports {
		admitted[cid] = true
	}
	list, cov, err := v.exactThemes(themes, nil, reports, admitted)
	if err != nil {
		return QueryResponse{}, err
	}
	resp.Global = &GlobalStats{Selection: "aggregate", ThemeTypes: sortedKeys(themes), Themes: list, Coverage: cov}
	lines := s.themeLines(list, cov, &resp)
	resp.Citations = themeCitations(&resp)
	if lines == "" {
		resp.Answer = "Nothing you can read is linked to a " + strings.Join(sortedKeys(themes), " or ") + "."
	} else {
		resp.Answer = "Exact counts over the documents you can read:\n" + lines
	}
	resp.Timings["retrieval_ms"] = ms(time.Since(began))
	return resp, nil
}

// validateQuery checks req and returns the token budget to use.
func (s *Service) validateQuery(req *QueryRequest) (int, error) {
	switch req.Mode {
	case ModeBasic, ModeLocal, ModeGlobal, ModeDrift, ModeAuto:
	case "":
		return 0, httpapi.Errorf(http.StatusBadRequest, "missing_field", "mode is required: basic, local, global, drift or auto")
	default:
		return 0, httpapi.Errorf(http.StatusBadRequest, "invalid_mode", "mode %q is not one of basic, local, global, drift, auto", truncate(req.Mode, 32))
	}
	req.Question = strings.TrimSpace(req.Question)
	if req.Question == "" {
		return 0, httpapi.Errorf(http.StatusBadRequest, "missing_field", "question is required")
	}
	if len(req.Question) > s.cfg.MaxQuestionBytes {
		return 0, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "question is longer than %d bytes", s.cfg.MaxQuestionBytes)
	}
	if req.Level != nil && *req.Level < 0 {
		return 0, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "level must be >= 0, got %d", *req.Level)
	}
	budget := s.cfg.DefaultBudgetTokens
	if req.BudgetTokens != nil {
		budget = *req.BudgetTokens
		if budget < 1 || budget > s.cfg.MaxBudgetTokens {
			return 0, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "budget_tokens must be 1 to %d, got %d", s.cfg.MaxBudgetTokens, budget)
		}
	}
	return budget, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// isStopword reports words that never match an entity on their own: a
// one-word n-gram like "the" would otherwise seed any entity named so.
func isStopword(w string) bool {
	switch strings.ToLower(w) {
	case "a", "an", "and", "are", "by", "did", "do", "for", "how", "in", "is", "it", "of",
		"on", "or", "our", "the", "to", "was", "were", "what", "when", "which", "who", "why", "with":
		return true
	}
	return false
}

// questionWords splits a question into words with surrounding punctuation
// and a trailing possessive removed ("cert-manager's?" -> "cert-manager").
func questionWords(q string) []string {
	var out []string
	for _, w := range strings.Fields(q) {
		w = strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		for _, suf := range []string{"'s", "’s"} {
			w = strings.TrimSuffix(w, suf)
		}
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

// matchEntities finds the visible entities named in the question: word
// n-grams of up to maxNgram words, longest first, compared by
// normalisation key with entity keys and display names. Matched words are
// consumed so "Cert Manager" does not also seed an entity named "manager".
func (s *Service) matchEntities(v *view, question string) ([]visibleEntity, error) {
	ix, err := v.nameIndex()
	if err != nil {
		return nil, err
	}
	// named returns the visible entities whose id key or display name
	// has key, sorted by id: the index gives candidates, admission decides.
	named := func(key string) ([]visibleEntity, error) {
		cands, err := v.admitIDs(ix, ix.list(kindKey, key))
		if err != nil {
			return nil, err
		}
		out := cands[:0]
		for _, ve := range cands {
			if _, k, _ := cutID(ve.out.ID); k == key || s.names.key(ve.out.Name) == key {
				out = append(out, ve)
			}
		}
		return out, nil
	}
	words := questionWords(question)
	seen := make(map[string]bool)
	var seeds []visibleEntity
	for i := 0; i < len(words) && len(seeds) < s.cfg.MaxSeedEntities; {
		matched := 0
		for n := min(maxNgram, len(words)-i); n >= 1; n-- {
			if n == 1 && isStopword(words[i]) {
				continue
			}
			key := resolve.Key(strings.Join(words[i:i+n], " "))
			if len([]rune(key)) < 2 || len(ix.list(kindKey, key)) == 0 {
				continue
			}
			hits, err := named(key)
			if err != nil {
				return nil, err
			}
			if len(hits) == 0 {
				continue
			}
			for _, ve := range hits {
				if !seen[ve.out.ID] && len(seeds) < s.cfg.MaxSeedEntities {
					seen[ve.out.ID] = true
					seeds = append(seeds, ve)
				}
			}
			matched = n
			break
		}
		i += max(matched, 1)
	}
	return seeds, nil
}

// local answers a question as GraphRAG's local search does. The question
// is mapped to entities (names, close names and aliases, the entities of
// the passages that best answer it; see mapQuestion); the context mixes
// entities, their relationships, text units ranked by relevance to the
// question and the reports of the entities' communities, each section
// within its share of the token budget (Config.LocalShares), what a
// section leaves going to text units first. The answer quotes the
// sentences of those passages that answer the question, with citations.
func (s *Service) local(v *view, req QueryRequest, budget int) (QueryResponse, error) {
	began := time.Now()
	resp := QueryResponse{
		Mode: ModeLocal, Entities: []entityJSON{}, Context: []ContextItem{}, Citations: []citation{},
		BudgetTokens: budget, Timings: map[string]float64{},
	}
	rank, err := v.unitRanking(req.Question)
	if err != nil {
		return QueryResponse{}, err
	}
	priors := map[string]float64{}
	if s.cfg.Vectors != nil && s.cfg.LocalVectorUnits > 0 {
		// The passages closest to the question lift their units in the
		// ranking: they catch what the question's words miss.
		near, _, err := s.searchTextUnits(v, req.Question, 2*s.cfg.LocalVectorUnits, resp.Timings)
		if err != nil {
			return QueryResponse{}, err
		}
		for i, it := range near {
			priors[it.ID] = max(priors[it.ID], 1/(1+0.5*float64(i)))
		}
	}
	top, err := v.rankUnits(rank, priors, maxRankedUnits)
	if err != nil {
		return QueryResponse{}, err
	}
	resp.Timings["rank_units_ms"] = ms(time.Since(began))
	mapBegan := time.Now()
	seeds, how, err := s.mapQuestion(v, req.Question, top)
	if err != nil {
		return QueryResponse{}, err
	}
	resp.Timings["map_entities_ms"] = ms(time.Since(mapBegan))
	resp.Mapping = how
	if len(seeds) == 0 && len(top) == 0 {
		resp.Answer = "Nothing in the question matches an entity or a passage in the index that you can read."
		resp.Timings["retrieval_ms"] = ms(time.Since(began))
		return resp, nil
	}
	seedIDs := make(map[string]bool, len(seeds))
	for _, sd := range seeds {
		resp.Entities = append(resp.Entities, sd.out)
		seedIDs[sd.out.ID] = true
	}

	// entityItems are the seeds' items, then their neighbours'.
	var entityItems, relItems, unitItems, reportItems []ContextItem
	for _, sd := range seeds {
		it, err := entityItem(v, sd, s.entityItemLimit(budget))
		if err != nil {
			return QueryResponse{}, err
		}
		entityItems = append(entityItems, it)
	}

	sc := localScratches.Get().(*localScratch)
	defer sc.release()
	usedEdges, seenNeighbor := sc.usedEdges, sc.seenNeighbor
	neighbors := sc.neighbors[:0]
	unitRefs := make(map[citation]bool) // the units the first seed facts cite
	ranker := relationRanker{r: rank, names: &s.names, rels: map[string][]string{}}
	// A relationship is ranked and measured from its edge and names
	// (pending), its item holding its kind and tokens only until the
	// context takes it, when relRefs[i] completes relItems[i]
	// (relRef.item): a hub's hundreds of relationships are ranked and
	// measured, and few fit the budget. The seeds' relationships (pending)
	// are sorted by rank, the second ring's appended as they come.
	pending := sc.pending[:0]
	var relRefs []relRef
	relWords := relationWords{}
	// relTokens counts the relationship section's tokens: the second ring
	// is built only while the section holds less than the whole budget
	// (see the neighbour items below).
	relTokens := 0
	relationships := func(ids []string, ring2 bool) error {
		for _, id := range ids {
			for _, dir := range []store.Direction{store.Out, store.In} {
				if ring2 && relTokens > budget {
					return nil
				}
				es, _, err := s.visibleEdgesInto(v, id, dir, s.cfg.MaxEntityEdges, &sc.edges)
				if err != nil {
					return err
				}
				for _, ve := range es {
					e := ve.e
					eid := edgeID(e)
					if usedEdges[eid] {
						continue
					}
					usedEdges[eid] = true
					src, tgt := v.known(e.Source).out, v.known(e.Target).out
					ref := relRef{e: e, id: eid, src: src.Name, tgt: tgt.Name}
					tokens := relWords.tokens(src.Name, e.Relation, tgt.Name)
					relTokens += tokens
					if ring2 {
						relItems = append(relItems, ContextItem{Kind: KindRelationship, Tokens: tokens})
						relRefs = append(relRefs, ref)
						if relTokens > budget {
							return nil
						}
						continue
					}
					pending = append(pending, pendingRel{ref, tokens, ranker.rank(src.Name, e.Relation, tgt.Name)})
					if n := ve.neighbor.ID; !seedIDs[n] && !seenNeighbor[n] {
						seenNeighbor[n] = true
						neighbors = append(neighbors, n)
					}
				}
			}
		}
		return nil
	}
	// Relationships of the first seeds only: the mapping may list more,
	// but each seed's edges are a store read.
	ids := make([]string, 0, len(seeds))
	for i, sd := range seeds {
		if i == maxExpandedSeeds {
			break
		}
		ids = append(ids, sd.out.ID)
	}
	if err := relationships(ids, false); err != nil {
		return QueryResponse{}, err
	}
	// Stated relationships before co-occurrences and bare mentions, and
	// those the question's words touch first.
	// (Each item's rank computed once, not at every comparison.)
	slices.SortStableFunc(pending, func(a, b pendingRel) int { return cmp.Compare(a.rank, b.rank) })
	relItems = slices.Grow(sc.relItems[:0], len(pending)+len(pending)/4)[:len(pending)]
	relRefs = slices.Grow(sc.relRefs[:0], cap(relItems))[:len(pending)]
	for i, p := range pending {
		relItems[i], relRefs[i] = ContextItem{Kind: KindRelationship, Tokens: p.tokens}, p.ref
	}
	sc.pending = pending
	pending = nil
	// The scratch keeps what ring 2 grows them to.
	defer func() { sc.relItems, sc.relRefs, sc.neighbors = relItems, relRefs, neighbors }()
	// Text units: the ranked passages, then the units the seeds'
	// relationships cite, by their relevance to the question.
	type unitKey struct{ doc, unit string }
	have := make(map[unitKey]bool, len(top))
	unitItems = appendUnitItems(make([]ContextItem, 0, len(top)+maxRelationUnits), top)
	for _, u := range top {
		have[unitKey{u.docID, u.unit}] = true
	}
	// The units the relationships cite, in the relationships' rank order,
	// until maxRelationUnits distinct ones besides the ranked passages: a
	// hub seed's hundreds of relationships cite thousands of units, each
	// to be scored against the question, of which a handful fit the
	// budget.
collectUnits:
	for i := range relItems {
		// Every readable support's units, read off the edge: the item's
		// own citations are written only if the context takes it.
		for _, f := range relRefs[i].e.Supports {
			if len(f.TextUnits) == 0 {
				continue
			}
			ok, err := v.adm.Direct(f.DocID)
			if err != nil {
				return QueryResponse{}, err
			}
			if !ok {
				continue
			}
			for _, tu := range f.TextUnits {
				if have[unitKey{f.DocID, tu}] {
					continue
				}
				c := citation{DocID: f.DocID, Version: f.Version, TextUnit: tu}
				if _, ok := unitRefs[c]; !ok && len(unitRefs) >= maxRelationUnits {
					break collectUnits
				}
				unitRefs[c] = true
			}
		}
	}
	extra := make([]rankedUnit, 0, len(unitRefs))
	for c := range unitRefs {
		u, err := v.unitAt(c)
		if err != nil {
			return QueryResponse{}, err
		}
		if u == nil {
			continue
		}
		extra = append(extra, rankedUnit{lexUnit: lexUnit{docID: c.DocID, version: c.Version, unit: c.TextUnit, text: u.text, tokens: u.tokens},
			score: rank.share(u.words.has)})
	}
	slices.SortFunc(extra, func(a, b rankedUnit) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.docID, b.docID), cmp.Compare(a.unit, b.unit))
	})
	unitItems = appendUnitItems(unitItems, extra)
	if reportItems, err = s.reportItems(v, seedIDs, req.Level); err != nil {
		return QueryResponse{}, err
	}
	// Neighbour items, in order, until the entity section holds more than
	// the whole budget: past that, an item could only be taken where a
	// larger one before it did not fit (a hub seed has hundreds of
	// neighbours, each item read from its fragments).
	sectionTokens := 0
	for _, it := range entityItems {
		sectionTokens += it.Tokens
	}
	// (Room for the seeds and a budget's worth of neighbours at once.)
	entityItems = slices.Grow(entityItems, min(len(neighbors), maxNeighborItems))
	for _, n := range neighbors {
		if sectionTokens > budget {
			break
		}
		it, err := entityItem(v, v.known(n), s.entityItemLimit(budget))
		if err != nil {
			return QueryResponse{}, err
		}
		entityItems = append(entityItems, it)
		sectionTokens += it.Tokens
	}
	// The second ring comes from the closest neighbours only: a hub seed
	// would otherwise pull in the whole graph.
	if err := relationships(neighbors[:min(len(neighbors), maxRing2Neighbors)], true); err != nil {
		return QueryResponse{}, err
	}
	resp.Timings["retrieval_ms"] = ms(time.Since(began))

	sections := [4][]ContextItem{entityItems, relItems, unitItems, reportItems}
	taken, used := s.takeWithinBudget(budget, sections)
	// Only the relationships taken are written out and cited, and only the
	// reports taken get a citation list of their own (a report high in the
	// hierarchy cites thousands, and a hub's seeds are in many such
	// communities): the others share the kept report's, never written.
	for _, i := range taken[1] {
		if err := relRefs[i].item(v, &relItems[i]); err != nil {
			return QueryResponse{}, err
		}
	}
	for _, i := range taken[3] {
		reportItems[i].Citations = slices.Clone(reportItems[i].Citations)
	}
	resp.Context, resp.UsedTokens = gatherTaken(sections, taken), used
	// The passages the answer quotes are cited first, then the rest of
	// the context.
	// The set and the list are made for every citation at once: a hub's
	// relationships cite thousands of units, and growing both through
	// every size on the way was as much garbage again.
	n := 0
	for _, it := range resp.Context {
		n += len(it.Citations)
	}
	seenCite := sc.seenCite
	resp.Citations = make([]citation, 0, n)
	for _, passages := range []bool{true, false} {
		for _, it := range resp.Context {
			if (it.Kind == KindTextUnit) != passages {
				continue
			}
			for _, c := range it.Citations {
				if _, dup := seenCite[c]; !dup {
					seenCite[c] = struct{}{}
					resp.Citations = append(resp.Citations, c)
				}
			}
		}
	}
	answerBegan := time.Now()
	titles, err := v.docTitles()
	if err != nil {
		return QueryResponse{}, err
	}
	if s.cfg.LLM != nil && !req.extractive {
		if err := s.llmAnswer(v, "local_answer", req.Question, &resp, titles); err == nil {
			resp.Timings["answer_ms"] = ms(time.Since(answerBegan))
			return resp, nil
		} else if v.ctx.Err() != nil {
			return QueryResponse{}, err
		} else {
			s.llmFallbacks.Inc()
			s.log.Warn("LLM answer failed, answering extractively", "tenant", v.tenant, "error", err)
			resp.AnswerBy = "offline (LLM answer unusable)"
		}
	}
	resp.Answer = s.extractiveAnswer(req.Question, rank, resp.Entities, resp.Context, titles)
	if resp.AnswerBy == "" {
		resp.AnswerBy = "offline"
	}
	resp.Timings["answer_ms"] = ms(time.Since(answerBegan))
	return resp, nil
}

// pendingRel is a relationship local search has ranked and measured but
// not yet written (see relRef).
type pendingRel struct {
	ref    relRef
	tokens int
	rank   float64
}

// localScratch is the working memory a local request gathers and ranks
// relationships in, reused by later requests (localScratches): a hub
// seed's relationships are ranked by the thousand, and these slices and
// sets, made afresh, were most of a request's garbage. Nothing a response
// holds points into it: the context taken is copied out (gatherTaken).
type localScratch struct {
	pending      []pendingRel
	relItems     []ContextItem
	relRefs      []relRef
	neighbors    []string
	usedEdges    map[string]bool
	seenNeighbor map[string]bool
	seenCite     map[citation]struct{}
	edges        edgeScratch
}

var localScratches = sync.Pool{New: func() any {
	return &localScratch{usedEdges: map[string]bool{}, seenNeighbor: map[string]bool{}, seenCite: map[citation]struct{}{}}
}}

// maxNeighborItems is how many neighbour items local search makes room
// for at once: a 4,000-token budget takes a few dozen.
const maxNeighborItems = 64

// maxScratchItems bounds what a scratch keeps for the next request: one
// that grew past it (a request far larger than usual) is left to the
// collector rather than kept at that size.
const maxScratchItems = 1 << 14

// release empties sc (so it keeps nothing alive) and returns it to the
// pool, unless it grew past maxScratchItems.
func (sc *localScratch) release() {
	if cap(sc.relItems) > maxScratchItems || len(sc.usedEdges) > maxScratchItems || cap(sc.edges.out) > maxScratchItems ||
		len(sc.seenCite) > maxScratchItems {
		return
	}
	clear(sc.pending[:cap(sc.pending)])
	clear(sc.relItems[:cap(sc.relItems)])
	clear(sc.relRefs[:cap(sc.relRefs)])
	clear(sc.neighbors[:cap(sc.neighbors)])
	clear(sc.edges.out[:cap(sc.edges.out)])
	clear(sc.usedEdges)
	clear(sc.seenNeighbor)
	clear(sc.seenCite)
	sc.pending, sc.relItems, sc.relRefs, sc.neighbors = sc.pending[:0], sc.relItems[:0], sc.relRefs[:0], sc.neighbors[:0]
	sc.edges.out = sc.edges.out[:0]
	localScratches.Put(sc)
}

// maxRankedUnits is how many ranked passages local search considers;
// maxRing2Neighbors how many neighbours lend their own relationships.
// maxExpandedSeeds how many seeds lend their relationships.
const (
	maxRankedUnits    = 12
	maxRelationUnits  = 64
	maxRing2Neighbors = 5
	maxExpandedSeeds  = 10
)

// relationRanker ranks relationships (rank) from their ends and
// relation, with the words of each name split once for every request
// (names, the service's cache: a hub's hundreds of neighbours are named
// again at every question about it) and of each relation phrase once per
// request: the words of relationText's sentence are those of its parts,
// since every part is set off by spaces.
type relationRanker struct {
	r     unitRanking
	names *nameWordCache
	rels  map[string][]string // by relation: its phrase's own words
}

// rank orders relationships: stated ones before co-occurrences and
// mentions; among equals, those sharing more of the question's words
// (lower first). It is the rank of the sentence relationText(src, rel,
// tgt) writes (the oracle relationRank of the tests).
func (rr *relationRanker) rank(src, rel, tgt string) float64 {
	base := 0.0
	switch rel {
	case "mentions", "co_occurs":
		base = 10
	}
	rw, ok := rr.rels[rel]
	if !ok {
		phrase, known := relationPhrases[rel]
		if !known {
			phrase = strings.ReplaceAll(rel, "_", " ")
		}
		rw = wordsOf(strings.ReplaceAll(phrase, "%s", " "))
		rr.rels[rel] = rw
	}
	ws := [3][]string{rr.names.allWords(src), rw, rr.names.allWords(tgt)}
	return base - rr.r.share(func(w string) bool {
		return slices.Contains(ws[0], w) || slices.Contains(ws[1], w) || slices.Contains(ws[2], w)
	})
}

// takeWithinBudget chooses the items of the four sections (entities,
// relationships, text units, reports) the context takes, in order, each
// section within its share of the budget; what the shares leave goes to
// text units first, then relationships, entities and reports. An item too
// large for what is left is skipped so smaller ones after it can still
// fit. It returns the indices taken of each section, ascending (the
// context lists the sections in that order, see gatherTaken), and the
// tokens they use. It reads only the items' tokens, so an item may be
// completed once taken.
func (s *Service) takeWithinBudget(budget int, sections [4][]ContextItem) ([4][]int, int) {
	sh := s.cfg.LocalShares
	shares := [4]float64{sh.Entities, sh.Relationships, sh.TextUnits, sh.Reports}
	taken := [4][]int{} // indices into sections
	used := [4][]bool{}
	for sec := range sections {
		used[sec] = make([]bool, len(sections[sec]))
	}
	left := budget
	take := func(sec int, limit int) {
		for i, it := range sections[sec] {
			if used[sec][i] || it.Tokens > limit || it.Tokens > left {
				continue
			}
			used[sec][i] = true
			limit -= it.Tokens
			left -= it.Tokens
			taken[sec] = append(taken[sec], i)
		}
	}
	for sec := range sections {
		take(sec, int(shares[sec]*float64(budget)))
	}
	for _, sec := range []int{2, 1, 0, 3} {
		take(sec, left)
	}
	for sec := range taken {
		slices.Sort(taken[sec]) // each section in its rank order
	}
	return taken, budget - left
}

// gatherTaken lists the taken items of the sections, in order.
func gatherTaken(sections [4][]ContextItem, taken [4][]int) []ContextItem {
	n := 0
	for sec := range taken {
		n += len(taken[sec])
	}
	out := make([]ContextItem, 0, n)
	for sec := range taken {
		for _, i := range taken[sec] {
			out = append(out, sections[sec][i])
		}
	}
	return out
}

// relRef is what a relationship item of local search is made from once
// it is taken into the context (until then the item holds its tokens and
// maybe its citations only).
type relRef struct {
	e        *store.Edge
	id       string // the edge's id
	src, tgt string // the ends' names as the caller sees them
}

// item completes it, the relationship's item: its id, its sentence and,
// unless already built, its citations.
func (r relRef) item(v *view, it *ContextItem) error {
	it.ID = r.id
	it.Text = relationText(r.src, r.e.Relation, r.tgt)
	c, docs, err := v.someCitations(*r.e, maxRelationCites)
	if err != nil {
		return err
	}
	it.Citations = c
	if docs > maxRelationCites {
		it.Supports = docs
	}
	return nil
}

// maxRelationCites bounds the documents a relationship item cites: a hub's
// co-occurrences are supported by hundreds of documents, and listing them
// all made the answer's fact lines and the response unreadable. The item
// says how many there are (ContextItem.Supports); the relationship itself
// (GET /v1/entities, /v1/paths) cites them all.
const maxRelationCites = 8

// edgeID is e's id: the stored one (no string built per edge) when it is
// the id its ends and relation make, as the store writes it.
func edgeID(e *store.Edge) string {
	if n := len(e.Source); len(e.ID) == n+len(e.Relation)+len(e.Target)+2 && strings.HasPrefix(e.ID, e.Source) &&
		e.ID[n] == '|' && strings.HasPrefix(e.ID[n+1:], e.Relation) && e.ID[n+1+len(e.Relation)] == '|' &&
		strings.HasSuffix(e.ID, e.Target) {
		return e.ID
	}
	return store.EdgeID(e.Source, e.Relation, e.Target)
}

// relationWords counts the words of relationText's sentences without
// writing them: a sentence's words are its names' and its phrase's, as
// every part is set off by spaces. The phrases' counts are kept by
// relation.
type relationWords map[string]int

// tokens is ApproxTokens(relationText(src, rel, tgt)).
func (rw relationWords) tokens(src, rel, tgt string) int {
	n, ok := rw[rel]
	if !ok {
		n = countFields(relationText("", rel, ""))
		rw[rel] = n
	}
	return tokensOfWords(countFields(src) + n + countFields(tgt))
}

// entityItem describes a visible entity from its readable fragments only,
// in at most limit tokens: its name and type, then the readable fragments'
// descriptions in order (as v.descriptions gives them) while they fit. An
// entity described by thousands of documents is not read whole to be
// dropped: its first descriptions stand for it. Without a description it
// cites its first readable mentions (until it holds maxMentionCites
// citations).
func entityItem(v *view, ve visibleEntity, limit int) (ContextItem, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s).", ve.out.Name, strings.ReplaceAll(ve.out.Type, "_", " "))
	words := countFields(b.String())
	var cites []citation
	described := false
	// Each distinct description is written once, citing at most
	// maxMentionCites of the fragments that state it: a hub's fragments
	// mostly repeat one extractor description ("Kafka (message broker)"),
	// and written once per document they filled the item with copies.
	d := ve.descs
	if d == nil {
		d = newDescIndex(ve.sources)
	}
	stated := make([]int, len(d.words)) // by description: fragments cited for it
	full := 0                           // descriptions cited maxMentionCites times
	for i, f := range ve.sources {
		k := d.of[i]
		if k < 0 || stated[k] >= maxMentionCites {
			continue
		}
		ok, err := v.adm.Direct(f.DocID)
		if err != nil {
			return ContextItem{}, err
		}
		if !ok {
			continue
		}
		described = true
		if stated[k] == 0 {
			n := d.words[k]
			if tokensOfWords(words+n) > limit {
				break
			}
			words += n
			b.WriteString(" ")
			b.WriteString(f.Description)
		}
		stated[k]++
		cites = appendFragmentCitations(cites, f)
		if stated[k] == maxMentionCites {
			if full++; full == len(d.words) {
				break // every later fragment would be passed over
			}
		}
	}
	text := b.String()
	if !described {
		// No description: cite the readable mentions that make it visible.
		for _, f := range ve.sources {
			if len(cites) >= maxMentionCites {
				break
			}
			ok, err := v.adm.Direct(f.DocID)
			if err != nil {
				return ContextItem{}, err
			}
			if ok {
				cites = appendFragmentCitations(cites, f)
			}
		}
	}
	return ContextItem{Kind: KindEntity, ID: ve.out.ID, Text: text, Citations: cites, Tokens: ApproxTokens(text)}, nil
}

// maxMentionCites bounds the mentions an entity item without a description
// cites; minEntityItemTokens is the least an entity item may hold whatever
// the entities' share of the budget.
const (
	maxMentionCites     = 8
	minEntityItemTokens = 64
)

// entityItemLimit is how large one entity item may grow: the entities'
// share of the budget (an item larger could only be taken from what the
// other sections leave).
func (s *Service) entityItemLimit(budget int) int {
	return min(budget, max(int(s.cfg.LocalShares.Entities*float64(budget)), minEntityItemTokens))
}

// reportItems returns the admitted reports of admitted communities holding a
// seed, those covering more seeds first, then by rating. Their citations
// are the reports' sources themselves, shared with the kept reports: the
// caller copies those of the items it takes. It reads only the communities
// of the seeds (the member index) and their reports.
func (s *Service) reportItems(v *view, seeds map[string]bool, level *int) ([]ContextItem, error) {
	ids := make([]string, 0, len(seeds))
	for id := range seeds {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	cs, err := v.admittedCommunitiesOf(ids)
	if err != nil {
		return nil, err
	}
	if level != nil {
		cs = slices.DeleteFunc(cs, func(c store.Community) bool { return c.Level != *level })
	}
	reports, err := v.admittedReportsOf(cs)
	if err != nil {
		return nil, err
	}
	type ranked struct {
		rep   store.Report
		seeds int
	}
	var rs []ranked
	for _, c := range cs {
		n := 0
		for _, m := range c.Members {
			if seeds[m] {
				n++
			}
		}
		if rep, ok := reports[c.ID]; ok && n > 0 {
			rs = append(rs, ranked{rep, n})
		}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(b.seeds, a.seeds), cmp.Compare(b.rep.Rating, a.rep.Rating), cmp.Compare(a.rep.ID, b.rep.ID))
	})
	out := make([]ContextItem, 0, len(rs))
	for _, r := range rs {
		text := r.rep.Title + ": " + r.rep.Summary
		for _, f := range r.rep.Findings {
			text += " " + f.Summary
		}
		out = append(out, ContextItem{Kind: KindReport, ID: r.rep.ID, Text: text, Citations: r.rep.Sources, Tokens: ApproxTokens(text)})
	}
	return out, nil
}

// extractiveAnswer answers from the context without generating text: the
// sentences of its passages that answer the question, each with its
// citation, then the relationships of the mapped entities read as words,
// then the documents by title and id. E.g. "The signing certificate
// expired at midnight [INC-101 v1 #u1]" / "INC-101 failed because of
// expired certificate [INC-101 v1]".
func (s *Service) extractiveAnswer(question string, rank unitRanking, seeds []entityJSON, items []ContextItem, titles map[string]string) string {
	var b strings.Builder
	names := make([]string, 0, len(seeds))
	for _, e := range seeds {
		if !documentTypes[e.Type] {
			names = append(names, e.Name)
		}
	}
	for _, ss := range selectSentences(question, rank, names, items, maxAnswerSentences) {
		fmt.Fprintf(&b, "%s %s\n", quote(ss.text), unitTag(items[ss.item].Citations))
	}
	if len(seeds) > 0 {
		shown := make([]string, 0, len(seeds))
		for i, e := range seeds {
			if i == 6 {
				shown = append(shown, fmt.Sprintf("and %d more", len(seeds)-6))
				break
			}
			shown = append(shown, fmt.Sprintf("%s (%s)", e.Name, strings.ReplaceAll(e.Type, "_", " ")))
		}
		fmt.Fprintf(&b, "The question maps to %s.\n", strings.Join(shown, ", "))
	}
	facts, more := 0, 0
	for _, it := range items {
		if it.Kind != KindRelationship {
			continue
		}
		if facts >= s.cfg.MaxAnswerFacts/2 {
			more++
			continue
		}
		facts++
		b.WriteString(it.Text)
		b.WriteByte(' ')
		writeCiteTag(&b, it.Citations)
		if it.Supports > 0 {
			fmt.Fprintf(&b, " (stated in %d documents you can read)", it.Supports)
		}
		b.WriteString(".\n")
	}
	if more > 0 {
		fmt.Fprintf(&b, "(%d more facts in the context.)\n", more)
	}
	for _, it := range items {
		if it.Kind == KindReport {
			b.WriteString("Community report ")
			b.WriteString(truncate(it.Text, 300))
			b.WriteByte(' ')
			writeCiteTag(&b, it.Citations)
			b.WriteString(".\n")
			break
		}
	}
	var cites []citation
	for _, it := range items {
		if it.Kind == KindTextUnit {
			cites = append(cites, it.Citations...)
		}
	}
	if line := sourcesLine(cites, titles, 5); line != "" {
		b.WriteString(line)
	}
	if b.Len() == 0 {
		return "No passage or relationship you can read answers this question."
	}
	return strings.TrimRight(b.String(), "\n")
}

// writeCiteTag writes citations by document version: "[INC-101 v1;
// INC-112 v2]", each document version once, in first-cited order,
// straight into b. A hub's relationship cites thousands of units, in
// document order (an edge's supports are sorted by document): then a
// repeat is the citation before, and no set is needed.
func writeCiteTag(b *strings.Builder, cs []citation) {
	type docVersion struct {
		doc     string
		version int64
	}
	sorted := slices.IsSortedFunc(cs, func(x, y citation) int {
		return cmp.Or(strings.Compare(x.DocID, y.DocID), cmp.Compare(x.Version, y.Version))
	})
	var seen map[docVersion]struct{}
	if !sorted {
		seen = make(map[docVersion]struct{}, len(cs))
	}
	var num [20]byte
	b.WriteByte('[')
	for i, c := range cs {
		k := docVersion{c.DocID, c.Version}
		if sorted {
			if i > 0 && c.DocID == cs[i-1].DocID && c.Version == cs[i-1].Version {
				continue
			}
		} else {
			if _, dup := seen[k]; dup {
				continue
			}
			seen[k] = struct{}{}
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(c.DocID)
		b.WriteString(" v")
		b.Write(strconv.AppendInt(num[:0], c.Version, 10))
	}
	b.WriteByte(']')
}
