package daemon

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/service"
	"github.com/kgstream/kgstream/pkg/vector"
	vecembedded "github.com/kgstream/kgstream/pkg/vector/embedded"
	"github.com/kgstream/kgstream/pkg/vector/weaviate"
)

// VectorConfig selects the vector index: Weaviate when URL is set, else the
// embedded index in Dir.
type VectorConfig struct {
	Dir        string
	URL        string
	GRPC       string
	Collection string
	APIKey     string
}

// OpenVectors opens the selected vector index.
func OpenVectors(ctx context.Context, c VectorConfig, log *slog.Logger) (vector.Index, error) {
	if c.URL != "" {
		return weaviate.New(ctx, weaviate.Config{URL: c.URL, GRPCAddr: c.GRPC, Collection: c.Collection, APIKey: c.APIKey, Logger: log})
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the vector dir: %w", err)
	}
	return vecembedded.Open(filepath.Join(c.Dir, VectorFile), vecembedded.Options{})
}

// VectorFlags are the vector-index flags of the services that read or write
// it (reporter, query).
type VectorFlags struct{ VectorConfig }

// Register adds --vector-dir, --weaviate, --weaviate-grpc and
// --weaviate-collection (and their KG_* environment defaults).
func (v *VectorFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&v.Dir, "vector-dir", os.Getenv("KG_VECTOR_DIR"), "directory of the embedded vector index (one process only: use --weaviate when reporter and query run apart)")
	fs.StringVar(&v.URL, "weaviate", os.Getenv("KG_WEAVIATE_URL"), "Weaviate REST URL of the vector index (empty: --vector-dir, or no vector index)")
	fs.StringVar(&v.GRPC, "weaviate-grpc", os.Getenv("KG_WEAVIATE_GRPC"), "Weaviate gRPC host:port (empty: REST)")
	fs.StringVar(&v.Collection, "weaviate-collection", os.Getenv("KG_WEAVIATE_COLLECTION"), "Weaviate collection prefix (default "+weaviate.DefaultCollection+")")
	v.APIKey = os.Getenv("KG_WEAVIATE_API_KEY")
}

// Open returns the selected index and the embedder of KG_EMBED_*, or nils
// when no index is selected.
func (v *VectorFlags) Open(ctx context.Context, log *slog.Logger) (vector.Index, embed.Embedder, error) {
	if v.URL == "" && v.Dir == "" {
		return nil, nil, nil
	}
	emb, err := embed.FromEnv(os.Getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("configuring the embedder: %w", err)
	}
	ix, err := OpenVectors(ctx, v.VectorConfig, log)
	return ix, emb, err
}

// DepsWithVectors is env.Deps() with the vector index v selects (none
// when it selects none) and its embedder; the index is closed when the
// service has stopped.
func (env *Env) DepsWithVectors(ctx context.Context, v VectorFlags) (service.Deps, error) {
	d := env.Deps()
	ix, emb, err := v.Open(ctx, env.Log)
	if err != nil {
		return d, err
	}
	if ix != nil {
		env.Defer(func() { _ = ix.Close() })
		d.Vectors, d.Embedder = ix, emb
	}
	return d, nil
}
