package offline_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/services/extractor/chunk"
)

// tokenizer is loaded once per test binary: loading cl100k_base takes a
// moment.
var tokenizer = sync.OnceValues(chunk.NewTokenizer)

func tok(t testing.TB) *chunk.Tokenizer {
	t.Helper()
	tk, err := tokenizer()
	require.NoError(t, err)
	return tk
}

// triples renders relationships as sorted "type:name -rel-> type:name".
func triples(rels []events.RawRelationship) []string {
	out := make([]string, 0, len(rels))
	for _, r := range rels {
		out = append(out, r.SourceType+":"+r.Source+" -"+r.Relation+"-> "+r.TargetType+":"+r.Target)
	}
	slices.Sort(out)
	return out
}
