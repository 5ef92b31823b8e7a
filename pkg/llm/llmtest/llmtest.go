// Package llmtest is a local OpenAI-compatible chat-completions server for
// tests anywhere in the workspace (and for offline demos): it answers from a
// Responder (a function or a table), replays the seed corpus's recorded LLM
// extraction, logs every call, and injects failures (429 with Retry-After,
// 500, timeouts, schema-invalid or malformed JSON) for the next N calls.
package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kgstream/kgstream/pkg/llm"
)

// Request is a chat request as the server received it.
type Request struct {
	Model    string        `json:"model"`
	Messages []llm.Message `json:"messages"`
	// ResponseFormat is the raw response_format, if any.
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
}

// Prompt is the last user message.
func (r Request) Prompt() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == llm.RoleUser {
			return r.Messages[i].Content
		}
	}
	return ""
}

// FollowUp reports whether the request continues an earlier exchange (it
// carries an assistant message), as a gleaning pass does.
func (r Request) FollowUp() bool {
	return slices.ContainsFunc(r.Messages, func(m llm.Message) bool { return m.Role == llm.RoleAssistant })
}

// Responder answers a request with the assistant message content; ok false
// answers 404 with an OpenAI-style error, so a test sees an unmatched prompt
// as a clear failure instead of an empty result.
type Responder func(req Request) (content string, ok bool)

// Table answers with the value of the longest key contained in the prompt.
func Table(entries map[string]string) Responder {
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return len(b) - len(a) })
	return func(req Request) (string, bool) {
		p := req.Prompt()
		for _, k := range keys {
			if strings.Contains(p, k) {
				return entries[k], true
			}
		}
		return "", false
	}
}

// Failure is a kind of injected failure.
type Failure string

// Injectable failures.
const (
	// RateLimit answers 429 with the server's RetryAfter header.
	RateLimit Failure = "rate_limit"
	// ServerError answers 500.
	ServerError Failure = "server_error"
	// Timeout holds the request until the client gives up (or TimeoutHold
	// passes, then answers 504).
	Timeout Failure = "timeout"
	// InvalidSchema answers 200 with JSON that does not follow the
	// extraction schema.
	InvalidSchema Failure = "invalid_schema"
	// MalformedJSON answers 200 with content that is not JSON at all.
	MalformedJSON Failure = "malformed_json"
)

// Content of the schema-breaking failures, exported so tests can look for
// them in error messages.
const (
	InvalidSchemaContent = `{"entities":"not a list","relationships":[{"source":1}]}`
	MalformedJSONContent = `{"entities":[{"name":"truncated`
)

// Call is one logged request.
type Call struct {
	Request  Request
	Prompt   string // last user message
	Status   int
	Response string // the response body
	Failure  Failure
	At       time.Time
}

// Server is a running test endpoint.
type Server struct {
	srv     *httptest.Server
	respond Responder
	closing chan struct{}
	close   sync.Once

	mu       sync.Mutex
	failures []Failure
	calls    []Call
	// retryAfter is the Retry-After header of RateLimit failures.
	retryAfter  string
	timeoutHold time.Duration
	usage       llm.Usage
}

// New starts a server answering with r. Close it when done.
func New(r Responder) *Server {
	s := &Server{respond: r, closing: make(chan struct{}), retryAfter: "1", timeoutHold: 30 * time.Second,
		usage: llm.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handle)
	mux.HandleFunc("POST /chat/completions", s.handle)
	s.srv = httptest.NewServer(mux)
	return s
}

// URL is the base URL to configure a client with (ends in /v1).
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Close stops the server, releasing held (timeout) requests first.
func (s *Server) Close() {
	s.close.Do(func() { close(s.closing) })
	s.srv.Close()
}

// SetRetryAfter sets the Retry-After header value of RateLimit failures
// (default "1"; fractional seconds such as "0.05" keep tests quick and are
// honoured by pkg/llm).
func (s *Server) SetRetryAfter(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAfter = v
}

// SetUsage sets the token usage reported with every successful answer.
func (s *Server) SetUsage(u llm.Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usage = u
}

// Fail makes the next n calls fail with f (queued after failures already
// injected).
func (s *Server) Fail(f Failure, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures = append(s.failures, f)
	}
}

// Calls returns a copy of the call log.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// ResetCalls empties the call log.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		s.reply(w, Call{Request: req, Status: http.StatusBadRequest}, nil, apiError("invalid_request_error", "decoding request: "+err.Error()))
		return
	}
	call := Call{Request: req, Prompt: req.Prompt(), At: time.Now()}
	s.mu.Lock()
	if len(s.failures) > 0 {
		call.Failure = s.failures[0]
		s.failures = s.failures[1:]
	}
	retryAfter, hold, usage := s.retryAfter, s.timeoutHold, s.usage
	s.mu.Unlock()

	switch call.Failure {
	case RateLimit:
		call.Status = http.StatusTooManyRequests
		s.reply(w, call, http.Header{"Retry-After": {retryAfter}}, apiError("rate_limit_exceeded", "Rate limit reached (injected)"))
		return
	case ServerError:
		call.Status = http.StatusInternalServerError
		s.reply(w, call, nil, apiError("server_error", "The server had an error (injected)"))
		return
	case Timeout:
		t := time.NewTimer(hold)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-s.closing:
		case <-t.C:
		}
		call.Status = http.StatusGatewayTimeout
		s.reply(w, call, nil, apiError("timeout", "held until the client gave up (injected)"))
		return
	case InvalidSchema:
		call.Status = http.StatusOK
		s.reply(w, call, nil, completion(req.Model, InvalidSchemaContent, usage))
		return
	case MalformedJSON:
		call.Status = http.StatusOK
		s.reply(w, call, nil, completion(req.Model, MalformedJSONContent, usage))
		return
	}
	content, ok := s.respond(req)
	if !ok {
		call.Status = http.StatusNotFound
		s.reply(w, call, nil, apiError("not_found", "llmtest: no recorded response for prompt: "+llm.Excerpt(call.Prompt, 200)))
		return
	}
	call.Status = http.StatusOK
	s.reply(w, call, nil, completion(req.Model, content, usage))
}

