//go:build integration

package clusterer_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/clusterer"
)

// Shared fixtures. Tests fail (never skip) when they are missing.
const (
	seedDir     = "../../../shared/corpora/seed-postmortems"
	fixturesDir = "../../../shared/fixtures/leiden"
)

// recording is the recorded LLM extraction of the seed corpus, by doc id.
var recording = sync.OnceValues(func() (map[string][]triple, error) {
	data, err := os.ReadFile(filepath.Join(seedDir, "recorded-llm-extraction.json"))
	if err != nil {
		return nil, err
	}
	var rec map[string][]triple
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("decoding the recorded extraction: %w", err)
	}
	return rec, nil
})

func seedRecording(t *testing.T) map[string][]triple {
	t.Helper()
	rec, err := recording()
	require.NoError(t, err, "the seed corpus is required")
	require.Len(t, rec, 10)
	return rec
}

// incidentContributions turns one document's recorded triples into
// canonical contributions, as the resolver would: ids from resolve.ID,
// mention spellings (name rank 2), weight = strength (1 when absent).
func incidentContributions(t *testing.T, doc string, triples []triple) store.Contributions {
	t.Helper()
	return incidentContributionsIn(t, seedDir, doc, triples)
}

// catalogContributions is the service catalog: six services, six teams and
// the six owned_by edges service -> team.
func catalogContributions(t *testing.T) store.Contributions {
	t.Helper()
	c := catalogContributionsIn(t, seedDir)
	require.Len(t, c.Edges, 6, "the catalog has six owned_by edges")
	return c
}

// applySeed applies the catalog and the ten recorded extractions (version 1
// each) and returns the union of the entities they touched.
func applySeed(t *testing.T, st store.GraphStore) []string {
	t.Helper()
	ctx := t.Context()
	rec := seedRecording(t)
	var touched []string
	res, err := st.Apply(ctx, tenant, catalogDoc, 1, catalogContributions(t))
	require.NoError(t, err)
	touched = append(touched, res.Touched...)
	docs := make([]string, 0, len(rec))
	for d := range rec {
		docs = append(docs, d)
	}
	sort.Strings(docs)
	for _, d := range docs {
		res, err := st.Apply(ctx, tenant, d, 1, incidentContributions(t, d, rec[d]))
		require.NoError(t, err)
		require.Equal(t, store.Applied, res.Outcome)
		touched = append(touched, res.Touched...)
	}
	stats, err := st.Stats(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, store.Stats{Sources: 11, Entities: 36, Edges: 39}, stats, "EXPECTED.md: 36 nodes / 39 edges resolved")
	slices.Sort(touched)
	return slices.Compact(touched)
}

// editINC121 applies version 2 of INC-121, whose failure is now "bad
// upgrade" instead of "expired certificate" (EXPECTED.md).
func editINC121(t *testing.T, st store.GraphStore) store.ApplyResult {
	t.Helper()
	triples := slices.Clone(seedRecording(t)["INC-121"])
	n := 0
	for i, r := range triples {
		if r.Relation == "failure" {
			triples[i].Target = "bad upgrade"
			n++
		}
	}
	require.Equal(t, 1, n)
	res, err := st.Apply(t.Context(), tenant, "INC-121", 2, incidentContributions(t, "INC-121", triples))
	require.NoError(t, err)
	require.Equal(t, store.Applied, res.Outcome)
	return res
}

// fixtureLevels reads a hierarchical fixture as member sets per level, each
// member set sorted and the sets of a level sorted.
func fixtureLevels(t *testing.T, name string) map[int][][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(fixturesDir, name))
	require.NoError(t, err, "the Leiden fixtures are required")
	defer f.Close()
	type key struct{ level, cluster int }
	sets := map[key][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), "\t")
		require.Len(t, fs, 5, "fixture row %q", sc.Text())
		cl, err := strconv.Atoi(fs[1])
		require.NoError(t, err)
		lv, err := strconv.Atoi(fs[2])
		require.NoError(t, err)
		k := key{lv, cl}
		sets[k] = append(sets[k], fs[0])
	}
	require.NoError(t, sc.Err())
	out := map[int][][]string{}
	for k, ms := range sets {
		slices.Sort(ms)
		out[k.level] = append(out[k.level], ms)
	}
	for _, l := range out {
		sortSets(l)
	}
	return out
}

// TestIncrementalReclusterIsStableOnSeed: the seed graph and the INC-121
// edit, as TestIncrementalReclusterIsStable does with its own graphs.
func TestIncrementalReclusterIsStableOnSeed(t *testing.T) {
	checkEditKeepsUntouchedCommunities(t, applySeed, editINC121)
}

// checkEditKeepsUntouchedCommunities clusters a graph incrementally and from
// scratch, applies one edit to both and checks that the incremental run
// changes no more than the from-scratch one and keeps every level-0
// community the edit did not touch.
func checkEditKeepsUntouchedCommunities(t *testing.T, apply func(*testing.T, store.GraphStore) []string,
	edit func(*testing.T, store.GraphStore) store.ApplyResult) {
	t.Helper()
	inc := newEnv(t, clusterer.Config{WeightBy: "sources", Partitioner: clusterer.Leiden(clusterer.LeidenConfig{MaxClusterSize: 6}),
		MaxClusterSize: 6, FullEvery: 100})
	scratch := newEnv(t, seedConfig())
	for _, e := range []*env{inc, scratch} {
		apply(t, e.st)
		require.NoError(t, e.w.Recluster(t.Context(), tenant))
	}
	first := communities(t, inc.st)
	require.Equal(t, communities(t, scratch.st), first, "the first run is the from-scratch (GraphRAG) partition")
	var res store.ApplyResult
	for _, e := range []*env{inc, scratch} {
		res = edit(t, e.st)
		require.NoError(t, e.w.Recluster(t.Context(), tenant))
	}
	got, want := announcements(t, inc.bus)[1], announcements(t, scratch.bus)[1]
	require.LessOrEqual(t, len(got.Changed)+len(got.Removed), len(want.Changed)+len(want.Removed),
		"incremental: %d changed, %d removed; from scratch: %d, %d", len(got.Changed), len(got.Removed), len(want.Changed), len(want.Removed))
	now := levelZero(communities(t, inc.st))
	g, err := inc.st.Snapshot(t.Context(), tenant)
	require.NoError(t, err)
	alive := map[string]bool{}
	for _, en := range g.Entities {
		alive[en.ID] = true
	}
	for id, c := range levelZero(first) {
		moved := slices.ContainsFunc(c.Members, func(m string) bool { return slices.Contains(res.Touched, m) || !alive[m] })
		if !moved {
			require.Contains(t, now, id, "untouched community %v moved", c.Members)
		}
	}
	t.Logf("incremental: %d changed, %d removed; from scratch: %d changed, %d removed",
		len(got.Changed), len(got.Removed), len(want.Changed), len(want.Removed))
}
