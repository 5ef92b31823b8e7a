package redis

import (
	"context"
	"fmt"
	"slices"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// The outbox's keys: a tenant's pending events are one hash beside its
// registry (same hash tag, so a registry change and its records are one
// MULTI/EXEC), and a global set names the tenants that ever had one.
//
//	<p>:outbox-tenants     set of tenants with pending events (never shrinks)
//	<p>:{<t>}:outbox       hash event id -> the pending event's record
func (s *Store) outboxTenantsKey() string { return s.prefix + ":outbox-tenants" }

func (k keys) outbox() string { return k.base + "outbox" }

// pendingWrites returns what records the events pend returns for the
// transition from cur to next, to be queued in the registry's MULTI. The
// caller has added the tenant to the global set of outbox tenants before
// the transaction (registryUpdate).
func pendingWrites(ctx context.Context, k keys, tenant string, pend store.PendingFunc, cur *provenance.SourceState, next provenance.SourceState) (func(goredis.Pipeliner), error) {
	ps, err := store.Recorded(pend, tenant, cur, next)
	if err != nil {
		return nil, err
	}
	key := k.outbox()
	return func(p goredis.Pipeliner) {
		for _, pe := range ps {
			p.HSet(ctx, key, pe.ID, pe.Data)
		}
	}, nil
}

// pendingOnly writes the records of a transition that leaves the registry
// as it is (deleting a deleted document), still under the transaction's
// WATCH.
func pendingOnly(ctx context.Context, tx *goredis.Tx, record func(goredis.Pipeliner)) error {
	_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		record(p)
		return nil
	})
	return err
}

// AnnounceRecording is Announce recording pend's events in the same
// transaction (see store.Outbox).
func (s *Store) AnnounceRecording(ctx context.Context, tenant string, a store.Announcement, pend store.PendingFunc) (provenance.SourceState, error) {
	st, err := s.registryUpdate(ctx, tenant, a.DocID, true, func(cur *provenance.SourceState) (provenance.SourceState, bool, error) {
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
	st, err := s.registryUpdate(ctx, tenant, docID, false, func(cur *provenance.SourceState) (provenance.SourceState, bool, error) {
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
	st, err := s.registryUpdate(ctx, tenant, a.DocID, a.Version > 0, func(cur *provenance.SourceState) (provenance.SourceState, bool, error) {
		return store.NextDeletedAt(cur, tenant, a)
	}, pend)
	if err != nil {
		return provenance.SourceState{}, fmt.Errorf("deleting %q in %q: %w", a.DocID, tenant, err)
	}
	return st, nil
}

// RecordPending records events that follow no registry change, each
// tenant's in one MULTI/EXEC.
func (s *Store) RecordPending(ctx context.Context, ps []store.Pending) error {
	byTenant := map[string][]store.Pending{}
	for _, p := range ps {
		if err := store.ValidatePending(p); err != nil {
			return fmt.Errorf("recording pending events: %w", err)
		}
		byTenant[p.Tenant] = append(byTenant[p.Tenant], p)
	}
	for tenant, tps := range byTenant {
		if err := s.noteTenant(ctx, s.outboxTenantsKey(), &s.outboxTenants, tenant); err != nil {
			return fmt.Errorf("recording pending events: %w", err)
		}
		key := s.tenantKeys(tenant).outbox()
		_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			for _, pe := range tps {
				p.HSet(ctx, key, pe.ID, pe.Data)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("recording pending events of %q: %w", tenant, err)
		}
	}
	return nil
}

// PendingEvents returns pending events by tenant then id, after the given
// one (see store.Outbox).
func (s *Store) PendingEvents(ctx context.Context, afterTenant, afterID string, limit int) ([]store.Pending, error) {
	tenants, err := s.client.SMembers(ctx, s.outboxTenantsKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("reading pending events: %w", err)
	}
	slices.Sort(tenants)
	out := []store.Pending{}
	for _, tenant := range tenants {
		if tenant < afterTenant {
			continue
		}
		key := s.tenantKeys(tenant).outbox()
		ids, err := s.client.HKeys(ctx, key).Result()
		if err != nil {
			return nil, fmt.Errorf("reading pending events of %q: %w", tenant, err)
		}
		slices.Sort(ids)
		ids = slices.DeleteFunc(ids, func(id string) bool { return !store.PendingAfter(tenant, id, afterTenant, afterID) })
		if limit > 0 {
			ids = ids[:min(len(ids), limit-len(out))]
		}
		for start := 0; start < len(ids); start += mgetChunk {
			chunk := ids[start:min(start+mgetChunk, len(ids))]
			vals, err := s.client.HMGet(ctx, key, chunk...).Result()
			if err != nil {
				return nil, fmt.Errorf("reading pending events of %q: %w", tenant, err)
			}
			for i, v := range vals {
				data, ok := v.(string)
				if !ok {
					continue // cleared meanwhile
				}
				out = append(out, store.Pending{Tenant: tenant, ID: chunk[i], Data: []byte(data)})
			}
		}
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out, nil
}

// Acknowledge removes acknowledged pending events and records the content
// they published in one MULTI/EXEC (see store.Outbox): the outbox hash and
// the document share the tenant's slot.
func (s *Store) Acknowledge(ctx context.Context, tenant string, ids []string, content *store.ContentAck) error {
	if err := store.ValidateAck(tenant, ids, content); err != nil {
		return fmt.Errorf("acknowledging events: %w", err)
	}
	key := s.tenantKeys(tenant).outbox()
	drop := func(p goredis.Pipeliner) {
		if len(ids) > 0 {
			p.HDel(ctx, key, ids...)
		}
	}
	if content == nil {
		if len(ids) == 0 {
			return nil
		}
		if err := s.client.HDel(ctx, key, ids...).Err(); err != nil {
			return fmt.Errorf("acknowledging events of %q: %w", tenant, err)
		}
		return nil
	}
	_, err := s.registryUpdateWith(ctx, tenant, content.DocID, false, func(cur *provenance.SourceState) (provenance.SourceState, bool, error) {
		if cur == nil {
			return provenance.SourceState{}, false, nil
		}
		return store.NextContent(cur, content.DocID, content.Version, content.Hash)
	}, nil, drop)
	if err != nil {
		return fmt.Errorf("acknowledging events of %q: %w", tenant, err)
	}
	return nil
}

// PendingCount counts the pending events of every tenant.
func (s *Store) PendingCount(ctx context.Context) (int, error) {
	tenants, err := s.client.SMembers(ctx, s.outboxTenantsKey()).Result()
	if err != nil {
		return 0, fmt.Errorf("counting pending events: %w", err)
	}
	n := 0
	for _, tenant := range tenants {
		c, err := s.client.HLen(ctx, s.tenantKeys(tenant).outbox()).Result()
		if err != nil {
			return 0, fmt.Errorf("counting pending events of %q: %w", tenant, err)
		}
		n += int(c)
	}
	return n, nil
}
