//go:build integration

package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/query"
)

// TestWarmCachesHonourRevocationAndDeletionAtOnce: with every cache warm
// (the registry view, the derived and graph caches live on the bus, the
// unit and name indexes built), a revocation and then a deletion recorded
// by the registry only, with no event, are honoured by the very next
// request of every mode and route: the document is gone from it, while a
// caller still admitted keeps seeing it until the deletion.
func TestWarmCachesHonourRevocationAndDeletionAtOnce(t *testing.T) {
	bus := streamtest.NewBus(t, streamtest.Options{})
	cs := &countingStores{Stores: openStore(t), calls: map[string]int{}}
	st := &failingStores{Stores: cs}
	loadSeed(t, st, tenantAcme)
	loadGlobex(t, st)
	emb := embed.NewHashing(256)
	ix := indexSeed(t, &fixture{t: t, st: st}, emb)
	a, err := newAuth()
	require.NoError(t, err)
	svc, err := query.New(query.Config{Events: bus, Vectors: ix, Embedder: emb}, st, a, nil, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	f := &fixture{t: t, st: st, srv: srv}

	const doc = "INC-101"
	tls := "Why did the TLS certificate on the public ingress expire?"
	requests := []struct {
		name, method, path string
		body               map[string]any
	}{
		{"paths", http.MethodGet, certPaths, nil},
		{"aggregate", http.MethodGet, "/v1/aggregate?type=incident&rel=affected", nil},
		{"entity", http.MethodGet, "/v1/entities/component/cert-manager", nil},
		{"entities", http.MethodGet, "/v1/entities?type=incident", nil},
		{"local", http.MethodPost, "/v1/query", map[string]any{"mode": "local", "question": "What happened to cert-manager?"}},
		{"basic", http.MethodPost, "/v1/query", map[string]any{"mode": "basic", "question": tls}},
		{"drift", http.MethodPost, "/v1/query", map[string]any{"mode": "drift", "question": tls}},
		{"global", http.MethodPost, "/v1/query", map[string]any{"mode": "global", "question": "What are the recurring root causes of our incidents?"}},
		{"auto", http.MethodPost, "/v1/query", map[string]any{"mode": "auto", "question": tls}},
	}
	// names returns, per request, whether its response names doc.
	names := func(token string) map[string]bool {
		t.Helper()
		out := map[string]bool{}
		for _, r := range requests {
			var raw json.RawMessage
			var body any
			if r.body != nil {
				body = r.body
			}
			status := f.do(r.method, r.path, token, body, &raw)
			require.Equal(t, http.StatusOK, status, "%s: %s", r.name, raw)
			out[r.name] = strings.Contains(string(raw), doc)
		}
		return out
	}
	all := map[string]bool{}
	none := map[string]bool{}
	for _, r := range requests {
		all[r.name], none[r.name] = true, false
	}

	// Warm every cache: the event consumer runs (a second global answer
	// reads no report), and a second round of requests lists no registry.
	streamtest.Eventually(t, 10*time.Second, func() error {
		names(tokAlice)
		cs.reset()
		names(tokAlice)
		if c := cs.reset(); c["Reports"] > 0 || c["ListSources"] > 0 {
			return fmt.Errorf("still reading whole tenants: %v", c)
		}
		return nil
	})
	require.Equal(t, all, names(tokAlice), "every request names %s before the revocation", doc)
	require.Equal(t, all, names(tokBob))
	cs.reset()
	names(tokAlice)
	calls := cs.reset()
	require.Zero(t, calls["ListSources"], "warm requests admit against the kept registry view: %v", calls)
	require.Positive(t, calls["RegistryGeneration"], "and check it on every request: %v", calls)

	// A revocation for alice (oncall), registry only: her very next
	// request of every mode leaves the document out; bob (sre) still has it.
	_, err = st.SetACL(t.Context(), tenantAcme, doc, provenance.ACL{Groups: []string{"sre"}})
	require.NoError(t, err)
	require.Equal(t, none, names(tokAlice), "the revocation counts at once")
	require.Equal(t, all, names(tokBob), "a caller still admitted keeps the document")

	// A deletion, registry only: bob's very next request of every mode
	// leaves it out too.
	_, err = st.MarkDeleted(t.Context(), tenantAcme, doc)
	require.NoError(t, err)
	require.Equal(t, none, names(tokBob), "the deletion counts at once")
	require.Equal(t, none, names(tokAlice))

	// The views are still served from the kept caches (no event came).
	cs.reset()
	names(tokBob)
	require.Zero(t, cs.reset()["Reports"])
}
