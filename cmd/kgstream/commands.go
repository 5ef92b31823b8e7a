package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/llm"
	"github.com/kgstream/kgstream/pkg/stream"
)

// envAnnotation names the environment variable a flag's default comes
// from; a config file does not override a flag whose variable is set.
const envAnnotation = "kgstream_env"

// envString defines a string flag whose default is env (when set) or def.
func envString(fs *pflag.FlagSet, p *string, name, env, def, usage string) {
	fs.StringVar(p, name, envOr(env, def), usage+" (env "+env+")")
	_ = fs.SetAnnotation(name, envAnnotation, []string{env})
}

func upCmd(g *globals) *cobra.Command {
	cfg := app.Config{}
	var configFile string
	c := &cobra.Command{
		Use:   "up",
		Short: "Run the all-in-one server (embedded NATS and stores unless told otherwise)",
		Long: "Run the all-in-one server. Every flag can also be set in a YAML config file (--config),\n" +
			"keyed by the flag's name (http: 127.0.0.1:8080, exclude-path-type: [team]); an unknown key\n" +
			"is an error. A flag on the command line wins over its environment variable, which wins\n" +
			"over the config file.",
		Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configFile != "" {
				if err := applyConfigFile(cmd.Flags(), configFile); err != nil {
					return err
				}
			}
			log, err := g.logger()
			if err != nil {
				return usageError("%v", err)
			}
			cfg.Log = log
			cfg.WeaviateAPIKey = os.Getenv("KG_WEAVIATE_API_KEY")
			// The LLM's endpoint and model may come from flags (or the
			// config file); its key and limits come from the environment.
			baseURL, model := cfg.LLM.BaseURL, cfg.LLM.Model
			if cfg.LLM, err = llm.ConfigFromEnv(func(k string) string {
				switch k {
				case "KG_LLM_BASE_URL":
					return baseURL
				case "KG_LLM_MODEL":
					return model
				}
				return os.Getenv(k)
			}); err != nil {
				return usageError("%v", err)
			}
			switch {
			case cfg.GiveWay < 0:
				return usageError("--give-way must be >= 0, not %s", cfg.GiveWay)
			case cfg.GiveWay == 0:
				cfg.GiveWay = -1 // never wait (the app's zero is its default)
			}
			return app.Run(cmd.Context(), cfg)
		},
	}
	fs := c.Flags()
	envString(fs, &configFile, "config", "KG_CONFIG", "", "YAML config file holding any of these flags")
	envString(fs, &cfg.DataDir, "data", "KG_DATA_DIR", "./data", "data directory (embedded NATS and stores)")
	envString(fs, &cfg.HTTPAddr, "http", "KG_HTTP_ADDR", "127.0.0.1:8080", "HTTP listen address")
	envString(fs, &cfg.OpsAddr, "ops", "KG_OPS_ADDR", app.DefaultOpsAddr, "ops listen address (/metrics, /healthz, /readyz)")
	envString(fs, &cfg.TokensFile, "tokens", "KG_TOKENS_FILE", "", "tokens file (JSON array of {token,tenant,principal,groups,admin,writer})")
	envString(fs, &cfg.NATSURL, "nats", "KG_NATS_URL", "", "external NATS URL (default: embedded server)")
	envString(fs, &cfg.RedisURL, "redis", "KG_REDIS_URL", "", "Redis URL for the stores (default: embedded stores)")
	envString(fs, &cfg.RedisPrefix, "redis-prefix", "KG_REDIS_PREFIX", "kg", "Redis key prefix")
	envString(fs, &cfg.WeaviateURL, "weaviate", "KG_WEAVIATE_URL", "", "Weaviate REST URL of the vector index (default: embedded index under --data)")
	envString(fs, &cfg.WeaviateGRPC, "weaviate-grpc", "KG_WEAVIATE_GRPC", "", "Weaviate gRPC host:port for batch writes (default: REST)")
	envString(fs, &cfg.WeaviateCollection, "weaviate-collection", "KG_WEAVIATE_COLLECTION", "", "Weaviate collection prefix (default Kgstream)")
	envString(fs, &cfg.Stream, "stream", "KG_STREAM", "KG", "JetStream stream name")
	envString(fs, &cfg.SubjectPrefix, "subject-prefix", "KG_SUBJECT_PREFIX", "kg", "subject prefix")
	envString(fs, &cfg.WebhooksFile, "webhooks", "KG_WEBHOOKS_FILE", "", "webhook receivers (YAML or JSON: providers, secrets, tenant, ACL)")
	envString(fs, &cfg.AliasesFile, "aliases", "KG_ALIASES_FILE", "", "alias table (YAML), reloaded when it changes")
	envString(fs, &cfg.LLM.BaseURL, "llm-base-url", "KG_LLM_BASE_URL", "", "OpenAI-compatible LLM endpoint (extraction, reports, global answers; offline without)")
	envString(fs, &cfg.LLM.Model, "llm-model", "KG_LLM_MODEL", "", "LLM model name")
	fs.BoolVar(&cfg.Demo, "demo", false, "ingest the bundled demo corpus (with --tokens, as the file's first writer or admin token)")
	fs.StringArrayVar(&cfg.ExcludedPathTypes, "exclude-path-type", nil, "entity type path queries never expand through (repeatable)")
	fs.StringArrayVar(&cfg.ExcludedPathEntities, "exclude-path-entity", nil, "entity id (TYPE:KEY) path queries never expand through (repeatable)")
	fs.DurationVar(&cfg.Quiet, "cluster-quiet", 2*time.Second, "quiet period before re-clustering")
	fs.DurationVar(&cfg.MaxDelay, "cluster-max-delay", 30*time.Second, "maximum delay of a re-clustering")
	fs.IntVar(&cfg.FullEvery, "cluster-full-every", 100, "every n-th re-clustering of a tenant is from scratch, the others start from the previous partition (1: all from scratch)")
	fs.DurationVar(&cfg.FullInterval, "cluster-full-interval", 0, "a tenant's re-clustering is from scratch once its last one from scratch is this old, and one is run then if runs since were incremental (0: no such schedule)")
	fs.DurationVar(&cfg.GiveWay, "give-way", 2*time.Second, "longest wait of a background stage (re-clustering, reports, vectors, the query caches' reads) while the extractor and resolver have a backlog; 0: never wait")
	fs.DurationVar(&cfg.AuditEvery, "audit-every", time.Minute, "period of the orphan audit")
	fs.IntVar(&cfg.MaxDeliver, "max-deliver", 0, "deliveries per stage before dead-lettering (0: the default)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", stream.DefaultDrainTimeout, "on shutdown, how long handlers in flight may finish before they are cancelled and their events redelivered")
	return c
}

