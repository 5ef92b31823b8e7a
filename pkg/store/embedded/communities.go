package embedded

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/store"
)

const (
	keyRun   = "run"
	subItems = "items"
)

// ReplaceCommunities replaces a tenant's communities with those of run, in
// one transaction.
func (s *Store) ReplaceCommunities(ctx context.Context, tenant string, run int64, cs []store.Community) error {
	if err := store.ValidateCommunities(tenant, run, cs); err != nil {
		return fmt.Errorf("replacing communities of %q with run %d: %w", tenant, run, err)
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		t, err := tenantBucket(tx, bucketCommunities, tenant, true)
		if err != nil {
			return err
		}
		if t.Bucket([]byte(subItems)) != nil {
			if err := t.DeleteBucket([]byte(subItems)); err != nil {
				return err
			}
		}
		items, err := t.CreateBucket([]byte(subItems))
		if err != nil {
			return err
		}
		for _, c := range cs {
			if err := putJSON(items, c.ID, c); err != nil {
				return err
			}
		}
		return putInt(t, keyRun, run)
	})
	if err != nil {
		return fmt.Errorf("replacing communities of %q with run %d: %w", tenant, run, err)
	}
	return nil
}

// Communities returns every community, sorted by level then id.
func (s *Store) Communities(ctx context.Context, tenant string) ([]store.Community, error) {
	out := []store.Community{}
	err := s.readTenant(ctx, bucketCommunities, tenant, func(t *bolt.Bucket) error {
		items := t.Bucket([]byte(subItems))
		if items == nil {
			return nil
		}
		return items.ForEach(func(k, v []byte) error {
			var c store.Community
			if err := unmarshal(k, v, &c); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing communities of %q: %w", tenant, err)
	}
	store.SortCommunities(out)
	return out, nil
}

// LastRun returns the number of the last stored run (0 if none).
func (s *Store) LastRun(ctx context.Context, tenant string) (int64, error) {
	var run int64
	err := s.readTenant(ctx, bucketCommunities, tenant, func(t *bolt.Bucket) error {
		run = getInt(t, keyRun)
		return nil
	})
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
	err := s.update(ctx, func(tx *bolt.Tx) error {
		t, err := tenantBucket(tx, bucketReports, tenant, true)
		if err != nil {
			return err
		}
		return putJSON(t, r.ID, r)
	})
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
	err := s.update(ctx, func(tx *bolt.Tx) error {
		t, err := tenantBucket(tx, bucketReports, tenant, false)
		if err != nil || t == nil {
			return err
		}
		return t.Delete([]byte(id))
	})
	if err != nil {
		return fmt.Errorf("deleting report %q of %q: %w", id, tenant, err)
	}
	return nil
}

// Report returns one report (store.ErrNotFound if absent).
func (s *Store) Report(ctx context.Context, tenant, id string) (store.Report, error) {
	var (
		r     store.Report
		found bool
	)
	err := s.readTenant(ctx, bucketReports, tenant, func(t *bolt.Bucket) (err error) {
		found, err = getJSON(t, id, &r)
		return err
	})
	if err == nil && !found {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Report{}, fmt.Errorf("getting report %q of %q: %w", id, tenant, err)
	}
	return r, nil
}

// Reports returns every report of a tenant, sorted by id.
func (s *Store) Reports(ctx context.Context, tenant string) ([]store.Report, error) {
	out := []store.Report{}
	err := s.readTenant(ctx, bucketReports, tenant, func(t *bolt.Bucket) error {
		return t.ForEach(func(k, v []byte) error {
			var r store.Report
			if err := unmarshal(k, v, &r); err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing reports of %q: %w", tenant, err)
	}
	return out, nil
}

// readTenant runs fn on a tenant bucket in a read transaction; an absent
// tenant reads as empty (fn is not called).
func (s *Store) readTenant(ctx context.Context, top, tenant string, fn func(*bolt.Bucket) error) error {
	if err := store.ValidateTenant(tenant); err != nil {
		return err
	}
	return s.view(ctx, func(tx *bolt.Tx) error {
		t, err := tenantBucket(tx, top, tenant, false)
		if err != nil || t == nil {
			return err
		}
		return fn(t)
	})
}
