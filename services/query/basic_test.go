package query_test

import (
	"net/http"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
	vecembedded "github.com/kgstream/kgstream/pkg/vector/embedded"
	"github.com/kgstream/kgstream/services/query"
)

// indexSeed writes every text unit of the fixture's documents to a new
// embedded vector index, with each document's ACL as the registry has it
// now, as the reporter does on each graph change.
func indexSeed(t *testing.T, f *fixture, emb embed.Embedder) *vecembedded.Index {
	t.Helper()
	ctx := t.Context()
	ix, err := vecembedded.Open(filepath.Join(t.TempDir(), "vectors.db"), vecembedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ix.Close()) })
	for _, tenant := range []string{tenantAcme, tenantGlobex} {
		srcs, err := f.st.ListSources(ctx, tenant)
		require.NoError(t, err)
		var items []vector.Item
		for _, s := range srcs {
			rec, err := f.st.Source(ctx, tenant, s.DocID)
			require.NoError(t, err)
			for _, tu := range rec.TextUnits {
				items = append(items, vector.Item{ID: s.DocID + "#" + tu.ID, Kind: vector.KindTextUnit, Text: tu.Text,
					Sources: []vector.Source{{SourceRef: provenance.SourceRef{DocID: s.DocID, Version: rec.Version, TextUnit: tu.ID}, ACL: s.ACL}}})
			}
		}
		texts := make([]string, len(items))
		for i, it := range items {
			texts[i] = it.Text
		}
		vecs, err := emb.Embed(ctx, texts)
		require.NoError(t, err)
		for i := range items {
			items[i].Vector = vecs[i]
		}
		require.NoError(t, ix.Upsert(ctx, tenant, items))
	}
	return ix
}

type basicResp struct {
	queryResp
	Basic struct {
		Used int `json:"used"`
	} `json:"basic"`
}

func basicQuery(t *testing.T, f *fixture, token, question string) basicResp {
	t.Helper()
	var r basicResp
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", token, map[string]any{"mode": "basic", "question": question}, &r))
	require.Equal(t, "basic", r.Mode)
	return r
}

func citedDocs(r basicResp) map[string]bool {
	out := map[string]bool{}
	for _, c := range r.Citations {
		out[c.DocID] = true
	}
	for _, it := range r.Context {
		for _, c := range it.Citations {
			out[c.DocID] = true
		}
	}
	return out
}

func TestConfigVectorsTogether(t *testing.T) {
	cfg := query.Config{Embedder: embed.NewHashing(8)}.WithDefaults()
	require.ErrorContains(t, cfg.Validate(), "both Vectors and Embedder")
}

var reportIDRE = regexp.MustCompile(`\[(r-[^\]]+)\]`)

type globalResp struct {
	queryResp
	Global struct {
		MapReduce   string              `json:"map_reduce"`
		LLMFallback bool                `json:"llm_fallback"`
		Points      []query.GlobalPoint `json:"points"`
	} `json:"global"`
}
