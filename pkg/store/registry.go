package store

import (
	"fmt"
	"math"

	"github.com/kgstream/kgstream/pkg/provenance"
)

// The registry transitions below are the Registry semantics as pure
// functions: an adapter reads the current state inside its transaction,
// calls one of them and writes what it returns. cur is nil for a document
// the registry has never seen.

// NextAnnounced returns the state after announcing a. It fails with
// ErrStaleVersion when a.Version is below the latest announced (or not above
// a deletion's), and with ErrInvalid for a malformed tenant or announcement,
// a version above provenance.MaxContentVersion, or a next version that
// would pass it.
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
	if a.Version != 0 {
		if err := provenance.ValidateVersion(a.Version); err != nil {
			return provenance.SourceState{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
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
	case next.Version == 0 && cur.Version >= provenance.MaxContentVersion:
		return provenance.SourceState{}, fmt.Errorf("%w: %q is at version %d, the last a content change may take",
			ErrInvalid, a.DocID, cur.Version)
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

// NextContent returns the state after recording the content hash of a
// version: changed only when the document is at that version and not
// deleted. It fails with ErrNotFound for a document never announced.
func NextContent(cur *provenance.SourceState, docID string, version int64, hash string) (next provenance.SourceState, changed bool, err error) {
	if cur == nil {
		return provenance.SourceState{}, false, fmt.Errorf("document %q: %w", docID, ErrNotFound)
	}
	if cur.Deleted || cur.Version != version || cur.ContentHash == hash {
		return *cur, false, nil
	}
	next = *cur
	next.ContentHash = hash
	return next, true, nil
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
	if cur.Version == math.MaxInt64 {
		// Only a registry written before versions were bounded holds this.
		return provenance.SourceState{}, false, fmt.Errorf("%w: %q is at the largest version", ErrInvalid, docID)
	}
	next = *cur
	next.Version++
	next.Deleted = true
	return next, true, nil
}

// NextDeletedAt returns the state after a deletion that may carry the
// version it happened at (a webhook's update time): when a.Version is above
// the registry's latest (or the document is unknown), that version is
// announced first, with a's ACL, source and title, and the deletion follows
// it (NextDeleted), in one transition, so the registry never holds the
// version without the deletion. A version at or below the latest is
// ignored, and the deletion is NextDeleted's.
func NextDeletedAt(cur *provenance.SourceState, tenant string, a Announcement) (next provenance.SourceState, changed bool, err error) {
	if a.Version > 0 && (cur == nil || a.Version > cur.Version) {
		announced, err := NextAnnounced(cur, tenant, a)
		if err != nil {
			return provenance.SourceState{}, false, err
		}
		next, _, err := NextDeleted(&announced, a.DocID)
		return next, err == nil, err
	}
	return NextDeleted(cur, a.DocID)
}

// normalizeACL is ACL.Normalize with empty lists as nil, the form a JSON
// round trip gives back, so what a transition returns equals what is read.
func normalizeACL(a provenance.ACL) provenance.ACL {
	n := a.Normalize()
	n.Groups, n.Principals = nilIfEmpty(n.Groups), nilIfEmpty(n.Principals)
	n.Writers.Groups, n.Writers.Principals = nilIfEmpty(n.Writers.Groups), nilIfEmpty(n.Writers.Principals)
	return n
}

func aclEqual(a, b provenance.ACL) bool { return a.Equal(b) }
