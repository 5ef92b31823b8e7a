package query

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDigitsMustAgreeInCloseSpellings(t *testing.T) {
	require.True(t, closeSpelling("manager", "manger"))
	require.True(t, closeSpelling("kubernetes", "kubernets"))
	require.False(t, closeSpelling("labvirt1008", "labvirt1009"), "digits differ")
	require.False(t, closeSpelling("labvirt1008", "labvirt100"), "digits differ")
	require.False(t, closeSpelling("cert", "cart"), "too short to be a variant")
	require.Zero(t, nameMatch("labvirt1009", wordsOf("What happened to labvirt1008?")))
	require.Positive(t, nameMatch("expired certificate", wordsOf("which certificates expired?")))
	require.Zero(t, nameMatch("in-service", wordsOf("What caused the KIAM service disruption?")), "every word of a name counts")
	require.Positive(t, nameMatch("in-service", wordsOf("Which node was taken in service?")))
}

func TestSplitPassageSections(t *testing.T) {
	text := "# Outage\n\n## Summary\n\nThe proxy was restarted. Traffic\nrecovered after ten minutes.\n\n" +
		"## Root cause\n\n- The certificate expired because the rotation job was disabled.\n" +
		"| 10:00 | Alert fired |\n|---|---|\n"
	ss := splitPassage(text)
	var got []string
	for _, s := range ss {
		got = append(got, s.heading+": "+s.text)
	}
	require.Equal(t, []string{
		"Summary: The proxy was restarted.",
		"Summary: Traffic recovered after ten minutes.",
		"Root cause: The certificate expired because the rotation job was disabled.",
		"Root cause: 10:00 — Alert fired",
	}, got)
}

func TestSelectSentencesPrefersStatedCause(t *testing.T) {
	passage := "## Summary\n\nThe KIAM outage on Hellman lasted two hours and pods could not reach AWS.\n\n" +
		"## Root cause\n\nThe KIAM server certificate expired, causing the service to crash-loop.\n\n" +
		"## Action items\n\nDocument how KIAM certificates are renewed on Hellman.\n"
	q := "What caused the KIAM outage on Hellman?"
	doc, rank, items := onePassage("PM-1", passage, q)
	got := selectSentences(q, rank, []string{"KIAM server"}, items, 1)
	require.Len(t, got, 1)
	require.True(t, strings.HasPrefix(got[0].text, "The KIAM server certificate expired"), got[0].text)
	// Without "why", the sentence most about the question wins.
	got = selectSentences("How long did the KIAM outage on Hellman last?", scanUnitRanking("How long did the KIAM outage on Hellman last?", []readableDoc{doc}), nil, items, 1)
	require.True(t, strings.HasPrefix(got[0].text, "The KIAM outage on Hellman lasted"), got[0].text)
}

func TestRankUnitsPrefersNamedDocuments(t *testing.T) {
	a := readableDoc{id: "PM-7 - Kafka metrics missing", title: "Kafka metrics missing", doc: newLexDocFromText("PM-7 - Kafka metrics missing", "The exporter endpoint was too slow to load.")}
	a.doc.titleWords = newWordSet(contentWords("Kafka metrics missing PM-7 - Kafka metrics missing"))
	b := readableDoc{id: "PM-8", doc: newLexDocFromText("PM-8", "Kafka brokers were restarted; metrics were fine.")}
	q := "Why were Kafka metrics missing?"
	r := scanUnitRanking(q, []readableDoc{a, b})
	got := r.scanRank([]readableDoc{a, b}, nil, 5)
	require.NotEmpty(t, got)
	require.Equal(t, "PM-7 - Kafka metrics missing", got[0].docID, "the document the question names comes first")
}

// TestCountFieldsIsFieldsLen: the token estimate's word count is
// strings.Fields' on ASCII, Unicode spaces and invalid UTF-8 alike.
func TestCountFieldsIsFieldsLen(t *testing.T) {
	for _, s := range []string{"", " ", "a", " a ", "a  b\tc\nd", "\u00a0x\u2003y\u3000", "x\xffy z", "\xff", "one\u0085two", "日本 語"} {
		if got, want := countFields(s), len(strings.Fields(s)); got != want {
			t.Errorf("countFields(%q) = %d, strings.Fields gives %d", s, got, want)
		}
	}
}

func FuzzCountFields(f *testing.F) {
	f.Add("a b\u00a0c")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := countFields(s), len(strings.Fields(s)); got != want {
			t.Fatalf("countFields(%q) = %d, strings.Fields gives %d", s, got, want)
		}
	})
}

// TestBestScoredIsTheSortedPrefix: keeping the best in a heap gives the
// first limit of the full sort, for every limit, ties broken as the sort
// breaks them.
func TestBestScoredIsTheSortedPrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	var cs []scored
	for i := range 500 {
		cs = append(cs, scored{doc: i, unit: r.IntN(3), score: float64(r.IntN(40)) / 8})
	}
	cmpf := func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.doc, b.doc), cmp.Compare(a.unit, b.unit))
	}
	want := slices.SortedFunc(slices.Values(cs), cmpf)
	for _, limit := range []int{1, 2, 7, 100, 249, 250, 251, 499, 500, 800} {
		b := newBestScored(limit, cmpf)
		for _, c := range cs {
			b.add(c)
		}
		if got := b.sorted(); !slices.Equal(got, want[:min(limit, len(cs))]) {
			t.Fatalf("limit %d: not the sorted prefix", limit)
		}
	}
}

func TestSelectSentencesSaysARepeatedSentenceOnce(t *testing.T) {
	passage := "The deploy of the billing worker broke invoice exports for two hours on Monday.\n\n" +
		"Summary of impact: The deploy of the billing worker broke invoice exports for two hours on Monday.\n\n" +
		"The billing worker was rolled back and invoice exports recovered.\n"
	q := "What happened to invoice exports of the billing worker?"
	_, rank, items := onePassage("PM-3", passage, q)
	got := selectSentences(q, rank, nil, items, 4)
	var texts []string
	for _, s := range got {
		texts = append(texts, s.text)
	}
	require.Len(t, texts, 2, "%q", texts)
	require.Contains(t, texts[1], "rolled back")
	require.True(t, wordsWithin("a b", "x a b"))
	require.False(t, wordsWithin("a b", "xa b"))
	require.False(t, wordsWithin("a b", "a bc"))
}

// onePassage is a readable document of one passage (unit u0 at version
// 1), the ranking of q over it and the passage as a context item.
func onePassage(id, passage, q string) (readableDoc, unitRanking, []ContextItem) {
	doc := readableDoc{id: id, doc: newLexDocFromText(id, passage)}
	items := []ContextItem{{Kind: KindTextUnit, ID: id + "#u0", Text: passage, Citations: []citation{{DocID: id, Version: 1, TextUnit: "u0"}}}}
	return doc, scanUnitRanking(q, []readableDoc{doc}), items
}
