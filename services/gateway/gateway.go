// Package gateway turns document changes into durable JetStream events. It
// records every change in the source registry first (so it is in force for
// reads at once), then publishes the event and answers 202 only after
// JetStream acknowledged it.
package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/catalog"
	"github.com/kgstream/kgstream/pkg/doctype"
	"github.com/kgstream/kgstream/pkg/errkind"
	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
)

// Config configures the gateway.
type Config struct {
	// MaxBodyBytes bounds request bodies (default 4 MiB).
	MaxBodyBytes int64
	// MaxEventBytes bounds a document's encoded event (default 32 MiB, what
	// a 4 MiB body encodes to at worst); a larger one is refused with 413
	// before anything is written. Events over a message travel by reference.
	MaxEventBytes int64
	// PublishTimeout bounds the wait for JetStream's acknowledgement (default 10s).
	PublishTimeout time.Duration
	// Graph, when set, enables re-resolution (POST /v1/entities/reresolve):
	// a kg.reresolve request asks the resolver to resolve the entity's
	// sources again from their stored extractions.
	Graph store.GraphStore
	// OutboxEvery is how often pending publishes are retried (default 10s).
	OutboxEvery time.Duration
	// Webhooks configures the receivers of POST /webhooks/{provider} (see
	// LoadWebhooks); without providers the route answers 404.
	Webhooks WebhooksConfig
	// DocTypes are the document types the document API accepts (default
	// doctype.Default()): a synonym is taken as its type, a missing one is
	// inferred from the text, any other value is refused with 400.
	DocTypes doctype.Set
}

func (c *Config) setDefaults() {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 4 << 20
	}
	if c.MaxEventBytes == 0 {
		c.MaxEventBytes = 32 << 20
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 10 * time.Second
	}
	if c.OutboxEvery == 0 {
		c.OutboxEvery = 10 * time.Second
	}
	if len(c.DocTypes.Types) == 0 {
		c.DocTypes = doctype.Default()
	}
	if c.Webhooks.DeliveryTTL == 0 {
		c.Webhooks.DeliveryTTL = Duration(DefaultDeliveryTTL)
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.MaxBodyBytes < 1024 {
		return errors.New("gateway: MaxBodyBytes must be at least 1024")
	}
	if err := c.Webhooks.Validate(); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// Gateway serves the document API.
type Gateway struct {
	cfg      Config
	registry Registry
	bus      *stream.Bus
	auth     *auth.Authenticator
	log      *slog.Logger
	requests *prometheus.CounterVec
	now      func() time.Time
	// hooks are the webhook receivers by provider name.
	hooks      map[string]*receiver
	deliveries *deliveryLog
	outbox     *outbox
	// cmds is the write core both the document API and the receivers use.
	cmds *Commands
}

// New returns a Gateway.
func New(cfg Config, registry Registry, bus *stream.Bus, a *auth.Authenticator, log *slog.Logger, reg prometheus.Registerer) (*Gateway, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if registry == nil || bus == nil || a == nil {
		return nil, errors.New("gateway: registry, bus and authenticator are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hooks, err := newReceivers(cfg.Webhooks)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g := &Gateway{hooks: hooks, outbox: newOutbox(registry, bus, log), deliveries: &deliveryLog{js: bus.JetStream(), ttl: time.Duration(cfg.Webhooks.DeliveryTTL)}, cfg: cfg, registry: registry, bus: bus, auth: a, log: log, now: time.Now,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_gateway_requests_total",
			Help: "Gateway requests by route and status code.",
		}, []string{"route", "code"}),
	}
	g.cmds = &Commands{registry: registry, graph: cfg.Graph, bus: bus, outbox: g.outbox, log: log, now: g.now, hooks: hooks,
		publishTimeout: cfg.PublishTimeout, maxEventBytes: cfg.MaxEventBytes}
	if reg != nil {
		if err := reg.Register(g.outbox.gauge); err != nil {
			return nil, fmt.Errorf("registering gateway metrics: %w", err)
		}
		if err := reg.Register(g.requests); err != nil {
			return nil, fmt.Errorf("registering gateway metrics: %w", err)
		}
	}
	return g, nil
}

