//go:build integration

package extractor_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"os"

	"github.com/kgstream/kgstream/pkg/catalog"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/llm/llmtest"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// seed is the seed corpus. Tests fail (never skip) without it.
const seed = "../../../shared/corpora/seed-postmortems"

// seedDoc reads a seed postmortem as a DocChanged.
func seedDoc(t *testing.T, tenant, id string, version int64) *events.DocChanged {
	t.Helper()
	return docIn(t, seed, tenant, id, version)
}

// recorded reads the seed recording's triples per document.
func recorded(t *testing.T) map[string][]string {
	t.Helper()
	return recordedIn(t, seed)
}

var seedIDs = []string{"INC-101", "INC-104", "INC-107", "INC-112", "INC-115", "INC-118", "INC-121", "INC-124", "INC-127", "INC-130"}

func replay(t *testing.T) *llmtest.Replay {
	t.Helper()
	r, err := llmtest.SeedReplay(filepath.Join(seed, "recorded-llm-extraction.json"))
	require.NoError(t, err)
	t.Cleanup(r.Close)
	return r
}

// seedGazetteer is the seed catalog's entities plus the components the
// postmortems name, as the graph would hold them after a catalog import.
func seedGazetteer(t *testing.T) offline.StaticGazetteer {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(seed, "catalog-info.yaml"))
	require.NoError(t, err)
	st, _, err := catalog.Parse(data)
	require.NoError(t, err)
	var g offline.StaticGazetteer
	for _, e := range st.Entities {
		g = append(g, offline.Entry{ID: resolve.ID(e.Type, e.Key), Type: e.Type, Name: e.Name, Key: resolve.Key(e.Key)})
	}
	for _, c := range []string{"cert-manager", "ingress", "orders-db"} {
		g = append(g, offline.Entry{ID: resolve.ID("component", c), Type: "component", Name: c, Key: resolve.Key(c)})
	}
	return g
}
