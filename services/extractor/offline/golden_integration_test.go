//go:build integration

package offline_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/catalog"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// goldenFile holds, per document of the corpora and extractor
// configuration, a digest of everything Extract returns: the record of
// what the extractor outputs, against which a change meant to keep the
// output (a faster matcher, a prefilter) is checked. Set
// KGSTREAM_GOLDEN_WRITE=1 to rewrite it from the code as it is, and
// KGSTREAM_GOLDEN_DUMP to a directory to write the whole outputs there
// (to diff two versions of the code document by document).
const goldenFile = "testdata/golden-digests.tsv"

// goldenCorpora are the corpora of the golden digests: the benchmark's
// and the seed postmortems.
func goldenCorpora() []string {
	return append(slices.Clone(corpora), "../../../../shared/corpora/seed-postmortems/docs")
}

// goldenOutput is what one extraction returns, in the order returned.
type goldenOutput struct {
	Units    []events.TextUnit
	Entities []events.RawEntity
	Rels     []events.RawRelationship
}

// seedCatalog is the seed corpus's service catalog as a gazetteer.
func seedCatalog(t *testing.T) offline.StaticGazetteer {
	t.Helper()
	data, err := os.ReadFile("../../../../shared/corpora/seed-postmortems/catalog-info.yaml")
	require.NoError(t, err)
	st, _, err := catalog.Parse(data)
	require.NoError(t, err)
	var g offline.StaticGazetteer
	for _, e := range st.Entities {
		g = append(g, offline.CatalogEntry(resolve.ID(e.Type, e.Key), e.Type, e.Name, resolve.Key(e.Key)))
	}
	require.NotEmpty(t, g)
	return g
}

// TestOutputMatchesGoldenDigests runs the extractor over every document
// of the corpora, chunked as the benchmark chunks them, in three
// configurations (the default; noun phrases; the seed catalog as the
// gazetteer, with the document's file name as its title) and compares
// each output's digest with the recorded one.
func TestOutputMatchesGoldenDigests(t *testing.T) {
	c, err := chunk.New(tok(t), chunk.DefaultTokens, chunk.DefaultOverlap)
	require.NoError(t, err)
	tagger, err := offline.NewTagger()
	require.NoError(t, err)
	configs := []struct {
		name  string
		cfg   offline.Config
		title bool
	}{
		{"default", offline.Config{}, false},
		{"noun-phrases", offline.Config{NounPhrases: offline.NounPhraseConfig{Enabled: true, IncludeIncidents: true, Tagger: tagger}}, false},
		{"catalog-titled", offline.Config{Gazetteer: seedCatalog(t)}, true},
	}
	dump := os.Getenv("KGSTREAM_GOLDEN_DUMP")
	var got []string
	for _, dir := range goldenCorpora() {
		corpus := filepath.Base(strings.TrimSuffix(dir, "/docs"))
		docs := loadCorpus(t, dir)
		for _, cf := range configs {
			x, err := offline.New(cf.cfg)
			require.NoError(t, err)
			for _, d := range docs {
				doc := &events.DocChanged{Header: events.Header{Tenant: "golden"}, DocID: d.id, Version: 1,
					DocType: "incident", Text: d.text}
				if cf.title {
					doc.Title = d.id
				}
				us := c.Chunk(d.id, 1, d.text)
				ents, rels, err := x.Extract(t.Context(), doc, us)
				require.NoError(t, err)
				data, err := json.Marshal(goldenOutput{Units: us, Entities: ents, Rels: rels})
				require.NoError(t, err)
				sum := sha256.Sum256(data)
				got = append(got, fmt.Sprintf("%s\t%s\t%s\t%s", corpus, d.id, cf.name, hex.EncodeToString(sum[:16])))
				if dump != "" {
					p := filepath.Join(dump, corpus, cf.name, d.id+".json")
					require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
					require.NoError(t, os.WriteFile(p, data, 0o644))
				}
			}
		}
	}
	if os.Getenv("KGSTREAM_GOLDEN_WRITE") != "" {
		require.NoError(t, os.WriteFile(goldenFile, []byte(strings.Join(got, "\n")+"\n"), 0o644))
		return
	}
	f, err := os.Open(goldenFile)
	require.NoError(t, err, "the golden digests are written with KGSTREAM_GOLDEN_WRITE=1")
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		want = append(want, sc.Text())
	}
	require.NoError(t, sc.Err())
	require.Len(t, got, len(want), "documents and configurations")
	diff := 0
	for i := range want {
		if got[i] != want[i] {
			diff++
			if diff <= 20 {
				t.Errorf("output differs: got %q, want %q", got[i], want[i])
			}
		}
	}
	require.Zero(t, diff, "outputs differing from the golden digests")
}
