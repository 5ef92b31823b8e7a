// Package gateway turns document changes into durable JetStream events. It
// records every change in the source registry first (so it is in force for
// reads at once), then publishes the event and answers 202 only after
// JetStream acknowledged it.
package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
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
	// stored extractions are re-published for the resolver to resolve again.
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
	registry store.Registry
	bus      *stream.Bus
	auth     *auth.Authenticator
	log      *slog.Logger
	requests *prometheus.CounterVec
	now      func() time.Time
	// hooks are the webhook receivers by provider name.
	hooks      map[string]*receiver
	deliveries *deliveryLog
	outbox     *outbox
}

// New returns a Gateway.
func New(cfg Config, registry store.Registry, bus *stream.Bus, a *auth.Authenticator, log *slog.Logger, reg prometheus.Registerer) (*Gateway, error) {
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
	g := &Gateway{hooks: hooks, outbox: newOutbox(bus), deliveries: &deliveryLog{js: bus.JetStream(), ttl: time.Duration(cfg.Webhooks.DeliveryTTL)}, cfg: cfg, registry: registry, bus: bus, auth: a, log: log, now: time.Now,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_gateway_requests_total",
			Help: "Gateway requests by route and status code.",
		}, []string{"route", "code"}),
	}
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

// current is the registry's state of docID, nil when unknown.
func (g *Gateway) current(ctx context.Context, tenant, docID string) (*provenance.SourceState, error) {
	cur, err := g.registry.Sources(ctx, tenant, []string{docID})
	if err != nil {
		return nil, g.registryError(err, "checking the document")
	}
	st, ok := cur[docID]
	if !ok {
		return nil, nil
	}
	return &st, nil
}

// mayWrite checks that c may write docID and returns the document's
// current state (nil when unknown). Reading is not writing: a known
// document is written by admin and writer tokens and by the writers its ACL
// names (provenance.Writable). A caller who may read it but not write it is
// refused (403); for one who may not even read it the document does not
// exist (404, the answer an unknown id gets), so a write tells no one
// which restricted ids exist. A new (or deleted) document may be created by
// anyone in the tenant.
func (g *Gateway) mayWrite(ctx context.Context, tenant string, c provenance.Caller, docID string) (*provenance.SourceState, error) {
	cur, err := g.current(ctx, tenant, docID)
	if err != nil {
		return nil, err
	}
	if cur == nil || cur.Deleted || provenance.Writable(c, *cur) {
		return cur, nil
	}
	if !provenance.Readable(provenance.Caller{Tenant: tenant, Principal: c.Principal, Groups: c.Groups}, *cur) {
		return nil, unknownDocument(docID)
	}
	return nil, httpapi.Errorf(http.StatusForbidden, "forbidden", "you may read document %q but not write it", docID)
}

// checkNamespace refuses, for the document API, an id in the namespace of
// a configured webhook receiver of the tenant: such documents are created
// by their receiver only, with the receiver's ACL.
func (g *Gateway) checkNamespace(tenant, docID string) error {
	if name, ok := g.reservedBy(tenant, docID); ok {
		return httpapi.Errorf(http.StatusForbidden, "reserved_id",
			"document id %q is in the namespace of the %s webhook receiver of tenant %q; only its deliveries create such documents", docID, name, tenant)
	}
	return nil
}

func unknownDocument(docID string) error {
	return httpapi.Errorf(http.StatusNotFound, "unknown_document", "document %q is unknown", docID)
}

