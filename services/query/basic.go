package query

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/kgstream/kgstream/pkg/store"

	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/vector"
)

// BasicStats says how a basic answer was built: how many hits the vector
// index returned (already pre-filtered by its copy of the ACLs), how many
// of those the source registry then refused (the index lags a revocation
// or deletion until the reporter applies it), and how many passages were
// used.
type BasicStats struct {
	Candidates int `json:"candidates"`
	Dropped    int `json:"dropped"`
	Used       int `json:"used"`
}

// errNoVectors answers basic mode when no vector index is configured.
func errNoVectors() error {
	return httpapi.Errorf(http.StatusNotImplemented, "not_implemented",
		"basic mode needs a vector index and an embedder; this query service has none configured")
}

// searchTextUnits embeds the question, asks the vector index for the k
// closest text units the caller's ACL filter admits, and admits every hit
// again against the registry (Direct on each source document) before it
// may enter a context: the index is a pre-filter, the registry decides.
// Hits come back as context items in score order; dropped counts the hits
// the registry refused.
func (s *Service) searchTextUnits(v *view, question string, k int, timings map[string]float64) (items []ContextItem, candidates, dropped int, err error) {
	began := time.Now()
	vecs, err := s.cfg.Embedder.Embed(v.ctx, []string{question})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("embedding the question: %w", err)
	}
	timings["embed_ms"] = ms(time.Since(began))
	if len(vecs) != 1 || vector.ValidateVector(vecs[0]) != nil {
		// A vector the index cannot compare (all zero, from an endpoint's
		// embedder): no passage is close.
		return nil, 0, 0, nil
	}
	began = time.Now()
	hits, err := s.cfg.Vectors.Search(v.ctx, v.tenant, vector.KindTextUnit, vecs[0], k, vector.FilterFor(v.adm.Caller()))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("searching text units: %w", err)
	}
	timings["search_ms"] = ms(time.Since(began))
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.DocIDs()...)
	}
	if err := v.adm.Prefetch(ids); err != nil {
		return nil, 0, 0, err
	}
	applied := map[string]int64{} // doc -> applied version, per request
	current := func(ref citation) (bool, error) {
		ver, ok := applied[ref.DocID]
		if !ok {
			rec, err := v.s.st.Source(v.ctx, v.tenant, ref.DocID)
			switch {
			case errors.Is(err, store.ErrNotFound):
				ver = -1
			case err != nil:
				return false, fmt.Errorf("reading source %s: %w", ref.DocID, err)
			case rec.Deleted:
				ver = -1
			default:
				ver = rec.Version
			}
			applied[ref.DocID] = ver
		}
		return ver == ref.Version, nil
	}
	for _, h := range hits {
		ok, err := v.directAll(h.Item)
		if err != nil {
			return nil, 0, 0, err
		}
		// The index may lag an edit: a passage of a superseded version
		// (perhaps the paragraph the edit removed) is not served.
		for _, ref := range h.Refs() {
			if !ok {
				break
			}
			if ok, err = current(ref); err != nil {
				return nil, 0, 0, err
			}
		}
		if !ok {
			dropped++
			continue
		}
		refs := h.Refs()
		id := h.ID
		if len(refs) == 1 && refs[0].TextUnit != "" {
			id = refs[0].DocID + "#" + refs[0].TextUnit
		}
		items = append(items, ContextItem{Kind: KindTextUnit, ID: id, Text: h.Text, Citations: refs,
			Tokens: ApproxTokens(h.Text), Score: h.Score})
	}
	return items, len(hits), dropped, nil
}

// directAll admits a vector item as a direct contribution: every source
// document is readable now (a text unit has one).
func (v *view) directAll(it vector.Item) (bool, error) {
	if len(it.Sources) == 0 {
		return false, nil
	}
	for _, src := range it.Sources {
		ok, err := v.adm.Direct(src.DocID)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// basic answers a question from the text units closest to it: vector
// search (pre-filtered by the index's ACL copy), re-admission of every hit,
// then the admitted passages in score order while they fit the budget. The
// answer is extractive: the passages themselves, each with its citation.
func (s *Service) basic(v *view, req QueryRequest, budget int) (QueryResponse, error) {
	if s.cfg.Vectors == nil {
		return QueryResponse{}, errNoVectors()
	}
	began := time.Now()
	resp := QueryResponse{Mode: ModeBasic, Entities: []entityJSON{}, Context: []ContextItem{}, Citations: []citation{},
		BudgetTokens: budget, Timings: map[string]float64{}}
	items, candidates, dropped, err := s.searchTextUnits(v, req.Question, s.cfg.BasicCandidates, resp.Timings)
	if err != nil {
		return QueryResponse{}, err
	}
	stats := &BasicStats{Candidates: candidates, Dropped: dropped}
	resp.Basic = stats
	left := budget
	for _, it := range items {
		if len(resp.Context) == s.cfg.BasicTopK {
			break
		}
		if it.Tokens > left {
			continue
		}
		left -= it.Tokens
		resp.Context = append(resp.Context, it)
	}
	resp.UsedTokens = budget - left
	stats.Used = len(resp.Context)
	seen := make(map[citation]bool)
	for _, it := range resp.Context {
		for _, c := range it.Citations {
			if !seen[c] {
				seen[c] = true
				resp.Citations = append(resp.Citations, c)
			}
		}
	}
	resp.Answer = basicAnswer(resp.Context)
	resp.Timings["retrieval_ms"] = ms(time.Since(began))
	return resp, nil
}

// maxPassageRunes bounds a passage quoted in a basic answer; the context
// item keeps the whole text unit.
const maxPassageRunes = 400

// basicAnswer lists the passages, closest first, each quoted with its
// citation: "1. <passage> [INC-101 v1 #u3]".
func basicAnswer(items []ContextItem) string {
	if len(items) == 0 {
		return "No passage you can read is close to the question."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The %d passages closest to the question:", len(items))
	for i, it := range items {
		text := strings.Join(strings.Fields(it.Text), " ")
		if r := []rune(text); len(r) > maxPassageRunes {
			text = string(r[:maxPassageRunes]) + "…"
		}
		fmt.Fprintf(&b, "\n%d. %s %s", i+1, text, unitTag(it.Citations))
	}
	return b.String()
}

// unitTag renders citations with their text units: "[INC-101 v1 #u3]".
func unitTag(cs []citation) string {
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		p := fmt.Sprintf("%s v%d", c.DocID, c.Version)
		if c.TextUnit != "" {
			p += " #" + c.TextUnit
		}
		parts = append(parts, p)
	}
	return "[" + strings.Join(parts, "; ") + "]"
}
