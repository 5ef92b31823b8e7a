// Command kgstream is the all-in-one kgstream server and its command-line
// client: up, ingest, catalog import, query, status, entities, eval, leiden,
// mcp and version.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/buildinfo"
	"github.com/kgstream/kgstream/pkg/daemon"
)

const environment = `Environment: KG_SERVER (default --server), KG_TOKEN (default --token), KG_LOG_FORMAT,
KG_LOG_LEVEL, KG_CONFIG (default up --config), KG_TOKENS_FILE, KG_LLM_BASE_URL, KG_LLM_MODEL,
KG_LLM_API_KEY (LLM extraction, reports, global answers), KG_LLM_MAX_CONCURRENCY,
KG_LLM_TOKENS_PER_MINUTE (limits per endpoint), KG_LLM_PRICE_PROMPT, KG_LLM_PRICE_COMPLETION
(per million tokens, for status), KG_EMBED_BASE_URL, KG_EMBED_MODEL, KG_EMBED_API_KEY
(embeddings; offline hashing otherwise), KG_EMBED_MAX_CONCURRENCY, KG_EMBED_TOKENS_PER_MINUTE.`

// exitError carries an exit code with its message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageError is exit code 2: the command line itself is wrong.
func usageError(format string, a ...any) error {
	return &exitError{code: 2, msg: fmt.Sprintf(format, a...)}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := runIO(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		var ee *exitError
		code := 1
		if errors.As(err, &ee) {
			code = ee.code
		}
		if err.Error() != "" {
			fmt.Fprintln(os.Stderr, "kgstream:", err)
		}
		stop()
		os.Exit(code)
	}
}

// run runs one command line with the process's standard streams.
func run(ctx context.Context, args []string) error {
	return runIO(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

// runIO runs one command line with the given streams.
func runIO(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

// globals are the flags every command takes, before or after its name.
type globals struct {
	server, token       string
	json                bool
	logFormat, logLevel string

	stdin          io.Reader
	stdout, stderr io.Writer
}

func (g *globals) client() *app.Client { return app.NewClient(g.server, g.token) }

func (g *globals) logger() (*slog.Logger, error) {
	return daemon.NewLogger(g.stderr, g.logFormat, g.logLevel)
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "kgstream",
		Short: "kgstream keeps a GraphRAG index live",
		Long: "kgstream keeps a GraphRAG index live: documents go in through the gateway and the graph,\n" +
			"communities and reports follow. This binary runs the all-in-one server (up) and is its client.\n\n" + environment,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("unknown command %q; see kgstream --help", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
			return usageError("no command given")
		},
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Refuse a bad logging flag before any command runs.
			_, err := g.logger()
			if err != nil {
				return usageError("%v", err)
			}
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", envOr("KG_SERVER", "http://127.0.0.1:8080"), "kgstream server URL")
	pf.StringVar(&g.token, "token", os.Getenv("KG_TOKEN"), "bearer token")
	pf.BoolVar(&g.json, "json", false, "print JSON instead of tables")
	envString(pf, &g.logFormat, "log-format", "KG_LOG_FORMAT", daemon.LogFormatText, "log format: json or text")
	envString(pf, &g.logLevel, "log-level", "KG_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError("%v; see %s --help", err, c.CommandPath())
	})
	root.AddCommand(upCmd(g), ingestCmd(g), catalogCmd(g), queryCmd(g), statusCmd(g), entitiesCmd(g),
		reclusterCmd(g), evalCmd(g), leidenCmd(g), mcpCmd(g), compactCmd(g), versionCmd(g))
	return root
}

// group makes a command that only holds subcommands: without one, or with
// an unknown one, it is a usage error (exit 2).
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("unknown command %q for %s; see %s --help", args[0], cmd.CommandPath(), cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
			return usageError("%s needs a subcommand", cmd.CommandPath())
		},
	}
	c.AddCommand(subs...)
	return c
}

// nArgs accepts from min to max positional arguments (max < 0: any).
func nArgs(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			return usageError("usage: %s; see %s --help", cmd.UseLine(), cmd.CommandPath())
		}
		return nil
	}
}

// buildInfo is what `kgstream version` prints.
type buildInfo = buildinfo.Info

func readBuildInfo() buildInfo { return buildinfo.Read() }

func versionString() string { return buildinfo.Read().String() }

func versionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the build's version, VCS revision and Go version",
		Args:  nArgs(0, 0),
		RunE: func(*cobra.Command, []string) error {
			if g.json {
				return writeJSON(g.stdout, readBuildInfo())
			}
			_, err := fmt.Fprintln(g.stdout, "kgstream", versionString())
			return err
		},
	}
}