func catalogCmd(g *globals) *cobra.Command {
	var id string
	imp := &cobra.Command{
		Use:   "import FILE",
		Short: "Import a Backstage catalog (catalog-info.yaml) as one document",
		Args:  nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("reading catalog: %w", err)
			}
			if id == "" {
				id = "catalog:" + filepath.Base(args[0])
			}
			a, err := g.client().PostCatalog(cmd.Context(), id, data)
			if err != nil {
				return serverError(g, err)
			}
			if g.json {
				return writeJSON(g.stdout, a)
			}
			fmt.Fprintf(g.stdout, "catalog %s accepted as version %d\n", a.ID, a.Version)
			return nil
		},
	}
	imp.Flags().StringVar(&id, "id", "", "document id of the catalog (default: catalog:<file name>)")
	return group("catalog", "Catalog commands", imp)
}

// serverError makes a transport failure one clear sentence naming the
// server; API errors pass through.
func serverError(g *globals, err error) error {
	if isUnreachable(err) {
		return &exitError{code: 1, msg: fmt.Sprintf("cannot reach the kgstream server at %s (set --server or KG_SERVER): %v", g.server, err)}
	}
	return err
}

func queryCmd(g *globals) *cobra.Command {
	get := func(ctx context.Context, p string, out any) error {
		return serverError(g, g.client().Do(ctx, http.MethodGet, p, "", nil, out))
	}
	paths := &cobra.Command{
		Use:   "paths START REL[,REL...]",
		Short: "Follow relations from an entity (TYPE:NAME); ~REL follows a relation backwards",
		Long: "Follow relations from an entity (TYPE:NAME); ~REL follows a relation backwards.\n" +
			"--limit and --offset page the terminals: a page shows the paths that end at its terminals.",
		Args: nArgs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := pageQuery(cmd, "limit", "offset")
			if err != nil {
				return err
			}
			var out map[string]any
			if err := get(cmd.Context(), "/v1/paths?start="+url.QueryEscape(args[0])+"&rels="+url.QueryEscape(args[1])+q, &out); err != nil {
				return err
			}
			if len(asList(out["terminals"])) == 0 && pageTotal(out) == 0 {
				// An empty answer may be a typo: name the relations the
				// graph does not use.
				if err := checkRelations(cmd.Context(), g, args[1]); err != nil {
					return err
				}
			}
			return printResult(g, "paths", out)
		},
	}
	aggregate := &cobra.Command{
		Use:   "aggregate TYPE REL",
		Short: "Group entities of TYPE by the target of REL",
		Long: "Group entities of TYPE by the target of REL, with exact counts.\n" +
			"--limit and --offset page the groups (largest first); --members and --member-offset\n" +
			"list a window of each group's members (its count stays exact).",
		Args: nArgs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := pageQuery(cmd, "limit", "offset", "members", "member-offset")
			if err != nil {
				return err
			}
			var out map[string]any
			if err := get(cmd.Context(), "/v1/aggregate?type="+url.QueryEscape(args[0])+"&rel="+url.QueryEscape(args[1])+q, &out); err != nil {
				return err
			}
			return printResult(g, "aggregate", out)
		},
	}
	// The paging flags are sent only when given, so without them a
	// command shows the whole answer, as the API gives it.
	paths.Flags().Int("limit", 0, "terminals to show at most (default: all)")
	paths.Flags().Int("offset", 0, "terminals to skip")
	aggregate.Flags().Int("limit", 0, "groups to show at most (default: all)")
	aggregate.Flags().Int("offset", 0, "groups to skip")
	aggregate.Flags().Int("members", 0, "members to list per group at most (default: all)")
	aggregate.Flags().Int("member-offset", 0, "members of each group to skip")
	var etype string
	var limit, offset int
	entities := &cobra.Command{
		Use:   "entities [Q]",
		Short: "List or search entities (Q matches a name or key substring)",
		Args:  nArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := ""
			if len(args) == 1 {
				q = args[0]
			}
			p := "/v1/entities?q=" + url.QueryEscape(q) + "&type=" + url.QueryEscape(etype)
			if limit > 0 {
				p += fmt.Sprintf("&limit=%d", limit)
			}
			if offset > 0 {
				p += fmt.Sprintf("&offset=%d", offset)
			}
			var out map[string]any
			if err := get(cmd.Context(), p, &out); err != nil {
				return err
			}
			return printResult(g, "entities", out)
		},
	}
	entities.Flags().StringVar(&etype, "type", "", "only entities of this type")
	entities.Flags().IntVar(&limit, "limit", 0, "page size (default: the server's)")
	entities.Flags().IntVar(&offset, "offset", 0, "entities to skip")
	entity := &cobra.Command{
		Use:   "entity TYPE:NAME",
		Short: "Show one entity: its citations, descriptions and relationships",
		Args:  nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			typ, name, ok := strings.Cut(args[0], ":")
			if !ok || typ == "" || name == "" {
				return usageError("entity %q is not TYPE:NAME", args[0])
			}
			var out map[string]any
			if err := get(cmd.Context(), "/v1/entities/"+url.PathEscape(typ)+"/"+url.PathEscape(name), &out); err != nil {
				return err
			}
			return printResult(g, "entity", out)
		},
	}
	report := &cobra.Command{
		Use:   "report ID",
		Short: "Show a community report",
		Args:  nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out map[string]any
			if err := get(cmd.Context(), "/v1/reports/"+url.PathEscape(args[0]), &out); err != nil {
				return err
			}
			return printResult(g, "report", out)
		},
	}
	communities := &cobra.Command{
		Use:   "communities",
		Short: "List the communities and their reports",
		Args:  nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out map[string]any
			if err := get(cmd.Context(), "/v1/communities", &out); err != nil {
				return err
			}
			return printResult(g, "communities", out)
		},
	}
	relations := &cobra.Command{
		Use:   "relations",
		Short: "List the relation types in use, with how many relationships each has",
		Long: "List the relation types in use among the entities the caller can see, read from the\n" +
			"entities API (every visible entity's relationships).",
		Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			counts, err := relationsInUse(cmd.Context(), g)
			if err != nil {
				return err
			}
			if g.json {
				type rel struct {
					Relation      string `json:"relation"`
					Relationships int    `json:"relationships"`
				}
				out := struct {
					Relations []rel `json:"relations"`
				}{Relations: []rel{}}
				for _, r := range sortedKeys(counts) {
					out.Relations = append(out.Relations, rel{r, counts[r]})
				}
				return writeJSON(g.stdout, out)
			}
			tw := table(g)
			fmt.Fprintln(tw, "RELATION\tRELATIONSHIPS")
			for _, r := range sortedKeys(counts) {
				fmt.Fprintf(tw, "%s\t%d\n", r, counts[r])
			}
			return tw.Flush()
		},
	}
	c := group("query", "Query the graph: paths, aggregate, entities, relations, reports, or ask in a mode",
		paths, aggregate, entities, entity, relations, report, communities)
	var level, budget int
	for _, mode := range []string{"basic", "local", "global", "drift", "auto"} {
		mc := &cobra.Command{
			Use:   mode + " QUESTION...",
			Short: "Ask a question in " + mode + " mode; the answer cites documents",
			Args:  nArgs(1, -1),
			RunE: func(cmd *cobra.Command, args []string) error {
				req := map[string]any{"mode": mode, "question": strings.Join(args, " ")}
				if level >= 0 {
					req["level"] = level
				}
				if budget > 0 {
					req["budget_tokens"] = budget
				}
				body, _ := json.Marshal(req)
				var out map[string]any
				if err := serverError(g, g.client().Do(cmd.Context(), http.MethodPost, "/v1/query", "application/json", body, &out)); err != nil {
					return err
				}
				return printResult(g, mode, out)
			},
		}
		mc.Flags().IntVar(&level, "level", -1, "community level (global mode)")
		mc.Flags().IntVar(&budget, "budget-tokens", 0, "context budget in tokens (default: the server's)")
		c.AddCommand(mc)
	}
	return c
}

