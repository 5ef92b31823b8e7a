package embedded

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// bucketOutbox holds the pending events, outbox/<tenant>/<id> = the
// record as the publisher wrote it. It is created by the first write that
// records one, so files from before it open unchanged.
const bucketOutbox = "outbox"

// putPending records the events pend returns for the transition from cur
// to next, inside the registry's transaction tx.
func putPending(tx *bolt.Tx, tenant string, pend store.PendingFunc, cur *provenance.SourceState, next provenance.SourceState) error {
	ps, err := store.Recorded(pend, tenant, cur, next)
	if err != nil || len(ps) == 0 {
		return err
	}
	return putPendingTx(tx, ps)
}

func putPendingTx(tx *bolt.Tx, ps []store.Pending) error {
	top, err := tx.CreateBucketIfNotExists([]byte(bucketOutbox))
	if err != nil {
		return err
	}
	for _, p := range ps {
		b, err := top.CreateBucketIfNotExists([]byte(p.Tenant))
		if err != nil {
			return err
		}
		if err := b.Put([]byte(p.ID), bytes.Clone(p.Data)); err != nil {
			return fmt.Errorf("recording pending event %q: %w", p.ID, err)
		}
	}
	return nil
}

// AnnounceRecording is Announce recording pend's events in the same
// transaction (see store.Outbox).
func (s *Store) AnnounceRecording(ctx context.Context, tenant string, a store.Announcement, pend store.PendingFunc) (provenance.SourceState, error) {
	st, err := s.registryUpdate(ctx, tenant, a.DocID, func(cur *provenance.SourceState) (provenance.SourceState, bool, error) {
		st, err := store.NextAnnounced(cur, tenant, a)
		return st, err == nil, err
	}, pend)
	if err != nil {
		return provenance.SourceState{}, fmt.Errorf("announcing %q in %q: %w", a.DocID, tenant, err)
	}
	return st, nil
}

// SetACLRecording is SetACL recording pend's events in the same
// transaction (see store.Outbox).
func (s *Store) SetACLRecording(ctx context.Context, tenant, docID string, acl provenance.ACL, pend store.PendingFunc) (provenance.SourceState, error) {
	st, err := s.registryUpdate(ctx, tenant, docID, func(cur *provenance.SourceState) (provenance.SourceState, bool, error) {
		st, err := store.NextACL(cur, docID, acl)
		return st, err == nil, err
	}, pend)
	if err != nil {
		return provenance.SourceState{}, fmt.Errorf("setting the ACL of %q in %q: %w", docID, tenant, err)
	}
	return st, nil
}

// DeleteRecording deletes a document, at a.Version when that is later,
// recording pend's events in the same transaction (see store.Outbox).
func (s *Store) DeleteRecording(ctx context.Context, tenant string, a store.Announcement, pend store.PendingFunc) (provenance.SourceState, error) {
	st, err := s.registryUpdate(ctx, tenant, a.DocID, func(cur *provenance.SourceState) (provenance.SourceState, bool, error) {
		return store.NextDeletedAt(cur, tenant, a)
	}, pend)
	if err != nil {
		return provenance.SourceState{}, fmt.Errorf("deleting %q in %q: %w", a.DocID, tenant, err)
	}
	return st, nil
}

// RecordPending records events that follow no registry change.
func (s *Store) RecordPending(ctx context.Context, ps []store.Pending) error {
	for _, p := range ps {
		if err := store.ValidatePending(p); err != nil {
			return fmt.Errorf("recording pending events: %w", err)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	if err := s.batch(ctx, func(tx *bolt.Tx) error { return putPendingTx(tx, ps) }); err != nil {
		return fmt.Errorf("recording pending events: %w", err)
	}
	return nil
}

// PendingEvents returns pending events by tenant then id, after the given
// one (see store.Outbox).
func (s *Store) PendingEvents(ctx context.Context, afterTenant, afterID string, limit int) ([]store.Pending, error) {
	out := []store.Pending{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		top := tx.Bucket([]byte(bucketOutbox))
		if top == nil {
			return nil
		}
		tc := top.Cursor()
		for tk, _ := tc.Seek([]byte(afterTenant)); tk != nil; tk, _ = tc.Next() {
			b := top.Bucket(tk)
			if b == nil {
				continue
			}
			tenant := string(tk)
			c := b.Cursor()
			k, v := c.First()
			if tenant == afterTenant {
				k, v = c.Seek([]byte(afterID))
				if k != nil && string(k) == afterID {
					k, v = c.Next()
				}
			}
			for ; k != nil; k, v = c.Next() {
				if limit > 0 && len(out) >= limit {
					return nil
				}
				out = append(out, store.Pending{Tenant: tenant, ID: string(k), Data: bytes.Clone(v)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading pending events: %w", err)
	}
	return out, nil
}

// Acknowledge removes acknowledged pending events and records the content
// they published in one transaction (see store.Outbox).
func (s *Store) Acknowledge(ctx context.Context, tenant string, ids []string, content *store.ContentAck) error {
	if err := store.ValidateAck(tenant, ids, content); err != nil {
		return fmt.Errorf("acknowledging events: %w", err)
	}
	if len(ids) == 0 && content == nil {
		return nil
	}
	// Acknowledgements come from concurrent requests: they share commits
	// with each other and with the announcements.
	err := s.batch(ctx, func(tx *bolt.Tx) error {
		if top := tx.Bucket([]byte(bucketOutbox)); top != nil {
			if b := top.Bucket([]byte(tenant)); b != nil {
				for _, id := range ids {
					if err := b.Delete([]byte(id)); err != nil {
						return err
					}
				}
			}
		}
		if content == nil {
			return nil
		}
		// Not created: an unknown tenant stays unknown.
		b, err := tenantBucket(tx, bucketRegistry, tenant, false)
		if err != nil || b == nil {
			return err
		}
		var cur provenance.SourceState
		found, err := getJSON(b, content.DocID, &cur)
		if err != nil || !found {
			return err
		}
		next, changed, err := store.NextContent(&cur, content.DocID, content.Version, content.Hash)
		if err != nil || !changed {
			return err
		}
		return putRegistry(tx, b, tenant, content.DocID, &cur, next)
	})
	if err != nil {
		return fmt.Errorf("acknowledging events of %q: %w", tenant, err)
	}
	return nil
}

// PendingCount counts the pending events of every tenant.
func (s *Store) PendingCount(ctx context.Context) (int, error) {
	n := 0
	err := s.view(ctx, func(tx *bolt.Tx) error {
		top := tx.Bucket([]byte(bucketOutbox))
		if top == nil {
			return nil
		}
		return top.ForEachBucket(func(k []byte) error {
			c := top.Bucket(k).Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				n++
			}
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("counting pending events: %w", err)
	}
	return n, nil
}
