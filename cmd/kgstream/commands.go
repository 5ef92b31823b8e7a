package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/llm"
)

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// parseInterleaved parses flags that may come before or after positionals.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, &exitError{code: 2, msg: err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func clientFlags(fs *flag.FlagSet) (server, token *string) {
	server = fs.String("server", envOr("KG_SERVER", "http://127.0.0.1:8080"), "kgstream server URL")
	token = fs.String("token", os.Getenv("KG_TOKEN"), "bearer token")
	return
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func cmdUp(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	cfg := app.Config{}
	fs.StringVar(&cfg.DataDir, "data", "./data", "data directory (embedded NATS and stores)")
	fs.StringVar(&cfg.HTTPAddr, "http", "127.0.0.1:8080", "HTTP listen address")
	fs.StringVar(&cfg.TokensFile, "tokens", os.Getenv("KG_TOKENS_FILE"), "tokens file (JSON array of {token,tenant,principal,groups})")
	fs.StringVar(&cfg.NATSURL, "nats", "", "external NATS URL (default: embedded server)")
	fs.StringVar(&cfg.RedisURL, "redis", "", "Redis URL for the stores (default: embedded stores)")
	fs.StringVar(&cfg.RedisPrefix, "redis-prefix", "kg", "Redis key prefix")
	fs.StringVar(&cfg.WeaviateURL, "weaviate", os.Getenv("KG_WEAVIATE_URL"), "Weaviate REST URL of the vector index (default: embedded index under --data)")
	fs.StringVar(&cfg.WeaviateGRPC, "weaviate-grpc", os.Getenv("KG_WEAVIATE_GRPC"), "Weaviate gRPC host:port for batch writes (default: REST)")
	fs.StringVar(&cfg.WeaviateCollection, "weaviate-collection", os.Getenv("KG_WEAVIATE_COLLECTION"), "Weaviate collection prefix (default Kgstream)")
	fs.StringVar(&cfg.Stream, "stream", "KG", "JetStream stream name")
	fs.StringVar(&cfg.SubjectPrefix, "subject-prefix", "kg", "subject prefix")
	fs.BoolVar(&cfg.Demo, "demo", false, "ingest the bundled demo corpus")
	var exTypes, exEntities multiFlag
	fs.Var(&exTypes, "exclude-path-type", "entity type path queries never expand through (repeatable)")
	fs.Var(&exEntities, "exclude-path-entity", "entity id (TYPE:KEY) path queries never expand through (repeatable)")
	fs.StringVar(&cfg.WebhooksFile, "webhooks", os.Getenv("KG_WEBHOOKS_FILE"), "webhook receivers (YAML or JSON: providers, secrets, tenant, ACL)")
	fs.StringVar(&cfg.AliasesFile, "aliases", os.Getenv("KG_ALIASES_FILE"), "alias table (YAML), reloaded when it changes")
	fs.DurationVar(&cfg.Quiet, "cluster-quiet", 2*time.Second, "quiet period before re-clustering")
	fs.DurationVar(&cfg.MaxDelay, "cluster-max-delay", 30*time.Second, "maximum delay of a re-clustering")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	cfg.ExcludedPathTypes, cfg.ExcludedPathEntities = exTypes, exEntities
	cfg.WeaviateAPIKey = os.Getenv("KG_WEAVIATE_API_KEY")
	cfg.LLM = llm.Config{BaseURL: os.Getenv("KG_LLM_BASE_URL"), Model: os.Getenv("KG_LLM_MODEL"), APIKey: os.Getenv("KG_LLM_API_KEY")}
	return app.Run(ctx, cfg)
}

// readDocuments turns paths into documents: text files one each, .jsonl one
// per line, directories recursively.
func readDocuments(paths []string) ([]app.Document, error) {
	var docs []app.Document
	for _, p := range paths {
		err := filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if strings.HasSuffix(path, ".jsonl") {
				sc := bufio.NewScanner(strings.NewReader(string(data)))
				sc.Buffer(make([]byte, 1<<20), 64<<20)
				for line := 1; sc.Scan(); line++ {
					if strings.TrimSpace(sc.Text()) == "" {
						continue
					}
					var doc app.Document
					dec := json.NewDecoder(strings.NewReader(sc.Text()))
					dec.DisallowUnknownFields()
					if err := dec.Decode(&doc); err != nil {
						return fmt.Errorf("%s:%d: %w", path, line, err)
					}
					docs = append(docs, doc)
				}
				return sc.Err()
			}
			docs = append(docs, app.DocumentFromFile(path, data))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
	}
	return docs, nil
}

