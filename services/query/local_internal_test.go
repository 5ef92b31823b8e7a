package query

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// statesView is a view whose admitter reads the registry states of states.
func statesView(caller provenance.Caller, states map[string]provenance.SourceState) *view {
	v := &view{}
	v.adm = provenance.NewAdmitter(caller, func(ids []string) (map[string]provenance.SourceState, error) {
		out := map[string]provenance.SourceState{}
		for _, id := range ids {
			if s, ok := states[id]; ok {
				out[id] = s
			}
		}
		return out, nil
	})
	return v
}

// TestEntityItemStaysWithinItsLimit: an entity described by hundreds of
// documents gets an item of its first readable descriptions that fits the
// limit (not one too large to be taken), citing only what it quotes and
// never an unreadable fragment; one without descriptions cites its first
// readable mentions only.
func TestEntityItemStaysWithinItsLimit(t *testing.T) {
	caller := provenance.Caller{Tenant: "acme", Principal: "sam", Groups: []string{"sre"}}
	states := map[string]provenance.SourceState{}
	var described, mentioned []store.Fragment
	for i := range 400 {
		id := fmt.Sprintf("doc-%03d", i)
		acl := provenance.PublicACL()
		if i%5 == 0 {
			acl = provenance.ACL{Groups: []string{"payments"}} // not sam's
		}
		states[id] = provenance.SourceState{Tenant: "acme", DocID: id, Version: 1, ACL: acl}
		desc := fmt.Sprintf("Seen in %s when the gateway timed out behind the load balancer.", id)
		if i%5 == 0 {
			desc = "SECRET " + desc
		}
		described = append(described, store.Fragment{DocID: id, Version: 1, TextUnits: []string{"u1"}, Description: desc})
		mentioned = append(mentioned, store.Fragment{DocID: id, Version: 1, TextUnits: []string{"u1"}})
	}
	view := func() *view { return statesView(caller, states) }
	hub := visibleEntity{sources: described, out: entityJSON{ID: "service:gateway", Type: "service", Name: "gateway"}, ok: true}
	const limit = 120
	it, err := entityItem(view(), hub, limit)
	require.NoError(t, err)
	require.LessOrEqual(t, it.Tokens, limit)
	require.Greater(t, it.Tokens, limit/2, "filled up to its limit")
	require.True(t, strings.HasPrefix(it.Text, "gateway (service). Seen in doc-001 "), it.Text)
	require.NotContains(t, it.Text, "SECRET")
	quoted := strings.Count(it.Text, "Seen in ")
	require.Len(t, it.Citations, quoted, "cites what it quotes")
	for _, c := range it.Citations {
		require.Contains(t, it.Text, c.DocID)
		require.True(t, states[c.DocID].ACL.Public, c.DocID)
	}

	bare := hub
	bare.sources = mentioned
	it, err = entityItem(view(), bare, limit)
	require.NoError(t, err)
	require.Equal(t, "gateway (service).", it.Text)
	require.Len(t, it.Citations, maxMentionCites)
	for _, c := range it.Citations {
		require.True(t, states[c.DocID].ACL.Public, c.DocID)
	}
}

// TestEntityItemByNumberedDescriptions: an entity item made through the
// numbered descriptions (made with the entity or by the item), which stops
// once every description has its citations, is the item of the plain
// reading of every fragment, on random entities: few or many fragments,
// repeated, unique and missing descriptions, unreadable documents and
// limits that cut the item short.
func TestEntityItemByNumberedDescriptions(t *testing.T) {
	caller := provenance.Caller{Tenant: "acme", Principal: "sam", Groups: []string{"sre"}}
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 300 {
		states := map[string]provenance.SourceState{}
		n := 1 + rng.IntN(120)
		pool := 1 + rng.IntN(6)
		var fs []store.Fragment
		for i := range n {
			id := fmt.Sprintf("doc-%03d", i)
			acl := provenance.PublicACL()
			if rng.IntN(4) == 0 {
				acl = provenance.ACL{Groups: []string{"payments"}}
			}
			states[id] = provenance.SourceState{Tenant: "acme", DocID: id, Version: 1, ACL: acl}
			desc := ""
			switch r := rng.IntN(10); {
			case r < 6:
				desc = fmt.Sprintf("Described the %d-th way, with a few words.", rng.IntN(pool))
			case r < 8:
				desc = "Only " + id + " says this."
			}
			units := []string{"u1"}
			if rng.IntN(3) == 0 {
				units = []string{"u1", "u2"}
			}
			fs = append(fs, store.Fragment{DocID: id, Version: 1, TextUnits: units, Description: desc})
		}
		view := func() *view { return statesView(caller, states) }
		limit := 20 + rng.IntN(300)
		ve := visibleEntity{sources: fs, out: entityJSON{ID: "service:gateway", Type: "service", Name: "gateway"}, ok: true}
		want := plainEntityItem(t, view(), ve, limit)
		got, err := entityItem(view(), ve, limit)
		require.NoError(t, err)
		require.Equal(t, want, got, "round %d, made by the item", round)
		ve.descs = newDescIndex(fs)
		got, err = entityItem(view(), ve, limit)
		require.NoError(t, err)
		require.Equal(t, want, got, "round %d, made with the entity", round)
	}
}

