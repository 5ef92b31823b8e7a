package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kgstream/kgstream/pkg/errkind"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
)

// Commands is the gateway's write core. Every change to a document, from
// the document API or a webhook receiver, is checked, recorded in the
// source registry together with its events (the registry's outbox), then
// published here, so both surfaces follow one set of rules. Refusals and failures are errkind
// errors (with the code clients see); Commands knows nothing of HTTP.
type Commands struct {
	registry       Registry
	graph          store.GraphStore // nil: no re-resolution
	bus            *stream.Bus
	outbox         *outbox
	log            *slog.Logger
	now            func() time.Time
	publishTimeout time.Duration
	maxEventBytes  int64
	// hooks are the webhook receivers, whose namespaces the document API
	// may not write.
	hooks map[string]*receiver
}

// Authority is on whose behalf a command runs: a caller of the document
// API (ByCaller), or a webhook receiver, whose provider's signature is the
// authority and whose configuration sets the rules.
type Authority struct {
	caller   provenance.Caller
	receiver *receiver
}

// ByCaller is the authority of an authenticated caller of the document API.
func ByCaller(c provenance.Caller) Authority { return Authority{caller: c} }

func byReceiver(rc *receiver) Authority { return Authority{receiver: rc} }

// ChangeCommand announces a new version of a document.
type ChangeCommand struct {
	DocID string
	// Version is the explicit version; 0 takes the next one.
	Version int64
	// UpdatedAt is the document's update time as the registry keeps it
	// (RFC 3339), OccurredAt the same as a time.
	UpdatedAt  string
	OccurredAt time.Time
	Source     string
	DocType    string
	Title      string
	Text       string
	Structured *events.Structured
	// ACL is the requested ACL; nil takes the default (public within the
	// tenant for a caller, the receiver's for a receiver).
	ACL *provenance.ACL
	// WriterOnly: a new document is created by writer and admin callers
	// only (the catalog shapes every document's entities).
	WriterOnly bool
}

// DeleteCommand deletes a document.
type DeleteCommand struct {
	DocID string
	// Version, when later than the registry's, is recorded first so the
	// deletion lands above it and a late delivery of an earlier edit is
	// stale.
	Version   int64
	UpdatedAt string
	// Ordered makes the deletion subject to versions like a change (a
	// withdrawal): one older than the registry's version is stale. A real
	// deletion always wins.
	Ordered bool
}

// Result is what a command did to a document.
type Result struct {
	DocID     string
	Version   int64
	EventID   string
	Duplicate bool
	// Unchanged says the document was already current with this content
	// and ACL: nothing was written or published.
	Unchanged bool
	DocType   string
}

// Errors of the commands, by the codes clients branch on.

func unknownDocument(docID string) error {
	return errkind.Errorf(errkind.NotFound, "unknown_document", "document %q is unknown", docID)
}

// Change records cmd in the registry, then publishes its event (and an ACL
// event when the ACL revision moved). The event is checked first, so a
// document the bus would refuse is refused before the registry moves. For
// a caller, a document the registry already holds with the same content
// and ACL, published, is Unchanged: no new version, no event. A version
// older than the registry's is an error wrapping store.ErrStaleVersion.
func (c *Commands) Change(ctx context.Context, tenant string, by Authority, cmd ChangeCommand) (Result, error) {
	if cmd.ACL != nil {
		if err := checkACL(*cmd.ACL); err != nil {
			return Result{}, err
		}
	}
	if by.receiver == nil {
		if err := c.checkNamespace(tenant, cmd.DocID); err != nil {
			return Result{}, err
		}
	}
	cur, err := c.current(ctx, tenant, cmd.DocID)
	if err != nil {
		return Result{}, err
	}
	acl, err := c.changeACL(tenant, by, cur, cmd)
	if err != nil {
		return Result{}, err
	}
	ev := cmd.event(tenant, acl, c.now().UTC())
	size, err := c.checkEvent(ev)
	if err != nil {
		return Result{}, err
	}
	hash := ""
	if by.receiver == nil {
		// Receivers are de-duplicated by delivery id instead.
		hash = contentHash(ev)
	}
	if unchanged(cur, cmd.Version, ev, hash) {
		return Result{DocID: ev.DocID, Version: cur.Version, Unchanged: true, DocType: ev.DocType,
			EventID: events.ChangedID(tenant, ev.DocID, cur.Version)}, nil
	}
	a := store.Announcement{DocID: ev.DocID, Version: cmd.Version,
		ACL: ev.ACL, Source: ev.Source, Title: ev.Title, UpdatedAt: cmd.UpdatedAt}
	build := func(cur *provenance.SourceState, st provenance.SourceState) []outgoing {
		return c.changeEvents(cur, st, ev, hash)
	}
	var stored map[string]bool
	if size > c.bus.InlineMax()/2 {
		// A large event is kept in the payload bucket before the registry
		// transaction, as the registry is expected to take it, so the
		// transaction does not wait on the bus.
		if predicted, err := store.NextAnnounced(cur, tenant, a); err == nil {
			if stored, err = c.outbox.prestore(ctx, build(cur, predicted)); err != nil {
				return Result{}, c.outboxError(err, "recording the document")
			}
		}
	}
	pend, taken := c.recording(ctx, tenant, stored, build)
	st, err := c.registry.AnnounceRecording(ctx, tenant, a, pend)
	if err != nil {
		return Result{}, c.outboxError(err, "recording the document")
	}
	return c.publishChange(ctx, st, ev, hash, taken())
}

