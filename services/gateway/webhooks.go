package gateway

// Webhook receivers: POST /webhooks/{provider}.
//
// The route takes no bearer token: providers sign their deliveries, and a
// request whose signature does not verify is 401 before its body is looked
// at. Every accepted delivery goes through the same flow as the document
// API: registry write first, then the JetStream publish, then 202.
//
// Answers. Providers retry every non-2xx answer, so only what a retry could
// fix is non-2xx: 401 bad or missing signature, 404 unknown provider, 400
// malformed payload, 413 too large, 503 registry or stream down. An event
// the receiver does not handle is 202 {"ignored": reason}; a delivery older
// than what the registry holds (deliveries arrive out of order) is 202 with
// "stale": true instead of the document API's 409, which a provider would
// retry for ever.
//
// Versions. When the payload carries the item's last update time, its unix
// milliseconds are the explicit version: an older delivery after a newer one
// is stale, and the same delivery again is an idempotent replay (same
// version, same event id, de-duplicated by JetStream). Payloads without one
// (GitHub wiki pages, GitLab wiki pages) get the next version; a redelivery
// of them is recognised by its delivery id (X-GitHub-Delivery,
// Idempotency-Key / X-Gitlab-Event-UUID, X-Atlassian-Webhook-Identifier,
// webhook-id), remembered with a digest of the body in a JetStream
// key-value bucket for DeliveryTTL, and answered with what the first
// delivery did, "duplicate": true.
//
// Mapping (ids are the natural names with '%', '/' and control characters
// percent-encoded, because document ids may not contain '/'):
//
//	github issues          github:<owner>/<repo>#<number>; title; text = title + body;
//	                       doc_type incident when a label name contains "incident", else
//	                       the provider's doc_type (default issue); version = issue.updated_at.
//	                       deleted: deletion (with the issue's comments); transferred:
//	                       deletion of the old id (with its comments).
//	github issue_comment   a document of its own, linked to its issue by id:
//	                       github:<owner>/<repo>#<number>/comment/<id>; doc_type
//	                       comment; text names the issue, then the comment body; version =
//	                       comment.updated_at; deleted: deletion. Comments on pull requests
//	                       are ignored (pull requests are not documents).
//	github gollum          one document per page: github-wiki:<owner>/<repo>/<page_name>;
//	                       doc_type wiki. The payload carries no page text, so the text is
//	                       the title and the edit summary; next version per delivery.
//	gitlab wiki_page       gitlab-wiki:<project path>/<slug>; text = title + content;
//	                       action delete: deletion.
//	gitlab issue           gitlab:<project path>#<iid>; text = title + description; incident
//	                       when issue_type is incident or a label contains "incident".
//	                       A confidential issue is withdrawn (deleted with its notes).
//	gitlab note            notes on issues: gitlab:<project path>#<iid>/note/<id>; system
//	                       notes and notes on anything else are ignored; confidential ones
//	                       withdrawn.
//	jira issue_created / issue_updated
//	                       jira:<key>; text = summary + description (plain or ADF);
//	                       version = fields.updated; an issue with a security level is
//	                       withdrawn; a key change (move) deletes the old key's document.
//	jira issue_deleted     deletion (with the issue's comments).
//	jira comment_*         jira:<key>/comment/<id>, comment_deleted: deletion.
//
// A deletion whose payload carries a version later than the registry's
// records that version first, so a late delivery of an edit made before the
// deletion cannot bring the document back.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"gopkg.in/yaml.v3"

	"github.com/kgstream/kgstream/pkg/errkind"
	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// Provider kinds: which payload decoder a receiver uses.
const (
	KindGitHub = "github"
	KindGitLab = "gitlab"
	KindJira   = "jira"
)

// DefaultDeliveryTTL is how long delivery ids are remembered: GitHub lets a
// delivery be redelivered for three days.
const DefaultDeliveryTTL = 72 * time.Hour

// deliveryBucket is the JetStream key-value bucket of processed deliveries.
const deliveryBucket = "kgstream_webhook_deliveries"

// WebhooksConfig configures POST /webhooks/{provider}. The file LoadWebhooks
// reads has the same shape, in JSON or (.yaml, .yml) YAML:
//
//	{"delivery_ttl": "72h",
//	 "providers": {
//	   "github": {"secrets": ["..."], "tenant": "acme", "acl": {"groups": ["eng"]}},
//	   "gitlab": {"secret_env": ["KG_GITLAB_WEBHOOK_TOKEN"], "tenant": "acme", "acl": {"public": true}},
//	   "jira":   {"kind": "jira", "scheme": "hmac-sha256", "signature_header": "X-Hub-Signature",
//	              "secrets": ["..."], "tenant": "acme", "acl": {"groups": ["sre"]}, "doc_type": "incident"}}}
type WebhooksConfig struct {
	// Providers maps the {provider} path segment ([a-z0-9_-]{1,64}) to its
	// receiver. Several receivers may share a kind (two GitHub orgs feeding
	// two tenants).
	Providers map[string]WebhookProvider `json:"providers"`
	// DeliveryTTL is how long delivery ids are remembered for redelivery
	// detection (default DefaultDeliveryTTL).
	DeliveryTTL Duration `json:"delivery_ttl,omitempty"`
}

