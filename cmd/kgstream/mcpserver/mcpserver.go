// Package mcpserver exposes the kgstream query API to MCP clients (agents):
// paths, aggregate, entity search and lookup, questions in every mode,
// communities and reports, each a tool. Every tool call is one request to
// the kgstream HTTP API with the caller's bearer token, so admission is
// exactly what the caller gets over HTTP: the MCP server holds no data and
// no privilege of its own.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config configures the MCP server.
type Config struct {
	// BaseURL is the kgstream HTTP API the tools call.
	BaseURL string
	// Token is the bearer token of stdio sessions (the one local caller).
	// Streamable HTTP sessions never use it: each request carries its
	// caller's own Authorization header.
	Token string
	// Version is reported to clients.
	Version string
	// HTTP is the client of the API calls (default: 60 s timeout).
	HTTP *http.Client
	// Log receives the start, stop and refused calls (never stdout: on
	// stdio that is the protocol's).
	Log *slog.Logger
}

func (c *Config) setDefaults() {
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.HTTP == nil {
		c.HTTP = &http.Client{Timeout: 60 * time.Second}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Version == "" {
		c.Version = "devel"
	}
}

// PathsInput are the arguments of the paths tool. The paging arguments
// are pointers: an absent one is not sent, and the API answers in full.
type PathsInput struct {
	Start  string `json:"start" jsonschema:"the start entity as TYPE:NAME, e.g. service:checkout-api"`
	Rels   string `json:"rels" jsonschema:"comma-separated relations to follow in order; ~REL follows a relation backwards, e.g. ~involved,owned_by"`
	Limit  *int   `json:"limit,omitempty" jsonschema:"terminals to return at most (default all); the page carries the paths ending at them"`
	Offset *int   `json:"offset,omitempty" jsonschema:"terminals to skip (the answer's page.next_offset)"`
}

// AggregateInput are the arguments of the aggregate tool.
type AggregateInput struct {
	Type         string `json:"type" jsonschema:"the entity type to group, e.g. service"`
	Rel          string `json:"rel" jsonschema:"the relation whose targets group them, e.g. owned_by"`
	Limit        *int   `json:"limit,omitempty" jsonschema:"groups to return at most, largest first (default all)"`
	Offset       *int   `json:"offset,omitempty" jsonschema:"groups to skip (the answer's page.next_offset)"`
	Members      *int   `json:"members,omitempty" jsonschema:"members to list per group at most (default all; counts stay exact)"`
	MemberOffset *int   `json:"member_offset,omitempty" jsonschema:"members of each group to skip"`
}

// pageArg is one paging argument of a tool: its query parameter and its
// value, nil when the caller did not give it.
type pageArg struct {
	name string
	v    *int
}

// pageParams renders the paging arguments that were given as query
// parameters to append; none given leaves the request as it was before
// paging existed.
func pageParams(args ...pageArg) string {
	q := url.Values{}
	for _, a := range args {
		if a.v != nil {
			q.Set(a.name, strconv.Itoa(*a.v))
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "&" + q.Encode()
}

// EntitiesInput are the arguments of the entities tool.
type EntitiesInput struct {
	Q      string `json:"q,omitempty" jsonschema:"a name or key substring (empty lists all)"`
	Type   string `json:"type,omitempty" jsonschema:"only entities of this type"`
	Limit  int    `json:"limit,omitempty" jsonschema:"page size"`
	Offset int    `json:"offset,omitempty" jsonschema:"entities to skip"`
}

// EntityInput are the arguments of the entity tool.
type EntityInput struct {
	Entity string `json:"entity" jsonschema:"the entity as TYPE:NAME, e.g. component:cert-manager"`
}

// QueryInput are the arguments of the query tool.
type QueryInput struct {
	Mode         string `json:"mode" jsonschema:"basic, local, global, drift or auto"`
	Question     string `json:"question" jsonschema:"the question in plain words"`
	Level        *int   `json:"level,omitempty" jsonschema:"community level (global mode)"`
	BudgetTokens *int   `json:"budget_tokens,omitempty" jsonschema:"context budget in tokens"`
}

// ReportInput are the arguments of the report tool.
type ReportInput struct {
	ID string `json:"id" jsonschema:"the report id, as communities lists it"`
}

// NoInput is the arguments of a tool that takes none.
type NoInput struct{}

// New returns an MCP server whose tools call the API at cfg.BaseURL.
func New(cfg Config) *mcp.Server {
	cfg.setDefaults()
	s := mcp.NewServer(&mcp.Implementation{Name: "kgstream", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "kgstream answers from a live knowledge graph of documents (incidents, runbooks, pages). " +
			"Start with entities or query (mode auto); every answer cites doc_id@version.",
		Logger: cfg.Log,
	})
	c := &caller{cfg: cfg}
	mcp.AddTool(s, &mcp.Tool{Name: "paths", Description: "Follow relations from an entity through the graph (multi-hop); returns terminals and the cited edges of each path."},
		func(ctx context.Context, req *mcp.CallToolRequest, in PathsInput) (*mcp.CallToolResult, any, error) {
			return c.get(ctx, req, "paths", "/v1/paths?start="+url.QueryEscape(in.Start)+"&rels="+url.QueryEscape(in.Rels)+
				pageParams(pageArg{"limit", in.Limit}, pageArg{"offset", in.Offset}))
		})
	mcp.AddTool(s, &mcp.Tool{Name: "aggregate", Description: "Group the entities of a type by the target of a relation, with exact counts and members; limit, offset and members bound a large answer."},
		func(ctx context.Context, req *mcp.CallToolRequest, in AggregateInput) (*mcp.CallToolResult, any, error) {
			return c.get(ctx, req, "aggregate", "/v1/aggregate?type="+url.QueryEscape(in.Type)+"&rel="+url.QueryEscape(in.Rel)+
				pageParams(pageArg{"limit", in.Limit}, pageArg{"offset", in.Offset},
					pageArg{"members", in.Members}, pageArg{"member_offset", in.MemberOffset}))
		})
	mcp.AddTool(s, &mcp.Tool{Name: "entities", Description: "Search or list the entities the caller can see."},
		func(ctx context.Context, req *mcp.CallToolRequest, in EntitiesInput) (*mcp.CallToolResult, any, error) {
			q := url.Values{}
			q.Set("q", in.Q)
			if in.Type != "" {
				q.Set("type", in.Type)
			}
			if in.Limit > 0 {
				q.Set("limit", fmt.Sprint(in.Limit))
			}
			if in.Offset > 0 {
				q.Set("offset", fmt.Sprint(in.Offset))
			}
			return c.get(ctx, req, "entities", "/v1/entities?"+q.Encode())
		})
	mcp.AddTool(s, &mcp.Tool{Name: "entity", Description: "Look up one entity: its citations, descriptions, relationships in and out, communities."},
		func(ctx context.Context, req *mcp.CallToolRequest, in EntityInput) (*mcp.CallToolResult, any, error) {
			typ, name, ok := strings.Cut(in.Entity, ":")
			if !ok || strings.TrimSpace(typ) == "" || strings.TrimSpace(name) == "" {
				return nil, nil, fmt.Errorf("entity %q is not TYPE:NAME", in.Entity)
			}
			return c.get(ctx, req, "entity", "/v1/entities/"+url.PathEscape(typ)+"/"+url.PathEscape(name))
		})
	mcp.AddTool(s, &mcp.Tool{Name: "query", Description: "Ask a question in a mode: basic (passages), local (entities and neighbours), global (community reports), drift (global then local), auto (routed). The answer cites documents."},
		func(ctx context.Context, req *mcp.CallToolRequest, in QueryInput) (*mcp.CallToolResult, any, error) {
			body, err := json.Marshal(in)
			if err != nil {
				return nil, nil, fmt.Errorf("encoding the question: %w", err)
			}
			return c.call(ctx, req, "query", http.MethodPost, "/v1/query", body)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "communities", Description: "List the communities of the graph with their levels, sizes and report ids."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ NoInput) (*mcp.CallToolResult, any, error) {
			return c.get(ctx, req, "communities", "/v1/communities")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "report", Description: "Read one community report: title, summary, findings with citations."},
		func(ctx context.Context, req *mcp.CallToolRequest, in ReportInput) (*mcp.CallToolResult, any, error) {
			if strings.TrimSpace(in.ID) == "" {
				return nil, nil, errors.New("id is required")
			}
			return c.get(ctx, req, "report", "/v1/reports/"+url.PathEscape(in.ID))
		})
	return s
}

// Handler serves MCP over streamable HTTP. Each request's Authorization
// header is the caller's token for the tool calls it makes.
func Handler(cfg Config) http.Handler {
	cfg.Token = "" // an HTTP caller never borrows the process's token
	s := New(cfg)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, Logger: cfg.Log})
}

// caller makes the API calls of the tools.
type caller struct{ cfg Config }

// authorization is the Authorization header of a tool call: the HTTP
// request's own on streamable HTTP, the configured token on stdio.
func (c *caller) authorization(req *mcp.CallToolRequest) string {
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		return req.Extra.Header.Get("Authorization")
	}
	if c.cfg.Token != "" {
		return "Bearer " + c.cfg.Token
	}
	return ""
}