func cmdIngest(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	server, token := clientFlags(fs)
	tenant := fs.String("tenant", "", "tenant (default: the token's)")
	docType := fs.String("doc-type", "", "document type for the offline extractor (incident, page, runbook)")
	source := fs.String("source", "", "source system name")
	var groups multiFlag
	fs.Var(&groups, "acl-group", "restrict the documents to this group (repeatable); default public")
	paths, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return &exitError{code: 2, msg: "usage: kgstream ingest PATH... [--server URL] [--token T]"}
	}
	docs, err := readDocuments(paths)
	if err != nil {
		return err
	}
	c := app.NewClient(*server, *token)
	var bar *progressbar.ProgressBar
	if term.IsTerminal(int(os.Stderr.Fd())) {
		bar = progressbar.NewOptions(len(docs), progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("ingesting"), progressbar.OptionShowCount())
	}
	var failed []string
	for _, d := range docs {
		if *tenant != "" {
			d.Tenant = *tenant
		}
		if d.DocType == "" {
			d.DocType = *docType
		}
		if d.Source == "" {
			d.Source = *source
		}
		if len(groups) > 0 && d.ACL == nil {
			d.ACL = map[string]any{"groups": []string(groups)}
		}
		if _, err := c.PostDocument(ctx, d); err != nil {
			failed = append(failed, d.ID)
			fmt.Fprintf(os.Stderr, "rejected %s: %v\n", d.ID, err)
		}
		if bar != nil {
			_ = bar.Add(1)
		}
	}
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(os.Stderr)
	}
	fmt.Printf("%d accepted, %d rejected\n", len(docs)-len(failed), len(failed))
	if len(failed) > 0 {
		return &exitError{code: 1, msg: "rejected: " + strings.Join(failed, ", ")}
	}
	return nil
}

func cmdCatalogImport(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("catalog import", flag.ContinueOnError)
	server, token := clientFlags(fs)
	id := fs.String("id", "", "document id of the catalog (default: catalog:<file name>)")
	paths, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(paths) != 1 {
		return &exitError{code: 2, msg: "usage: kgstream catalog import FILE [--server URL] [--token T]"}
	}
	data, err := os.ReadFile(paths[0])
	if err != nil {
		return fmt.Errorf("reading catalog: %w", err)
	}
	if *id == "" {
		*id = "catalog:" + filepath.Base(paths[0])
	}
	a, err := app.NewClient(*server, *token).PostCatalog(ctx, *id, data)
	if err != nil {
		return err
	}
	fmt.Printf("catalog %s accepted as version %d\n", a.ID, a.Version)
	return nil
}