// WebhookProvider configures one receiver.
type WebhookProvider struct {
	// Kind is github, gitlab or jira (default: the provider's name).
	Kind string `json:"kind,omitempty"`
	// Scheme is the signature scheme (Scheme* constants). Default: github
	// hmac-sha256, gitlab gitlab-token, jira hmac-sha256 in X-Hub-Signature.
	Scheme string `json:"scheme,omitempty"`
	// Secrets are the accepted secrets; more than one while rotating.
	Secrets []string `json:"secrets,omitempty"`
	// SecretEnv names environment variables that each hold one more secret;
	// LoadWebhooks resolves them into Secrets.
	SecretEnv []string `json:"secret_env,omitempty"`
	// SignatureHeader overrides the header of the hmac-sha256 scheme.
	SignatureHeader string `json:"signature_header,omitempty"`
	// Tolerance bounds the age of a Standard Webhooks timestamp (default 5m).
	Tolerance Duration `json:"tolerance,omitempty"`
	// DeliveryHeader overrides the header that carries the delivery id.
	DeliveryHeader string `json:"delivery_header,omitempty"`
	// Tenant receives every document of this provider; payloads never
	// choose it.
	Tenant string `json:"tenant"`
	// ACL is every document's ACL. Required: a private repository's issues
	// must not become public within the tenant by omission. Use
	// {"public": true} for that.
	ACL *provenance.ACL `json:"acl"`
	// DocType replaces the default doc type of issues ("issue"); an issue
	// the mapping classifies as an incident stays "incident".
	DocType string `json:"doc_type,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("5m", "72h")
// in configuration files.
type Duration time.Duration

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("parsing duration %q: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

var providerNameRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// Validate checks the configuration (a nil or empty Providers map is valid:
// the route then answers 404 for every provider).
func (c WebhooksConfig) Validate() error {
	_, err := newReceivers(c)
	return err
}

// LoadWebhooks reads a webhooks configuration file (JSON, or YAML when the
// name ends in .yaml or .yml), resolves secret_env from the environment
// and validates the result. Unknown fields are errors.
func LoadWebhooks(path string) (WebhooksConfig, error) {
	return loadWebhooks(path, os.LookupEnv)
}

func loadWebhooks(path string, lookup func(string) (string, bool)) (WebhooksConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return WebhooksConfig{}, fmt.Errorf("reading webhooks config: %w", err)
	}
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".yaml" || ext == ".yml" {
		var doc any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return WebhooksConfig{}, fmt.Errorf("parsing webhooks config %s: %w", path, err)
		}
		// One set of field names and one strict decoder for both formats.
		if data, err = json.Marshal(doc); err != nil {
			return WebhooksConfig{}, fmt.Errorf("parsing webhooks config %s: %w", path, err)
		}
	}
	var c WebhooksConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return WebhooksConfig{}, fmt.Errorf("parsing webhooks config %s: %w", path, err)
	}
	for name, p := range c.Providers {
		for _, env := range p.SecretEnv {
			v, ok := lookup(env)
			if !ok || v == "" {
				return WebhooksConfig{}, fmt.Errorf("resolving the secrets of webhook provider %q: environment variable %s is unset or empty", name, env)
			}
			p.Secrets = append(p.Secrets, v)
		}
		p.SecretEnv = nil
		c.Providers[name] = p
	}
	if err := c.Validate(); err != nil {
		return WebhooksConfig{}, fmt.Errorf("validating webhooks config %s: %w", path, err)
	}
	return c, nil
}

// receiver is one configured provider, ready to serve.
type receiver struct {
	name, kind, tenant, docType string
	acl                         provenance.ACL
	verifier                    *verifier
	deliveryHeaders             []string
}

// idPrefixes are the document id namespaces the receivers of a kind write.
func idPrefixes(kind string) []string {
	switch kind {
	case KindGitHub:
		return []string{"github:", "github-wiki:"}
	case KindGitLab:
		return []string{"gitlab:", "gitlab-wiki:"}
	case KindJira:
		return []string{"jira:"}
	}
	return nil
}

func newReceivers(c WebhooksConfig) (map[string]*receiver, error) {
	if c.DeliveryTTL < 0 {
		return nil, errors.New("webhooks: delivery_ttl must not be negative")
	}
	out := make(map[string]*receiver, len(c.Providers))
	for name, p := range c.Providers {
		r, err := newReceiver(name, p)
		if err != nil {
			return nil, fmt.Errorf("webhook provider %q: %w", name, err)
		}
		out[name] = r
	}
	return out, nil
}

func newReceiver(name string, p WebhookProvider) (*receiver, error) {
	if !providerNameRE.MatchString(name) {
		return nil, errors.New("the name must match [a-z0-9_-]{1,64}")
	}
	r := &receiver{name: name, kind: p.Kind, tenant: p.Tenant, docType: p.DocType}
	if r.kind == "" {
		r.kind = name
	}
	scheme, header := p.Scheme, p.SignatureHeader
	switch r.kind {
	case KindGitHub:
		r.deliveryHeaders = []string{"X-GitHub-Delivery"}
		if scheme == "" {
			scheme = SchemeHMACSHA256
		}
	case KindGitLab:
		// Idempotency-Key stays the same across GitLab's retries.
		r.deliveryHeaders = []string{"Idempotency-Key", "X-Gitlab-Event-UUID"}
		if scheme == "" {
			scheme = SchemeGitLabToken
		}
	case KindJira:
		r.deliveryHeaders = []string{"X-Atlassian-Webhook-Identifier"}
		if scheme == "" {
			scheme = SchemeHMACSHA256
		}
		if scheme == SchemeHMACSHA256 && header == "" {
			header = "X-Hub-Signature"
		}
	default:
		return nil, fmt.Errorf("unknown kind %q (want %s, %s or %s)", r.kind, KindGitHub, KindGitLab, KindJira)
	}
	if scheme == SchemeStandardWebhooks {
		r.deliveryHeaders = append([]string{headerWebhookID}, r.deliveryHeaders...)
	}
	if p.DeliveryHeader != "" {
		r.deliveryHeaders = []string{p.DeliveryHeader}
	}
	if len(p.SecretEnv) > 0 && len(p.Secrets) == 0 {
		return nil, fmt.Errorf("secret_env %v is not resolved (load the file with LoadWebhooks)", p.SecretEnv)
	}
	v, err := newVerifier(scheme, header, p.Secrets, time.Duration(p.Tolerance))
	if err != nil {
		return nil, err
	}
	r.verifier = v
	if err := provenance.ValidateTenant(p.Tenant); err != nil {
		return nil, fmt.Errorf("tenant: %w", err)
	}
	if p.ACL == nil {
		return nil, errors.New(`acl is required (use {"public": true} for public within the tenant)`)
	}
	r.acl = p.ACL.Normalize()
	return r, nil
}

func (r *receiver) deliveryID(h http.Header) string {
	for _, name := range r.deliveryHeaders {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			return v
		}
	}
	return ""
}

// WebhookAccepted is the 202 body of POST /webhooks/{provider}.
type WebhookAccepted struct {
	Provider string `json:"provider"`
	Event    string `json:"event,omitempty"`
	// Ignored says why the delivery changed nothing, when it is an event
	// the receiver does not handle.
	Ignored string `json:"ignored,omitempty"`
	// Documents says what the delivery did to each document it touched.
	Documents []WebhookDocument `json:"documents,omitempty"`
	// Stale is set when every document of the delivery was older than what
	// the registry holds, so nothing changed.
	Stale bool `json:"stale,omitempty"`
	// Duplicate is set for a redelivery of a delivery already processed;
	// Documents is then what the first delivery did.
	Duplicate bool `json:"duplicate,omitempty"`
}

// WebhookDocument is what a delivery did to one document.
type WebhookDocument struct {
	ID string `json:"id"`
	// Action is "changed" or "deleted".
	Action    string `json:"action"`
	Version   int64  `json:"version,omitempty"`
	EventID   string `json:"event_id,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// Stale: the registry holds a later version; nothing was changed.
	Stale bool `json:"stale,omitempty"`
	// Ignored says why nothing was done (a deletion of an unknown document).
	Ignored string `json:"ignored,omitempty"`
}

