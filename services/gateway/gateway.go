// Package gateway turns document changes into durable JetStream events. It
// records every change in the source registry first (so it is in force for
// reads at once), then publishes the event and answers 202 only after
// JetStream acknowledged it.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/catalog"
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
	// PublishTimeout bounds the wait for JetStream's acknowledgement (default 10s).
	PublishTimeout time.Duration
	// Graph, when set, enables re-resolution (POST /v1/entities/reresolve):
	// stored extractions are re-published for the resolver to resolve again.
	Graph store.GraphStore
	// Webhooks configures the receivers of POST /webhooks/{provider} (see
	// LoadWebhooks); without providers the route answers 404.
	Webhooks WebhooksConfig
}

func (c *Config) setDefaults() {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 4 << 20
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 10 * time.Second
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
	g := &Gateway{hooks: hooks, deliveries: &deliveryLog{js: bus.JetStream(), ttl: time.Duration(cfg.Webhooks.DeliveryTTL)}, cfg: cfg, registry: registry, bus: bus, auth: a, log: log, now: time.Now,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_gateway_requests_total",
			Help: "Gateway requests by route and status code.",
		}, []string{"route", "code"}),
	}
	if reg != nil {
		if err := reg.Register(g.requests); err != nil {
			return nil, fmt.Errorf("registering gateway metrics: %w", err)
		}
	}
	return g, nil
}

// Handler returns the gateway's routes.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/documents", g.route("documents.post", g.postDocument))
	mux.Handle("DELETE /v1/documents/{id}", g.route("documents.delete", g.deleteDocument))
	mux.Handle("PUT /v1/documents/{id}/acl", g.route("documents.acl", g.putACL))
	mux.Handle("POST /v1/catalog", g.route("catalog.post", g.postCatalog))
	mux.Handle("POST /v1/entities/reresolve", g.route("entities.reresolve", g.reresolve))
	// Providers sign their deliveries instead of sending a bearer token.
	mux.HandleFunc("POST /webhooks/{provider}", g.serveWebhook)
	return mux
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

// mayWrite refuses a write to an existing document the caller may not read:
// being in the tenant is not enough to overwrite, re-permission or delete
// someone else's restricted document. Admin and writer (service account)
// callers may write anything in their tenant. A new document (or one deleted) may be written by anyone in
// the tenant. The answer says the document exists but not what it holds.
func (g *Gateway) mayWrite(ctx context.Context, tenant string, c provenance.Caller, docID string) error {
	if c.Admin || c.Writer {
		return nil
	}
	cur, err := g.registry.Sources(ctx, tenant, []string{docID})
	if err != nil {
		return httpapi.Errorf(http.StatusServiceUnavailable, "registry_unavailable", "checking the document: %v", err)
	}
	st, ok := cur[docID]
	if !ok || st.Deleted {
		return nil
	}
	// Readable checks the caller's own tenant; the write may target another
	// tenant only for admins, handled above.
	if !provenance.Readable(provenance.Caller{Tenant: tenant, Principal: c.Principal, Groups: c.Groups}, st) {
		return httpapi.Errorf(http.StatusForbidden, "forbidden", "document %q exists and you may not write it", docID)
	}
	return nil
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
	if err := httpapi.DecodeJSON(nil, r, g.cfg.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if err := provenance.ValidateDocID(req.ID); err != nil {
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "id: %v", err)
	}
	if strings.TrimSpace(req.Text) == "" {
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "text is required and must not be empty")
	}
	if req.Version < 0 {
		return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "version must be >= 1")
	}
	tenant, err := g.tenantFor(c, req.Tenant)
	if err != nil {
		return 0, nil, err
	}
	acl := provenance.PublicACL()
	if req.ACL != nil {
		acl = req.ACL.Normalize()
	}
	ev := &events.DocChanged{DocID: req.ID, Source: req.Source, DocType: req.DocType, Title: req.Title,
		Text: req.Text, ACL: acl}
	if req.UpdatedAt != "" {
		t, err := time.Parse(time.RFC3339, req.UpdatedAt)
		if err != nil {
			return 0, nil, httpapi.Errorf(http.StatusBadRequest, "invalid_field", "updated_at must be RFC 3339: %v", err)
		}
		ev.OccurredAt = t
	}
	if err := g.mayWrite(r.Context(), tenant, c, req.ID); err != nil {
		return 0, nil, err
	}
	return g.announce(r.Context(), tenant, req.Version, req.UpdatedAt, ev)
}