// changeEvents are the events of an announcement that took the registry
// from cur to st: the content event at st's version, and the ACL event
// when the announcement moved the ACL revision.
func (c *Commands) changeEvents(cur *provenance.SourceState, st provenance.SourceState, ev *events.DocChanged, hash string) []outgoing {
	e := *ev
	e.Version = st.Version
	outs := []outgoing{{kind: events.KindDocChanged, id: events.ChangedID(e.Tenant, e.DocID, st.Version), ev: &e,
		meta: pending{DocID: e.DocID, Version: st.Version, ContentHash: hash}}}
	if aclMoved(cur, st) {
		outs = append(outs, c.aclEvent(e.Tenant, st))
	}
	return outs
}

// publishChange publishes the events of a recorded change; the registry
// write that clears them records the content as acknowledged too.
func (c *Commands) publishChange(ctx context.Context, st provenance.SourceState, ev *events.DocChanged, hash string, outs []outgoing) (Result, error) {
	res := Result{DocID: ev.DocID, Version: st.Version, EventID: events.ChangedID(ev.Tenant, ev.DocID, st.Version), DocType: ev.DocType}
	var content *store.ContentAck
	if hash != "" {
		content = &store.ContentAck{DocID: st.DocID, Version: st.Version, Hash: hash}
	}
	var err error
	res.Duplicate, err = c.publishRecorded(ctx, ev.Tenant, outs, content)
	if err != nil {
		return res, err
	}
	c.log.Info("document accepted", "tenant", ev.Tenant, "doc", ev.DocID, "version", st.Version, "duplicate", res.Duplicate)
	return res, nil
}

// changeACL checks that by may make cmd (the namespace already checked)
// and returns the ACL the document
// takes. A receiver's document keeps the ACL it has when a receiver of its
// kind created it: someone may have restricted it with PUT
// /v1/documents/{id}/acl, and an edit upstream must not undo a revocation.
// One in the namespace that got there otherwise takes the receiver's, so
// no one can pre-create an id to read what the provider sends.
func (c *Commands) changeACL(tenant string, by Authority, cur *provenance.SourceState, cmd ChangeCommand) (provenance.ACL, error) {
	if rc := by.receiver; rc != nil {
		if cur != nil && !cur.Deleted && cur.Source == rc.kind {
			return cur.ACL, nil
		}
		return rc.acl, nil
	}
	if err := mayWrite(tenant, by.caller, cmd.DocID, cur); err != nil {
		return provenance.ACL{}, err
	}
	if cmd.WriterOnly && (cur == nil || cur.Deleted) && !by.caller.Admin && !by.caller.Writer {
		return provenance.ACL{}, errkind.Errorf(errkind.Forbidden, "forbidden", "a %s is written by writer and admin callers", cmd.DocType)
	}
	acl := provenance.PublicACL()
	if cmd.ACL != nil {
		acl = cmd.ACL.Normalize()
	}
	return withWriters(acl, cur, by.caller), nil
}

func (cmd ChangeCommand) event(tenant string, acl provenance.ACL, now time.Time) *events.DocChanged {
	return &events.DocChanged{Header: events.Header{Schema: events.SchemaVersion, Tenant: tenant},
		DocID: cmd.DocID, Version: max(cmd.Version, 1), Source: cmd.Source, DocType: cmd.DocType,
		Title: cmd.Title, Text: cmd.Text, Structured: cmd.Structured, ACL: acl,
		OccurredAt: cmd.OccurredAt, ReceivedAt: now}
}