// plainEntityItem is entityItem reading every fragment, its descriptions
// told apart by a map.
func plainEntityItem(t *testing.T, v *view, ve visibleEntity, limit int) ContextItem {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s).", ve.out.Name, strings.ReplaceAll(ve.out.Type, "_", " "))
	words := len(strings.Fields(b.String()))
	var cites []citation
	described := false
	stated := map[string]int{}
	for _, f := range ve.sources {
		if f.Description == "" || stated[f.Description] >= maxMentionCites {
			continue
		}
		ok, err := v.adm.Direct(f.DocID)
		require.NoError(t, err)
		if !ok {
			continue
		}
		described = true
		if stated[f.Description] == 0 {
			n := len(strings.Fields(f.Description))
			if tokensOfWords(words+n) > limit {
				break
			}
			words += n
			b.WriteString(" " + f.Description)
		}
		stated[f.Description]++
		cites = appendFragmentCitations(cites, f)
	}
	if !described {
		for _, f := range ve.sources {
			if len(cites) >= maxMentionCites {
				break
			}
			ok, err := v.adm.Direct(f.DocID)
			require.NoError(t, err)
			if ok {
				cites = appendFragmentCitations(cites, f)
			}
		}
	}
	text := b.String()
	return ContextItem{Kind: KindEntity, ID: ve.out.ID, Text: text, Citations: cites, Tokens: ApproxTokens(text)}
}

// TestRelationRankerRanksAsTheSentence: relationRanker gives what
// relationRank gives for the sentence relationText writes, for every
// relation phrase, an unknown relation and names with punctuation, digits
// and the question's words.
func TestRelationRankerRanksAsTheSentence(t *testing.T) {
	r := unitRanking{words: contentWords("Why did the Kafka broker fail after the v2.3 upgrade of checkout-api?"), unitIDF: map[string]float64{}}
	for i, w := range r.words {
		r.unitIDF[w] = 1 + float64(i)/3
		r.unitSum += r.unitIDF[w]
	}
	rr := relationRanker{r: r, names: &nameWordCache{}, rels: map[string][]string{}}
	names := []string{"Kafka broker", "checkout-api", "v2.3 upgrade", "PM-202", "the upgrade's rollback", "Failed (disk)", ""}
	rels := []string{"custom_rel_upgrade"}
	for rel := range relationPhrases {
		rels = append(rels, rel)
	}
	n := 0
	for _, rel := range rels {
		for _, src := range names {
			for _, tgt := range names {
				text := relationText(src, rel, tgt)
				want := relationRank(ContextItem{ID: store.EdgeID("a:x", rel, "b:y"), Text: text}, r)
				require.Equal(t, want, rr.rank(src, rel, tgt), text)
				if want != 0 && want != 10 {
					n++
				}
			}
		}
	}
	require.Greater(t, n, 100, "most cases share words with the question")
}

// relationRank is the definition relationRanker.rank keeps: it orders
// relationships by their sentence: stated ones before co-occurrences and
// mentions; among equals, those sharing more of the question's words.
func relationRank(it ContextItem, r unitRanking) float64 {
	_, rel, _ := splitEdgeID(it.ID)
	base := 0.0
	switch rel {
	case "mentions", "co_occurs":
		base = 10
	}
	ws := wordsOf(it.Text)
	return base - r.share(func(w string) bool { return slices.Contains(ws, w) })
}

// TestRelationTokensWithoutText: a relationship item's tokens counted
// from its parts are those of its sentence, for every phrase, unknown
// relations and names of any spacing; edgeID is the stored id when it is
// the edge's and makes it otherwise.
func TestRelationTokensWithoutText(t *testing.T) {
	names := []string{"", "cert-manager", "Expired  certificate ", " lead", "a\tb\nc", "ünïcode\u00a0name", "x\xffy"}
	rels := []string{"some_new_relation", "", "_", "odd__rel_"}
	for r := range relationPhrases {
		rels = append(rels, r)
	}
	rw := relationWords{}
	for _, rel := range rels {
		for _, src := range names {
			for _, tgt := range names {
				want := fmt.Sprintf("%s %s %s", src, strings.ReplaceAll(rel, "_", " "), tgt)
				if f, ok := relationPhrases[rel]; ok {
					want = fmt.Sprintf(f, src, tgt)
				}
				require.Equal(t, want, relationText(src, rel, tgt))
				require.Equal(t, ApproxTokens(relationText(src, rel, tgt)), rw.tokens(src, rel, tgt), "%q %q %q", src, rel, tgt)
			}
		}
	}
	e := store.Edge{ID: store.EdgeID("a:x", "calls", "b:y"), Source: "a:x", Relation: "calls", Target: "b:y"}
	require.Equal(t, e.ID, edgeID(&e))
	for _, id := range []string{"", "a:x|calls|b:z", "a:x|call|sb:y", "a:x|calls|b:yy"} {
		e.ID = id
		require.Equal(t, store.EdgeID("a:x", "calls", "b:y"), edgeID(&e), "stored id %q", id)
	}
}