// withWriters completes the writers of a requested ACL: when it names none,
// a known document keeps the writers it has, and a document created by a
// caller without writer or admin powers names that caller, so its author
// can edit it later.
func withWriters(acl provenance.ACL, cur *provenance.SourceState, c provenance.Caller) provenance.ACL {
	if !acl.Writers.IsZero() {
		return acl
	}
	switch {
	case cur != nil && !cur.Deleted:
		acl.Writers = cur.ACL.Writers
	case !c.Admin && !c.Writer && c.Principal != "":
		acl.Writers = provenance.Writers{Principals: []string{c.Principal}}
	}
	return acl
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

// checkACL refuses an ACL that names no reader: it would make the document
// readable by no one, which no caller means (to hide a document, delete it).
func checkACL(a provenance.ACL) error {
	n := a.Normalize()
	if !n.Public && len(n.Groups) == 0 && len(n.Principals) == 0 {
		return httpapi.Errorf(http.StatusBadRequest, "invalid_field", "the ACL names no reader; send {\"public\":true} or the groups and principals who may read")
	}
	return nil
}

// registryError maps a registry error to its answer. An outage is 503 with
// no detail of the store (its address stays in the log); a refused
// argument is 400, a stale version 409, an unknown document 404.
func (g *Gateway) registryError(err error, doing string) error {
	switch {
	case errors.Is(err, store.ErrStaleVersion):
		return httpapi.Errorf(http.StatusConflict, "stale_version", "%v", err)
	case errors.Is(err, store.ErrNotFound):
		return httpapi.Errorf(http.StatusNotFound, "unknown_document", "%v", err)
	case errors.Is(err, store.ErrInvalid):
		return httpapi.Errorf(http.StatusBadRequest, "invalid_field", "%v", err)
	}
	g.log.Error("registry unavailable", "doing", doing, "error", err)
	return httpapi.Errorf(http.StatusServiceUnavailable, "registry_unavailable", "%s: the registry is unavailable; retry the request", doing)
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

// contentHash is the hex SHA-256 of what an event's content is: text,
// title, type, source and structured content. The ACL is compared apart.
func contentHash(ev *events.DocChanged) string {
	data, err := json.Marshal(struct {
		Text, Title, DocType, Source string
		Structured                   any
	}{ev.Text, ev.Title, ev.DocType, ev.Source, ev.Structured})
	if err != nil {
		// Only unmarshalable structured content gets here; such a
		// document is never taken as unchanged.
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// unchanged reports whether announcing ev at version (0: the next one)
// would repeat what the registry already holds and the bus acknowledged.
func unchanged(cur *provenance.SourceState, version int64, ev *events.DocChanged, hash string) bool {
	return cur != nil && !cur.Deleted && hash != "" && cur.ContentHash == hash &&
		(version == 0 || version == cur.Version) && cur.ACL.Equal(ev.ACL)
}

func (g *Gateway) tenantFor(c provenance.Caller, requested string) (string, error) {
	if requested == "" || requested == c.Tenant {
		return c.Tenant, nil
	}
	if !c.Admin {
		return "", httpapi.Errorf(http.StatusForbidden, "forbidden_tenant", "principal %q may not write to tenant %q", c.Principal, requested)
	}
	if err := provenance.ValidateTenant(requested); err != nil {
		return "", httpapi.Errorf(http.StatusBadRequest, "invalid_field", "%v", err)
	}
	return requested, nil
}

func (g *Gateway) postDocument(r *http.Request, c provenance.Caller) (int, any, error) {
	var req DocumentRequest
	if err := g.decode(r, &req); err != nil {
		return 0, nil, err
	}
	if err := provenance.ValidateDocID(req.ID); err != nil {
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "id: %v", err)
	}
	if strings.TrimSpace(req.Text) == "" {
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "text is required and must not be empty")
	}
	if req.Version != 0 {
		if err := provenance.ValidateVersion(req.Version); err != nil {
			return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "%v", err)
		}
	}
	tenant, err := g.tenantFor(c, req.Tenant)
	if err != nil {
		return 0, nil, err
	}
	acl := provenance.PublicACL()
	if req.ACL != nil {
		if err := checkACL(*req.ACL); err != nil {
			return 0, nil, err
		}
		acl = req.ACL.Normalize()
	}
	dt, err := g.cfg.DocTypes.Resolve(req.DocType, req.Title, req.Text)
	if err != nil {
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "unknown_doc_type", "doc_type: %v", err)
	}
	ev := &events.DocChanged{DocID: req.ID, Source: req.Source, DocType: dt.Type, Title: req.Title,
		Text: req.Text, ACL: acl}
	if req.UpdatedAt != "" {
		t, err := time.Parse(time.RFC3339, req.UpdatedAt)
		if err != nil {
			return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "updated_at must be RFC 3339: %v", err)
		}
		ev.OccurredAt = t
	}
	if err := g.checkNamespace(tenant, req.ID); err != nil {
		return 0, nil, err
	}
	cur, err := g.mayWrite(r.Context(), tenant, c, req.ID)
	if err != nil {
		return 0, nil, err
	}
	ev.ACL = withWriters(ev.ACL, cur, c)
	status, out, err := g.announce(r.Context(), tenant, req.Version, req.UpdatedAt, ev)
	if acc, ok := out.(Accepted); ok {
		acc.DocTypeInferred = dt.Inferred
		out = acc
	}
	return status, out, err
}