// checkEvent refuses an event the bus would refuse, or one too large to
// be carried, before anything is written, and returns its encoded size.
func (c *Commands) checkEvent(ev *events.DocChanged) (int, error) {
	if err := ev.Validate(); err != nil {
		return 0, errkind.Errorf(errkind.Invalid, "invalid_document", "%w", err)
	}
	data, _ := json.Marshal(ev)
	if int64(len(data))+1024 > c.maxEventBytes {
		return 0, errkind.Errorf(errkind.TooLarge, "event_too_large", "the document's event (%d bytes) exceeds %d bytes", len(data), c.maxEventBytes)
	}
	return len(data), nil
}

// Delete marks a document deleted and publishes its deletion. A document
// the registry does not know is an unknown_document error (NotFound); an
// ordered deletion older than the registry's version wraps
// store.ErrStaleVersion.
func (c *Commands) Delete(ctx context.Context, tenant string, by Authority, cmd DeleteCommand) (Result, error) {
	cur, err := c.current(ctx, tenant, cmd.DocID)
	if err != nil {
		return Result{}, err
	}
	if by.receiver == nil {
		if err := mayWrite(tenant, by.caller, cmd.DocID, cur); err != nil {
			return Result{}, err
		}
	}
	if cmd.Ordered && cur != nil && !cur.Deleted && cmd.Version > 0 && cmd.Version < cur.Version {
		return Result{}, errkind.Errorf(errkind.Conflict, "stale_version", "%w: document %q is at version %d", store.ErrStaleVersion, cmd.DocID, cur.Version)
	}
	if cur == nil && cmd.Version <= 0 {
		return Result{}, unknownDocument(cmd.DocID)
	}
	// A deletion at a later version (a webhook's update time) announces that
	// version and deletes in one registry write: the registry never holds
	// the version without the deletion, and the outbox holds one event.
	a := store.Announcement{DocID: cmd.DocID, UpdatedAt: cmd.UpdatedAt}
	if cmd.Version > 0 && (cur == nil || cmd.Version > cur.Version) {
		a.Version = cmd.Version
	}
	if rc := by.receiver; rc != nil {
		a.ACL, a.Source = rc.acl, rc.kind
	}
	if cur != nil {
		a.ACL, a.Title = cur.ACL, cur.Title
		if a.Source == "" {
			a.Source = cur.Source
		}
	}
	receivedAt := c.now().UTC()
	pend, taken := c.recording(ctx, tenant, nil, func(_ *provenance.SourceState, st provenance.SourceState) []outgoing {
		return []outgoing{{kind: events.KindDocDeleted, id: events.DeletedID(tenant, cmd.DocID, st.Version),
			ev: &events.DocDeleted{Header: events.Header{Tenant: tenant}, DocID: cmd.DocID, Version: st.Version, ReceivedAt: receivedAt}}}
	})
	st, err := c.registry.DeleteRecording(ctx, tenant, a, pend)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Result{}, unknownDocument(cmd.DocID)
	case err != nil:
		return Result{}, c.outboxError(err, "recording the deletion")
	}
	res := Result{DocID: cmd.DocID, Version: st.Version, EventID: events.DeletedID(tenant, cmd.DocID, st.Version)}
	res.Duplicate, err = c.publishRecorded(ctx, tenant, taken(), nil)
	return res, err
}

// SetACL replaces a known document's ACL and publishes the ACL event of
// its new revision.
func (c *Commands) SetACL(ctx context.Context, tenant string, by Authority, docID string, acl provenance.ACL) (Result, error) {
	if err := checkACL(acl); err != nil {
		return Result{}, err
	}
	cur, err := c.current(ctx, tenant, docID)
	if err != nil {
		return Result{}, err
	}
	if err := mayWrite(tenant, by.caller, docID, cur); err != nil {
		return Result{}, err
	}
	if cur == nil || cur.Deleted {
		return Result{}, unknownDocument(docID)
	}
	pend, taken := c.recording(ctx, tenant, nil, func(_ *provenance.SourceState, st provenance.SourceState) []outgoing {
		return []outgoing{c.aclEvent(tenant, st)}
	})
	st, err := c.registry.SetACLRecording(ctx, tenant, docID, withWriters(acl, cur, by.caller).Normalize(), pend)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Result{}, unknownDocument(docID)
	case err != nil:
		return Result{}, c.outboxError(err, "recording the ACL")
	}
	res := Result{DocID: st.DocID, Version: st.Version, EventID: events.ACLID(tenant, st.DocID, st.Version, st.ACLRevision)}
	res.Duplicate, err = c.publishRecorded(ctx, tenant, taken(), nil)
	return res, err
}