// announce records ev in the registry, then publishes it.
func (g *Gateway) announce(ctx context.Context, tenant string, version int64, updatedAt string, ev *events.DocChanged) (int, any, error) {
	st, err := g.registry.Announce(ctx, tenant, store.Announcement{DocID: ev.DocID, Version: version,
		ACL: ev.ACL, Source: ev.Source, Title: ev.Title, UpdatedAt: updatedAt})
	switch {
	case errors.Is(err, store.ErrStaleVersion):
		return 0, nil, httpapi.Errorf(http.StatusConflict, "stale_version", "%v", err)
	case err != nil:
		return 0, nil, httpapi.Errorf(http.StatusServiceUnavailable, "registry_unavailable", "recording the document: %v", err)
	}
	ev.Tenant, ev.Version, ev.ReceivedAt = tenant, st.Version, g.now().UTC()
	id := events.MsgID(tenant, ev.DocID, st.Version, "changed")
	dup, err := g.publish(ctx, events.KindDocChanged, tenant, id, ev)
	if err != nil {
		return 0, nil, err
	}
	g.log.Info("document accepted", "tenant", tenant, "doc", ev.DocID, "version", st.Version, "duplicate", dup)
	return http.StatusAccepted, Accepted{ID: ev.DocID, Version: st.Version, EventID: id, Duplicate: dup}, nil
}

func (g *Gateway) publish(ctx context.Context, kind events.Kind, tenant, id string, ev events.Validator) (bool, error) {
	// The registry already holds the change: a client hanging up must not
	// cancel the publish that makes it durable.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.PublishTimeout)
	defer cancel()
	ack, err := g.bus.Publish(ctx, kind, tenant, id, ev)
	if err != nil {
		if errors.Is(err, events.ErrInvalidEvent) {
			return false, httpapi.Errorf(http.StatusBadRequest, "invalid_document", "%v", err)
		}
		// The registry already holds the change; the client retries and the
		// same version is an idempotent replay with the same event id.
		return false, httpapi.Errorf(http.StatusServiceUnavailable, "publish_failed", "publishing the event: %v; retry the request", err)
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
	if err := g.mayWrite(r.Context(), tenant, c, docID); err != nil {
		return 0, nil, err
	}
	st, err := g.registry.MarkDeleted(r.Context(), tenant, docID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, nil, httpapi.Errorf(http.StatusNotFound, "unknown_document", "document %q is unknown", docID)
	case err != nil:
		return 0, nil, httpapi.Errorf(http.StatusServiceUnavailable, "registry_unavailable", "recording the deletion: %v", err)
	}
	id := events.MsgID(tenant, docID, st.Version, "deleted")
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
	var acl provenance.ACL
	if err := httpapi.DecodeJSON(nil, r, g.cfg.MaxBodyBytes, &acl); err != nil {
		return 0, nil, err
	}
	if err := g.mayWrite(r.Context(), tenant, c, docID); err != nil {
		return 0, nil, err
	}
	st, err := g.registry.SetACL(r.Context(), tenant, docID, acl.Normalize())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, nil, httpapi.Errorf(http.StatusNotFound, "unknown_document", "document %q is unknown", docID)
	case err != nil:
		return 0, nil, httpapi.Errorf(http.StatusServiceUnavailable, "registry_unavailable", "recording the ACL: %v", err)
	}
	id := events.MsgID(tenant, docID, st.Version, fmt.Sprintf("acl-%d", st.ACLRevision))
	dup, err := g.publish(r.Context(), events.KindDocACL, tenant, id, &events.DocACL{Header: events.Header{Tenant: tenant},
		DocID: docID, Version: st.Version, ACLRevision: st.ACLRevision, ACL: st.ACL, ReceivedAt: g.now().UTC()})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, Accepted{ID: docID, Version: st.Version, EventID: id, Duplicate: dup}, nil
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
	if err := g.mayWrite(r.Context(), tenant, c, docID); err != nil {
		return 0, nil, err
	}
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
	if err := httpapi.DecodeJSON(nil, r, g.cfg.MaxBodyBytes, &req); err != nil {
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
		return 0, nil, httpapi.Errorf(http.StatusServiceUnavailable, "store_unavailable", "reading %s: %v", id, err)
	}
	out := ReresolveAccepted{Entity: id, Sources: []string{}}
	for _, f := range e.Sources {
		rec, err := g.cfg.Graph.Source(ctx, c.Tenant, f.DocID)
		if err != nil {
			return 0, nil, httpapi.Errorf(http.StatusServiceUnavailable, "store_unavailable", "reading source %s: %v", f.DocID, err)
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
			events.MsgID(c.Tenant, rec.DocID, rec.Version, fmt.Sprintf("extracted-r%d", ev.Resolution)), &ev); err != nil {
			return 0, nil, err
		}
		out.Sources = append(out.Sources, rec.DocID)
	}
	g.log.Info("re-resolution requested", "tenant", c.Tenant, "entity", id, "sources", len(out.Sources), "skipped", len(out.Skipped))
	return http.StatusAccepted, out, nil
}
