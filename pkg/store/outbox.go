package store

import (
	"context"
	"fmt"

	"github.com/kgstream/kgstream/pkg/provenance"
)

// MaxPendingIDBytes bounds the id of a pending event (a message id:
// tenant, document id, version and kind).
const MaxPendingIDBytes = 1024

// Pending is an event the registry holds for publishing: recorded in the
// same transaction as the registry change it announces, removed once the
// bus acknowledged it (the outbox). A process dying between the registry
// write and the publish leaves it there, so the change is never lost to
// the pipeline.
type Pending struct {
	Tenant string
	// ID is the event's message id, unique within the tenant: recording
	// the same id again replaces the record.
	ID string
	// Data is the record as the publisher wrote it (the event, or a
	// reference to where it is kept); the store does not read it.
	Data []byte
}

// PendingFunc returns the events a registry transition from cur (nil for
// a document the registry has never seen) to next must publish. It runs
// inside the registry's transaction, and may run more than once when an
// optimistic transaction retries (only the last run's records are
// written); an error from it aborts the change. It runs only for a
// transition the registry accepts.
type PendingFunc func(cur *provenance.SourceState, next provenance.SourceState) ([]Pending, error)

// Outbox is the registry's outbox: pending publishes written atomically
// with the registry changes that produce them. Every Registry adapter
// implements it.
type Outbox interface {
	// AnnounceRecording is Announce that also records the events pend
	// returns, in the same transaction: either the announcement and its
	// records are written, or neither (a refused or failed announcement
	// records nothing).
	AnnounceRecording(ctx context.Context, tenant string, a Announcement, pend PendingFunc) (provenance.SourceState, error)
	// SetACLRecording is SetACL recording pend's events likewise.
	SetACLRecording(ctx context.Context, tenant, docID string, acl provenance.ACL, pend PendingFunc) (provenance.SourceState, error)
	// DeleteRecording deletes a.DocID as NextDeletedAt does (the deletion
	// at a later a.Version announces that version first, in the same
	// transaction), recording pend's events likewise; deleting a deleted
	// document at no later version changes nothing in the registry but
	// still records them (the deletion's event is published again).
	DeleteRecording(ctx context.Context, tenant string, a Announcement, pend PendingFunc) (provenance.SourceState, error)
	// RecordPending records events that follow no registry change (a
	// re-resolution), or that an older outbox held.
	RecordPending(ctx context.Context, ps []Pending) error
	// PendingEvents returns up to limit pending events (every one when
	// limit <= 0) ordered by tenant then id, starting after (afterTenant,
	// afterID): pass the last one returned to read the next page.
	PendingEvents(ctx context.Context, afterTenant, afterID string, limit int) ([]Pending, error)
	// Acknowledge settles what the bus acknowledged, in one write: it
	// removes the pending events ids of tenant (absent ones are no error)
	// and, when content is not nil, records its hash as the document's
	// ContentHash (only while the document is at content.Version and not
	// deleted; a later announcement or replay clears it, an ACL change
	// keeps it). A document the registry does not know records nothing and
	// is no error here: the events are removed all the same. Either all of
	// it is written or none (a failed call leaves the events pending).
	Acknowledge(ctx context.Context, tenant string, ids []string, content *ContentAck) error
	// PendingCount counts the pending events of every tenant.
	PendingCount(ctx context.Context) (int, error)
}

// ContentAck is the content hash of a document version whose events the
// bus acknowledged (see Outbox.Acknowledge).
type ContentAck struct {
	DocID   string
	Version int64
	Hash    string
}

// ValidateAck checks the arguments of Outbox.Acknowledge.
func ValidateAck(tenant string, ids []string, content *ContentAck) error {
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	for _, id := range ids {
		if err := ValidatePending(Pending{Tenant: tenant, ID: id}); err != nil {
			return err
		}
	}
	if content != nil {
		return ValidateDocID(content.DocID)
	}
	return nil
}

// ValidatePending checks the tenant and id of a pending event.
func ValidatePending(p Pending) error {
	if err := ValidateTenant(p.Tenant); err != nil {
		return err
	}
	if p.ID == "" || len(p.ID) > MaxPendingIDBytes {
		return fmt.Errorf("%w: pending event id %q must be 1 to %d bytes", ErrInvalid, p.ID, MaxPendingIDBytes)
	}
	return nil
}

// PendingAfter reports whether (tenant, id) comes after (afterTenant,
// afterID) in the order PendingEvents reads.
func PendingAfter(tenant, id, afterTenant, afterID string) bool {
	return tenant > afterTenant || (tenant == afterTenant && id > afterID)
}

// Recorded returns the pending events of a transition of a tenant's
// document, checked: each of that tenant (an adapter keeps them beside
// its registry, in one transaction); nil pend records nothing.
func Recorded(pend PendingFunc, tenant string, cur *provenance.SourceState, next provenance.SourceState) ([]Pending, error) {
	if pend == nil {
		return nil, nil
	}
	ps, err := pend(cur, next)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.Tenant != tenant {
			return nil, fmt.Errorf("%w: pending event %q of tenant %q recorded with a change of tenant %q", ErrInvalid, p.ID, p.Tenant, tenant)
		}
		if err := ValidatePending(p); err != nil {
			return nil, err
		}
	}
	return ps, nil
}
