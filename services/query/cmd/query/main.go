// Command query serves kgstream's query API as its own process. With
// --weaviate (or --vector-dir) it answers basic mode from the vector index
// the reporter fills; with KG_LLM_BASE_URL global answers map and reduce
// with the LLM.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/status"
	"github.com/kgstream/kgstream/pkg/vector"
	vecembedded "github.com/kgstream/kgstream/pkg/vector/embedded"
	"github.com/kgstream/kgstream/pkg/vector/weaviate"
	"github.com/kgstream/kgstream/services/query"
)

func main() {
	f := daemon.Flags{Name: "query"}
	fs := flag.NewFlagSet("query", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:8082")
	tokens := fs.String("tokens", os.Getenv("KG_TOKENS_FILE"), "tokens file")
	anonymous := fs.Bool("allow-anonymous", false, "admit callers without a token as tenant default, public documents only")
	aliasesFile := fs.String("aliases", os.Getenv("KG_ALIASES_FILE"), "alias table (YAML), reloaded when it changes")
	var vf vectorFlags
	vf.register(fs)
	_ = fs.Parse(os.Args[1:])
	err := daemon.Run(f, true, func(ctx context.Context, env *daemon.Env) (func(context.Context) error, http.Handler, error) {
		var toks []auth.Token
		if *tokens != "" {
			var err error
			if toks, err = auth.LoadFile(*tokens); err != nil {
				return nil, nil, err
			}
		}
		var anon *provenance.Caller
		if *anonymous {
			c := auth.AnonymousCaller
			anon = &c
		}
		a, err := auth.New(toks, anon)
		if err != nil {
			return nil, nil, err
		}
		aliases, err := resolve.NewAliasWatcher(*aliasesFile, env.Log)
		if err != nil {
			return nil, nil, err
		}
		qcfg := query.DefaultConfig()
		qcfg.Aliases = aliases
		ix, emb, err := vf.open(ctx)
		if err != nil {
			return nil, nil, err
		}
		qcfg.Vectors, qcfg.Embedder = ix, emb
		if base := os.Getenv("KG_LLM_BASE_URL"); base != "" {
			if qcfg.LLM, err = llm.New(llm.Config{BaseURL: base, Model: os.Getenv("KG_LLM_MODEL"), APIKey: os.Getenv("KG_LLM_API_KEY")}); err != nil {
				return nil, nil, err
			}
		}
		q, err := query.New(qcfg, env.Stores, a, env.Log, env.Registry)
		if err != nil {
			return nil, nil, err
		}
		stc, err := status.NewCollector(env.Stores, env.Bus, []string{"extractor", "resolver", "clusterer", "reporter"}, env.Log, env.Registry)
		if err != nil {
			return nil, nil, err
		}
		mux := http.NewServeMux()
		mux.Handle("GET /v1/status", stc.Handler(a))
		mux.Handle("/", q.Handler())
		return func(ctx context.Context) error {
			if ix != nil {
				defer ix.Close()
			}
			go aliases.Run(ctx, 5*time.Second)
			return q.Run(ctx)
		}, mux, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "query:", err)
		os.Exit(1)
	}
}

// vectorFlags select the vector index: Weaviate, the embedded index in a
// directory, or none (basic mode then answers 501).
type vectorFlags struct {
	dir, url, grpc, collection, apiKey string
}

func (v *vectorFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&v.dir, "vector-dir", os.Getenv("KG_VECTOR_DIR"), "directory of the embedded vector index (one process only: the reporter cannot share it; use --weaviate when it runs apart)")
	fs.StringVar(&v.url, "weaviate", os.Getenv("KG_WEAVIATE_URL"), "Weaviate REST URL of the vector index (empty: --vector-dir, or no vector index)")
	fs.StringVar(&v.grpc, "weaviate-grpc", os.Getenv("KG_WEAVIATE_GRPC"), "Weaviate gRPC host:port (empty: REST)")
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
