package query

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/kgstream/kgstream/pkg/resolve"
)

// How a question was mapped to an entity (QueryResponse.Mapping).
const (
	MappedName    = "name"           // an n-gram of the question is the entity's name
	MappedFuzzy   = "close name"     // the question holds the words of a name or alias, or a close spelling
	MappedPassage = "passage entity" // the entity is named in a passage that answers the question
)

// MappedEntity says why local search took an entity from the question.
type MappedEntity struct {
	ID  string `json:"id"`
	How string `json:"how"`
}

// digitsOf is the digits of s in order: close spellings must keep them
// ("labvirt1008" is not "labvirt1009", "PM-202" is not "PM-205").
func digitsOf(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// closeSpelling reports whether a and b differ by at most one edit, both
// long enough for that to be a spelling variant, with the same digits.
func closeSpelling(a, b string) bool {
	if a == b {
		return true
	}
	if d := len(a) - len(b); d > 1 || d < -1 || len(a) < 5 || len(b) < 5 {
		return false // cheap rejections first: most word pairs end here
	}
	ra, rb := []rune(a), []rune(b)
	if len(ra) < 5 || len(rb) < 5 || digitsOf(a) != digitsOf(b) {
		return false
	}
	if len(ra) > len(rb) {
		ra, rb = rb, ra
	}
	if len(rb)-len(ra) > 1 {
		return false
	}
	i := 0
	for i < len(ra) && ra[i] == rb[i] {
		i++
	}
	if len(ra) == len(rb) {
		return string(ra[i+1:]) == string(rb[i+1:])
	}
	return string(ra[i:]) == string(rb[i+1:])
}

// nameMatch scores how well the question's words hold a name: 0 when they
// do not. Every content word of a one- or two-word name must be there (or
// a close spelling of it); of a longer name, three in four. Longer names
// score higher, so a specific name outranks a word it contains.
func nameMatch(name string, q []string) float64 {
	return nameWordsMatch(nameWords(name), q)
}

// nameWords are the distinct words a question must hold to name an entity:
// every word of the name but articles and "of"/"and", so "in-service"
// needs "in" too; none when the name has no content word at all.
func nameWords(name string) []string {
	if len(contentWords(name)) == 0 {
		return nil
	}
	var out []string
	for _, w := range wordsOf(name) {
		switch w {
		case "a", "an", "the", "of", "and":
			continue
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// nameWordsMatch scores name words ws (from nameWords) against the
// question's words q (every word, stemmed).
func nameWordsMatch(ws, q []string) float64 {
	if len(ws) == 0 {
		return 0
	}
	if len(ws) == 1 && len([]rune(ws[0])) < 3 && !isDigits(ws[0]) {
		return 0
	}
	hit := 0
	for _, w := range ws {
		for _, qw := range q {
			if w == qw || closeSpelling(w, qw) {
				hit++
				break
			}
		}
	}
	need := len(ws)
	if len(ws) > 2 {
		need = (3*len(ws) + 3) / 4
	}
	if hit < need {
		return 0
	}
	return float64(hit) + float64(hit)/float64(len(ws))
}

// mapQuestion maps a question to the entities it is about, as GraphRAG's
// local search does, even when it names none exactly: the exact n-gram
// matches first; then entities whose name or any readable spelling the
// question's words hold (word order free, close spellings with the same
// digits); then the entities named in the passages that best answer the
// question. Every entity is visible to the caller and named from readable
// fragments only.
func (s *Service) mapQuestion(v *view, question string, top []rankedUnit) ([]visibleEntity, []MappedEntity, error) {
	exact, err := s.matchEntities(v, question)
	if err != nil {
		return nil, nil, err
	}
	var seeds []visibleEntity
	var how []MappedEntity
	seen := map[string]bool{}
	add := func(ve visibleEntity, h string) {
		if seen[ve.out.ID] || len(seeds) >= s.cfg.MaxSeedEntities {
			return
		}
		seen[ve.out.ID] = true
		seeds = append(seeds, ve)
		how = append(how, MappedEntity{ID: ve.out.ID, How: h})
	}
	for _, ve := range exact {
		add(ve, MappedName)
	}
	ix, err := v.nameIndex()
	if err != nil {
		return nil, nil, err
	}
	q := wordsOf(question)
	// Only entities with a name word equal or close to a question word
	// can score: the index gives them, the scoring below is unchanged.
	close, err := v.admitIDs(ix, ix.closeCandidates(q))
	if err != nil {
		return nil, nil, err
	}
	type scored struct {
		ve    visibleEntity
		score float64
	}
	var fuzzy []scored
	for _, ve := range close {
		if seen[ve.out.ID] {
			continue
		}
		best := nameWordsMatch(s.names.words(ve.out.Name), q)
		err := v.readableSpellings(ve, ve.out.Name, func(name string) {
			best = max(best, nameWordsMatch(s.names.words(name), q))
		})
		if err != nil {
			return nil, nil, err
		}
		if best > 0 {
			fuzzy = append(fuzzy, scored{ve, best})
		}
	}
	slices.SortFunc(fuzzy, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(len(a.ve.sources), len(b.ve.sources)), cmp.Compare(a.ve.out.ID, b.ve.out.ID))
	})
	for i, f := range fuzzy {
		if i == maxFuzzySeeds {
			break
		}
		add(f.ve, MappedFuzzy)
	}
	// The entities of the best passages: whatever their names, they are
	// what the answering text is about.
	if len(top) > 0 {
		byUnit := map[string][]visibleEntity{}
		for i, u := range top {
			if i == passageSeedUnits {
				break
			}
			k := u.docID + "#" + u.unit
			if _, done := byUnit[k]; done {
				continue
			}
			es, err := v.admitIDs(ix, ix.list(kindUnit, k))
			if err != nil {
				return nil, nil, err
			}
			byUnit[k] = es
		}
		for i, u := range top {
			if i == passageSeedUnits {
				break
			}
			es := byUnit[u.docID+"#"+u.unit]
			// Specific entities first: those few documents mention.
			slices.SortFunc(es, func(a, b visibleEntity) int {
				return cmp.Or(cmp.Compare(len(a.sources), len(b.sources)), cmp.Compare(a.out.ID, b.out.ID))
			})
			for j, ve := range es {
				if j == passageSeedsPerUnit {
					break
				}
				add(ve, MappedPassage)
			}
		}
	}
	return seeds, how, nil
}

// nameWordCache keeps the name words of entity names across requests
// (names only, no admission state): mapping a question compares them with
// every visible entity's names.
type nameWordCache struct {
	mu   sync.Mutex
	m    map[string][]string
	keys map[string]string
	// all are the names' words as wordsOf splits them (every word,
	// stopwords too).
	all map[string][]string
}

// maxCachedNames bounds the cache; past it the cache starts over.
const maxCachedNames = 200000

// key is resolve.Key of name, cached like its words.
func (c *nameWordCache) key(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := c.keys[name]; ok {
		return k
	}
	if c.keys == nil || len(c.keys) >= maxCachedNames {
		c.keys = map[string]string{}
	}
	k := resolve.Key(name)
	c.keys[name] = k
	return k
}

// allWords is wordsOf(name), cached like its name words. Callers must
// not modify the result.
func (c *nameWordCache) allWords(name string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ws, ok := c.all[name]; ok {
		return ws
	}
	if c.all == nil || len(c.all) >= maxCachedNames {
		c.all = map[string][]string{}
	}
	ws := wordsOf(name)
	c.all[name] = ws
	return ws
}

func (c *nameWordCache) words(name string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ws, ok := c.m[name]; ok {
		return ws
	}
	if c.m == nil || len(c.m) >= maxCachedNames {
		c.m = map[string][]string{}
	}
	ws := nameWords(name)
	c.m[name] = ws
	return ws
}

// passageSeedUnits is how many of the best passages lend their entities to
// the question's mapping, passageSeedsPerUnit how many each.
// maxFuzzySeeds bounds the close-name matches.
const (
	passageSeedUnits    = 3
	passageSeedsPerUnit = 3
	maxFuzzySeeds       = 5
)
