package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/store"
)

// ReplaceCommunities replaces a tenant's communities with those of run, in
// one MULTI (a blind write: nothing is read, so nothing to watch).
func (s *Store) ReplaceCommunities(ctx context.Context, tenant string, run int64, cs []store.Community) error {
	if err := store.ValidateCommunities(tenant, run, cs); err != nil {
		return fmt.Errorf("replacing communities of %q with run %d: %w", tenant, run, err)
	}
	k := s.tenantKeys(tenant)
	fields := make([]any, 0, 2*len(cs))
	for _, c := range cs {
		data, err := marshal(c)
		if err != nil {
			return fmt.Errorf("replacing communities of %q with run %d: %w", tenant, run, err)
		}
		fields = append(fields, c.ID, data)
	}
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Del(ctx, k.communities())
		if len(fields) > 0 {
			p.HSet(ctx, k.communities(), fields...)
		}
		p.Set(ctx, k.communitiesRun(), run, 0)
		return nil
	})
	if err != nil {
		return fmt.Errorf("replacing communities of %q with run %d: %w", tenant, run, err)
	}
	return nil
}

// Communities returns every community, sorted by level then id.
func (s *Store) Communities(ctx context.Context, tenant string) ([]store.Community, error) {
	out, err := hashValues[store.Community](ctx, s, tenant, func(k keys) string { return k.communities() })
	if err != nil {
		return nil, fmt.Errorf("listing communities of %q: %w", tenant, err)
	}
	store.SortCommunities(out)
	return out, nil
}

// LastRun returns the number of the last stored run (0 if none).
func (s *Store) LastRun(ctx context.Context, tenant string) (int64, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return 0, fmt.Errorf("reading the last clustering run: %w", err)
	}
	run, err := s.client.Get(ctx, s.tenantKeys(tenant).communitiesRun()).Int64()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the last clustering run of %q: %w", tenant, err)
	}
	return run, nil
}

// PutReport stores r, replacing the report of the same id.
func (s *Store) PutReport(ctx context.Context, tenant string, r store.Report) error {
	if err := store.ValidateReport(tenant, r); err != nil {
		return fmt.Errorf("putting report %q in %q: %w", r.ID, tenant, err)
	}
	data, err := marshal(r)
	if err == nil {
		err = s.client.HSet(ctx, s.tenantKeys(tenant).reports(), r.ID, data).Err()
	}
	if err != nil {
		return fmt.Errorf("putting report %q in %q: %w", r.ID, tenant, err)
	}
	return nil
}

// DeleteReport removes a report; removing an absent one is not an error, so
// replayed deletions succeed.
func (s *Store) DeleteReport(ctx context.Context, tenant, id string) error {
	if err := store.ValidateTenant(tenant); err != nil {
		return fmt.Errorf("deleting report %q: %w", id, err)
	}
	if err := s.client.HDel(ctx, s.tenantKeys(tenant).reports(), id).Err(); err != nil {
		return fmt.Errorf("deleting report %q of %q: %w", id, tenant, err)
	}
	return nil
}

// Report returns one report (store.ErrNotFound if absent).
func (s *Store) Report(ctx context.Context, tenant, id string) (store.Report, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return store.Report{}, fmt.Errorf("getting report %q: %w", id, err)
	}
	data, err := s.client.HGet(ctx, s.tenantKeys(tenant).reports(), id).Bytes()
	if errors.Is(err, goredis.Nil) {
		err = store.ErrNotFound
	}
	var r store.Report
	if err == nil {
		err = json.Unmarshal(data, &r)
	}
	if err != nil {
		return store.Report{}, fmt.Errorf("getting report %q of %q: %w", id, tenant, err)
	}
	return r, nil
}

// Reports returns every report of a tenant, sorted by id.
func (s *Store) Reports(ctx context.Context, tenant string) ([]store.Report, error) {
	out, err := hashValues[store.Report](ctx, s, tenant, func(k keys) string { return k.reports() })
	if err != nil {
		return nil, fmt.Errorf("listing reports of %q: %w", tenant, err)
	}
	slices.SortFunc(out, func(a, b store.Report) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// hashValues decodes every value of a tenant hash.
func hashValues[T any](ctx context.Context, s *Store, tenant string, key func(keys) string) ([]T, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, err
	}
	vals, err := s.client.HVals(ctx, key(s.tenantKeys(tenant))).Result()
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(vals))
	for _, v := range vals {
		var x T
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			return nil, fmt.Errorf("decoding %T: %w", x, err)
		}
		out = append(out, x)
	}
	return out, nil
}