// serveWebhook is POST /webhooks/{provider}. It does not authenticate
// callers by token: the provider's signature is the authentication.
func (g *Gateway) serveWebhook(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("provider")
	rc, ok := g.hooks[name]
	label := "webhooks.unknown"
	if ok {
		label = "webhooks." + name
	}
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	defer func() { g.requests.WithLabelValues(label, fmt.Sprint(sw.code)).Inc() }()
	if !ok {
		httpapi.WriteError(sw, g.log, httpapi.Errorf(http.StatusNotFound, "unknown_provider", "no webhook receiver is configured for provider %q", name))
		return
	}
	status, body, err := g.receive(r, rc)
	if err != nil {
		httpapi.WriteError(sw, g.log, err)
		return
	}
	httpapi.WriteJSON(sw, status, body)
}

func (g *Gateway) receive(r *http.Request, rc *receiver) (int, any, error) {
	body, d, err := g.readDelivery(r, rc)
	if err != nil {
		return 0, nil, err
	}
	out := WebhookAccepted{Provider: rc.name, Event: d.event}
	if d.ignored != "" {
		out.Ignored = d.ignored
		g.log.Info("webhook ignored", "provider", rc.name, "event", d.event, "reason", d.ignored)
		return http.StatusAccepted, out, nil
	}
	ctx := r.Context()
	key := ""
	if id := rc.deliveryID(r.Header); id != "" {
		key = deliveryKey(rc.name, id, body)
		prev, err := g.deliveries.lookup(ctx, key)
		if err != nil {
			return 0, nil, errkind.Wrap(errkind.Unavailable, "delivery_log_unavailable", err,
				fmt.Sprintf("looking up delivery %q failed; retry the delivery", id))
		}
		if prev != nil {
			prev.Duplicate = true
			return http.StatusAccepted, prev, nil
		}
	}
	for _, op := range d.ops {
		docs, err := g.applyOp(ctx, rc, op)
		if err != nil {
			return 0, nil, err
		}
		out.Documents = append(out.Documents, docs...)
	}
	out.Stale = len(out.Documents) > 0
	for _, doc := range out.Documents {
		out.Stale = out.Stale && doc.Stale
	}
	if key != "" {
		// The delivery is already durable; failing to remember it only
		// means a redelivery is processed again (an idempotent replay, or
		// one more version of an unversioned page).
		if err := g.deliveries.record(ctx, key, out); err != nil {
			g.log.Warn("webhook delivery not remembered", "provider", rc.name, "error", err)
		}
	}
	g.log.Info("webhook accepted", "provider", rc.name, "tenant", rc.tenant, "event", d.event, "documents", len(out.Documents), "stale", out.Stale)
	return http.StatusAccepted, out, nil
}

