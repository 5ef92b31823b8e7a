package embedded

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

const (
	keyRun      = "run"
	subItems    = "items"
	subMembers  = "members"
	subBySource = "by_src"
	subCites    = "cites"
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
		if t.Bucket([]byte(subMembers)) != nil {
			if err := t.DeleteBucket([]byte(subMembers)); err != nil {
				return err
			}
		}
		items, err := t.CreateBucket([]byte(subItems))
		if err != nil {
			return err
		}
		members, err := t.CreateBucket([]byte(subMembers))
		if err != nil {
			return err
		}
		// Both buckets are new: keys are put in their order. A bucket's
		// node grows by insertion until the commit splits it, so keys in
		// any other order moved the node's entries once per put (a
		// re-clustering of 11,000 entities spent 1.5 s in bbolt's
		// node.put, most of one edit's cost).
		byID := slices.SortedFunc(slices.Values(cs), func(a, b store.Community) int { return cmp.Compare(a.ID, b.ID) })
		for _, c := range byID {
			if err := putJSON(items, c.ID, c, store.CommunityCompression); err != nil {
				return err
			}
		}
		var pairs [][]byte
		for _, c := range cs {
			for _, m := range c.Members {
				pairs = append(pairs, pair(m, c.ID))
			}
		}
		slices.SortFunc(pairs, bytes.Compare)
		for _, k := range pairs {
			if err := members.Put(k, nil); err != nil {
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

// CommunitiesOf returns the communities holding any of the entities.
func (s *Store) CommunitiesOf(ctx context.Context, tenant string, entityIDs []string) ([]store.Community, error) {
	out := []store.Community{}
	err := s.readTenant(ctx, bucketCommunities, tenant, func(t *bolt.Bucket) error {
		items, members := t.Bucket([]byte(subItems)), t.Bucket([]byte(subMembers))
		if items == nil || members == nil {
			return nil
		}
		seen := map[string]bool{}
		for _, e := range entityIDs {
			err := scanPrefix(members, e, func(id string) error {
				if seen[id] {
					return nil
				}
				seen[id] = true
				var c store.Community
				found, err := getJSON(items, id, &c)
				if err != nil {
					return err
				}
				if !found {
					return fmt.Errorf("member index names community %q, which is missing", id)
				}
				out = append(out, c)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the communities of %d entities of %q: %w", len(entityIDs), tenant, err)
	}
	store.SortCommunities(out)
	return out, nil
}

// CommunitiesByID returns the stored communities among ids.
func (s *Store) CommunitiesByID(ctx context.Context, tenant string, ids []string) (map[string]store.Community, error) {
	out := make(map[string]store.Community, len(ids))
	err := s.readTenant(ctx, bucketCommunities, tenant, func(t *bolt.Bucket) error {
		items := t.Bucket([]byte(subItems))
		if items == nil {
			return nil
		}
		for _, id := range ids {
			var c store.Community
			found, err := getJSON(items, id, &c)
			if err != nil {
				return err
			}
			if found {
				out[id] = c
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("getting %d communities of %q: %w", len(ids), tenant, err)
	}
	return out, nil
}

// Clustered reports which entities the member index lists (see
// store.CommunityStore).
func (s *Store) Clustered(ctx context.Context, tenant string, entityIDs []string) (map[string]bool, error) {
	out := map[string]bool{}
	err := s.readTenant(ctx, bucketCommunities, tenant, func(t *bolt.Bucket) error {
		members := t.Bucket([]byte(subMembers))
		if members == nil {
			return nil
		}
		c := members.Cursor()
		for _, e := range entityIDs {
			prefix := pairPrefix(e)
			if k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) {
				out[e] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("looking up the membership of %d entities of %q: %w", len(entityIDs), tenant, err)
	}
	return out, nil
}

// UpdateCommunities replaces some communities of the last run in place.
func (s *Store) UpdateCommunities(ctx context.Context, tenant string, run int64, cs []store.Community) error {
	if err := store.ValidateCommunities(tenant, run, cs); err != nil {
		return fmt.Errorf("updating %d communities of %q: %w", len(cs), tenant, err)
	}
	// Encoded before the write transaction: a grown community is large,
	// and every other writer of the file waits while one is open.
	encoded := make([][]byte, len(cs))
	for i, c := range cs {
		data, err := store.EncodeValue(c, store.CommunityCompression)
		if err != nil {
			return fmt.Errorf("updating %d communities of %q: encoding %q: %w", len(cs), tenant, c.ID, err)
		}
		encoded[i] = data
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		t, err := tenantBucket(tx, bucketCommunities, tenant, false)
		if err != nil {
			return err
		}
		if t == nil || getInt(t, keyRun) != run {
			return fmt.Errorf("%w: run %d is not the last stored run", store.ErrConflict, run)
		}
		items, members := t.Bucket([]byte(subItems)), t.Bucket([]byte(subMembers))
		if items == nil || members == nil {
			return fmt.Errorf("%w: no communities stored", store.ErrNotFound)
		}
		for i, c := range cs {
			// Only the members are needed of the stored community.
			var old struct {
				Members []string `json:"members"`
			}
			found, err := getJSON(items, c.ID, &old)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("%w: community %q", store.ErrNotFound, c.ID)
			}
			if err := updateMembers(members, c.ID, old.Members, c.Members); err != nil {
				return err
			}
			if err := items.Put([]byte(c.ID), encoded[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("updating %d communities of %q in run %d: %w", len(cs), tenant, run, err)
	}
	return nil
}

// updateMembers moves community id's member index from the members was
// to the members now: it ends holding <m|id> for every m of now and for
// no m of was that now lacks, as deleting every pair of was and putting
// every pair of now would, but touches only the pairs that change (a
// grown community keeps most of its members, and every pair written
// dirties a page the commit writes).
func updateMembers(members *bolt.Bucket, id string, was, now []string) error {
	keep := make(map[string]bool, len(now))
	for _, m := range now {
		keep[m] = true
	}
	for _, m := range was {
		if keep[m] {
			continue
		}
		if err := members.Delete(pair(m, id)); err != nil {
			return err
		}
	}
	cur := members.Cursor()
	for _, m := range now {
		// Seek, not Get: Get cannot tell a key with an empty value (every
		// pair's) from a missing one.
		k := pair(m, id)
		if at, _ := cur.Seek(k); bytes.Equal(at, k) {
			continue
		}
		if err := members.Put(k, nil); err != nil {
			return err
		}
	}
	return nil
}

// buildMemberIndex indexes the members of every tenant's communities that
// have no member index yet (a file from before the index).
func buildMemberIndex(tx *bolt.Tx) error {
	for _, tenant := range tenantNames(tx, bucketCommunities) {
		t, err := tenantBucket(tx, bucketCommunities, tenant, false)
		if err != nil {
			return err
		}
		items := t.Bucket([]byte(subItems))
		if items == nil || t.Bucket([]byte(subMembers)) != nil {
			continue
		}
		members, err := t.CreateBucket([]byte(subMembers))
		if err != nil {
			return err
		}
		err = items.ForEach(func(k, v []byte) error {
			var c store.Community
			if err := unmarshal(k, v, &c); err != nil {
				return err
			}
			for _, m := range c.Members {
				if err := members.Put(pair(m, c.ID), nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("indexing the community members of %q: %w", tenant, err)
		}
	}
	return nil
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

// PutReport stores r, replacing the report of the same id and its index
// entries, in one transaction.
func (s *Store) PutReport(ctx context.Context, tenant string, r store.Report) error {
	if err := store.ValidateReport(tenant, r); err != nil {
		return fmt.Errorf("putting report %q in %q: %w", r.ID, tenant, err)
	}
	if err := s.putReports(ctx, tenant, []store.Report{r}); err != nil {
		return fmt.Errorf("putting report %q in %q: %w", r.ID, tenant, err)
	}
	return nil
}

// PutReports stores rs with their index entries in one transaction, one
// commit for the batch.
func (s *Store) PutReports(ctx context.Context, tenant string, rs []store.Report) error {
	if err := store.ValidateReports(tenant, rs); err != nil {
		return fmt.Errorf("putting %d reports in %q: %w", len(rs), tenant, err)
	}
	if len(rs) == 0 {
		return nil
	}
	if err := s.putReports(ctx, tenant, rs); err != nil {
		return fmt.Errorf("putting %d reports in %q: %w", len(rs), tenant, err)
	}
	return nil
}

// putReports is PutReports of valid reports, its error unwrapped.
func (s *Store) putReports(ctx context.Context, tenant string, rs []store.Report) error {
	// Encoded before the write transaction, as every other writer of the
	// file waits while one is open.
	encoded := make([][]byte, len(rs))
	for i, r := range rs {
		data, err := store.EncodeValue(r, store.SmallCompression)
		if err != nil {
			return fmt.Errorf("encoding %q: %w", r.ID, err)
		}
		encoded[i] = data
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		t, err := tenantBucket(tx, bucketReports, tenant, true)
		if err != nil {
			return err
		}
		for i, r := range rs {
			if err := t.Put([]byte(r.ID), encoded[i]); err != nil {
				return err
			}
			if err := indexReport(tx, tenant, r.ID, store.CitationsOf(r)); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteReport removes a report and its index entries; removing an absent
// one is not an error, so replayed deletions succeed.
func (s *Store) DeleteReport(ctx context.Context, tenant, id string) error {
	if err := store.ValidateTenant(tenant); err != nil {
		return fmt.Errorf("deleting report %q: %w", id, err)
	}
	if err := s.deleteReports(ctx, tenant, []string{id}); err != nil {
		return fmt.Errorf("deleting report %q of %q: %w", id, tenant, err)
	}
	return nil
}

// DeleteReports removes the reports ids and their index entries in one
// transaction; absent ones are not an error.
func (s *Store) DeleteReports(ctx context.Context, tenant string, ids []string) error {
	if err := store.ValidateTenant(tenant); err != nil {
		return fmt.Errorf("deleting %d reports: %w", len(ids), err)
	}
	if len(ids) == 0 {
		return nil
	}
	if err := s.deleteReports(ctx, tenant, ids); err != nil {
		return fmt.Errorf("deleting %d reports of %q: %w", len(ids), tenant, err)
	}
	return nil
}

// deleteReports is DeleteReports in a valid tenant, its error unwrapped.
func (s *Store) deleteReports(ctx context.Context, tenant string, ids []string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		t, err := tenantBucket(tx, bucketReports, tenant, false)
		if err != nil || t == nil {
			return err
		}
		for _, id := range ids {
			if err := t.Delete([]byte(id)); err != nil {
				return err
			}
			if err := indexReport(tx, tenant, id, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// indexReport replaces the index entries of report id with cites (none
// for a deleted report).
func indexReport(tx *bolt.Tx, tenant, id string, cites []provenance.SourceRef) error {
	t, err := tenantBucket(tx, bucketReportIndex, tenant, true)
	if err != nil {
		return err
	}
	bySrc, err := t.CreateBucketIfNotExists([]byte(subBySource))
	if err != nil {
		return err
	}
	citesB, err := t.CreateBucketIfNotExists([]byte(subCites))
	if err != nil {
		return err
	}
	var old []provenance.SourceRef
	if _, err := getJSON(citesB, id, &old); err != nil {
		return err
	}
	// Only the documents the report stops or starts citing change their
	// entries (a rewrite of a report citing thousands of documents
	// deleted and put them all again).
	now := make(map[string]bool, len(cites))
	for _, c := range cites {
		now[c.DocID] = true
	}
	was := make(map[string]bool, len(old))
	for _, c := range old {
		if was[c.DocID] {
			continue
		}
		was[c.DocID] = true
		if !now[c.DocID] {
			if err := bySrc.Delete(pair(c.DocID, id)); err != nil {
				return err
			}
		}
	}
	if cites == nil {
		return citesB.Delete([]byte(id))
	}
	for doc := range now {
		if !was[doc] {
			if err := bySrc.Put(pair(doc, id), nil); err != nil {
				return err
			}
		}
	}
	return putJSON(citesB, id, cites, store.SmallCompression)
}

// buildReportIndex indexes every stored report (a file from before the
// index).
func buildReportIndex(tx *bolt.Tx) error {
	for _, tenant := range tenantNames(tx, bucketReports) {
		t, err := tenantBucket(tx, bucketReports, tenant, false)
		if err != nil {
			return err
		}
		var reps []store.Report
		err = t.ForEach(func(k, v []byte) error {
			var r store.Report
			if err := unmarshal(k, v, &r); err != nil {
				return err
			}
			reps = append(reps, r)
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range reps {
			if err := indexReport(tx, tenant, r.ID, store.CitationsOf(r)); err != nil {
				return fmt.Errorf("indexing report %q of %q: %w", r.ID, tenant, err)
			}
		}
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

// ReportsByID returns the reports among ids that exist.
func (s *Store) ReportsByID(ctx context.Context, tenant string, ids []string) (map[string]store.Report, error) {
	out := make(map[string]store.Report, len(ids))
	err := s.readTenant(ctx, bucketReports, tenant, func(t *bolt.Bucket) error {
		for _, id := range ids {
			var r store.Report
			found, err := getJSON(t, id, &r)
			if err != nil {
				return err
			}
			if found {
				out[id] = r
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("getting %d reports of %q: %w", len(ids), tenant, err)
	}
	return out, nil
}

// ReportsBySource returns the reports citing docID, sorted by id.
func (s *Store) ReportsBySource(ctx context.Context, tenant, docID string) ([]store.Report, error) {
	out := []store.Report{}
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("listing the reports citing %q: %w", docID, err)
	}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		ix, err := tenantBucket(tx, bucketReportIndex, tenant, false)
		if err != nil || ix == nil {
			return err
		}
		bySrc := ix.Bucket([]byte(subBySource))
		reps, err := tenantBucket(tx, bucketReports, tenant, false)
		if err != nil || bySrc == nil || reps == nil {
			return err
		}
		return scanPrefix(bySrc, docID, func(id string) error {
			var r store.Report
			found, err := getJSON(reps, id, &r)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("index names report %q, which is missing", id)
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing the reports of %q citing %q: %w", tenant, docID, err)
	}
	return out, nil
}

// ReportCitations returns each report's (doc, version) citations.
func (s *Store) ReportCitations(ctx context.Context, tenant string) (map[string][]provenance.SourceRef, error) {
	out := map[string][]provenance.SourceRef{}
	err := s.readTenant(ctx, bucketReportIndex, tenant, func(t *bolt.Bucket) error {
		cites := t.Bucket([]byte(subCites))
		if cites == nil {
			return nil
		}
		return cites.ForEach(func(k, v []byte) error {
			var refs []provenance.SourceRef
			if err := unmarshal(k, v, &refs); err != nil {
				return err
			}
			out[string(k)] = refs
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing the report citations of %q: %w", tenant, err)
	}
	return out, nil
}

// ReportCitationsOf returns the citations of the reports citing any of
// docIDs, through the by-source index.
func (s *Store) ReportCitationsOf(ctx context.Context, tenant string, docIDs []string) (map[string][]provenance.SourceRef, error) {
	out := map[string][]provenance.SourceRef{}
	err := s.readTenant(ctx, bucketReportIndex, tenant, func(t *bolt.Bucket) error {
		bySrc, cites := t.Bucket([]byte(subBySource)), t.Bucket([]byte(subCites))
		if bySrc == nil || cites == nil {
			return nil
		}
		for _, doc := range docIDs {
			err := scanPrefix(bySrc, doc, func(id string) error {
				if _, seen := out[id]; seen {
					return nil
				}
				var refs []provenance.SourceRef
				found, err := getJSON(cites, id, &refs)
				if err != nil {
					return err
				}
				if !found {
					return fmt.Errorf("index names report %q, which has no citations entry", id)
				}
				out[id] = refs
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the citations of the reports of %q citing %d documents: %w", tenant, len(docIDs), err)
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
