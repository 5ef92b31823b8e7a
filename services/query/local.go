package query

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

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
}

// ContextItem is one admitted piece of an answer's context.
type ContextItem struct {
	Kind      string     `json:"kind"`
	ID        string     `json:"id"`
	Text      string     `json:"text"`
	Citations []citation `json:"citations"`
	Tokens    int        `json:"tokens"`
	// Score is the cosine similarity of an item found by vector search.
	Score float32 `json:"score,omitempty"`
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
	// RoutedTo is the mode an auto question was answered in.
	RoutedTo string `json:"routed_to,omitempty"`
	// Basic is set for basic answers.
	Basic *BasicStats `json:"basic,omitempty"`
}

// ApproxTokens estimates the tokens of text as 4/3 per word, rounded up:
// close enough for English prose under common BPE tokenizers, and it needs
// no tokenizer at query time.
func ApproxTokens(text string) int {
	return (len(strings.Fields(text))*4 + 2) / 3
}

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
	mode, routed := req.Mode, ""
	if mode == ModeAuto {
		if mode, err = s.route(v, req.Question); err != nil {
			return nil, err
		}
		routed = mode
	}
	switch mode {
	case ModeLocal:
		resp, err = s.local(v, req, budget)
	case ModeGlobal:
		resp, err = s.global(v, req, budget)
	case ModeBasic:
		resp, err = s.basic(v, req, budget)
	default:
		return nil, httpapi.Errorf(http.StatusNotImplemented, "not_implemented", "mode %q is not implemented yet; use basic, local or global", req.Mode)
	}
	if err != nil {
		return nil, err
	}
	resp.RoutedTo = routed
	resp.Timings["total_ms"] = ms(time.Since(began))
	return resp, nil
}

// globalCues are question shapes about the whole corpus rather than about
// named things: they route to global search.
var globalCues = []string{"recurring", "most common", "top ", "overall", "trend", "themes", "across all",
	"in general", "what are our", "which kinds", "patterns"}