// Children lists the documents under docID ("<docID>/..."), deleted ones
// included: an issue's comments.
func (c *Commands) Children(ctx context.Context, tenant, docID string) ([]string, error) {
	all, err := c.registry.ListSources(ctx, tenant)
	if err != nil {
		return nil, c.registryError(err, "listing the documents")
	}
	var out []string
	for _, s := range all {
		if strings.HasPrefix(s.DocID, docID+"/") {
			out = append(out, s.DocID)
		}
	}
	return out, nil
}

// current is the registry's state of docID, nil when unknown.
func (c *Commands) current(ctx context.Context, tenant, docID string) (*provenance.SourceState, error) {
	cur, err := c.registry.Sources(ctx, tenant, []string{docID})
	if err != nil {
		return nil, c.registryError(err, "checking the document")
	}
	st, ok := cur[docID]
	if !ok {
		return nil, nil
	}
	return &st, nil
}

// mayWrite checks that caller may write docID, whose registry state is cur
// (nil when unknown). Reading is not writing: a known document is written
// by admin and writer tokens and by the writers its ACL names
// (provenance.Writable). A caller who may read it but not write it is
// refused (Forbidden); for one who may not even read it the document does
// not exist (NotFound, the answer an unknown id gets), so a write tells no
// one which restricted ids exist. A new (or deleted) document may be
// created by anyone in the tenant.
func mayWrite(tenant string, caller provenance.Caller, docID string, cur *provenance.SourceState) error {
	if cur == nil || cur.Deleted || provenance.Writable(caller, *cur) {
		return nil
	}
	if !provenance.Readable(provenance.Caller{Tenant: tenant, Principal: caller.Principal, Groups: caller.Groups}, *cur) {
		return unknownDocument(docID)
	}
	return errkind.Errorf(errkind.Forbidden, "forbidden", "you may read document %q but not write it", docID)
}

// checkNamespace refuses, for the document API, an id in the namespace of
// a configured webhook receiver of the tenant: such documents are created
// by their receiver only, with the receiver's ACL.
func (c *Commands) checkNamespace(tenant, docID string) error {
	if name, ok := c.reservedBy(tenant, docID); ok {
		return errkind.Errorf(errkind.Forbidden, "reserved_id",
			"document id %q is in the namespace of the %s webhook receiver of tenant %q; only its deliveries create such documents", docID, name, tenant)
	}
	return nil
}

