package embedded

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// registryUpdate runs one registry transition on docID in a read-write
// transaction: next gets the current state (nil if unknown) and returns the
// state to store and whether to store it. The events pend returns for an
// accepted transition are recorded in the same transaction (see putPending).
func (s *Store) registryUpdate(ctx context.Context, tenant, docID string,
	next func(cur *provenance.SourceState) (provenance.SourceState, bool, error), pend store.PendingFunc) (provenance.SourceState, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return provenance.SourceState{}, err
	}
	if err := store.ValidateDocID(docID); err != nil {
		return provenance.SourceState{}, err
	}
	var out provenance.SourceState
	// Registry changes come from concurrent requests: they share commits.
	// next and pend are pure but for what they return (a pend that stores
	// an event payload stores it under its content's name), so running
	// them again is harmless.
	err := s.batch(ctx, func(tx *bolt.Tx) error {
		b, err := tenantBucket(tx, bucketRegistry, tenant, true)
		if err != nil {
			return err
		}
		var cur provenance.SourceState
		found, err := getJSON(b, docID, &cur)
		if err != nil {
			return err
		}
		var curp *provenance.SourceState
		if found {
			curp = &cur
		}
		st, write, err := next(curp)
		if err != nil {
			return err
		}
		out = st
		if err := putPending(tx, tenant, pend, curp, st); err != nil {
			return err
		}
		if !write {
			return nil
		}
		return putRegistry(tx, b, tenant, docID, curp, st)
	})
	return out, err
}

// putRegistry writes the state st of docID, whose state was cur (nil if
// unknown), into the tenant's registry bucket b, with the tenant's
// registry generation and counts.
func putRegistry(tx *bolt.Tx, b *bolt.Bucket, tenant, docID string, cur *provenance.SourceState, st provenance.SourceState) error {
	if err := bumpRegistryGeneration(tx, tenant, docID); err != nil {
		return err
	}
	if err := countRegistryWrite(tx, tenant, cur, st); err != nil {
		return err
	}
	return putJSON(b, docID, st, store.NoCompression)
}

// Announce records a content version (see store.Registry).
func (s *Store) Announce(ctx context.Context, tenant string, a store.Announcement) (provenance.SourceState, error) {
	return s.AnnounceRecording(ctx, tenant, a, nil)
}

// SetACL replaces a document's ACL (see store.Registry).
func (s *Store) SetACL(ctx context.Context, tenant, docID string, acl provenance.ACL) (provenance.SourceState, error) {
	return s.SetACLRecording(ctx, tenant, docID, acl, nil)
}

// MarkDeleted records a deletion (see store.Registry).
func (s *Store) MarkDeleted(ctx context.Context, tenant, docID string) (provenance.SourceState, error) {
	return s.DeleteRecording(ctx, tenant, store.Announcement{DocID: docID}, nil)
}

// Sources returns the state of the given documents; unknown ids are absent.
func (s *Store) Sources(ctx context.Context, tenant string, docIDs []string) (map[string]provenance.SourceState, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("looking up sources: %w", err)
	}
	out := make(map[string]provenance.SourceState, len(docIDs))
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return statesIn(tx, tenant, docIDs, func(st provenance.SourceState) { out[st.DocID] = st })
	})
	if err != nil {
		return nil, fmt.Errorf("looking up sources in %q: %w", tenant, err)
	}
	return out, nil
}

// statesIn calls fn with the registry state of each of docIDs the tenant's
// registry holds, in the order of docIDs.
func statesIn(tx *bolt.Tx, tenant string, docIDs []string, fn func(provenance.SourceState)) error {
	b, err := tenantBucket(tx, bucketRegistry, tenant, false)
	if err != nil || b == nil {
		return err
	}
	for _, id := range docIDs {
		var st provenance.SourceState
		found, err := getJSON(b, id, &st)
		if err != nil {
			return err
		}
		if found {
			fn(st)
		}
	}
	return nil
}

// ListSources returns every document of a tenant, sorted by doc id.
func (s *Store) ListSources(ctx context.Context, tenant string) ([]provenance.SourceState, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("listing sources: %w", err)
	}
	out := []provenance.SourceState{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b, err := tenantBucket(tx, bucketRegistry, tenant, false)
		if err != nil || b == nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			var st provenance.SourceState
			if err := unmarshal(k, v, &st); err != nil {
				return err
			}
			out = append(out, st)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing sources of %q: %w", tenant, err)
	}
	return out, nil
}

// Tenants lists the tenants the registry knows, sorted.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	var out []string
	err := s.view(ctx, func(tx *bolt.Tx) error {
		out = tenantNames(tx, bucketRegistry)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing tenants: %w", err)
	}
	return out, nil
}