func (s *Server) reply(w http.ResponseWriter, call Call, h http.Header, body []byte) {
	call.Response = string(body)
	if call.At.IsZero() {
		call.At = time.Now()
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	for k, vs := range h {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(call.Status)
	_, _ = w.Write(body)
}

func apiError(code, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": code, "code": code}})
	return b
}

func completion(model, content string, u llm.Usage) []byte {
	b, _ := json.Marshal(map[string]any{
		"id":      "chatcmpl-llmtest",
		"object":  "chat.completion",
		"created": 0,
		"model":   model,
		"choices": []map[string]any{{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content},
			"finish_reason": "stop",
		}},
		"usage": u,
	})
	return b
}

// Entity is an entity of the fixed extraction schema.
type Entity struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description"`
}

// Relationship is a relationship of the fixed extraction schema. The
// recording leaves Description and Strength out; the replay fills them.
type Relationship struct {
	Source      string  `json:"source"`
	SourceType  string  `json:"source_type"`
	Relation    string  `json:"relation"`
	Target      string  `json:"target"`
	TargetType  string  `json:"target_type"`
	Description string  `json:"description"`
	Strength    float64 `json:"strength"`
}

// Extraction is the fixed extraction schema's document.
type Extraction struct {
	Entities      []Entity       `json:"entities"`
	Relationships []Relationship `json:"relationships"`
}

// Replay is a server answering extraction prompts from a recording: the
// first recorded document id found in the prompt selects the answer, a
// follow-up (gleaning) request gets an empty extraction.
type Replay struct {
	*Server
	mu   sync.Mutex
	docs map[string][]Relationship
}

// SeedReplay loads a recording (doc id -> relationships, as in
// shared/corpora/seed-postmortems/recorded-llm-extraction.json) and starts
// a server replaying it. Close it when done.
func SeedReplay(path string) (*Replay, error) {
	docs, err := LoadRecording(path)
	if err != nil {
		return nil, err
	}
	r := &Replay{docs: docs}
	r.Server = New(r.respond)
	return r, nil
}

// LoadRecording reads a recording file.
func LoadRecording(path string) (map[string][]Relationship, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading recording %s: %w", path, err)
	}
	var docs map[string][]Relationship
	if err := json.Unmarshal(data, &docs); err != nil {
		return nil, fmt.Errorf("decoding recording %s: %w", path, err)
	}
	return docs, nil
}

// Override replaces (or adds) the answer for a document, e.g. a revised
// INC-121 whose failure is "bad upgrade".
func (r *Replay) Override(docID string, rels []Relationship) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.docs[docID] = slices.Clone(rels)
}

// Relationships returns the answer currently recorded for a document.
func (r *Replay) Relationships(docID string) []Relationship {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.docs[docID])
}

// ExtractionFor builds the extraction answered for a document: its
// relationships, and as entities their endpoints with their types.
func (r *Replay) ExtractionFor(docID string) (Extraction, bool) {
	r.mu.Lock()
	rels, ok := r.docs[docID]
	r.mu.Unlock()
	if !ok {
		return Extraction{}, false
	}
	return BuildExtraction(rels), true
}

// BuildExtraction makes a schema document from relationships: their
// endpoints become the entities (first spelling wins), empty descriptions
// and strengths are filled in.
func BuildExtraction(rels []Relationship) Extraction {
	ex := Extraction{Entities: []Entity{}, Relationships: make([]Relationship, 0, len(rels))}
	seen := map[string]bool{}
	addEntity := func(name, typ string) {
		k := typ + "\x00" + name
		if seen[k] {
			return
		}
		seen[k] = true
		ex.Entities = append(ex.Entities, Entity{Name: name, Type: typ, Description: typ + " " + name})
	}
	for _, rel := range rels {
		addEntity(rel.Source, rel.SourceType)
		addEntity(rel.Target, rel.TargetType)
		if rel.Description == "" {
			rel.Description = rel.Source + " " + strings.ReplaceAll(rel.Relation, "_", " ") + " " + rel.Target
		}
		if rel.Strength == 0 {
			rel.Strength = 8
		}
		ex.Relationships = append(ex.Relationships, rel)
	}
	return ex
}

func (r *Replay) respond(req Request) (string, bool) {
	if req.FollowUp() {
		b, _ := json.Marshal(Extraction{Entities: []Entity{}, Relationships: []Relationship{}})
		return string(b), true
	}
	id := r.findDoc(req.Prompt())
	if id == "" {
		return "", false
	}
	ex, _ := r.ExtractionFor(id)
	b, _ := json.Marshal(ex)
	return string(b), true
}

// findDoc returns the longest recorded doc id that occurs in the prompt as
// a whole token (so INC-10 never matches inside INC-101).
func (r *Replay) findDoc(prompt string) string {
	r.mu.Lock()
	ids := make([]string, 0, len(r.docs))
	for id := range r.docs {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	slices.SortFunc(ids, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	for _, id := range ids {
		for i := 0; ; {
			j := strings.Index(prompt[i:], id)
			if j < 0 {
				break
			}
			start, end := i+j, i+j+len(id)
			if boundary(prompt, start-1) && boundary(prompt, end) {
				return id
			}
			i = start + 1
		}
	}
	return ""
}

func boundary(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return true
	}
	c := s[i]
	return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_')
}