// route picks a mode for an auto question by its shape: corpus-wide
// questions go to global; questions naming entities the caller can see go
// to local; anything else goes to basic when a vector index is configured,
// else local (which then says nothing matched).
func (s *Service) route(v *view, question string) (string, error) {
	q := " " + strings.ToLower(question) + " "
	for _, c := range globalCues {
		if strings.Contains(q, c) {
			return ModeGlobal, nil
		}
	}
	seeds, err := s.matchEntities(v, question)
	if err != nil {
		return "", err
	}
	if len(seeds) == 0 && s.cfg.Vectors != nil && s.cfg.Embedder != nil {
		return ModeBasic, nil
	}
	return ModeLocal, nil
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
	all, err := v.allEntities()
	if err != nil {
		return nil, err
	}
	index := make(map[string][]visibleEntity)
	for _, ve := range all {
		_, k, _ := cutID(ve.out.ID)
		index[k] = append(index[k], ve)
		if nk := resolve.Key(ve.out.Name); nk != k {
			index[nk] = append(index[nk], ve)
		}
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
			if len([]rune(key)) < 2 || len(index[key]) == 0 {
				continue
			}
			for _, ve := range index[key] {
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

// local answers a question from the graph around the entities it names.
// Candidates come in tiers, most specific first: the matched entities, their
// relationships, the text units supporting those, the reports of their
// communities, the neighbours, then the neighbours' relationships. Items are
// taken tier by tier while they fit the token budget; an item too large for
// what is left is skipped so smaller ones after it can still fit.
func (s *Service) local(v *view, req QueryRequest, budget int) (QueryResponse, error) {
	began := time.Now()
	resp := QueryResponse{
		Mode: ModeLocal, Entities: []entityJSON{}, Context: []ContextItem{}, Citations: []citation{},
		BudgetTokens: budget, Timings: map[string]float64{},
	}
	seeds, err := s.matchEntities(v, req.Question)
	if err != nil {
		return QueryResponse{}, err
	}
	if len(seeds) == 0 {
		resp.Answer = "Nothing in the question matches an entity in the index that you can read."
		resp.Timings["retrieval_ms"] = ms(time.Since(began))
		return resp, nil
	}
	seedIDs := make(map[string]bool, len(seeds))
	for _, sd := range seeds {
		resp.Entities = append(resp.Entities, sd.out)
		seedIDs[sd.out.ID] = true
	}

	var seedItems, relItems, unitItems, reportItems, neighborItems, ring2Items []ContextItem
	for _, sd := range seeds {
		it, err := entityItem(v, sd)
		if err != nil {
			return QueryResponse{}, err
		}
		seedItems = append(seedItems, it)
	}

	usedEdges := make(map[string]bool)
	var neighbors []string
	seenNeighbor := make(map[string]bool)
	unitRefs := make(map[citation]int) // (doc, version, unit) -> how many seed facts cite it
	relationships := func(ids []string, ring2 bool) error {
		for _, id := range ids {
			for _, dir := range []store.Direction{store.Out, store.In} {
				es, _, err := s.neighborEdges(v, id, dir, s.cfg.MaxEntityEdges)
				if err != nil {
					return err
				}
				for _, e := range es {
					eid := store.EdgeID(e.Source, e.Relation, e.Target)
					if usedEdges[eid] {
						continue
					}
					usedEdges[eid] = true
					src, tgt := v.entityCache[e.Source].out, v.entityCache[e.Target].out
					text := fmt.Sprintf("%s %s %s", src.Name, strings.ReplaceAll(e.Relation, "_", " "), tgt.Name)
					it := ContextItem{Kind: KindRelationship, ID: eid, Text: text, Citations: e.Citations, Tokens: ApproxTokens(text)}
					if ring2 {
						ring2Items = append(ring2Items, it)
						continue
					}
					relItems = append(relItems, it)
					for _, c := range e.Citations {
						if c.TextUnit != "" {
							unitRefs[c]++
						}
					}
					if n := e.Neighbor.ID; !seedIDs[n] && !seenNeighbor[n] {
						seenNeighbor[n] = true
						neighbors = append(neighbors, n)
					}
				}
			}
		}
		return nil
	}
	ids := make([]string, len(seeds))
	for i, sd := range seeds {
		ids[i] = sd.out.ID
		// The seeds' own mentions are evidence too, weighted below the
		// relationships that connect them.
		for _, f := range sd.raw.Sources {
			if ok, err := v.adm.Direct(f.DocID); err != nil {
				return QueryResponse{}, err
			} else if ok {
				for _, tu := range f.TextUnits {
					c := citation{DocID: f.DocID, Version: f.Version, TextUnit: tu}
					if _, dup := unitRefs[c]; !dup {
						unitRefs[c] = 0
					}
				}
			}
		}
	}
	if err := relationships(ids, false); err != nil {
		return QueryResponse{}, err
	}
	if unitItems, err = s.textUnitItems(v, unitRefs); err != nil {
		return QueryResponse{}, err
	}
	if s.cfg.Vectors != nil && s.cfg.LocalVectorUnits > 0 {
		// The passages closest to the question, after the graph's own:
		// they catch what extraction missed. Admitted like basic mode's.
		near, _, _, err := s.searchTextUnits(v, req.Question, s.cfg.LocalVectorUnits, resp.Timings)
		if err != nil {
			return QueryResponse{}, err
		}
		have := make(map[string]bool, len(unitItems))
		for _, it := range unitItems {
			have[it.ID] = true
		}
		for _, it := range near {
			if !have[it.ID] {
				unitItems = append(unitItems, it)
			}
		}
	}
	if reportItems, err = s.reportItems(v, seedIDs, req.Level); err != nil {
		return QueryResponse{}, err
	}
	for _, n := range neighbors {
		it, err := entityItem(v, v.entityCache[n])
		if err != nil {
			return QueryResponse{}, err
		}
		neighborItems = append(neighborItems, it)
	}
	if err := relationships(neighbors, true); err != nil {
		return QueryResponse{}, err
	}
	resp.Timings["retrieval_ms"] = ms(time.Since(began))

	left := budget
	for _, tier := range [][]ContextItem{seedItems, relItems, unitItems, reportItems, neighborItems, ring2Items} {
		for _, it := range tier {
			if it.Tokens > left {
				continue
			}
			left -= it.Tokens
			resp.Context = append(resp.Context, it)
		}
	}
	resp.UsedTokens = budget - left
	seenCite := make(map[citation]bool)
	for _, it := range resp.Context {
		for _, c := range it.Citations {
			if !seenCite[c] {
				seenCite[c] = true
				resp.Citations = append(resp.Citations, c)
			}
		}
	}
	resp.Answer = s.extractiveAnswer(resp.Entities, resp.Context)
	return resp, nil
}

// entityItem describes a visible entity from its readable fragments only.
func entityItem(v *view, ve visibleEntity) (ContextItem, error) {
	ds, err := v.descriptions(ve.raw)
	if err != nil {
		return ContextItem{}, err
	}
	text := fmt.Sprintf("%s (%s).", ve.out.Name, strings.ReplaceAll(ve.out.Type, "_", " "))
	var cites []citation
	for _, d := range ds {
		text += " " + d.Text
		cites = append(cites, d.Citations...)
	}
	if len(cites) == 0 {
		// No description: cite the readable mentions that make it visible.
		for _, f := range ve.raw.Sources {
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

// textUnitItems loads the cited text units, most cited first. Only units of
// readable documents reach here (citations are admitted), and a unit is only
// shown if the document's applied version is the cited one.
func (s *Service) textUnitItems(v *view, refs map[citation]int) ([]ContextItem, error) {
	keys := make([]citation, 0, len(refs))
	for c := range refs {
		keys = append(keys, c)
	}
	slices.SortFunc(keys, func(a, b citation) int {
		return cmp.Or(cmp.Compare(refs[b], refs[a]), cmp.Compare(a.DocID, b.DocID), cmp.Compare(a.TextUnit, b.TextUnit))
	})
	records := make(map[string]*store.SourceRecord)
	var out []ContextItem
	for _, c := range keys {
		ok, err := v.adm.Direct(c.DocID)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		rec, loaded := records[c.DocID]
		if !loaded {
			r, err := s.st.Source(v.ctx, v.tenant, c.DocID)
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return nil, fmt.Errorf("reading source %q: %w", c.DocID, err)
			default:
				rec = &r
			}
			records[c.DocID] = rec
		}
		if rec == nil || rec.Deleted || rec.Version != c.Version {
			continue
		}
		for _, tu := range rec.TextUnits {
			if tu.ID == c.TextUnit {
				out = append(out, ContextItem{Kind: KindTextUnit, ID: c.DocID + "#" + tu.ID, Text: tu.Text, Citations: []citation{c}, Tokens: ApproxTokens(tu.Text)})
				break
			}
		}
	}
	return out, nil
}

// reportItems returns the admitted reports of admitted communities holding a
// seed, those covering more seeds first, then by rating.
func (s *Service) reportItems(v *view, seeds map[string]bool, level *int) ([]ContextItem, error) {
	cs, err := v.admittedCommunities()
	if err != nil {
		return nil, err
	}
	reports, err := v.admittedReports()
	if err != nil {
		return nil, err
	}
	type ranked struct {
		rep   store.Report
		seeds int
	}
	var rs []ranked
	for _, c := range cs {
		if level != nil && c.Level != *level {
			continue
		}
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
		cites := slices.Clone(r.rep.Sources)
		out = append(out, ContextItem{Kind: KindReport, ID: r.rep.ID, Text: text, Citations: cites, Tokens: ApproxTokens(text)})
	}
	return out, nil
}

// extractiveAnswer lists the facts of the context as sentences with their
// sources, e.g. "INC-101 involved cert-manager [INC-101 v1]." No text is
// generated that the context does not hold.
func (s *Service) extractiveAnswer(seeds []entityJSON, items []ContextItem) string {
	var b strings.Builder
	names := make([]string, len(seeds))
	for i, e := range seeds {
		names[i] = fmt.Sprintf("%s (%s)", e.Name, e.Type)
	}
	fmt.Fprintf(&b, "The question matches %s.", strings.Join(names, ", "))
	facts, more := 0, 0
	for _, it := range items {
		if it.Kind != KindRelationship {
			continue
		}
		if facts >= s.cfg.MaxAnswerFacts {
			more++
			continue
		}
		facts++
		fmt.Fprintf(&b, "\n%s %s.", it.Text, citeTag(it.Citations))
	}
	if facts == 0 {
		b.WriteString("\nNo relationship of these entities is visible to you.")
	}
	if more > 0 {
		fmt.Fprintf(&b, "\n(%d more facts in the context.)", more)
	}
	for _, it := range items {
		if it.Kind == KindReport {
			fmt.Fprintf(&b, "\nCommunity report %s %s.", it.Text, citeTag(it.Citations))
			break
		}
	}
	return b.String()
}

// citeTag renders citations by document version: "[INC-101 v1; INC-112 v2]".
func citeTag(cs []citation) string {
	var parts []string
	seen := make(map[string]bool)
	for _, c := range cs {
		p := fmt.Sprintf("%s v%d", c.DocID, c.Version)
		if !seen[p] {
			seen[p] = true
			parts = append(parts, p)
		}
	}
	return "[" + strings.Join(parts, "; ") + "]"
}