// Handler returns the gateway's routes.
//
// Paths under /v1/documents/ are routed here, not by ServeMux: a document id
// is one escaped path segment and may hold '/' (as %2F) or be "." or ".."
// (as %2E), and ServeMux would clean or redirect such paths (a 307 from
// /v1/documents/a/../b to /v1/documents/b would delete b). An unclean path
// is a JSON 400 instead.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/documents", g.route("documents.post", g.postDocument))
	mux.Handle("POST /v1/catalog", g.route("catalog.post", g.postCatalog))
	mux.Handle("POST /v1/entities/reresolve", g.route("entities.reresolve", g.reresolve))
	mux.Handle("POST /v1/communities/recluster", g.route("communities.recluster", g.recluster))
	// Providers sign their deliveries instead of sending a bearer token.
	mux.HandleFunc("POST /webhooks/{provider}", g.serveWebhook)
	del := g.route("documents.delete", g.deleteDocument)
	acl := g.route("documents.acl", g.putACL)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.EscapedPath()
		if rest, ok := strings.CutPrefix(p, "/v1/documents/"); ok {
			g.serveDocumentPath(w, r, rest, del, acl)
			return
		}
		if strings.HasPrefix(p, "/webhooks/") && path.Clean(p) != p {
			httpapi.WriteError(w, g.log, httpapi.Errorf(http.StatusBadRequest, "invalid_path", "the path %q is not clean", p))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// serveDocumentPath routes DELETE /v1/documents/{id} and
// PUT /v1/documents/{id}/acl, rest being the escaped path after the prefix.
func (g *Gateway) serveDocumentPath(w http.ResponseWriter, r *http.Request, rest string, del, acl http.Handler) {
	segs := strings.Split(rest, "/")
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			httpapi.WriteError(w, g.log, httpapi.Errorf(http.StatusBadRequest, "invalid_path",
				"the path has an empty or dot segment; escape '/' in an id as %%2F and '.' as %%2E"))
			return
		}
	}
	var h http.Handler
	allow := ""
	switch {
	case len(segs) == 1:
		h, allow = del, http.MethodDelete
	case len(segs) == 2 && segs[1] == "acl":
		h, allow = acl, http.MethodPut
	default:
		httpapi.WriteError(w, g.log, httpapi.Errorf(http.StatusNotFound, "not_found", "no route for %q", r.URL.EscapedPath()))
		return
	}
	if r.Method != allow {
		w.Header().Set("Allow", allow)
		httpapi.WriteError(w, g.log, httpapi.Errorf(http.StatusMethodNotAllowed, "method_not_allowed", "%s is not allowed here; use %s", r.Method, allow))
		return
	}
	id, err := url.PathUnescape(segs[0])
	if err != nil {
		httpapi.WriteError(w, g.log, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "id: %v", err))
		return
	}
	r.SetPathValue("id", id)
	h.ServeHTTP(w, r)
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (g *Gateway) route(name string, h func(*http.Request, provenance.Caller) (int, any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: 200}
		defer func() { g.requests.WithLabelValues(name, fmt.Sprint(sw.code)).Inc() }()
		c, err := g.auth.Authenticate(r)
		if err != nil {
			sw.Header().Set("WWW-Authenticate", `Bearer realm="kgstream"`)
			httpapi.WriteError(sw, g.log, httpapi.Errorf(http.StatusUnauthorized, "unauthenticated", "%v", err))
			return
		}
		r.Body = http.MaxBytesReader(sw, r.Body, g.cfg.MaxBodyBytes)
		status, body, err := h(r.WithContext(auth.WithCaller(r.Context(), c)), c)
		if err != nil {
			httpapi.WriteError(sw, g.log, err)
			return
		}
		httpapi.WriteJSON(sw, status, body)
	})
}

// decode decodes a JSON request body strictly. A body without a
// Content-Type is refused like one of another type: what a client did not
// label as JSON is not read as JSON.
func (g *Gateway) decode(r *http.Request, v any) error {
	if err := httpapi.RequireJSON(r); err != nil {
		return err
	}
	return httpapi.DecodeJSON(nil, r, g.cfg.MaxBodyBytes, v)
}

// DocumentRequest is the body of POST /v1/documents.
type DocumentRequest struct {
	ID        string          `json:"id"`
	Version   int64           `json:"version,omitempty"`
	Title     string          `json:"title,omitempty"`
	Text      string          `json:"text"`
	Source    string          `json:"source,omitempty"`
	DocType   string          `json:"doc_type,omitempty"`
	ACL       *provenance.ACL `json:"acl,omitempty"`
	Tenant    string          `json:"tenant,omitempty"`
	UpdatedAt string          `json:"updated_at,omitempty"`
}

