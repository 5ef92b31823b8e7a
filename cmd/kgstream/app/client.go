package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"
)

// Client talks to a kgstream server's HTTP API.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
}

// maxIdlePerHost is how many idle connections a Client keeps to its
// server. net/http's default (2) makes a Client used by many goroutines at
// once (an import, a benchmark, the MCP server) dial and the server accept
// a new connection for most requests.
const maxIdlePerHost = 64

// NewClient returns a Client for base with an optional bearer token. It may
// be used by concurrent goroutines.
func NewClient(base, token string) *Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = maxIdlePerHost
	t.MaxIdleConns = max(t.MaxIdleConns, maxIdlePerHost)
	return &Client{BaseURL: strings.TrimRight(base, "/"), Token: token, HTTP: &http.Client{Timeout: 60 * time.Second, Transport: t}}
}

// APIError is a non-2xx answer.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Do sends a request and decodes a JSON answer into out (may be nil).
func (c *Client) Do(ctx context.Context, method, p, contentType string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+p, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("calling %s %s: %w", method, p, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading answer of %s %s: %w", method, p, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		if e.Error.Code == "" {
			e.Error.Code, e.Error.Message = "http_error", strings.TrimSpace(string(data))
		}
		return &APIError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decoding answer of %s %s: %w", method, p, err)
		}
	}
	return nil
}

// Document is the body of POST /v1/documents.
type Document struct {
	ID        string         `json:"id"`
	Version   int64          `json:"version,omitempty"`
	Title     string         `json:"title,omitempty"`
	Text      string         `json:"text"`
	Source    string         `json:"source,omitempty"`
	DocType   string         `json:"doc_type,omitempty"`
	ACL       map[string]any `json:"acl,omitempty"`
	Tenant    string         `json:"tenant,omitempty"`
	UpdatedAt string         `json:"updated_at,omitempty"`
}

// Accepted is the gateway's 202 answer.
type Accepted struct {
	ID        string `json:"id"`
	Version   int64  `json:"version"`
	EventID   string `json:"event_id"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// PostDocument sends one document.
func (c *Client) PostDocument(ctx context.Context, d Document) (Accepted, error) {
	body, err := json.Marshal(d)
	if err != nil {
		return Accepted{}, err
	}
	var a Accepted
	err = c.Do(ctx, http.MethodPost, "/v1/documents", "application/json", body, &a)
	return a, err
}

// PostCatalog imports a Backstage catalog under document id.
func (c *Client) PostCatalog(ctx context.Context, id string, yaml []byte) (Accepted, error) {
	var a Accepted
	err := c.Do(ctx, http.MethodPost, "/v1/catalog?id="+urlEscape(id), "application/yaml", yaml, &a)
	return a, err
}

func urlEscape(s string) string {
	r := strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", " ", "%20", "#", "%23", "?", "%3F")
	return r.Replace(s)
}

// DocumentFromFile turns a text file into a document: id = file name without
// extension, title = first line.
func DocumentFromFile(name string, data []byte) Document {
	id := strings.TrimSuffix(path.Base(name), path.Ext(name))
	text := string(data)
	title, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	return Document{ID: id, Title: strings.TrimSpace(title), Text: text}
}

// IngestDemo imports the bundled catalog and postmortems into the server at base.
func IngestDemo(ctx context.Context, base, token string) error {
	c := NewClient(base, token)
	demo := DemoFS()
	cat, err := fs.ReadFile(demo, "catalog-info.yaml")
	if err != nil {
		return err
	}
	if _, err := c.PostCatalog(ctx, "catalog-info", cat); err != nil {
		return fmt.Errorf("importing the demo catalog: %w", err)
	}
	// The offline extractor links mentions to catalog entities, so let the
	// catalog reach the graph before the postmortems are extracted.
	if err := c.WaitFor(ctx, 30*time.Second, func() (bool, error) {
		var r struct {
			Total int `json:"total"`
		}
		err := c.Do(ctx, http.MethodGet, "/v1/entities?type=service&limit=1", "", nil, &r)
		return r.Total > 0, err
	}); err != nil {
		return fmt.Errorf("waiting for the demo catalog: %w", err)
	}
	names, err := fs.Glob(demo, "*.txt")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, n := range names {
		data, err := fs.ReadFile(demo, n)
		if err != nil {
			return err
		}
		d := DocumentFromFile(n, data)
		d.Source, d.DocType = "demo", "incident"
		if _, err := c.PostDocument(ctx, d); err != nil {
			return fmt.Errorf("ingesting %s: %w", n, err)
		}
	}
	return nil
}

// WaitFor polls cond until it is true or timeout passes.
func (c *Client) WaitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("timed out after %s: %w", timeout, last)
			}
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