// readDelivery reads, verifies and decodes a delivery: its signature
// first, before anything of the body is looked at.
func (g *Gateway) readDelivery(r *http.Request, rc *receiver) ([]byte, delivery, error) {
	body, err := httpapi.ReadBody(nil, r, g.cfg.MaxBodyBytes)
	if err != nil {
		return nil, delivery{}, err
	}
	if err := rc.verifier.verify(r.Header, body, g.now()); err != nil {
		code := "bad_signature"
		switch {
		case errors.Is(err, ErrUnsigned):
			code = "unsigned"
		case errors.Is(err, ErrStaleSignature):
			code = "stale_signature"
		}
		g.log.Warn("webhook signature refused", "provider", rc.name, "error", err)
		return nil, delivery{}, errkind.Errorf(errkind.Unauthorized, code, "verifying the %s signature: %w", rc.verifier.scheme, err)
	}
	if err := httpapi.RequireJSON(r); err != nil {
		return nil, delivery{}, err
	}
	d, err := decodeDelivery(rc.kind, r.Header, body, rc.docType)
	if err != nil {
		return nil, delivery{}, errkind.Errorf(errkind.Invalid, "malformed_payload", "decoding the %s payload: %w", rc.kind, err)
	}
	return body, d, nil
}

// applyOp applies one op of a delivery through the command core.
func (g *Gateway) applyOp(ctx context.Context, rc *receiver, op docOp) ([]WebhookDocument, error) {
	if op.kind == opChange {
		res, err := g.cmds.Change(ctx, rc.tenant, byReceiver(rc), ChangeCommand{DocID: op.docID, Version: op.version,
			UpdatedAt: op.updatedAt, OccurredAt: op.occurredAt, Source: rc.kind, DocType: op.docType,
			Title: op.title, Text: op.text})
		doc, err := webhookDocument(op.docID, "changed", res, err)
		return []WebhookDocument{doc}, err
	}
	first, err := g.webhookDelete(ctx, rc, DeleteCommand{DocID: op.docID, Version: op.version,
		UpdatedAt: op.updatedAt, Ordered: op.kind == opWithdraw})
	if err != nil || !op.children || first.Stale {
		return []WebhookDocument{first}, err
	}
	children, err := g.cmds.Children(ctx, rc.tenant, op.docID)
	if err != nil {
		return nil, err
	}
	docs := []WebhookDocument{first}
	for _, id := range children {
		// Children already marked deleted are deleted again: a retry after
		// a failed publish must still deliver their deletion (the same
		// version gives the same event id, so JetStream de-duplicates).
		doc, err := g.webhookDelete(ctx, rc, DeleteCommand{DocID: id})
		if err != nil {
			return nil, err
		}
		docs = append(docs, doc)
	}
	return docs, nil
}

func (g *Gateway) webhookDelete(ctx context.Context, rc *receiver, cmd DeleteCommand) (WebhookDocument, error) {
	res, err := g.cmds.Delete(ctx, rc.tenant, byReceiver(rc), cmd)
	return webhookDocument(cmd.DocID, "deleted", res, err)
}

// webhookDocument is a command's result as a receiver answers it: what a
// provider's retry cannot fix is no error. An older version than the
// registry's is stale (deliveries arrive out of order; a 409 would be
// retried for ever), a deletion of an unknown document is ignored.
func webhookDocument(docID, action string, res Result, err error) (WebhookDocument, error) {
	switch {
	case errors.Is(err, store.ErrStaleVersion):
		return WebhookDocument{ID: docID, Action: action, Stale: true}, nil
	case action == "deleted" && errors.Is(err, errkind.NotFound):
		return WebhookDocument{ID: docID, Action: action, Ignored: "unknown document"}, nil
	}
	return WebhookDocument{ID: docID, Action: action, Version: res.Version, EventID: res.EventID, Duplicate: res.Duplicate}, err
}

// deliveryLog remembers processed deliveries in a JetStream key-value
// bucket, so every gateway replica shares it and it survives restarts.
type deliveryLog struct {
	js  jetstream.JetStream
	ttl time.Duration

	mu sync.Mutex
	kv jetstream.KeyValue
}

// deliveryKey names a delivery by provider, delivery id and body: a forged
// delivery id on another (validly signed, replayed) body is no duplicate.
func deliveryKey(provider, id string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write(body)
	return provider + "." + hex.EncodeToString(h.Sum(nil))
}

func (d *deliveryLog) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.kv != nil {
		return d.kv, nil
	}
	kv, err := d.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: deliveryBucket,
		Description: "webhook deliveries processed by the gateway", TTL: d.ttl, History: 1})
	if err != nil {
		return nil, fmt.Errorf("opening bucket %s: %w", deliveryBucket, err)
	}
	d.kv = kv
	return kv, nil
}