func (c *caller) get(ctx context.Context, req *mcp.CallToolRequest, tool, p string) (*mcp.CallToolResult, any, error) {
	return c.call(ctx, req, tool, http.MethodGet, p, nil)
}

// call sends one API request and returns its JSON answer as the tool's
// result; an API refusal is a tool error carrying the API's message.
func (c *caller) call(ctx context.Context, req *mcp.CallToolRequest, tool, method, p string, body []byte) (*mcp.CallToolResult, any, error) {
	hreq, err := http.NewRequestWithContext(ctx, method, c.cfg.BaseURL+p, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("building the request: %w", err)
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if a := c.authorization(req); a != "" {
		hreq.Header.Set("Authorization", a)
	}
	resp, err := c.cfg.HTTP.Do(hreq)
	if err != nil {
		c.cfg.Log.Warn("kgstream API unreachable", "tool", tool, "err", err)
		return nil, nil, fmt.Errorf("calling the kgstream API: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the kgstream API's answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		if e.Error.Code == "" {
			e.Error.Code, e.Error.Message = http.StatusText(resp.StatusCode), strings.TrimSpace(string(data))
		}
		c.cfg.Log.Info("tool call refused", "tool", tool, "status", resp.StatusCode, "code", e.Error.Code)
		return nil, nil, fmt.Errorf("%d %s: %s", resp.StatusCode, e.Error.Code, e.Error.Message)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, nil, fmt.Errorf("decoding the kgstream API's answer: %w", err)
	}
	return nil, out, nil
}
