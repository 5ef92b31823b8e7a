package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/kgstream/kgstream/cmd/kgstream/mcpserver"
)

func mcpCmd(g *globals) *cobra.Command {
	var listen string
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the query API to MCP clients (stdio, or streamable HTTP with --http)",
		Long: `Serve kgstream's query API as MCP tools: paths, aggregate, entities, entity, query (every
mode), communities and report. Every tool call is one request to the kgstream server (--server)
with the caller's token: on stdio the --token given here, over streamable HTTP (--http ADDR, path
/mcp) the Authorization header of each request. Admission is therefore exactly as on HTTP.
Logs go to stderr; on stdio, stdout carries the protocol.`,
		Example: `  kgstream mcp --server http://127.0.0.1:8080 --token "$KG_TOKEN"
  kgstream mcp --http 127.0.0.1:8091`,
		Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return usageError("%v", err)
			}
			cfg := mcpserver.Config{BaseURL: g.server, Token: g.token, Version: readBuildInfo().Version, Log: log}
			ctx := cmd.Context()
			if listen == "" {
				log.Info("mcp server started", "transport", "stdio", "server", g.server)
				err := mcpserver.New(cfg).Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(g.stdin), Writer: nopWriteCloser{g.stdout}})
				log.Info("mcp server stopped")
				if errors.Is(err, context.Canceled) {
					return nil
				}
				return err
			}
			return serveMCP(ctx, listen, cfg)
		},
	}
	c.Flags().StringVar(&listen, "http", "", "serve streamable HTTP on this address (path /mcp) instead of stdio")
	return c
}

// nopWriteCloser leaves stdout open when a session ends.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func serveMCP(ctx context.Context, addr string, cfg mcpserver.Config) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpserver.Handler(cfg))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	cfg.Log.Info("mcp server started", "transport", "streamable-http", "addr", l.Addr().String(), "server", cfg.BaseURL)
	err = srv.Serve(l)
	cfg.Log.Info("mcp server stopped")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