// relationsInUse counts the relationships of each relation type among the
// entities the caller sees, from GET /v1/entities and each entity's
// outgoing edges (every edge is some entity's outgoing edge).
func relationsInUse(ctx context.Context, g *globals) (map[string]int, error) {
	c := g.client()
	counts := map[string]int{}
	const page = 1000
	for offset := 0; ; offset += page {
		var list struct {
			Entities []struct{ ID, Type, Name string } `json:"entities"`
			Total    int                               `json:"total"`
		}
		if err := serverError(g, c.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/entities?limit=%d&offset=%d", page, offset), "", nil, &list)); err != nil {
			return nil, fmt.Errorf("listing entities: %w", err)
		}
		for _, e := range list.Entities {
			typ, key, _ := strings.Cut(e.ID, ":")
			var d struct {
				Out []struct {
					Relation string `json:"relation"`
				} `json:"out"`
			}
			if err := c.Do(ctx, http.MethodGet, "/v1/entities/"+url.PathEscape(typ)+"/"+url.PathEscape(key), "", nil, &d); err != nil {
				return nil, fmt.Errorf("reading entity %s: %w", e.ID, err)
			}
			for _, o := range d.Out {
				counts[o.Relation]++
			}
		}
		if len(list.Entities) == 0 || offset+len(list.Entities) >= list.Total {
			return counts, nil
		}
	}
}