// lookup returns what the delivery did the first time, or nil.
func (d *deliveryLog) lookup(ctx context.Context, key string) (*WebhookAccepted, error) {
	kv, err := d.bucket(ctx)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	var out WebhookAccepted
	if err := json.Unmarshal(e.Value(), &out); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", key, err)
	}
	return &out, nil
}

func (d *deliveryLog) record(ctx context.Context, key string, out WebhookAccepted) error {
	kv, err := d.bucket(ctx)
	if err != nil {
		return err
	}
	data, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", key, err)
	}
	if _, err := kv.Put(ctx, key, data); err != nil {
		return fmt.Errorf("writing %s: %w", key, err)
	}
	return nil
}

// Payload decoding. Decoders are pure functions of the headers and the
// body, so they can be fuzzed; the handler applies what they return.

type opKind int

const (
	// opChange announces a new version of a document.
	opChange opKind = iota + 1
	// opDelete: the item is gone; the deletion wins over any version.
	opDelete
	// opWithdraw: the item became unreadable for the configured audience
	// (confidential, security level); ordered by version like a change.
	opWithdraw
)

// docOp is one thing a delivery does to one document.
type docOp struct {
	kind  opKind
	docID string
	// children also deletes the documents under docID (an issue's comments).
	children             bool
	title, text, docType string
	// version is the explicit version (unix ms of the item's update), 0 for
	// the next one.
	version    int64
	updatedAt  string
	occurredAt time.Time
}

// delivery is a decoded webhook: the ops to apply, or why there are none.
type delivery struct {
	event   string
	ignored string
	ops     []docOp
}

// decodeDelivery decodes a payload of kind. A returned error means the
// payload is malformed (400).
func decodeDelivery(kind string, h http.Header, body []byte, docType string) (delivery, error) {
	if docType == "" {
		docType = "issue"
	}
	var (
		d   delivery
		err error
	)
	switch kind {
	case KindGitHub:
		d, err = decodeGitHub(h.Get("X-GitHub-Event"), body, docType)
	case KindGitLab:
		d, err = decodeGitLab(body, docType)
	case KindJira:
		d, err = decodeJira(body, docType)
	default:
		return delivery{}, fmt.Errorf("unknown kind %q", kind)
	}
	if err != nil {
		return delivery{}, err
	}
	if d.ignored == "" && len(d.ops) == 0 {
		d.ignored = "the delivery names no document"
	}
	for _, op := range d.ops {
		if err := provenance.ValidateDocID(op.docID); err != nil {
			return delivery{}, fmt.Errorf("mapping the document id: %w", err)
		}
		if op.kind == opChange && strings.TrimSpace(op.text) == "" {
			return delivery{}, fmt.Errorf("document %q has no text", op.docID)
		}
	}
	return d, nil
}

// docID builds a document id from a prefix and a natural name such as
// "owner/repo#1", keeping it as people write it ('/' included). What an id
// may not hold is percent-encoded byte by byte: '%' itself, control and
// invisible characters, invalid UTF-8, and white space at the end. The
// encoding is reversible, so distinct names never share an id.
func docID(prefix, name string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		last := i+n == len(name)
		if r == '%' || r == utf8.RuneError || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) ||
			(last && unicode.IsSpace(r)) {
			for j := i; j < i+n; j++ {
				fmt.Fprintf(&b, "%%%02X", name[j])
			}
		} else {
			b.WriteString(name[i : i+n])
		}
		i += n
	}
	return b.String()
}

// joinText is a title and a body as one text.
func joinText(title, body string) string {
	title, body = strings.TrimSpace(title), strings.TrimSpace(body)
	switch {
	case body == "":
		return title
	case title == "":
		return body
	}
	return title + "\n\n" + body
}

// versionOf turns a provider's update time into an explicit version (unix
// milliseconds) and the RFC 3339 form the registry keeps. An empty s is no
// version.
func versionOf(s string) (int64, string, time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, "", time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000-0700", "2006-01-02T15:04:05-0700",
		"2006-01-02 15:04:05 MST", "2006-01-02 15:04:05 -0700", "2006-01-02 15:04:05.000 -0700"} {
		t, err := time.Parse(layout, s)
		if err != nil {
			continue
		}
		if ms := t.UnixMilli(); ms > 0 {
			return ms, t.UTC().Format(time.RFC3339Nano), t, nil
		}
		return 0, "", time.Time{}, fmt.Errorf("update time %q is before 1970", s)
	}
	return 0, "", time.Time{}, fmt.Errorf("update time %q is in no known format", s)
}

func containsFold(s, sub string) bool { return strings.Contains(strings.ToLower(s), sub) }

// GitHub

type ghRepo struct {
	FullName string `json:"full_name"`
}

type ghIssue struct {
	Number      int64           `json:"number"`
	Title       string          `json:"title"`
	Body        string          `json:"body"`
	UpdatedAt   string          `json:"updated_at"`
	PullRequest json.RawMessage `json:"pull_request"`
	Labels      []struct {
		Name string `json:"name"`
	} `json:"labels"`
}

type ghComment struct {
	ID        int64  `json:"id"`
	Body      string `json:"body"`
	UpdatedAt string `json:"updated_at"`
	User      struct {
		Login string `json:"login"`
	} `json:"user"`
}