// announce records ev in the registry, then publishes it. The event is
// checked first, so a document the bus would refuse is refused before the
// registry moves. A document the registry already holds with the same
// content and ACL, published, is answered 200 unchanged: no new version,
// no event.
func (g *Gateway) announce(ctx context.Context, tenant string, version int64, updatedAt string, ev *events.DocChanged) (int, any, error) {
	ev.Schema, ev.Tenant, ev.Version, ev.ReceivedAt = events.SchemaVersion, tenant, max(version, 1), g.now().UTC()
	if err := ev.Validate(); err != nil {
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_document", "%v", err)
	}
	if data, _ := json.Marshal(ev); int64(len(data))+1024 > g.cfg.MaxEventBytes {
		return 0, nil, httpapi.Errorf(http.StatusRequestEntityTooLarge, "event_too_large", "the document's event (%d bytes) exceeds %d bytes", len(data), g.cfg.MaxEventBytes)
	}
	hash := contentHash(ev)
	cur, err := g.current(ctx, tenant, ev.DocID)
	if err != nil {
		return 0, nil, err
	}
	if unchanged(cur, version, ev, hash) {
		return http.StatusOK, Accepted{ID: ev.DocID, Version: cur.Version, Unchanged: true, DocType: ev.DocType,
			EventID: events.ChangedID(tenant, ev.DocID, cur.Version)}, nil
	}
	st, err := g.registry.Announce(ctx, tenant, store.Announcement{DocID: ev.DocID, Version: version,
		ACL: ev.ACL, Source: ev.Source, Title: ev.Title, UpdatedAt: updatedAt})
	if err != nil {
		return 0, nil, g.registryError(err, "recording the document")
	}
	ev.Tenant, ev.Version, ev.ReceivedAt = tenant, st.Version, g.now().UTC()
	id := events.ChangedID(tenant, ev.DocID, st.Version)
	dup, err := g.publishWith(ctx, pending{DocID: ev.DocID, Version: st.Version, ContentHash: hash}, events.KindDocChanged, tenant, id, ev)
	if err != nil {
		return 0, nil, err
	}
	if aclMoved(cur, st) {
		if _, err := g.publishACL(ctx, tenant, st); err != nil {
			return 0, nil, err
		}
	}
	if hash != "" {
		// Failing to record it only means the next identical request is
		// published again (de-duplicated or applied as a replay).
		if _, err := g.registry.RecordContent(context.WithoutCancel(ctx), tenant, ev.DocID, st.Version, hash); err != nil {
			g.log.Warn("content hash not recorded", "tenant", tenant, "doc", ev.DocID, "error", err)
		}
	}
	g.log.Info("document accepted", "tenant", tenant, "doc", ev.DocID, "version", st.Version, "duplicate", dup)
	return http.StatusAccepted, Accepted{ID: ev.DocID, Version: st.Version, EventID: id, Duplicate: dup, DocType: ev.DocType}, nil
}

// aclMoved reports whether an announcement that took the registry from cur
// to st needs an ACL event: its ACL revision went up, or it replays a
// version whose events were never all acknowledged (no content recorded),
// so an ACL event an earlier attempt failed to publish is published now.
// Its message id is per revision, so a repeat is de-duplicated.
func aclMoved(cur *provenance.SourceState, st provenance.SourceState) bool {
	if cur == nil || st.ACLRevision == 0 {
		return false
	}
	return st.ACLRevision != cur.ACLRevision || (cur.ContentHash == "" && cur.Version == st.Version)
}

// publishACL publishes the ACL event of st's ACL revision. Every ACL
// change, whichever endpoint made it, has its own event: a content event
// at the same version would be de-duplicated and the consumers would keep
// the old ACL.
func (g *Gateway) publishACL(ctx context.Context, tenant string, st provenance.SourceState) (Accepted, error) {
	id := events.ACLID(tenant, st.DocID, st.Version, st.ACLRevision)
	dup, err := g.publish(ctx, events.KindDocACL, tenant, id, &events.DocACL{Header: events.Header{Tenant: tenant},
		DocID: st.DocID, Version: st.Version, ACLRevision: st.ACLRevision, ACL: st.ACL, ReceivedAt: g.now().UTC()})
	return Accepted{ID: st.DocID, Version: st.Version, EventID: id, Duplicate: dup}, err
}

func (g *Gateway) publish(ctx context.Context, kind events.Kind, tenant, id string, ev events.Validator) (bool, error) {
	return g.publishWith(ctx, pending{}, kind, tenant, id, ev)
}

