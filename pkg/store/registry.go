package store

import (
	"fmt"
	"slices"

	"github.com/kgstream/kgstream/pkg/provenance"
)

// The registry transitions below are the Registry semantics as pure
// functions: an adapter reads the current state inside its transaction,
// calls one of them and writes what it returns. cur is nil for a document
// the registry has never seen.

// NextAnnounced returns the state after announcing a. It fails with
// ErrStaleVersion when a.Version is below the latest announced (or not above
// a deletion's), and with ErrInvalid for a malformed tenant or announcement.
// Announcing the current version again is an idempotent replay that replaces
// the ACL and metadata. The ACL revision counts ACL changes: it goes up when
// an announcement of a known document changes its (normalized) ACL.
func NextAnnounced(cur *provenance.SourceState, tenant string, a Announcement) (provenance.SourceState, error) {
	if err := ValidateTenant(tenant); err != nil {
		return provenance.SourceState{}, err
	}
	if err := ValidateDocID(a.DocID); err != nil {
		return provenance.SourceState{}, err
	}
	if a.Version < 0 {
		return provenance.SourceState{}, fmt.Errorf("%w: version %d must be >= 0", ErrInvalid, a.Version)
	}
	acl := normalizeACL(a.ACL)
	next := provenance.SourceState{
		Tenant:    tenant,
		DocID:     a.DocID,
		Version:   a.Version,
		ACL:       acl,
		Source:    a.Source,
		Title:     a.Title,
		UpdatedAt: a.UpdatedAt,
	}
	if cur == nil {
		if next.Version == 0 {
			next.Version = 1
		}
		return next, nil
	}
	switch {
	case next.Version == 0:
		next.Version = cur.Version + 1
	case next.Version < cur.Version, cur.Deleted && next.Version == cur.Version:
		return provenance.SourceState{}, fmt.Errorf("%w: version %d of %q, latest is %d",
			ErrStaleVersion, a.Version, a.DocID, cur.Version)
	}
	next.ACLRevision = cur.ACLRevision
	if !aclEqual(cur.ACL, acl) {
		next.ACLRevision++
	}
	return next, nil
}

// NextACL returns the state after replacing a document's ACL: the ACL
// revision always goes up, so every SetACL gets its own event id. It fails
// with ErrNotFound for an unknown or deleted document.
func NextACL(cur *provenance.SourceState, docID string, acl provenance.ACL) (provenance.SourceState, error) {
	if cur == nil || cur.Deleted {
		return provenance.SourceState{}, fmt.Errorf("document %q: %w", docID, ErrNotFound)
	}
	next := *cur
	next.ACL = normalizeACL(acl)
	next.ACLRevision++
	return next, nil
}

// NextDeleted returns the state after deleting a document: a new version
// (latest + 1) with Deleted set. For a document already deleted it returns
// the state unchanged and changed false. It fails with ErrNotFound for a
// document never announced.
func NextDeleted(cur *provenance.SourceState, docID string) (next provenance.SourceState, changed bool, err error) {
	if cur == nil {
		return provenance.SourceState{}, false, fmt.Errorf("document %q: %w", docID, ErrNotFound)
	}
	if cur.Deleted {
		return *cur, false, nil
	}
	next = *cur
	next.Version++
	next.Deleted = true
	return next, true, nil
}

// normalizeACL is ACL.Normalize with empty lists as nil, the form a JSON
// round trip gives back, so what a transition returns equals what is read.
func normalizeACL(a provenance.ACL) provenance.ACL {
	n := a.Normalize()
	n.Groups, n.Principals = nilIfEmpty(n.Groups), nilIfEmpty(n.Principals)
	return n
}

func aclEqual(a, b provenance.ACL) bool {
	a, b = a.Normalize(), b.Normalize()
	return a.Public == b.Public && slices.Equal(a.Groups, b.Groups) && slices.Equal(a.Principals, b.Principals)
}
