package query

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/bits"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/sync/errgroup"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// isContentStopword reports words that never carry a question's meaning on
// their own: framing words ("what went wrong", "why did") and function
// words. They take no part in word matching between questions and passages.
func isContentStopword(w string) bool {
	switch w {
	case "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "before",
		"being", "but", "by", "can", "cause", "caused", "causes", "causing", "could", "did", "do", "does", "doing",
		"during", "for", "from", "get", "go", "goe", "got", "had", "happen", "happened", "has", "have", "how",
		"i", "if", "in", "into", "is", "it", "its", "made", "make", "many", "more", "most", "much", "not", "of",
		"on", "one", "or", "our", "out", "over", "reason", "root", "so", "some", "start", "started", "than",
		"that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "up", "us",
		"was", "we", "went", "were", "what", "when", "where", "which", "while", "who", "why", "will", "with",
		"wrong", "would", "you", "your":
		return true
	}
	return false
}

// stem folds the common English inflections so "nodes" meets "node" and
// "expired" meets "expire". It is applied the same way to questions and
// passages, so it only needs to be consistent, not linguistically right.
func stem(w string) string {
	switch {
	case len(w) > 5 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 6 && strings.HasSuffix(w, "ing"):
		return w[:len(w)-3]
	case len(w) > 5 && strings.HasSuffix(w, "ed"):
		return w[:len(w)-2]
	case len(w) > 4 && strings.HasSuffix(w, "es") && !strings.HasSuffix(w, "ses"):
		return w[:len(w)-1]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return w[:len(w)-1]
	}
	return w
}

// wordsOf splits text into lower-case stemmed words (letters and digits;
// any other rune separates), keeping stopwords.
func wordsOf(text string) []string { return appendWords(nil, text) }

// appendWords appends the words of text (wordsOf) to dst: a caller
// splitting many texts reuses one slice. The words are substrings of
// text lowered (as strings.FieldsFunc would cut them, without its slice
// of spans).
func appendWords(dst []string, text string) []string {
	lower := strings.ToLower(text)
	start := -1
	for i, r := range lower {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			dst = append(dst, stem(lower[start:i]))
			start = -1
		}
	}
	if start >= 0 {
		dst = append(dst, stem(lower[start:]))
	}
	return dst
}