type ghPayload struct {
	Action     string     `json:"action"`
	Repository *ghRepo    `json:"repository"`
	Issue      *ghIssue   `json:"issue"`
	Comment    *ghComment `json:"comment"`
	Pages      []struct {
		PageName string `json:"page_name"`
		Title    string `json:"title"`
		Summary  string `json:"summary"`
		Action   string `json:"action"`
	} `json:"pages"`
}

func decodeGitHub(event string, body []byte, docType string) (delivery, error) {
	d := delivery{event: event}
	switch event {
	case "":
		return d, errors.New("the X-GitHub-Event header is missing")
	case "ping":
		d.ignored = "ping"
		return d, nil
	case "issues", "issue_comment", "gollum":
	default:
		d.ignored = fmt.Sprintf("event %q is not handled", event)
		return d, nil
	}
	var p ghPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return d, fmt.Errorf("parsing the JSON body: %w", err)
	}
	if p.Repository == nil || p.Repository.FullName == "" {
		return d, errors.New("repository.full_name is missing")
	}
	repo := p.Repository.FullName
	if event == "gollum" {
		for i, pg := range p.Pages {
			if pg.PageName == "" {
				return d, fmt.Errorf("pages[%d].page_name is missing", i)
			}
			title := pg.Title
			if title == "" {
				title = pg.PageName
			}
			d.ops = append(d.ops, docOp{kind: opChange, docID: docID("github-wiki:", repo+"/"+pg.PageName),
				title: title, text: joinText(title, pg.Summary), docType: "wiki"})
		}
		return d, nil
	}
	if p.Issue == nil || p.Issue.Number <= 0 {
		return d, errors.New("issue.number is missing")
	}
	is := p.Issue
	natural := fmt.Sprintf("%s#%d", repo, is.Number)
	issueID := docID("github:", natural)
	if event == "issue_comment" {
		if len(is.PullRequest) > 0 && string(is.PullRequest) != "null" {
			d.ignored = "comment on a pull request"
			return d, nil
		}
		c := p.Comment
		if c == nil || c.ID <= 0 {
			return d, errors.New("comment.id is missing")
		}
		version, updated, at, err := versionOf(c.UpdatedAt)
		if err != nil {
			return d, fmt.Errorf("comment.updated_at: %w", err)
		}
		op := docOp{docID: docID("github:", fmt.Sprintf("%s/comment/%d", natural, c.ID)), version: version, updatedAt: updated, occurredAt: at}
		switch p.Action {
		case "created", "edited":
			op.kind, op.docType = opChange, "comment"
			op.title = commentTitle(c.User.Login, natural, is.Title)
			op.text = joinText(op.title, c.Body)
		case "deleted":
			op.kind = opDelete
		default:
			d.ignored = fmt.Sprintf("issue_comment action %q is not handled", p.Action)
			return d, nil
		}
		d.ops = append(d.ops, op)
		return d, nil
	}
	version, updated, at, err := versionOf(is.UpdatedAt)
	if err != nil {
		return d, fmt.Errorf("issue.updated_at: %w", err)
	}
	op := docOp{docID: issueID, version: version, updatedAt: updated, occurredAt: at}
	switch p.Action {
	case "deleted", "transferred":
		// A transferred issue lives on under another repository's id; the
		// receiver of that repository announces it there.
		op.kind, op.children = opDelete, true
	default:
		op.kind, op.title, op.text, op.docType = opChange, is.Title, joinText(is.Title, is.Body), docType
		for _, l := range is.Labels {
			if containsFold(l.Name, "incident") {
				op.docType = "incident"
			}
		}
	}
	d.ops = append(d.ops, op)
	return d, nil
}

func commentTitle(author, parent, parentTitle string) string {
	by := ""
	if author != "" {
		by = " by " + author
	}
	return fmt.Sprintf("Comment%s on %s: %s", by, parent, strings.TrimSpace(parentTitle))
}

// GitLab

type glLabel struct {
	Title string `json:"title"`
}

type glIssue struct {
	IID          int64     `json:"iid"`
	Title        string    `json:"title"`
	Description  string    `json:"description"`
	UpdatedAt    string    `json:"updated_at"`
	Action       string    `json:"action"`
	Confidential bool      `json:"confidential"`
	IssueType    string    `json:"issue_type"`
	Labels       []glLabel `json:"labels"`
}

type glPayload struct {
	ObjectKind string `json:"object_kind"`
	EventType  string `json:"event_type"`
	Project    *struct {
		PathWithNamespace string `json:"path_with_namespace"`
	} `json:"project"`
	ObjectAttributes json.RawMessage `json:"object_attributes"`
	Issue            *glIssue        `json:"issue"`
	Labels           []glLabel       `json:"labels"`
}