// reservedBy returns the receiver whose namespace id is in, in tenant.
func (c *Commands) reservedBy(tenant, id string) (string, bool) {
	for _, name := range slices.Sorted(maps.Keys(c.hooks)) {
		rc := c.hooks[name]
		if rc.tenant != tenant {
			continue
		}
		for _, p := range idPrefixes(rc.kind) {
			if strings.HasPrefix(id, p) {
				return name, true
			}
		}
	}
	return "", false
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

// checkACL refuses an ACL that names no reader: it would make the document
// readable by no one, which no caller means (to hide a document, delete it).
func checkACL(a provenance.ACL) error {
	n := a.Normalize()
	if !n.Public && len(n.Groups) == 0 && len(n.Principals) == 0 {
		return errkind.Errorf(errkind.Invalid, "invalid_field", "the ACL names no reader; send {\"public\":true} or the groups and principals who may read")
	}
	return nil
}

// registryError classifies a registry error. An outage is Unavailable with
// no detail of the store in its message (the cause, with the store's
// address, is logged by the HTTP layer); a refused argument is Invalid, a
// stale version Conflict, an unknown document NotFound.
func (c *Commands) registryError(err error, doing string) error {
	switch {
	case errors.Is(err, store.ErrStaleVersion):
		return errkind.Errorf(errkind.Conflict, "stale_version", "%w", err)
	case errors.Is(err, store.ErrNotFound):
		return errkind.Errorf(errkind.NotFound, "unknown_document", "%w", err)
	case errors.Is(err, store.ErrInvalid):
		return errkind.Errorf(errkind.Invalid, "invalid_field", "%w", err)
	}
	return errkind.Wrap(errkind.Unavailable, "registry_unavailable", err, doing+": the registry is unavailable; retry the request")
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

// aclEvent is the ACL event of st's ACL revision. Every ACL change,
// whichever endpoint made it, has its own event: a content event at the
// same version would be de-duplicated and the consumers would keep the
// old ACL.
func (c *Commands) aclEvent(tenant string, st provenance.SourceState) outgoing {
	return outgoing{kind: events.KindDocACL, id: events.ACLID(tenant, st.DocID, st.Version, st.ACLRevision),
		ev: &events.DocACL{Header: events.Header{Tenant: tenant}, DocID: st.DocID, Version: st.Version,
			ACLRevision: st.ACLRevision, ACL: st.ACL, ReceivedAt: c.now().UTC()}}
}

// Reresolve asks the resolver to resolve the sources of entity (TYPE:NAME)
// again from their stored extractions with the alias table in force (after
// an unmerge), without extracting them again: it publishes one
// kg.reresolve request naming them, under a message id of its own, and the
// resolver numbers the resolution from what it has applied. Only admin
// callers may; sources without a stored extraction are Skipped.
func (c *Commands) Reresolve(ctx context.Context, tenant string, by Authority, entity string) (ReresolveAccepted, error) {
	if by.receiver != nil || !by.caller.Admin {
		return ReresolveAccepted{}, errkind.Errorf(errkind.Forbidden, "forbidden", "re-resolution is for admin callers")
	}
	if c.graph == nil {
		return ReresolveAccepted{}, errkind.Errorf(errkind.Unavailable, "not_implemented", "re-resolution needs the graph store")
	}
	id, err := resolve.ParseRef(entity)
	if err != nil {
		return ReresolveAccepted{}, errkind.Errorf(errkind.Invalid, "invalid_field", "entity: %w", err)
	}
	e, err := c.graph.Entity(ctx, tenant, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return ReresolveAccepted{}, errkind.Errorf(errkind.NotFound, "unknown_entity", "no entity %s", id)
	case err != nil:
		return ReresolveAccepted{}, storeUnavailable(err, "reading "+id)
	}
	out := ReresolveAccepted{Entity: id, Sources: []string{}}
	for _, f := range e.Sources {
		rec, err := c.graph.Source(ctx, tenant, f.DocID)
		if err != nil {
			return ReresolveAccepted{}, storeUnavailable(err, "reading source "+f.DocID)
		}
		switch {
		case rec.Deleted:
		case len(rec.Raw) == 0:
			out.Skipped = append(out.Skipped, rec.DocID)
		default:
			out.Sources = append(out.Sources, rec.DocID)
		}
	}
	if len(out.Sources) > 0 {
		req := &events.Reresolve{Header: events.Header{Tenant: tenant}, RequestID: newRequestID(), Entity: id,
			DocIDs: out.Sources, RequestedAt: c.now().UTC()}
		queued, err := c.publishRequest(ctx, tenant, outgoing{kind: events.KindReresolve,
			id: events.ReresolveID(tenant, req.RequestID), ev: req})
		if err != nil {
			return ReresolveAccepted{}, err
		}
		out.Queued = queued
	}
	c.log.Info("re-resolution requested", "tenant", tenant, "entity", id, "sources", len(out.Sources), "skipped", len(out.Skipped),
		"queued", out.Queued)
	return out, nil
}

// Recluster asks the clusterer to re-cluster tenant now, from scratch when
// full: it publishes one kg.recluster request under a message id of its
// own. Only admin callers may.
func (c *Commands) Recluster(ctx context.Context, tenant string, by Authority, full bool) (ReclusterAccepted, error) {
	if by.receiver != nil || !by.caller.Admin {
		return ReclusterAccepted{}, errkind.Errorf(errkind.Forbidden, "forbidden", "re-clustering is for admin callers")
	}
	req := &events.Recluster{Header: events.Header{Tenant: tenant}, RequestID: newRequestID(), Full: full,
		RequestedAt: c.now().UTC()}
	queued, err := c.publishRequest(ctx, tenant, outgoing{kind: events.KindRecluster,
		id: events.ReclusterID(tenant, req.RequestID), ev: req})
	if err != nil {
		return ReclusterAccepted{}, err
	}
	out := ReclusterAccepted{Tenant: tenant, RequestID: req.RequestID, Full: full, Queued: queued}
	c.log.Info("re-clustering requested", "tenant", tenant, "full", full, "request", req.RequestID, "queued", out.Queued)
	return out, nil
}

// publishRequest publishes a request (an event following no registry
// change) through the outbox. One the stream does not take is kept there
// and published later: queued, not an error, since a retry would be a
// second request.
func (c *Commands) publishRequest(ctx context.Context, tenant string, out outgoing) (queued bool, err error) {
	_, err = c.publishAlone(ctx, tenant, out)
	var q queuedError
	if errors.As(err, &q) {
		c.log.Warn("request kept for publishing later", "tenant", tenant, "event", out.id, "error", err)
		return true, nil
	}
	return false, err
}

// newRequestID is a random id for a request that no stored state names.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
