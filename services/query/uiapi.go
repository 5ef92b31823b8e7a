package query

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// The read routes the web UI needs besides the query routes: who the
// caller is, the documents it may read, one document's indexed state and a
// cited text unit with its supporting sentence. Each answers only from
// documents the caller may read now; an unreadable document is the same
// 404 as an absent one.
const (
	routeMe       = "GET /v1/me"
	routeSources  = "GET /v1/sources"
	routeSource   = "GET /v1/source"
	routeTextUnit = "GET /v1/textunit"
	routeAliases  = "GET /v1/aliases"
)

func (s *Service) handleUIRoutes(mux *http.ServeMux) {
	s.handle(mux, routeMe, s.me)
	s.handle(mux, routeSources, s.sources)
	s.handle(mux, routeSource, s.source)
	s.handle(mux, routeTextUnit, s.textUnit)
	s.handle(mux, routeAliases, s.aliases)
}

type aliasesResponse struct {
	Entity  entityJSON `json:"entity"`
	Aliases []string   `json:"aliases"`
}

// aliases lists the spellings of an entity that documents the caller may
// read use (its display name first), so that no alias comes from a
// document the caller cannot see.
func (s *Service) aliases(v *view, _ http.ResponseWriter, r *http.Request) (any, error) {
	id, err := singleParam(r, "id")
	if err != nil {
		return nil, err
	}
	if id == "" || len(id) > maxRefLen {
		return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_param", "id must be 1 to %d bytes", maxRefLen)
	}
	ve, err := v.entity(id)
	if err != nil {
		return nil, err
	}
	if !ve.ok {
		return nil, httpapi.Errorf(http.StatusNotFound, "unknown_entity", "no entity %q", truncate(id, 200))
	}
	out := aliasesResponse{Entity: ve.out, Aliases: []string{}}
	for _, f := range ve.sources {
		ok, err := v.adm.Direct(f.DocID)
		if err != nil {
			return nil, err
		}
		if ok && f.Name != "" && f.Name != ve.out.Name && !slices.Contains(out.Aliases, f.Name) {
			out.Aliases = append(out.Aliases, f.Name)
		}
	}
	slices.Sort(out.Aliases)
	return out, nil
}

// me answers who the bearer token is, so the UI shows writer and admin
// controls only to those who may use them.
func (s *Service) me(v *view, _ http.ResponseWriter, _ *http.Request) (any, error) {
	c := v.adm.Caller()
	if c.Groups == nil {
		c.Groups = []string{}
	}
	return meResponse{Caller: c, Build: buildVersion()}, nil
}

type meResponse struct {
	provenance.Caller
	// Build is the binary's module version and VCS revision.
	Build string `json:"build"`
}

// buildVersion describes the running binary from its build information.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			v += " " + st.Value[:min(12, len(st.Value))]
		case "vcs.modified":
			if st.Value == "true" {
				v += " (modified)"
			}
		}
	}
	return v + " " + bi.GoVersion
}