// checkRelations fails when rels (REL[,REL...], ~ for backwards) names a
// relation no visible relationship has.
func checkRelations(ctx context.Context, g *globals, rels string) error {
	inUse, err := relationsInUse(ctx, g)
	if err != nil {
		return err
	}
	var unknown []string
	for _, r := range strings.Split(rels, ",") {
		r = strings.TrimPrefix(strings.TrimSpace(r), "~")
		if _, ok := inUse[r]; !ok && r != "" {
			unknown = append(unknown, r)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	return &exitError{code: 1, msg: fmt.Sprintf("unknown relation %s; relations in use: %s (kgstream query relations)",
		strings.Join(unknown, ", "), strings.Join(sortedKeys(inUse), ", "))}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func table(g *globals) *tabwriter.Writer {
	return tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
}

func writeJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func statusCmd(g *globals) *cobra.Command {
	var audit bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the index's figures: documents, entities, orphans, vector ACL mismatches, pending, lag, LLM cost (pipeline figures for admins)",
		Args:  nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStatus(cmd.Context(), g, audit)
		},
	}
	c.Flags().BoolVar(&audit, "audit", false, "audit now (orphans, index mismatches, vector ACL copies against the registry); exit 1 if anything is found or the audit is not for this token")
	return c
}

// statusReport is the part of GET /v1/status the CLI prints. The audit
// and pipeline figures are nil when the server left them out: audit
// figures for a caller who may not read every document of the tenant,
// pipeline figures for anyone but an admin.
type statusReport struct {
	Tenant          string            `json:"tenant"`
	Scope           string            `json:"scope"`
	Documents       int               `json:"documents"`
	Applied         int               `json:"applied"`
	Entities        int               `json:"entities"`
	Edges           int               `json:"edges"`
	Audited         bool              `json:"audited"`
	OrphanEdges     *int              `json:"orphan_edges"`
	OrphanEntities  int               `json:"orphan_entities"`
	IndexMismatches int               `json:"index_mismatches"`
	ACLMismatches   int               `json:"acl_mismatches"`
	VectorOrphans   int               `json:"vector_orphans"`
	DeadLetters     *uint64           `json:"dead_letters"`
	Pending         map[string]uint64 `json:"pending"`
	IndexLag        struct {
		P50, P99 float64
		Samples  int
	} `json:"index_lag_seconds"`
	Sources []struct {
		Process    string  `json:"process"`
		Figure     string  `json:"figure"`
		AgeSeconds float64 `json:"age_seconds"`
		Live       bool    `json:"live"`
	} `json:"sources"`
	Problems []string `json:"problems"`
	LLM      *struct {
		Documents        uint64  `json:"documents"`
		PromptTokens     float64 `json:"prompt_tokens"`
		CompletionTokens float64 `json:"completion_tokens"`
		Cost             float64 `json:"cost"`
		CallsPerDocument float64 `json:"calls_per_document"`
		CostPerDocument  float64 `json:"cost_per_document"`
	} `json:"llm"`
}

func runStatus(ctx context.Context, g *globals, audit bool) error {
	p := "/v1/status"
	if audit {
		p += "?audit=1"
	}
	var st statusReport
	var raw json.RawMessage
	if err := g.client().Do(ctx, http.MethodGet, p, "", nil, &raw); err != nil {
		return serverError(g, err)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("decoding status: %w", err)
	}
	if g.json {
		fmt.Fprintln(g.stdout, string(raw))
	} else {
		printStatus(g.stdout, st)
	}
	if !audit {
		return nil
	}
	if !st.Audited {
		return &exitError{code: 1, msg: "the audit did not run: it is for admins and for tokens that may read every document of the tenant"}
	}
	orphans := 0
	if st.OrphanEdges != nil {
		orphans = *st.OrphanEdges
	}
	if orphans > 0 || st.OrphanEntities > 0 || st.IndexMismatches > 0 || st.ACLMismatches > 0 || st.VectorOrphans > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("audit found %d orphan edges, %d orphan entities, %d index mismatches, %d vector ACL mismatches, %d vector orphans",
			orphans, st.OrphanEntities, st.IndexMismatches, st.ACLMismatches, st.VectorOrphans)}
	}
	return nil
}