// Accepted is the 202 body.
type Accepted struct {
	ID        string `json:"id"`
	Version   int64  `json:"version"`
	EventID   string `json:"event_id"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// Unchanged (with status 200) says the document was already current
	// with this content and ACL: nothing was written or published.
	Unchanged bool `json:"unchanged,omitempty"`
	// DocType is the type the document was taken as (a synonym resolved,
	// a missing one inferred: DocTypeInferred).
	DocType         string `json:"doc_type,omitempty"`
	DocTypeInferred bool   `json:"doc_type_inferred,omitempty"`
}

func (g *Gateway) tenantFor(c provenance.Caller, requested string) (string, error) {
	if requested == "" || requested == c.Tenant {
		return c.Tenant, nil
	}
	if !c.Admin {
		return "", errkind.Errorf(errkind.Forbidden, "forbidden_tenant", "principal %q may not write to tenant %q", c.Principal, requested)
	}
	if err := provenance.ValidateTenant(requested); err != nil {
		return "", errkind.Errorf(errkind.Invalid, "invalid_field", "%w", err)
	}
	return requested, nil
}

func (g *Gateway) postDocument(r *http.Request, c provenance.Caller) (int, any, error) {
	var req DocumentRequest
	if err := g.decode(r, &req); err != nil {
		return 0, nil, err
	}
	tenant, cmd, err := g.changeCommand(c, req)
	if err != nil {
		return 0, nil, err
	}
	dt, err := g.cfg.DocTypes.Resolve(req.DocType, req.Title, req.Text)
	if err != nil {
		return 0, nil, errkind.Errorf(errkind.Invalid, "unknown_doc_type", "doc_type: %w", err)
	}
	cmd.DocType = dt.Type
	res, err := g.cmds.Change(r.Context(), tenant, ByCaller(c), cmd)
	if err != nil {
		return 0, nil, err
	}
	acc := accepted(res)
	acc.DocTypeInferred = dt.Inferred
	if res.Unchanged {
		return http.StatusOK, acc, nil
	}
	return http.StatusAccepted, acc, nil
}

// changeCommand checks the fields of a document request and returns its
// tenant and command (without its doc type, which is resolved apart).
func (g *Gateway) changeCommand(c provenance.Caller, req DocumentRequest) (string, ChangeCommand, error) {
	if err := provenance.ValidateDocID(req.ID); err != nil {
		return "", ChangeCommand{}, errkind.Errorf(errkind.Invalid, "invalid_field", "id: %w", err)
	}
	if strings.TrimSpace(req.Text) == "" {
		return "", ChangeCommand{}, errkind.Errorf(errkind.Invalid, "invalid_field", "text is required and must not be empty")
	}
	if req.Version != 0 {
		if err := provenance.ValidateVersion(req.Version); err != nil {
			return "", ChangeCommand{}, errkind.Errorf(errkind.Invalid, "invalid_field", "%w", err)
		}
	}
	tenant, err := g.tenantFor(c, req.Tenant)
	if err != nil {
		return "", ChangeCommand{}, err
	}
	cmd := ChangeCommand{DocID: req.ID, Version: req.Version, UpdatedAt: req.UpdatedAt, Source: req.Source,
		Title: req.Title, Text: req.Text, ACL: req.ACL}
	if req.UpdatedAt != "" {
		t, err := time.Parse(time.RFC3339, req.UpdatedAt)
		if err != nil {
			return "", ChangeCommand{}, errkind.Errorf(errkind.Invalid, "invalid_field", "updated_at must be RFC 3339: %w", err)
		}
		cmd.OccurredAt = t
	}
	return tenant, cmd, nil
}

// accepted is the answer to a command's result.
func accepted(res Result) Accepted {
	return Accepted{ID: res.DocID, Version: res.Version, EventID: res.EventID, Duplicate: res.Duplicate,
		Unchanged: res.Unchanged, DocType: res.DocType}
}

// docTarget reads the document id of the path and the tenant of the query.
func (g *Gateway) docTarget(r *http.Request, c provenance.Caller) (string, string, error) {
	docID := r.PathValue("id")
	if err := provenance.ValidateDocID(docID); err != nil {
		return "", "", errkind.Errorf(errkind.Invalid, "invalid_field", "id: %w", err)
	}
	tenant, err := g.tenantFor(c, r.URL.Query().Get("tenant"))
	return docID, tenant, err
}

func (g *Gateway) deleteDocument(r *http.Request, c provenance.Caller) (int, any, error) {
	docID, tenant, err := g.docTarget(r, c)
	if err != nil {
		return 0, nil, err
	}
	res, err := g.cmds.Delete(r.Context(), tenant, ByCaller(c), DeleteCommand{DocID: docID})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, accepted(res), nil
}

func (g *Gateway) putACL(r *http.Request, c provenance.Caller) (int, any, error) {
	docID, tenant, err := g.docTarget(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body *provenance.ACL
	if err := g.decode(r, &body); err != nil {
		return 0, nil, err
	}
	if body == nil {
		return 0, nil, errkind.Errorf(errkind.Invalid, "invalid_field", "the ACL is null; send {\"public\":true} or the groups and principals who may read")
	}
	res, err := g.cmds.SetACL(r.Context(), tenant, ByCaller(c), docID, *body)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, accepted(res), nil
}

// postCatalog imports a Backstage catalog as one structured document. The
// document id comes from ?id= (default "catalog"); re-importing the same id
// replaces what the previous import contributed.
func (g *Gateway) postCatalog(r *http.Request, c provenance.Caller) (int, any, error) {
	q := r.URL.Query()
	docID := q.Get("id")
	if docID == "" {
		docID = "catalog"
	}
	if err := provenance.ValidateDocID(docID); err != nil {
		return 0, nil, errkind.Errorf(errkind.Invalid, "invalid_field", "id: %w", err)
	}
	tenant, err := g.tenantFor(c, q.Get("tenant"))
	if err != nil {
		return 0, nil, err
	}
	body, err := httpapi.ReadBody(nil, r, g.cfg.MaxBodyBytes)
	if err != nil {
		return 0, nil, err
	}
	st, skipped, err := catalog.Parse(body)
	if err != nil {
		return 0, nil, errkind.Errorf(errkind.Invalid, "invalid_catalog", "%w", err)
	}
	if len(st.Entities) == 0 {
		return 0, nil, errkind.Errorf(errkind.Invalid, "invalid_catalog", "the catalog has no entity")
	}
	if len(skipped) > 0 {
		g.log.Info("catalog entities skipped", "doc", docID, "count", len(skipped))
	}
	res, err := g.cmds.Change(r.Context(), tenant, ByCaller(c), ChangeCommand{DocID: docID, Source: "backstage",
		DocType: "catalog", Title: "Service catalog " + docID, Structured: st, WriterOnly: true})
	if err != nil {
		return 0, nil, err
	}
	if res.Unchanged {
		return http.StatusOK, accepted(res), nil
	}
	return http.StatusAccepted, accepted(res), nil
}

// ReresolveRequest is the body of POST /v1/entities/reresolve.
type ReresolveRequest struct {
	// Entity is the TYPE:NAME of the entity whose sources are resolved again.
	Entity string `json:"entity"`
}

// ReresolveAccepted is its 202 answer.
type ReresolveAccepted struct {
	Entity string `json:"entity"`
	// Sources are the documents the request names for re-resolution.
	Sources []string `json:"sources"`
	// Skipped are the documents without a stored extraction (applied before
	// extractions were kept); re-ingest them.
	Skipped []string `json:"skipped,omitempty"`
	// Queued says the stream did not take the request yet: the gateway
	// keeps it and publishes it once the stream does.
	Queued bool `json:"queued,omitempty"`
}

// reresolve asks, through Commands.Reresolve, for the sources of an
// entity to be resolved again. It changes the graph for everyone, so it is
// for admin callers only.
func (g *Gateway) reresolve(r *http.Request, c provenance.Caller) (int, any, error) {
	if g.cfg.Graph == nil {
		return 0, nil, httpapi.Errorf(http.StatusNotImplemented, "not_implemented", "re-resolution needs the graph store")
	}
	var req ReresolveRequest
	if err := g.decode(r, &req); err != nil {
		return 0, nil, err
	}
	out, err := g.cmds.Reresolve(r.Context(), c.Tenant, ByCaller(c), req.Entity)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, out, nil
}

// ReclusterRequest is the body of POST /v1/communities/recluster.
type ReclusterRequest struct {
	// Full asks for a re-clustering from scratch (GraphRAG's partition, as
	// the first run) instead of the incremental run the next would be.
	Full bool `json:"full"`
}

// ReclusterAccepted is its 202 answer.
type ReclusterAccepted struct {
	Tenant    string `json:"tenant"`
	RequestID string `json:"request_id"`
	Full      bool   `json:"full"`
	// Queued says the stream did not take the request yet: the gateway
	// keeps it and publishes it once the stream does.
	Queued bool `json:"queued,omitempty"`
}

// recluster asks, through Commands.Recluster, for the caller's tenant to
// be re-clustered now. Its communities and reports change for everyone,
// so it is for admin callers only.
func (g *Gateway) recluster(r *http.Request, c provenance.Caller) (int, any, error) {
	var req ReclusterRequest
	if err := g.decode(r, &req); err != nil {
		return 0, nil, err
	}
	out, err := g.cmds.Recluster(r.Context(), c.Tenant, ByCaller(c), req.Full)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, out, nil
}

// storeUnavailable is the graph store's outage while doing: 503 with no
// detail of the store (the cause is logged).
func storeUnavailable(err error, doing string) error {
	return errkind.Wrap(errkind.Unavailable, "store_unavailable", err, doing+": the store is unavailable; retry the request")
}
