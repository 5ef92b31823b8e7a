package weaviate_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
	"github.com/kgstream/kgstream/pkg/vector/vectortest"
	"github.com/kgstream/kgstream/pkg/vector/weaviate"
)

// serverConfig is where the tests find Weaviate: KG_TEST_WEAVIATE_URL and
// KG_TEST_WEAVIATE_GRPC, as .ci/weaviate.sh starts it.
func serverConfig() weaviate.Config {
	cfg := weaviate.Config{URL: os.Getenv("KG_TEST_WEAVIATE_URL"), GRPCAddr: os.Getenv("KG_TEST_WEAVIATE_GRPC")}
	if cfg.URL == "" {
		cfg.URL = "http://127.0.0.1:8090"
	}
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = "127.0.0.1:50051"
	}
	return cfg
}

// requireServer fails (never skips) the test when Weaviate does not answer:
// the suite must run against a real server.
func requireServer(tb testing.TB, cfg weaviate.Config) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.URL+"/v1/.well-known/ready", nil)
	require.NoError(tb, err)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		err = fmt.Errorf("ready endpoint answered %s", resp.Status)
	}
	tb.Fatalf("Weaviate is not reachable at %s (%v). Start it with .ci/weaviate.sh, or point KG_TEST_WEAVIATE_URL (and KG_TEST_WEAVIATE_GRPC) at a running server.", cfg.URL, err)
}

// newIndex connects with a fresh collection prefix, so parallel tests and
// earlier runs never share data, and drops the collections afterwards.
func newIndex(tb testing.TB, cfg weaviate.Config) *weaviate.Index {
	tb.Helper()
	requireServer(tb, cfg)
	var b [6]byte
	_, _ = rand.Read(b[:])
	cfg.Collection = "Kgtest" + hex.EncodeToString(b[:])
	cfg.StartupTimeout = 10 * time.Second
	ix, err := weaviate.New(context.Background(), cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		_ = ix.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := ix.Drop(ctx); err != nil {
			tb.Errorf("dropping test collections: %v", err)
		}
	})
	return ix
}

func TestConformance(t *testing.T) {
	cfg := serverConfig()
	requireServer(t, cfg)
	vectortest.Run(t, func(t *testing.T) vector.Index { return newIndex(t, cfg) })
}

// TestConformanceREST runs the suite with batches over REST instead of
// gRPC, the two paths the client takes.
func TestConformanceREST(t *testing.T) {
	cfg := serverConfig()
	cfg.GRPCAddr = ""
	requireServer(t, cfg)
	vectortest.Run(t, func(t *testing.T) vector.Index { return newIndex(t, cfg) })
}

// TestManyACLs checks the slot folding on the server: an item built from
// more distinct ACLs than there are slots is visible to a caller every ACL
// admits and to nobody else.
func TestManyACLs(t *testing.T) {
	const Slots = weaviate.Slots
	ix := newIndex(t, serverConfig())
	ctx := t.Context()
	var sources []vector.Source
	var all []string
	for i := range Slots + 3 {
		g := fmt.Sprintf("g%d", i)
		all = append(all, g)
		sources = append(sources, vector.Source{
			SourceRef: provenance.SourceRef{DocID: fmt.Sprintf("d%d", i), Version: 1},
			// "everyone" is in every ACL, so folding keeps it.
			ACL: provenance.ACL{Groups: []string{g, "everyone"}},
		})
	}
	it := vector.Item{ID: "r", Kind: vector.KindReport, Vector: []float32{1, 0}, Text: "r", Sources: sources}
	require.NoError(t, ix.Upsert(ctx, "acme", []vector.Item{it}))
	count := func(f vector.Filter) int {
		hits, err := ix.Search(ctx, "acme", vector.KindReport, []float32{1, 0}, 10, f)
		require.NoError(t, err)
		return len(hits)
	}
	require.Equal(t, 1, count(vector.Filter{Groups: []string{"everyone"}}))
	require.Equal(t, 1, count(vector.Filter{Groups: append(all[:Slots-1:Slots-1], "everyone")}))
	require.Equal(t, 0, count(vector.Filter{Groups: all[1:]}), "missing a group of a slot")
	require.Equal(t, 0, count(vector.Filter{Principal: "everyone"}))
	// Exactly, every g_i admits too; the folded slot only keeps the tokens
	// common to the folded ACLs, so it is stricter than exact, never looser.
	require.Equal(t, 0, count(vector.Filter{Groups: all}), "folding is stricter than exact")
}

func TestUnreachable(t *testing.T) {
	_, err := weaviate.New(t.Context(), weaviate.Config{URL: "http://127.0.0.1:1"})
	require.Error(t, err)
	_, err = weaviate.New(t.Context(), weaviate.Config{URL: "127.0.0.1:8090"})
	require.ErrorIs(t, err, vector.ErrInvalid)
	_, err = weaviate.New(t.Context(), weaviate.Config{URL: "http://x", Collection: "lower"})
	require.ErrorIs(t, err, vector.ErrInvalid)
}