// printStatus writes the human form of a status report.
func printStatus(w io.Writer, st statusReport) {
	fmt.Fprintf(w, "tenant %s\ndocuments %d (applied %d)\nentities %d\nedges %d\n", st.Tenant, st.Documents, st.Applied, st.Entities, st.Edges)
	if st.Scope == "readable" {
		fmt.Fprintln(w, "(counts of the documents this token may read)")
	}
	if st.OrphanEdges != nil {
		fmt.Fprintf(w, "orphan edges %d\n", *st.OrphanEdges)
	}
	if st.Audited {
		fmt.Fprintf(w, "orphan entities %d\nindex mismatches %d\nvector acl mismatches %d\nvector orphans %d\n",
			st.OrphanEntities, st.IndexMismatches, st.ACLMismatches, st.VectorOrphans)
	}
	if st.DeadLetters == nil {
		fmt.Fprintln(w, "pipeline figures (pending, dead letters, lag, LLM usage): admins only")
	} else {
		fmt.Fprintf(w, "dead letters %d\n", *st.DeadLetters)
		for _, s := range app.Stages {
			fmt.Fprintf(w, "pending %-10s %d\n", s, st.Pending[s])
		}
		fmt.Fprintf(w, "index lag p50 %.3fs p99 %.3fs (%d samples)\n", st.IndexLag.P50, st.IndexLag.P99, st.IndexLag.Samples)
		for _, src := range st.Sources {
			silent := ""
			if !src.Live {
				silent = ", silent: left out"
			}
			fmt.Fprintf(w, "source %s %s (%.1fs ago%s)\n", src.Process, src.Figure, src.AgeSeconds, silent)
		}
	}
	if l := st.LLM; l != nil {
		fmt.Fprintf(w, "llm %d documents, %.1f calls/doc, %.0f prompt + %.0f completion tokens, cost %.4f (%.6f per document)\n",
			l.Documents, l.CallsPerDocument, l.PromptTokens, l.CompletionTokens, l.Cost, l.CostPerDocument)
	}
	for _, pr := range st.Problems {
		fmt.Fprintln(w, "problem:", pr)
	}
}

// pageQuery renders the paging flags the command line gave (a flag named
// a-b is the parameter a_b) as query parameters; a negative value is a
// usage error.
func pageQuery(cmd *cobra.Command, names ...string) (string, error) {
	var q strings.Builder
	for _, name := range names {
		if !cmd.Flags().Changed(name) {
			continue
		}
		n, err := cmd.Flags().GetInt(name)
		if err != nil {
			return "", err
		}
		if n < 0 {
			return "", usageError("--%s must not be negative", name)
		}
		fmt.Fprintf(&q, "&%s=%d", strings.ReplaceAll(name, "-", "_"), n)
	}
	return q.String(), nil
}

// pageTotal is the total of a bounded answer's page (0 when unbounded).
func pageTotal(out map[string]any) int {
	t, _ := asMap(out["page"])["total"].(float64)
	return int(t)
}