func cmdQuery(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	server, token := clientFlags(fs)
	asJSON := fs.Bool("json", false, "print the raw JSON response")
	level := fs.Int("level", -1, "community level (global mode)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return &exitError{code: 2, msg: "usage: kgstream query MODE ARGS..."}
	}
	c := app.NewClient(*server, *token)
	var out map[string]any
	need := func(n int, u string) error {
		if len(pos) < n+1 {
			return &exitError{code: 2, msg: "usage: kgstream query " + u}
		}
		return nil
	}
	switch mode := pos[0]; mode {
	case "paths":
		if err := need(2, "paths TYPE:NAME REL[,REL...]"); err != nil {
			return err
		}
		err = c.Do(ctx, http.MethodGet, "/v1/paths?start="+url.QueryEscape(pos[1])+"&rels="+url.QueryEscape(pos[2]), "", nil, &out)
	case "aggregate":
		if err := need(2, "aggregate TYPE REL"); err != nil {
			return err
		}
		err = c.Do(ctx, http.MethodGet, "/v1/aggregate?type="+url.QueryEscape(pos[1])+"&rel="+url.QueryEscape(pos[2]), "", nil, &out)
	case "entities":
		q := ""
		if len(pos) > 1 {
			q = pos[1]
		}
		err = c.Do(ctx, http.MethodGet, "/v1/entities?q="+url.QueryEscape(q), "", nil, &out)
	case "report":
		if err := need(1, "report ID"); err != nil {
			return err
		}
		err = c.Do(ctx, http.MethodGet, "/v1/reports/"+url.PathEscape(pos[1]), "", nil, &out)
	case "communities":
		err = c.Do(ctx, http.MethodGet, "/v1/communities", "", nil, &out)
	case "basic", "local", "global", "drift", "auto":
		if err := need(1, mode+" QUESTION"); err != nil {
			return err
		}
		req := map[string]any{"mode": mode, "question": strings.Join(pos[1:], " ")}
		if *level >= 0 {
			req["level"] = *level
		}
		body, _ := json.Marshal(req)
		err = c.Do(ctx, http.MethodPost, "/v1/query", "application/json", body, &out)
	default:
		return &exitError{code: 2, msg: fmt.Sprintf("unknown query mode %q", mode)}
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printAnswer(os.Stdout, pos[0], out)
	return nil
}

func printAnswer(w io.Writer, mode string, out map[string]any) {
	switch mode {
	case "paths":
		for _, t := range asList(out["terminals"]) {
			m := asMap(t)
			fmt.Fprintf(w, "%s (%s)  paths=%v\n", m["name"], m["type"], m["paths"])
		}
		for _, r := range asList(out["rows"]) {
			var parts []string
			for _, e := range asList(asMap(r)["edges"]) {
				em := asMap(e)
				parts = append(parts, fmt.Sprintf("%s -%s-> %s %s", em["source"], em["relation"], em["target"], cites(em["citations"])))
			}
			fmt.Fprintln(w, "  "+strings.Join(parts, "  "))
		}
	case "aggregate":
		for _, g := range asList(out["groups"]) {
			m := asMap(g)
			var names []string
			for _, mem := range asList(m["members"]) {
				names = append(names, fmt.Sprint(asMap(mem)["name"]))
			}
			fmt.Fprintf(w, "%s  %v  [%s]\n", asMap(m["target"])["name"], m["count"], strings.Join(names, ", "))
		}
	default:
		if a, ok := out["answer"]; ok {
			fmt.Fprintln(w, a)
			fmt.Fprintln(w, "citations:", cites(out["citations"]))
			return
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	}
}

func cites(v any) string {
	var parts []string
	for _, c := range asList(v) {
		m := asMap(c)
		parts = append(parts, fmt.Sprintf("%v@v%v", m["doc_id"], m["version"]))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func cmdStatus(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	server, token := clientFlags(fs)
	audit := fs.Bool("audit", false, "recount orphans from the store; exit 1 if any")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	p := "/v1/status"
	if *audit {
		p += "?audit=1"
	}
	var st struct {
		Tenant          string                     `json:"tenant"`
		Documents       int                        `json:"documents"`
		Applied         int                        `json:"applied"`
		Entities        int                        `json:"entities"`
		Edges           int                        `json:"edges"`
		OrphanEdges     int                        `json:"orphan_edges"`
		OrphanEntities  int                        `json:"orphan_entities"`
		IndexMismatches int                        `json:"index_mismatches"`
		DeadLetters     uint64                     `json:"dead_letters"`
		Pending         map[string]uint64          `json:"pending"`
		IndexLag        struct{ P50, P99 float64 } `json:"index_lag_seconds"`
		Problems        []string                   `json:"problems"`
		LLM             *struct {
			Documents        uint64  `json:"documents"`
			PromptTokens     float64 `json:"prompt_tokens"`
			CompletionTokens float64 `json:"completion_tokens"`
			Cost             float64 `json:"cost"`
			CallsPerDocument float64 `json:"calls_per_document"`
			CostPerDocument  float64 `json:"cost_per_document"`
		} `json:"llm"`
	}
	var raw json.RawMessage
	if err := app.NewClient(*server, *token).Do(ctx, http.MethodGet, p, "", nil, &raw); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return err
	}
	if *asJSON {
		fmt.Println(string(raw))
	} else {
		fmt.Printf("tenant %s\ndocuments %d (applied %d)\nentities %d\nedges %d\norphan edges %d\ndead letters %d\n",
			st.Tenant, st.Documents, st.Applied, st.Entities, st.Edges, st.OrphanEdges, st.DeadLetters)
		for _, s := range app.Stages {
			fmt.Printf("pending %-10s %d\n", s, st.Pending[s])
		}
		fmt.Printf("index lag p50 %.3fs p99 %.3fs\n", st.IndexLag.P50, st.IndexLag.P99)
		if l := st.LLM; l != nil {
			fmt.Printf("llm %d documents, %.1f calls/doc, %.0f prompt + %.0f completion tokens, cost %.4f (%.6f per document)\n",
				l.Documents, l.CallsPerDocument, l.PromptTokens, l.CompletionTokens, l.Cost, l.CostPerDocument)
		}
		for _, pr := range st.Problems {
			fmt.Println("problem:", pr)
		}
	}
	if *audit && (st.OrphanEdges > 0 || st.OrphanEntities > 0 || st.IndexMismatches > 0) {
		return &exitError{code: 1, msg: fmt.Sprintf("audit found %d orphan edges, %d orphan entities, %d index mismatches",
			st.OrphanEdges, st.OrphanEntities, st.IndexMismatches)}
	}
	return nil
}

var _ = errors.New