// publishWith publishes an event the registry already holds, through the
// outbox: recorded as pending first, cleared once acknowledged, so a lost
// publish is republished (see Run). meta carries what a republish records.
func (g *Gateway) publishWith(ctx context.Context, meta pending, kind events.Kind, tenant, id string, ev events.Validator) (bool, error) {
	// The registry already holds the change: a client hanging up must not
	// cancel the publish that makes it durable.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.PublishTimeout)
	defer cancel()
	meta.Kind, meta.Tenant, meta.MsgID = kind, tenant, id
	data, err := events.Encode(ev)
	if err != nil {
		return false, httpapi.Errorf(http.StatusBadRequest, "invalid_document", "%v", err)
	}
	meta.Event = data
	kept := true
	if len(data) > g.bus.InlineMax() {
		// Too large for a key-value record: the outbox names it in the
		// payload bucket instead.
		name, err := g.bus.StorePayload(ctx, data)
		if err != nil {
			g.log.Error("storing a pending event failed", "event", id, "error", err)
			return false, httpapi.Errorf(http.StatusServiceUnavailable, "outbox_unavailable", "recording the event failed; retry the request")
		}
		meta.Event, meta.EventPayload = nil, name
	}
	if err := g.outbox.put(ctx, meta); err != nil {
		// The publish may still succeed; if it does not, the caller's
		// retry is what republishes it.
		kept = false
		g.log.Warn("pending event not recorded", "event", id, "error", err)
	}
	ack, err := g.bus.Publish(ctx, kind, tenant, id, ev)
	if err == nil && kept {
		if err := g.outbox.done(ctx, id); err != nil {
			g.log.Warn("pending event not cleared", "event", id, "error", err)
		}
	}
	if err != nil {
		if errors.Is(err, events.ErrInvalidEvent) {
			if kept {
				_ = g.outbox.done(ctx, id)
			}
			return false, httpapi.Errorf(http.StatusBadRequest, "invalid_document", "%v", err)
		}
		// The registry already holds the change; the client retries and the
		// same version is an idempotent replay with the same event id.
		g.log.Error("publishing failed", "event", id, "error", err)
		return false, httpapi.Errorf(http.StatusServiceUnavailable, "publish_failed", "publishing the event failed; retry the request")
	}
	return ack.Duplicate, nil
}

func (g *Gateway) deleteDocument(r *http.Request, c provenance.Caller) (int, any, error) {
	docID := r.PathValue("id")
	if err := provenance.ValidateDocID(docID); err != nil {
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "id: %v", err)
	}
	tenant, err := g.tenantFor(c, r.URL.Query().Get("tenant"))
	if err != nil {
		return 0, nil, err
	}
	if _, err := g.mayWrite(r.Context(), tenant, c, docID); err != nil {
		return 0, nil, err
	}
	st, err := g.registry.MarkDeleted(r.Context(), tenant, docID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, unknownDocument(docID)
	}
	if err != nil {
		return 0, nil, g.registryError(err, "recording the deletion")
	}
	id := events.DeletedID(tenant, docID, st.Version)
	dup, err := g.publish(r.Context(), events.KindDocDeleted, tenant, id,
		&events.DocDeleted{Header: events.Header{Tenant: tenant}, DocID: docID, Version: st.Version, ReceivedAt: g.now().UTC()})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, Accepted{ID: docID, Version: st.Version, EventID: id, Duplicate: dup}, nil
}

func (g *Gateway) putACL(r *http.Request, c provenance.Caller) (int, any, error) {
	docID := r.PathValue("id")
	if err := provenance.ValidateDocID(docID); err != nil {
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "id: %v", err)
	}
	tenant, err := g.tenantFor(c, r.URL.Query().Get("tenant"))
	if err != nil {
		return 0, nil, err
	}
	var body *provenance.ACL
	if err := g.decode(r, &body); err != nil {
		return 0, nil, err
	}
	if body == nil {
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "the ACL is null; send {\"public\":true} or the groups and principals who may read")
	}
	acl := *body
	if err := checkACL(acl); err != nil {
		return 0, nil, err
	}
	cur, err := g.mayWrite(r.Context(), tenant, c, docID)
	if err != nil {
		return 0, nil, err
	}
	if cur == nil || cur.Deleted {
		return 0, nil, unknownDocument(docID)
	}
	st, err := g.registry.SetACL(r.Context(), tenant, docID, withWriters(acl, cur, c).Normalize())
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, unknownDocument(docID)
	}
	if err != nil {
		return 0, nil, g.registryError(err, "recording the ACL")
	}
	out, err := g.publishACL(r.Context(), tenant, st)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, out, nil
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
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "id: %v", err)
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
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_catalog", "%v", err)
	}
	if len(st.Entities) == 0 {
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_catalog", "the catalog has no entity")
	}
	if len(skipped) > 0 {
		g.log.Info("catalog entities skipped", "doc", docID, "count", len(skipped))
	}
	ev := &events.DocChanged{DocID: docID, Source: "backstage", DocType: "catalog", Title: "Service catalog " + docID,
		ACL: provenance.PublicACL(), Structured: st}
	if err := g.checkNamespace(tenant, docID); err != nil {
		return 0, nil, err
	}
	cur, err := g.mayWrite(r.Context(), tenant, c, docID)
	if err != nil {
		return 0, nil, err
	}
	if (cur == nil || cur.Deleted) && !c.Admin && !c.Writer {
		// The catalog shapes every document's entities: it is written by
		// writer and admin tokens (and writers they name), not by every reader.
		return 0, nil, httpapi.Errorf(http.StatusForbidden, "forbidden", "a catalog is written by writer and admin callers")
	}
	ev.ACL = withWriters(ev.ACL, cur, c)
	return g.announce(r.Context(), tenant, 0, "", ev)
}

