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

// BasicStats says how a basic answer was built: how many passages it
// used. It counts admitted material only: hits the registry refused are
// counted in the kgstream_query_readmission_drops_total metric, never in a
// response, since their number would tell a caller about documents they
// may not read.
type BasicStats struct {
	Used int `json:"used"`
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
// the registry refused (for the metric only).
func (s *Service) searchTextUnits(v *view, question string, k int, timings map[string]float64) (items []ContextItem, dropped int, err error) {
	defer func() { s.readmissionDrops.Add(float64(dropped)) }()
	began := time.Now()
	vecs, err := s.cfg.Embedder.Embed(v.ctx, []string{question})
	if err != nil {
		return nil, 0, fmt.Errorf("embedding the question: %w", err)
	}
	timings["embed_ms"] = ms(time.Since(began))
	if len(vecs) != 1 || vector.ValidateVector(vecs[0]) != nil {
		// A vector the index cannot compare (all zero, from an endpoint's
		// embedder): no passage is close.
		return nil, 0, nil
	}
	began = time.Now()
	hits, err := s.cfg.Vectors.Search(v.ctx, v.tenant, vector.KindTextUnit, vecs[0], k, vector.FilterFor(v.adm.Caller()))
	if err != nil {
		return nil, 0, fmt.Errorf("searching text units: %w", err)
	}
	timings["search_ms"] = ms(time.Since(began))
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.DocIDs()...)
	}
	if err := v.adm.Prefetch(ids); err != nil {
		return nil, 0, err
	}
	applied := map[string]int64{} // doc -> applied version, per request
	units := v.s.units.tenant(v.tenant)
	current := func(ref citation) (bool, error) {
		ver, ok := applied[ref.DocID]
		if !ok {
			ver, ok = v.appliedFromCache(units, ref.DocID)
		}
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
			return nil, 0, err
		}
		// The index may lag an edit: a passage of a superseded version
		// (perhaps the paragraph the edit removed) is not served.
		for _, ref := range h.Refs() {
			if !ok {
				break
			}
			if ok, err = current(ref); err != nil {
				return nil, 0, err
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
	return items, dropped, nil
}

// appliedFromCache returns doc's applied version without a store read
// when the unit cache holds the version the registry announces last: the
// applied version never goes down and never passes the announced one, so
// it is that version.
func (v *view) appliedFromCache(units *lexTenant, doc string) (int64, bool) {
	m, err := v.lookupSources([]string{doc})
	st, known := m[doc]
	if err != nil || !known || st.Deleted {
		return 0, false
	}
	d := units.lookup([]string{doc})[0]
	if d == nil || d.version != st.Version {
		return 0, false
	}
	return d.version, true
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

// basic answers a question from the passages closest to it: vector search
// (pre-filtered by the index's ACL copy) with re-admission of every hit,
// merged with a word search over the passages the caller may read (the
// question's IDF-weighted words, documents it names first), then the best
// passages while they fit the budget. The answer is extractive: the
// sentences of those passages that answer the question, each with its
// citation, and the documents by title and id.
func (s *Service) basic(v *view, req QueryRequest, budget int) (QueryResponse, error) {
	if s.cfg.Vectors == nil {
		return QueryResponse{}, errNoVectors()
	}
	began := time.Now()
	resp := QueryResponse{Mode: ModeBasic, Entities: []entityJSON{}, Context: []ContextItem{}, Citations: []citation{},
		BudgetTokens: budget, Timings: map[string]float64{}, AnswerBy: "offline"}
	near, _, err := s.searchTextUnits(v, req.Question, s.cfg.BasicCandidates, resp.Timings)
	if err != nil {
		return QueryResponse{}, err
	}
	rank, err := v.unitRanking(req.Question)
	if err != nil {
		return QueryResponse{}, err
	}
	priors := map[string]float64{}
	for i, it := range near {
		priors[it.ID] = max(priors[it.ID], 1/(1+0.25*float64(i)))
	}
	top, err := v.rankUnits(rank, priors, 2*s.cfg.BasicTopK)
	if err != nil {
		return QueryResponse{}, err
	}
	stats := &BasicStats{}
	resp.Basic = stats
	left := budget
	for _, u := range top {
		if len(resp.Context) == s.cfg.BasicTopK {
			break
		}
		it := unitItem(u)
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
	resp.Timings["retrieval_ms"] = ms(time.Since(began))
	titles, err := v.docTitles()
	if err != nil {
		return QueryResponse{}, err
	}
	resp.Answer = basicAnswer(req.Question, rank, resp.Context, titles)
	return resp, nil
}

// basicAnswer quotes the sentences of the passages that answer the
// question, each with its citation ("... [INC-101 v1 #u3]"), then names
// the documents.
func basicAnswer(question string, rank unitRanking, items []ContextItem, titles map[string]string) string {
	if len(items) == 0 {
		return "No passage you can read is close to the question."
	}
	var b strings.Builder
	for _, ss := range selectSentences(question, rank, nil, items, maxAnswerSentences) {
		fmt.Fprintf(&b, "%s %s\n", quote(ss.text), unitTag(items[ss.item].Citations))
	}
	var cites []citation
	for _, it := range items {
		cites = append(cites, it.Citations...)
	}
	b.WriteString(sourcesLine(cites, titles, 5))
	return strings.TrimRight(b.String(), "\n")
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