// sourceJSON is a readable document as the registry knows it.
type sourceJSON struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Version   int64  `json:"version"`
	Source    string `json:"source,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
}

type sourcesResponse struct {
	Sources []sourceJSON `json:"sources"`
	// Total counts the readable documents matching q, of which Sources is
	// the page at Offset, Limit long at most.
	Total  int `json:"total"`
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
}

// sources lists the documents the caller may read, in id order, a page at
// a time (limit, offset), optionally those whose id or title contains q
// (case-insensitive). Unreadable documents are left out and not counted.
// It reads the tenant's registry listing the request's admission keeps
// (one listing per registry generation, with each caller's readable set),
// not the registry for every request.
func (s *Service) sources(v *view, _ http.ResponseWriter, r *http.Request) (any, error) {
	q, err := searchParam(r)
	if err != nil {
		return nil, err
	}
	limit, offset, err := s.listPage(r)
	if err != nil {
		return nil, err
	}
	q = strings.ToLower(strings.TrimSpace(q))
	if err := v.listRegistry(); err != nil {
		return nil, err
	}
	c := v.adm.Caller()
	readable, _ := v.reg.readableBits(v.callerKey(), c)
	var lower [][2]string
	if q != "" {
		lower = v.reg.lowered()
	}
	resp := sourcesResponse{Sources: []sourceJSON{}, Limit: limit, Offset: offset}
	for i, st := range v.reg.states {
		if q != "" && !strings.Contains(lower[i][0], q) && !strings.Contains(lower[i][1], q) {
			continue
		}
		if !hasBit(readable, i) {
			continue
		}
		if resp.Total >= offset && len(resp.Sources) < limit {
			resp.Sources = append(resp.Sources, sourceJSON{ID: st.DocID, Title: st.Title, Version: st.Version, Source: st.Source, UpdatedAt: st.UpdatedAt})
		}
		resp.Total++
	}
	return resp, nil
}

// indexedJSON is what the graph store holds of a document's applied version.
type indexedJSON struct {
	Version   int64     `json:"version"`
	AppliedAt time.Time `json:"applied_at"`
	DocType   string    `json:"doc_type,omitempty"`
	TextUnits int       `json:"text_units"`
	// Text is the indexed text, put together from its text units.
	Text     string       `json:"text"`
	Entities []entityJSON `json:"entities"`
	Edges    []edgeJSON   `json:"edges"`
}

type sourceDetail struct {
	sourceJSON
	// ACL is the whole ACL for writers and admins; other readers see
	// whether it is public and which of their own principal and groups it
	// names, never anyone else's.
	ACL     provenance.ACL `json:"acl"`
	Indexed *indexedJSON   `json:"indexed"`
}

func sourceNotFound() error {
	return httpapi.Errorf(http.StatusNotFound, "not_found", "document not found")
}

// readableSource returns the registry state of id when the caller may read it.
func (v *view) readableSource(id string) (provenance.SourceState, error) {
	if id == "" || len(id) > 512 {
		return provenance.SourceState{}, sourceNotFound()
	}
	m, err := v.s.st.Sources(v.ctx, v.tenant, []string{id})
	if err != nil {
		return provenance.SourceState{}, fmt.Errorf("%w: %w", errAdmissionUnavailable, err)
	}
	st, ok := m[id]
	if !ok || !provenance.Readable(v.adm.Caller(), st) {
		return provenance.SourceState{}, sourceNotFound()
	}
	return st, nil
}

// source shows one readable document: its registry state, its ACL as far
// as the caller may see it, and the entities and edges its applied version
// contributes.
func (s *Service) source(v *view, _ http.ResponseWriter, r *http.Request) (any, error) {
	id, err := singleParam(r, "id")
	if err != nil {
		return nil, err
	}
	st, err := v.readableSource(id)
	if err != nil {
		return nil, err
	}
	out := sourceDetail{sourceJSON: sourceJSON{ID: st.DocID, Title: st.Title, Version: st.Version, Source: st.Source, UpdatedAt: st.UpdatedAt},
		ACL: visibleACL(v.adm.Caller(), st.ACL)}
	rec, err := s.st.Source(v.ctx, v.tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading source record %q: %w", id, err)
	}
	if rec.Deleted {
		return out, nil
	}
	ix := &indexedJSON{Version: rec.Version, AppliedAt: rec.AppliedAt, DocType: rec.DocType, TextUnits: len(rec.TextUnits),
		Text: joinUnits(rec.TextUnits), Entities: []entityJSON{}, Edges: []edgeJSON{}}
	if err := v.entities(rec.Entities); err != nil {
		return nil, err
	}
	for _, eid := range rec.Entities {
		if ve := v.known(eid); ve.ok {
			ix.Entities = append(ix.Entities, ve.out)
		}
	}
	cite := []citation{{DocID: id, Version: rec.Version}}
	for _, eid := range rec.Edges {
		parts := strings.SplitN(eid, "|", 3)
		if len(parts) != 3 || !v.known(parts[0]).ok || !v.known(parts[2]).ok {
			continue
		}
		ix.Edges = append(ix.Edges, edgeJSON{Source: parts[0], Relation: parts[1], Target: parts[2], Citations: cite})
	}
	out.Indexed = ix
	return out, nil
}

// joinUnits puts a document's text back together from its text units by
// their byte offsets (overlapping chunks agree where they overlap; a gap
// between units becomes one space).
func joinUnits(units []events.TextUnit) string {
	var b strings.Builder
	end := 0
	for _, u := range units {
		switch {
		case u.Start > end && end > 0:
			b.WriteByte(' ')
		case u.Start < end:
			if skip := end - u.Start; skip < len(u.Text) {
				b.WriteString(u.Text[skip:])
				end = max(end, u.End)
			}
			continue
		}
		b.WriteString(u.Text)
		end = max(end, u.End)
	}
	return b.String()
}

// visibleACL is the part of acl caller may see.
func visibleACL(c provenance.Caller, acl provenance.ACL) provenance.ACL {
	if c.Admin || c.Writer {
		return acl
	}
	out := provenance.ACL{Public: acl.Public}
	if slices.Contains(acl.Principals, c.Principal) {
		out.Principals = []string{c.Principal}
	}
	for _, g := range acl.Groups {
		if slices.Contains(c.Groups, g) {
			out.Groups = append(out.Groups, g)
		}
	}
	return out
}

// sentenceJSON is one sentence of a text unit, by byte offsets in its text.
type sentenceJSON struct {
	Text  string `json:"text"`
	Start int    `json:"start"`
	End   int    `json:"end"`
}

type textUnitResponse struct {
	DocID     string         `json:"doc_id"`
	Title     string         `json:"title"`
	Version   int64          `json:"version"`
	TextUnit  string         `json:"text_unit"`
	Text      string         `json:"text"`
	Sentences []sentenceJSON `json:"sentences"`
	// Highlight is the index in Sentences of the sentence that best
	// supports claim (-1 when nothing does).
	Highlight int `json:"highlight"`
}

// textUnit shows a cited text unit of a readable document at the cited
// version (only the applied version's units are kept), split into
// sentences with the one that best supports claim marked. Without unit,
// the document version's unit that best supports claim is shown.
func (s *Service) textUnit(v *view, _ http.ResponseWriter, r *http.Request) (any, error) {
	var p [4]string
	for i, name := range []string{"doc", "version", "unit", "claim"} {
		var err error
		if p[i], err = singleParam(r, name); err != nil {
			return nil, err
		}
	}
	doc, unit, claim := p[0], p[2], p[3]
	if len(claim) > 4096 {
		return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_param", "claim is longer than 4096 bytes")
	}
	version, err := intParam(r, "version", 0, 1<<62)
	if err != nil {
		return nil, err
	}
	st, err := v.readableSource(doc)
	if err != nil {
		return nil, err
	}
	rec, err := s.st.Source(v.ctx, v.tenant, doc)
	if errors.Is(err, store.ErrNotFound) {
		return nil, httpapi.Errorf(http.StatusNotFound, "not_indexed", "document %q is not indexed yet", doc)
	}
	if err != nil {
		return nil, fmt.Errorf("reading source record %q: %w", doc, err)
	}
	if rec.Deleted || (version != 0 && rec.Version != int64(version)) {
		return nil, httpapi.Errorf(http.StatusNotFound, "version_not_indexed",
			"version %d of %q is no longer the indexed one; ask again for current evidence", version, doc)
	}
	if len(rec.TextUnits) == 0 {
		// A structured source (a catalog) has no text: the citation is the
		// record itself.
		return textUnitResponse{DocID: doc, Title: st.Title, Version: rec.Version, Sentences: []sentenceJSON{}, Highlight: -1}, nil
	}
	// The document's own id is in every claim about it and says nothing
	// about which sentence supports the claim.
	words := claimWords(claim)
	for w := range claimWords(doc) {
		delete(words, w)
	}
	best, bestScore := -1, -1
	for i, tu := range rec.TextUnits {
		if unit != "" {
			if tu.ID == unit {
				best = i
				break
			}
			continue
		}
		if _, sc := bestSentence(sentenceSpans(tu.Text), words); sc > bestScore {
			best, bestScore = i, sc
		}
	}
	if best < 0 {
		return nil, httpapi.Errorf(http.StatusNotFound, "not_found", "text unit not found")
	}
	tu := rec.TextUnits[best]
	sents := sentenceSpans(tu.Text)
	hi, score := bestSentence(sents, words)
	if score <= 0 {
		hi = -1
	}
	return textUnitResponse{DocID: doc, Title: st.Title, Version: rec.Version, TextUnit: tu.ID, Text: tu.Text, Sentences: sents, Highlight: hi}, nil
}

var sentenceEnd = regexp.MustCompile(`[.!?]+["')\]]*\s+|\n+`)

// sentenceSpans cuts text at sentence ends and line breaks, keeping each
// sentence's byte offsets (the UI highlights by offset).
func sentenceSpans(text string) []sentenceJSON {
	out := []sentenceJSON{}
	start := 0
	add := func(end int) {
		seg := text[start:end]
		trimmed := strings.TrimSpace(seg)
		if trimmed != "" {
			off := start + strings.Index(seg, trimmed)
			out = append(out, sentenceJSON{Text: trimmed, Start: off, End: off + len(trimmed)})
		}
	}
	for _, m := range sentenceEnd.FindAllStringIndex(text, -1) {
		add(m[1])
		start = m[1]
	}
	add(len(text))
	return out
}

var wordRE = regexp.MustCompile(`[\p{L}\p{N}][\p{L}\p{N}_-]*`)

// claimWords are the distinct lower-cased words of claim of three letters
// or more (the words that can say what a sentence supports).
func claimWords(claim string) map[string]bool {
	out := map[string]bool{}
	for _, w := range wordRE.FindAllString(strings.ToLower(claim), -1) {
		if len(w) >= 3 {
			out[w] = true
		}
	}
	return out
}

// bestSentence returns the index of the sentence sharing the most claim
// words (the first on a tie) and that count.
func bestSentence(sents []sentenceJSON, words map[string]bool) (int, int) {
	best, bestScore := -1, 0
	for i, se := range sents {
		seen := map[string]bool{}
		for _, w := range wordRE.FindAllString(strings.ToLower(se.Text), -1) {
			if words[w] {
				seen[w] = true
			}
		}
		if len(seen) > bestScore {
			best, bestScore = i, len(seen)
		}
	}
	if best < 0 && len(sents) > 0 {
		return 0, 0
	}
	return best, bestScore
}