// ReresolveRequest is the body of POST /v1/entities/reresolve.
type ReresolveRequest struct {
	// Entity is the TYPE:NAME of the entity whose sources are resolved again.
	Entity string `json:"entity"`
}

// ReresolveAccepted is its 202 answer.
type ReresolveAccepted struct {
	Entity string `json:"entity"`
	// Sources are the documents re-published for resolution.
	Sources []string `json:"sources"`
	// Skipped are the documents without a stored extraction (applied before
	// extractions were kept); re-ingest them.
	Skipped []string `json:"skipped,omitempty"`
}

// reresolve re-publishes the stored extraction of every source of an entity
// with the next resolution number, so the resolver resolves them again with
// the current alias table (after an unmerge) without re-extracting. It
// changes the graph for everyone, so it is for admin callers only.
func (g *Gateway) reresolve(r *http.Request, c provenance.Caller) (int, any, error) {
	if g.cfg.Graph == nil {
		return 0, nil, httpapi.Errorf(http.StatusNotImplemented, "not_implemented", "re-resolution needs the graph store")
	}
	if !c.Admin {
		return 0, nil, httpapi.Errorf(http.StatusForbidden, "forbidden", "re-resolution is for admin callers")
	}
	var req ReresolveRequest
	if err := g.decode(r, &req); err != nil {
		return 0, nil, err
	}
	id, err := resolve.ParseRef(req.Entity)
	if err != nil {
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "entity: %v", err)
	}
	ctx := r.Context()
	e, err := g.cfg.Graph.Entity(ctx, c.Tenant, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, nil, httpapi.Errorf(http.StatusNotFound, "unknown_entity", "no entity %s", id)
	case err != nil:
		g.log.Error("store unavailable", "doing", "reading an entity", "error", err)
		return 0, nil, httpapi.Errorf(http.StatusServiceUnavailable, "store_unavailable", "reading %s: the store is unavailable; retry the request", id)
	}
	out := ReresolveAccepted{Entity: id, Sources: []string{}}
	for _, f := range e.Sources {
		rec, err := g.cfg.Graph.Source(ctx, c.Tenant, f.DocID)
		if err != nil {
			g.log.Error("store unavailable", "doing", "reading a source", "error", err)
			return 0, nil, httpapi.Errorf(http.StatusServiceUnavailable, "store_unavailable", "reading source %s: the store is unavailable; retry the request", f.DocID)
		}
		if rec.Deleted {
			continue
		}
		if len(rec.Raw) == 0 {
			out.Skipped = append(out.Skipped, rec.DocID)
			continue
		}
		var ev events.Extracted
		if err := events.Decode(rec.Raw, &ev); err != nil {
			out.Skipped = append(out.Skipped, rec.DocID)
			g.log.Error("stored extraction does not decode", "doc", rec.DocID, "error", err)
			continue
		}
		ev.Resolution, ev.ReceivedAt = rec.Resolution+1, g.now().UTC()
		if _, err := g.publish(ctx, events.KindExtracted, c.Tenant,
			events.ExtractedID(c.Tenant, rec.DocID, rec.Version, ev.Resolution), &ev); err != nil {
			return 0, nil, err
		}
		out.Sources = append(out.Sources, rec.DocID)
	}
	g.log.Info("re-resolution requested", "tenant", c.Tenant, "entity", id, "sources", len(out.Sources), "skipped", len(out.Skipped))
	return http.StatusAccepted, out, nil
}
