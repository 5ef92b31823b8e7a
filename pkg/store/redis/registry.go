package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// registryUpdate runs one registry transition on docID as an optimistic
// transaction on its key: next gets the current state (nil if unknown) and
// returns the state to store and whether to store it. The events pend
// returns for an accepted transition are written in the same MULTI/EXEC
// (see pendingWrites).
//
// The tenant is added to the global sets first, outside the transaction
// (they live in other slots), and never from inside it: a callback holding
// the transaction's connection that waits for a second one from the pool
// deadlocks once every connection is held that way, until the pool's
// timeout fails them all. creates says the call may create the document
// (an announcement, a deletion at a version); the others need it to exist,
// so its tenant is listed already.
func (s *Store) registryUpdate(ctx context.Context, tenant, docID string, creates bool,
	next func(cur *provenance.SourceState) (provenance.SourceState, bool, error), pend store.PendingFunc) (provenance.SourceState, error) {
	return s.registryUpdateWith(ctx, tenant, docID, creates, next, pend, nil)
}

// registryUpdateWith is registryUpdate that also queues also's writes (of
// keys in the tenant's slot) in the transaction, whether or not next
// changes the document.
func (s *Store) registryUpdateWith(ctx context.Context, tenant, docID string, creates bool,
	next func(cur *provenance.SourceState) (provenance.SourceState, bool, error), pend store.PendingFunc,
	also func(goredis.Pipeliner)) (provenance.SourceState, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return provenance.SourceState{}, err
	}
	if err := store.ValidateDocID(docID); err != nil {
		return provenance.SourceState{}, err
	}
	if creates {
		// A refused call leaves no trace: what is invalid whatever the
		// stored state is refused before the tenant is listed. Listing a
		// tenant whose first write then fails otherwise is harmless.
		if _, _, err := next(nil); errors.Is(err, store.ErrInvalid) {
			return provenance.SourceState{}, err
		}
		if err := s.noteTenant(ctx, s.tenantsKey(), &s.regTenants, tenant); err != nil {
			return provenance.SourceState{}, err
		}
	}
	if pend != nil {
		// Before the events are recorded, so a process that stops after
		// the transaction never leaves them where PendingEvents does not look.
		if err := s.noteTenant(ctx, s.outboxTenantsKey(), &s.outboxTenants, tenant); err != nil {
			return provenance.SourceState{}, err
		}
	}
	k := s.tenantKeys(tenant)
	key := k.reg(docID)
	var out provenance.SourceState
	err := s.optimistic(ctx, func(tx *goredis.Tx) error {
		cur, err := getJSON[provenance.SourceState](ctx, tx, key)
		if err != nil {
			return err
		}
		st, write, err := next(cur)
		if err != nil {
			return err
		}
		out = st
		record, err := pendingWrites(ctx, k, tenant, pend, cur, st)
		if err != nil {
			return err
		}
		if also != nil {
			pending := record
			record = func(p goredis.Pipeliner) {
				pending(p)
				also(p)
			}
		}
		if !write {
			return pendingOnly(ctx, tx, record)
		}
		data, err := marshal(st, store.NoCompression)
		if err != nil {
			return err
		}
		live, deleted := store.CountChange(cur, st)
		_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Set(ctx, key, data, 0)
			p.SAdd(ctx, k.regDocs(), docID)
			if live != 0 {
				p.HIncrBy(ctx, k.regCount(), "live", int64(live))
			}
			if deleted != 0 {
				p.HIncrBy(ctx, k.regCount(), "deleted", int64(deleted))
			}
			record(p)
			bumpRegistryGeneration(ctx, p, k, docID)
			return nil
		})
		return err
	}, key)
	return out, err
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
	k := s.tenantKeys(tenant)
	out := make(map[string]provenance.SourceState, len(docIDs))
	err := mgetJSON(ctx, s.client, k.prefixed(k.reg, docIDs), func(i int, st provenance.SourceState) {
		out[docIDs[i]] = st
	})
	if err != nil {
		return nil, fmt.Errorf("looking up sources in %q: %w", tenant, err)
	}
	return out, nil
}

// ListSources returns every document of a tenant, sorted by doc id.
func (s *Store) ListSources(ctx context.Context, tenant string) ([]provenance.SourceState, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("listing sources: %w", err)
	}
	k := s.tenantKeys(tenant)
	ids, err := s.client.SMembers(ctx, k.regDocs()).Result()
	if err != nil {
		return nil, fmt.Errorf("listing sources of %q: %w", tenant, err)
	}
	slices.Sort(ids)
	out := make([]provenance.SourceState, 0, len(ids))
	err = mgetJSON(ctx, s.client, k.prefixed(k.reg, ids), func(_ int, st provenance.SourceState) {
		out = append(out, st)
	})
	if err != nil {
		return nil, fmt.Errorf("listing sources of %q: %w", tenant, err)
	}
	return out, nil
}

// Tenants lists the tenants the registry knows, sorted.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	ts, err := s.client.SMembers(ctx, s.tenantsKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("listing tenants: %w", err)
	}
	slices.Sort(ts)
	return ts, nil
}

// countScript counts a tenant's registry in one atomic step and stores the
// counts, marked as covering every document: KEYS[1] is the registry's doc
// id set, KEYS[2] the counts hash, ARGV[1] the prefix of the registry keys.
// A registry written before the counts were kept has a hash without the
// mark (or none): its writes since then incremented counts that leave out
// the documents before them. Registry states are plain JSON
// (store.NoCompression), which cjson reads.
var countScript = goredis.NewScript(`
local ids = redis.call('SMEMBERS', KEYS[1])
local live, deleted = 0, 0
for _, id in ipairs(ids) do
  local v = redis.call('GET', ARGV[1] .. id)
  if v then
    local ok, st = pcall(cjson.decode, v)
    if ok and type(st) == 'table' and st['deleted'] == true then deleted = deleted + 1 else live = live + 1 end
  end
end
redis.call('HSET', KEYS[2], 'live', live, 'deleted', deleted, 'counted', 1)
return {live, deleted}
`)

// CountSources returns the tenant's registry counts (see
// store.SourceCounter): two fields of a hash every registry write
// increments in its transaction; the first call on a registry written
// before the counts were kept counts it once (countScript).
func (s *Store) CountSources(ctx context.Context, tenant string) (store.SourceCounts, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return store.SourceCounts{}, fmt.Errorf("counting sources: %w", err)
	}
	k := s.tenantKeys(tenant)
	var h struct {
		Counted bool `redis:"counted"`
		Live    int  `redis:"live"`
		Deleted int  `redis:"deleted"`
	}
	if err := s.client.HMGet(ctx, k.regCount(), "counted", "live", "deleted").Scan(&h); err != nil {
		return store.SourceCounts{}, fmt.Errorf("counting the sources of %q: %w", tenant, err)
	}
	if h.Counted {
		return store.SourceCounts{Live: h.Live, Deleted: h.Deleted}, nil
	}
	n, err := countScript.Run(ctx, s.client, []string{k.regDocs(), k.regCount()}, k.reg("")).Int64Slice()
	if err != nil || len(n) != 2 {
		return store.SourceCounts{}, fmt.Errorf("counting the sources of %q: %v", tenant, err)
	}
	return store.SourceCounts{Live: int(n[0]), Deleted: int(n[1])}, nil
}