func decodeGitLab(body []byte, docType string) (delivery, error) {
	var p glPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return delivery{}, fmt.Errorf("parsing the JSON body: %w", err)
	}
	d := delivery{event: p.ObjectKind}
	switch p.ObjectKind {
	case "":
		return d, errors.New("object_kind is missing")
	case "wiki_page", "issue", "note":
	default:
		d.ignored = fmt.Sprintf("event %q is not handled", p.ObjectKind)
		return d, nil
	}
	if p.Project == nil || p.Project.PathWithNamespace == "" {
		return d, errors.New("project.path_with_namespace is missing")
	}
	if len(p.ObjectAttributes) == 0 || string(p.ObjectAttributes) == "null" {
		return d, errors.New("object_attributes is missing")
	}
	path := p.Project.PathWithNamespace
	switch p.ObjectKind {
	case "wiki_page":
		var w struct {
			Title   string `json:"title"`
			Content string `json:"content"`
			Slug    string `json:"slug"`
			Action  string `json:"action"`
		}
		if err := json.Unmarshal(p.ObjectAttributes, &w); err != nil {
			return d, fmt.Errorf("parsing object_attributes: %w", err)
		}
		if w.Slug == "" {
			return d, errors.New("object_attributes.slug is missing")
		}
		op := docOp{kind: opChange, docID: docID("gitlab-wiki:", path+"/"+w.Slug), title: w.Title,
			text: joinText(w.Title, w.Content), docType: "wiki"}
		if w.Action == "delete" {
			op = docOp{kind: opDelete, docID: op.docID}
		}
		d.ops = append(d.ops, op)
	case "issue":
		var is glIssue
		if err := json.Unmarshal(p.ObjectAttributes, &is); err != nil {
			return d, fmt.Errorf("parsing object_attributes: %w", err)
		}
		op, err := gitlabIssueOp(path, is, p.Labels, docType)
		if err != nil {
			return d, err
		}
		if is.Confidential || p.EventType == "confidential_issue" {
			op = docOp{kind: opWithdraw, docID: op.docID, children: true, version: op.version, updatedAt: op.updatedAt}
		}
		d.ops = append(d.ops, op)
	case "note":
		var n struct {
			ID           int64  `json:"id"`
			Note         string `json:"note"`
			NoteableType string `json:"noteable_type"`
			UpdatedAt    string `json:"updated_at"`
			System       bool   `json:"system"`
			Confidential bool   `json:"confidential"`
			Internal     bool   `json:"internal"`
		}
		if err := json.Unmarshal(p.ObjectAttributes, &n); err != nil {
			return d, fmt.Errorf("parsing object_attributes: %w", err)
		}
		switch {
		case n.NoteableType != "Issue":
			d.ignored = fmt.Sprintf("note on %q is not handled", n.NoteableType)
			return d, nil
		case n.System:
			d.ignored = "system note"
			return d, nil
		case p.Issue == nil || p.Issue.IID <= 0:
			return d, errors.New("issue.iid is missing")
		case n.ID <= 0:
			return d, errors.New("object_attributes.id is missing")
		}
		version, updated, at, err := versionOf(n.UpdatedAt)
		if err != nil {
			return d, fmt.Errorf("object_attributes.updated_at: %w", err)
		}
		parent := fmt.Sprintf("%s#%d", path, p.Issue.IID)
		op := docOp{kind: opChange, docID: docID("gitlab:", fmt.Sprintf("%s/note/%d", parent, n.ID)), docType: "comment",
			version: version, updatedAt: updated, occurredAt: at}
		if n.Confidential || n.Internal || p.Issue.Confidential || p.EventType == "confidential_note" {
			op = docOp{kind: opWithdraw, docID: op.docID, version: version, updatedAt: updated}
		} else {
			op.title = commentTitle("", parent, p.Issue.Title)
			op.text = joinText(op.title, n.Note)
		}
		d.ops = append(d.ops, op)
	}
	return d, nil
}

func gitlabIssueOp(path string, is glIssue, labels []glLabel, docType string) (docOp, error) {
	if is.IID <= 0 {
		return docOp{}, errors.New("object_attributes.iid is missing")
	}
	version, updated, at, err := versionOf(is.UpdatedAt)
	if err != nil {
		return docOp{}, fmt.Errorf("object_attributes.updated_at: %w", err)
	}
	op := docOp{kind: opChange, docID: docID("gitlab:", fmt.Sprintf("%s#%d", path, is.IID)), title: is.Title,
		text: joinText(is.Title, is.Description), docType: docType, version: version, updatedAt: updated, occurredAt: at}
	if is.Action == "delete" {
		return docOp{kind: opDelete, docID: op.docID, children: true, version: version, updatedAt: updated}, nil
	}
	if strings.EqualFold(is.IssueType, "incident") {
		op.docType = "incident"
	}
	for _, l := range append(labels, is.Labels...) {
		if containsFold(l.Title, "incident") {
			op.docType = "incident"
		}
	}
	return op, nil
}

// Jira

type jiraIssue struct {
	Key    string `json:"key"`
	Fields struct {
		Summary     string          `json:"summary"`
		Description json.RawMessage `json:"description"`
		Updated     string          `json:"updated"`
		Security    json.RawMessage `json:"security"`
		Labels      []string        `json:"labels"`
		IssueType   *struct {
			Name string `json:"name"`
		} `json:"issuetype"`
	} `json:"fields"`
}

type jiraPayload struct {
	WebhookEvent string     `json:"webhookEvent"`
	Issue        *jiraIssue `json:"issue"`
	Comment      *struct {
		ID      flexString      `json:"id"`
		Body    json.RawMessage `json:"body"`
		Updated string          `json:"updated"`
		Author  *struct {
			DisplayName string `json:"displayName"`
		} `json:"author"`
	} `json:"comment"`
	Changelog *struct {
		Items []struct {
			Field      string  `json:"field"`
			FromString *string `json:"fromString"`
		} `json:"items"`
	} `json:"changelog"`
}

