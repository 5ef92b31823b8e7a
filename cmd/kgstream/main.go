// Command kgstream is the all-in-one kgstream server and its command-line
// client: up, ingest, catalog import, query, status and leiden.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `kgstream keeps a GraphRAG index live.

Usage:
  kgstream up [--data DIR] [--http ADDR] [--tokens FILE] [--nats URL] [--redis URL] [--weaviate URL]
             [--aliases FILE] [--webhooks FILE] [--demo]
  kgstream ingest PATH... [--server URL] [--token T] [--tenant T] [--acl-group G]... [--doc-type T]
  kgstream catalog import FILE [--server URL] [--token T]
  kgstream query MODE [ARGS...] [--server URL] [--token T] [--json]
      MODE: paths START REL[,REL...] | aggregate TYPE REL | local|basic|global|drift|auto QUESTION
            | entities [Q] | report ID | communities
  kgstream status [--audit] [--json] [--server URL] [--token T]
  kgstream entities unmerge TYPE:NAME --mention SPELLING [--as NAME] --aliases FILE [--server URL] [--token T]
  kgstream entities reresolve TYPE:NAME [--server URL] [--token T]
  kgstream eval extraction --gold FILE --docs DIR [--catalog FILE] [--json]
  kgstream leiden [--flat] [--max-cluster-size N] [--seed S] [--resolution G] [--randomness R] [--iterations K]

Environment: KG_LLM_BASE_URL, KG_LLM_MODEL, KG_LLM_API_KEY (LLM extraction, reports, global answers),
KG_LLM_PRICE_PROMPT, KG_LLM_PRICE_COMPLETION (per million tokens, for status), KG_EMBED_BASE_URL,
KG_EMBED_MODEL, KG_EMBED_API_KEY (embeddings; offline hashing otherwise), KG_TOKENS_FILE,
KG_SERVER (default server URL), KG_TOKEN (default token).
`

// exitError carries an exit code with its message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:])
	if err != nil {
		var ee *exitError
		code := 1
		if errors.As(err, &ee) {
			code = ee.code
		}
		if err.Error() != "" {
			fmt.Fprintln(os.Stderr, "kgstream:", err)
		}
		os.Exit(code)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return &exitError{code: 2, msg: "no command given"}
	}
	switch args[0] {
	case "up":
		return cmdUp(ctx, args[1:])
	case "ingest":
		return cmdIngest(ctx, args[1:])
	case "catalog":
		if len(args) < 2 || args[1] != "import" {
			return &exitError{code: 2, msg: "usage: kgstream catalog import FILE [--server URL] [--token T]"}
		}
		return cmdCatalogImport(ctx, args[2:])
	case "query":
		return cmdQuery(ctx, args[1:])
	case "status":
		return cmdStatus(ctx, args[1:])
	case "entities":
		return cmdEntities(ctx, args[1:])
	case "eval":
		return cmdEval(ctx, args[1:])
	case "leiden":
		return cmdLeiden(ctx, args[1:], os.Stdin, os.Stdout, os.Stderr)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	default:
		fmt.Fprint(os.Stderr, usage)
		return &exitError{code: 2, msg: fmt.Sprintf("unknown command %q", args[0])}
	}
}