// contentWords are the distinct words of text that carry meaning.
func contentWords(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range wordsOf(text) {
		if isContentStopword(w) || seen[w] || (len(w) < 2 && !isDigits(w)) {
			continue
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

func isDigits(s string) bool {
	for _, r := range s {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return s != ""
}

// lexUnit is one text unit of an applied document version, tokenized.
type lexUnit struct {
	docID   string
	version int64
	unit    string
	text    string
	words   wordSet
	// tokens is ApproxTokens(text), computed once with the unit.
	tokens int
}

// lexDoc is what the unit cache keeps of one applied document version.
// Its content never changes (versions are immutable), so the cache needs
// no invalidation beyond dropping versions that are no longer current.
type lexDoc struct {
	version    int64
	title      string
	titleWords wordSet
	units      []lexUnit
	// seq numbers the version in its tenant's index (0: not indexed);
	// guarded by the index's lock.
	seq uint32
}

// readableDoc is a document the caller may read now, at its current version.
type readableDoc struct {
	id    string
	title string
	doc   *lexDoc
}

// readableDocs returns every document of the tenant the caller may read
// whose applied version is the registry's latest, with its tokenized text
// units, loaded once per request. A document whose edit is announced but
// not applied yet is left out: its applied text is superseded.
func (v *view) readableDocs() ([]readableDoc, error) {
	if v.docsLoaded {
		return v.docs, nil
	}
	// The kept set is looked up before the store is read: a graph change
	// (an apply) after this point drops g, so what is read below is never
	// kept in a set made after the change.
	g, key, keep := v.keptDocsKey()
	if keep {
		if q := g.lexQuery(key); q != nil {
			v.lex, v.docs, v.docsLoaded = q, q.docs, true
			return q.docs, nil
		}
	}
	if err := v.listRegistry(); err != nil {
		return nil, err
	}
	states := v.reg.states
	// The listing is this request's registry snapshot, which the admitter
	// would serve these states from: the rule is applied to them directly.
	// Which states the caller reads, as the view keeps them per caller;
	// counted first, so the lists are made at their size (growing them
	// through every size on the way copied the states over and over).
	readBits, _ := v.reg.readableBits(v.callerKey(), v.adm.Caller())
	n := 0
	for _, w := range readBits {
		n += bits.OnesCount64(w)
	}
	readable := make([]provenance.SourceState, 0, n)
	ids := make([]string, 0, n)
	var deleted []string
	for i, st := range states {
		switch {
		case st.Deleted:
			deleted = append(deleted, st.DocID)
		case hasBit(readBits, i):
			readable = append(readable, st)
			ids = append(ids, st.DocID)
		}
	}
	t := v.s.units.tenant(v.tenant)
	t.drop(deleted)
	cached := t.lookup(ids)
	if !sameVersions(readable, cached) {
		// One load at a time per tenant: a request arriving while another
		// (or the warm-up, warm.go) reads the tenant's documents waits for
		// it and reads only what it left, rather than every document again.
		t.loadMu.Lock()
		cached = t.lookup(ids)
		err := v.s.loadLexDocs(v.ctx, v.tenant, t, readable, cached)
		t.loadMu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	out := make([]readableDoc, 0, len(readable))
	for i, st := range readable {
		d := cached[i]
		if d == nil {
			continue
		}
		title := d.title
		if title == "" {
			title = st.Title
		}
		out = append(out, readableDoc{id: st.DocID, title: title, doc: d})
	}
	if keep {
		v.lex = g.keepLexQuery(key, newLexQuery(t, out))
		out = v.lex.docs
	}
	v.docs, v.docsLoaded = out, true
	return out, nil
}

// lexLoaders bounds the concurrent source reads of loadLexDocs: on Redis
// each is a round trip, and the first request after a start reads every
// readable document of the tenant.
const lexLoaders = 16

// sameVersions reports whether every cached[i] is readable[i]'s version.
func sameVersions(readable []provenance.SourceState, cached []*lexDoc) bool {
	for i, st := range readable {
		if d := cached[i]; d == nil || d.version != st.Version {
			return false
		}
	}
	return true
}

// loadLexDocs reads and indexes, concurrently, the documents of readable
// (of tenant, whose unit cache is t) whose cached entry is missing or at
// another version: cached[i] becomes the new entry, also put in t, or nil
// when the document is not applied at the registry's version yet.
func (s *Service) loadLexDocs(ctx context.Context, tenant string, t *lexTenant, readable []provenance.SourceState, cached []*lexDoc) error {
	var todo []int
	for i, st := range readable {
		if d := cached[i]; d == nil || d.version != st.Version {
			cached[i] = nil
			todo = append(todo, i)
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(lexLoaders)
	for _, i := range todo {
		st := readable[i]
		g.Go(func() error {
			rec, err := s.st.Source(ctx, tenant, st.DocID)
			switch {
			case errors.Is(err, store.ErrNotFound):
				return nil
			case err != nil:
				return fmt.Errorf("reading source %q: %w", st.DocID, err)
			}
			if rec.Deleted || rec.Version != st.Version {
				return nil // not applied yet at the registry's version
			}
			cached[i] = newLexDoc(rec, st.Title)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, i := range todo {
		if cached[i] != nil {
			t.put(readable[i].DocID, cached[i])
		}
	}
	return nil
}

// unitAt returns the cached text unit c cites (its text and words) when
// its document is readable and applied at the cited version, else nil.
func (v *view) unitAt(c citation) (*lexUnit, error) {
	byID, err := v.docVersions()
	if err != nil {
		return nil, err
	}
	d := byID[c.DocID]
	if d == nil || d.version != c.Version {
		return nil, nil
	}
	for i := range d.units {
		if d.units[i].unit == c.TextUnit {
			return &d.units[i], nil
		}
	}
	return nil, nil
}

func newLexDoc(rec store.SourceRecord, title string) *lexDoc {
	if rec.Title != "" {
		title = rec.Title
	}
	d := &lexDoc{version: rec.Version, title: title, titleWords: newWordSet(contentWords(title + " " + rec.DocID)),
		units: make([]lexUnit, 0, len(rec.TextUnits))}
	var buf []string // each unit's words, reused
	seen := map[string]struct{}{}
	for _, tu := range rec.TextUnits {
		buf = distinct(appendWords(buf[:0], tu.Text), seen)
		d.units = append(d.units, lexUnit{docID: rec.DocID, version: rec.Version, unit: tu.ID, text: tu.Text,
			words: newWordSet(buf), tokens: ApproxTokens(tu.Text)})
	}
	return d
}

// distinct keeps the first of each word of ws, in place, with seen (left
// empty) as its scratch: a unit's words repeat ("the", its subject), and
// sorting them with their repeats was most of what tokenizing every
// document cost the first question (or the warm-up) of a tenant.
func distinct(ws []string, seen map[string]struct{}) []string {
	out := ws[:0]
	for _, w := range ws {
		if _, dup := seen[w]; !dup {
			seen[w] = struct{}{}
			out = append(out, w)
		}
	}
	clear(seen)
	return out
}

// wordSet is a set of words, sorted and distinct. The unit cache keeps
// one per text unit and document title, so its form is what every
// collection marks: the words are kept joined in one string, with their
// end offsets in an array without pointers. A map was several objects of
// twice the bytes; a []string was one pointer for every word of the
// corpus (two million at 10,000 documents), each to be followed.
type wordSet struct {
	words string   // the words, sorted, joined without separators
	end   []uint32 // word i is words[end[i-1]:end[i]] (from 0 for i = 0)
}

// newWordSet is the set of ws (sorted in place).
func newWordSet(ws []string) wordSet {
	slices.Sort(ws)
	ws = slices.Compact(ws)
	n := 0
	for _, w := range ws {
		n += len(w)
	}
	var b strings.Builder
	b.Grow(n)
	end := make([]uint32, len(ws))
	for i, w := range ws {
		b.WriteString(w)
		end[i] = uint32(b.Len())
	}
	return wordSet{words: b.String(), end: end}
}

// at is word i (a substring of the set's string).
func (s wordSet) at(i int) string {
	start := uint32(0)
	if i > 0 {
		start = s.end[i-1]
	}
	return s.words[start:s.end[i]]
}

// all yields the words in order.
func (s wordSet) all() iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := range s.end {
			if !yield(s.at(i)) {
				return
			}
		}
	}
}

func (s wordSet) has(w string) bool {
	i, j := 0, len(s.end)
	for i < j {
		h := int(uint(i+j) >> 1)
		if s.at(h) < w {
			i = h + 1
		} else {
			j = h
		}
	}
	return i < len(s.end) && s.at(i) == w
}

// rankedUnit is a text unit with its relevance to a question.
type rankedUnit struct {
	lexUnit
	title string
	score float64
	// titleShare is how much of the question the document's title and id
	// hold: a document the question names.
	titleShare float64
}

// unitRanking scores text units against a question by the IDF-weighted
// share of the question's content words each holds, plus how well the
// document's title matches (documents the question names come first) and
// any prior (closest passages, units the graph cites).
type unitRanking struct {
	words    []string
	unitIDF  map[string]float64
	titleIDF map[string]float64
	unitSum  float64
	titleSum float64
}

// share is the IDF-weighted share of the question's words that has holds.
func (r unitRanking) share(has func(string) bool) float64 {
	if r.unitSum == 0 {
		return 0
	}
	got := 0.0
	for _, w := range r.words {
		if has(w) {
			got += r.unitIDF[w]
		}
	}
	return got / r.unitSum
}

func (r unitRanking) titleShare(d *lexDoc) float64 {
	if r.titleSum == 0 {
		return 0
	}
	got := 0.0
	for _, w := range r.words {
		if idf, ok := r.titleIDF[w]; ok && d.titleWords.has(w) {
			got += idf
		}
	}
	return got / r.titleSum
}

// Weights of the unit ranking: a named document's units first, then the
// word share of each unit; priors (vector hits, graph citations) break
// near ties.
const (
	titleWeight = 1.2
	priorWeight = 0.3
	// minUnitShare is the least word share that makes a unit relevant by
	// words alone.
	minUnitShare = 0.2
	// maxUnitsPerDoc keeps one long document from filling the context.
	maxUnitsPerDoc = 3
)

// unitItem is the context item of a ranked unit.
func unitItem(u rankedUnit) ContextItem { return unitItemCiting(u, make([]citation, 1)) }

// unitItemCiting is unitItem with its citation in cite[0], cite[:1:1]
// its citation list (items made together share one array).
func unitItemCiting(u rankedUnit, cite []citation) ContextItem {
	cite[0] = citation{DocID: u.docID, Version: u.version, TextUnit: u.unit}
	tokens := u.tokens
	if tokens == 0 {
		tokens = ApproxTokens(u.text)
	}
	return ContextItem{Kind: KindTextUnit, ID: u.docID + "#" + u.unit, Text: u.text, Citations: cite[:1:1],
		Tokens: tokens, Score: float32(u.score)}
}

// appendUnitItems appends the items of us to items, their citations in
// one array.
func appendUnitItems(items []ContextItem, us []rankedUnit) []ContextItem {
	cites := make([]citation, len(us))
	for i, u := range us {
		items = append(items, unitItemCiting(u, cites[i:]))
	}
	return items
}

// newLexDocFromText tokenizes one text as a document of one unit "u0" at
// version 1 (tests and tools).
func newLexDocFromText(id, text string) *lexDoc {
	return newLexDoc(store.SourceRecord{DocID: id, Version: 1, TextUnits: []events.TextUnit{{ID: "u0", Text: text}}}, "")
}