// TestCiteTag: citation tags list each document version once, in
// first-cited order, whether the citations come sorted (an edge's) or not
// (a report's).
func TestCiteTag(t *testing.T) {
	tag := func(cs ...citation) string {
		var b strings.Builder
		writeCiteTag(&b, cs)
		return b.String()
	}
	c := func(doc string, v int64, unit string) citation {
		return citation{DocID: doc, Version: v, TextUnit: unit}
	}
	require.Equal(t, "[]", tag())
	require.Equal(t, "[INC-101 v1]", tag(c("INC-101", 1, "u1"), c("INC-101", 1, "u2")))
	require.Equal(t, "[A v1; A v2; B v1]", tag(c("A", 1, "u1"), c("A", 1, "u2"), c("A", 2, ""), c("B", 1, "u0"), c("B", 1, "u3")))
	require.Equal(t, "[B v1; A v1; A v12]", tag(c("B", 1, "u1"), c("A", 1, ""), c("B", 1, "u2"), c("A", 12, "u1"), c("A", 1, "u9")))
}

// TestAppendWords: words are split as strings.FieldsFunc cuts the lowered
// text, stemmed, invalid UTF-8 and other scripts included, appended to
// what dst holds.
func TestAppendWords(t *testing.T) {
	oracle := func(text string) []string {
		var out []string
		for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r)
		}) {
			out = append(out, stem(w))
		}
		return out
	}
	for _, text := range []string{"", " ", "Cert-Manager's certificates EXPIRED at 00:00 UTC.", "x\xffy\xe2\x82z", "İstanbul KELVIN \u212a Ünïcode—dash",
		"batteries queries nodes", "日本語 テキスト", "trailing word"} {
		require.Equal(t, oracle(text), wordsOf(text), "%q", text)
		require.Equal(t, append([]string{"kept"}, oracle(text)...), appendWords([]string{"kept"}, text), "%q", text)
	}
}

// TestReadableSpellingsAsEveryFragment: an entity's readable spellings
// read through its spelling index (a hub's fragments grouped by name) are
// those of a pass over every fragment: the names of readable fragments
// only, the skipped name never, each name of a readable fragment once at
// least.
func TestReadableSpellingsAsEveryFragment(t *testing.T) {
	caller := provenance.Caller{Tenant: "acme", Principal: "sam", Groups: []string{"sre"}}
	r := rand.New(rand.NewPCG(3, 5))
	names := []string{"", "Microsoft Azure", "Azure", "MS Azure", "Azure Cloud", "azure-secret"}
	for round := range 50 {
		states := map[string]provenance.SourceState{}
		var fs []store.Fragment
		for i := range indexedSources + r.IntN(200) {
			id := fmt.Sprintf("doc-%d-%03d", round, i)
			acl := provenance.PublicACL()
			if r.IntN(3) == 0 {
				acl = provenance.ACL{Groups: []string{"payments"}} // not sam's
			}
			states[id] = provenance.SourceState{Tenant: "acme", DocID: id, Version: 1, ACL: acl}
			fs = append(fs, store.Fragment{DocID: id, Version: 1, Name: names[r.IntN(len(names))]})
		}
		ve := visibleEntity{sources: fs, out: entityJSON{ID: "cloud_service:azure", Type: "cloud_service", Name: "Microsoft Azure"}, ok: true}
		spelled := func(ve visibleEntity) []string {
			got := map[string]bool{}
			require.NoError(t, statesView(caller, states).readableSpellings(ve, ve.out.Name, func(n string) { got[n] = true }))
			return slices.Sorted(maps.Keys(got))
		}
		var want []string
		for _, f := range fs {
			if f.Name != "" && f.Name != ve.out.Name && provenance.Readable(caller, states[f.DocID]) && !slices.Contains(want, f.Name) {
				want = append(want, f.Name)
			}
		}
		slices.Sort(want)
		require.Equal(t, want, spelled(ve), "round %d, through every fragment", round)
		ve.spells = newSpellIndex(fs)
		require.Equal(t, want, spelled(ve), "round %d, through the spelling index", round)
	}
}