// flexString is a JSON string or number as a string (Jira ids are either).
type flexString string

// UnmarshalJSON accepts a string, a number or null.
func (f *flexString) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*f = flexString(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("parsing an id: want a string or a number, got %s", b)
	}
	*f = flexString(n.String())
	return nil
}

func decodeJira(body []byte, docType string) (delivery, error) {
	var p jiraPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return delivery{}, fmt.Errorf("parsing the JSON body: %w", err)
	}
	event := strings.TrimPrefix(p.WebhookEvent, "jira:")
	d := delivery{event: event}
	switch event {
	case "":
		return d, errors.New("webhookEvent is missing")
	case "issue_created", "issue_updated", "issue_deleted", "comment_created", "comment_updated", "comment_deleted":
	default:
		d.ignored = fmt.Sprintf("event %q is not handled", event)
		return d, nil
	}
	if p.Issue == nil {
		if strings.HasPrefix(event, "comment_") {
			// Older Jira versions send comments without their issue.
			d.ignored = "comment without its issue"
			return d, nil
		}
		return d, errors.New("issue is missing")
	}
	is := p.Issue
	if is.Key == "" {
		return d, errors.New("issue.key is missing")
	}
	if strings.HasPrefix(event, "comment_") {
		c := p.Comment
		if c == nil || c.ID == "" {
			return d, errors.New("comment.id is missing")
		}
		version, updated, at, err := versionOf(c.Updated)
		if err != nil {
			return d, fmt.Errorf("comment.updated: %w", err)
		}
		op := docOp{kind: opChange, docID: docID("jira:", is.Key+"/comment/"+string(c.ID)), docType: "comment",
			version: version, updatedAt: updated, occurredAt: at}
		if event == "comment_deleted" {
			op = docOp{kind: opDelete, docID: op.docID}
		} else {
			text, err := adfText(c.Body)
			if err != nil {
				return d, fmt.Errorf("comment.body: %w", err)
			}
			author := ""
			if c.Author != nil {
				author = c.Author.DisplayName
			}
			op.title = commentTitle(author, is.Key, is.Fields.Summary)
			op.text = joinText(op.title, text)
		}
		d.ops = append(d.ops, op)
		return d, nil
	}
	version, updated, at, err := versionOf(is.Fields.Updated)
	if err != nil {
		return d, fmt.Errorf("issue.fields.updated: %w", err)
	}
	id := docID("jira:", is.Key)
	switch {
	case event == "issue_deleted":
		d.ops = append(d.ops, docOp{kind: opDelete, docID: id, children: true, version: version, updatedAt: updated})
		return d, nil
	case len(is.Fields.Security) > 0 && string(is.Fields.Security) != "null":
		d.ops = append(d.ops, docOp{kind: opWithdraw, docID: id, children: true, version: version, updatedAt: updated})
		return d, nil
	}
	desc, err := adfText(is.Fields.Description)
	if err != nil {
		return d, fmt.Errorf("issue.fields.description: %w", err)
	}
	op := docOp{kind: opChange, docID: id, title: is.Fields.Summary, text: joinText(is.Fields.Summary, desc),
		docType: docType, version: version, updatedAt: updated, occurredAt: at}
	if is.Fields.IssueType != nil && containsFold(is.Fields.IssueType.Name, "incident") {
		op.docType = "incident"
	}
	for _, l := range is.Fields.Labels {
		if containsFold(l, "incident") {
			op.docType = "incident"
		}
	}
	d.ops = append(d.ops, op)
	if p.Changelog != nil {
		for _, it := range p.Changelog.Items {
			// A moved issue gets a new key: its old document goes.
			if it.Field == "Key" && it.FromString != nil && *it.FromString != "" && *it.FromString != is.Key {
				d.ops = append(d.ops, docOp{kind: opDelete, docID: docID("jira:", *it.FromString), children: true})
			}
		}
	}
	return d, nil
}

// adfNode is a node of the Atlassian Document Format.
type adfNode struct {
	Type    string    `json:"type"`
	Text    string    `json:"text"`
	Content []adfNode `json:"content"`
}

// adfText is a Jira rich-text field as plain text: a string (Jira Server,
// REST v2) or an ADF document (Jira Cloud, REST v3).
func adfText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case raw[0] == '{':
		var n adfNode
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", err
		}
		var b strings.Builder
		writeADF(&b, n, 0)
		return strings.TrimSpace(b.String()), nil
	}
	return "", fmt.Errorf("want a string or an ADF document, got %.20s", raw)
}

func writeADF(b *strings.Builder, n adfNode, depth int) {
	if depth > 64 {
		return // deeper than any real document; not worth a stack
	}
	switch n.Type {
	case "text":
		b.WriteString(n.Text)
	case "hardBreak":
		b.WriteByte('\n')
	}
	for _, c := range n.Content {
		writeADF(b, c, depth+1)
	}
	switch n.Type {
	case "paragraph", "heading", "codeBlock", "blockquote", "listItem", "tableRow", "rule":
		b.WriteByte('\n')
	}
}
