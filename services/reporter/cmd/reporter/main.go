// Command reporter writes community reports as its own process and, with
// --weaviate (or --vector-dir), keeps the vector index current: text units,
// entity descriptions and reports, embedded by the KG_EMBED_* endpoint or
// the offline hashing embedder.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/vector"
	vecembedded "github.com/kgstream/kgstream/pkg/vector/embedded"
	"github.com/kgstream/kgstream/pkg/vector/weaviate"
	"github.com/kgstream/kgstream/services/reporter"
)

func main() {
	f := daemon.Flags{Name: "reporter"}
	fs := flag.NewFlagSet("reporter", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:8085")
	var vf vectorFlags
	vf.register(fs)
	_ = fs.Parse(os.Args[1:])
	err := daemon.Run(f, true, func(ctx context.Context, env *daemon.Env) (func(context.Context) error, http.Handler, error) {
		cfg := reporter.Config{}
		if base := os.Getenv("KG_LLM_BASE_URL"); base != "" {
			client, err := llm.New(llm.Config{BaseURL: base, Model: os.Getenv("KG_LLM_MODEL"), APIKey: os.Getenv("KG_LLM_API_KEY")})
			if err != nil {
				return nil, nil, err
			}
			cfg.LLM = reporter.NewLLMWriter(client)
		}
		ix, emb, err := vf.open(ctx)
		if err != nil {
			return nil, nil, err
		}
		cfg.Vectors, cfg.Embedder = ix, emb
		w, err := reporter.New(cfg, env.Bus, env.Stores, env.Log, env.Registry)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context) error {
			if ix != nil {
				defer ix.Close()
			}
			return w.Run(ctx)
		}, nil, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "reporter:", err)
		os.Exit(1)
	}
}

// vectorFlags select the vector index: Weaviate, the embedded index in a
// directory, or none.
type vectorFlags struct {
	dir, url, grpc, collection, apiKey string
}

func (v *vectorFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&v.dir, "vector-dir", os.Getenv("KG_VECTOR_DIR"), "directory of the embedded vector index (one process only: the query service cannot share it; use --weaviate when it runs apart)")
	fs.StringVar(&v.url, "weaviate", os.Getenv("KG_WEAVIATE_URL"), "Weaviate REST URL of the vector index (empty: --vector-dir, or no vector index)")
	fs.StringVar(&v.grpc, "weaviate-grpc", os.Getenv("KG_WEAVIATE_GRPC"), "Weaviate gRPC host:port for batch writes (empty: REST)")
	fs.StringVar(&v.collection, "weaviate-collection", os.Getenv("KG_WEAVIATE_COLLECTION"), "Weaviate collection prefix (default "+weaviate.DefaultCollection+")")
	v.apiKey = os.Getenv("KG_WEAVIATE_API_KEY")
}

// open returns the selected index and the embedder of KG_EMBED_*, or nils.
func (v *vectorFlags) open(ctx context.Context) (vector.Index, embed.Embedder, error) {
	if v.url == "" && v.dir == "" {
		return nil, nil, nil
	}
	emb, err := embed.FromEnv(os.Getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("configuring the embedder: %w", err)
	}
	if v.url != "" {
		ix, err := weaviate.New(ctx, weaviate.Config{URL: v.url, GRPCAddr: v.grpc, Collection: v.collection, APIKey: v.apiKey})
		return ix, emb, err
	}
	if err := os.MkdirAll(v.dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("creating the vector dir: %w", err)
	}
	ix, err := vecembedded.Open(filepath.Join(v.dir, "vectors.db"), vecembedded.Options{})
	return ix, emb, err
}
