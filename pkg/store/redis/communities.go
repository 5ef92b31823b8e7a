package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/provenance"
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
	of := map[string][]string{}
	for _, c := range cs {
		data, err := marshal(c, store.CommunityCompression)
		if err != nil {
			return fmt.Errorf("replacing communities of %q with run %d: %w", tenant, run, err)
		}
		fields = append(fields, c.ID, data)
		for _, m := range c.Members {
			of[m] = append(of[m], c.ID)
		}
	}
	memberFields, err := memberIndexFields(of)
	if err != nil {
		return fmt.Errorf("replacing communities of %q with run %d: %w", tenant, run, err)
	}
	_, err = s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Del(ctx, k.communities(), k.communityMembers())
		if len(fields) > 0 {
			p.HSet(ctx, k.communities(), fields...)
		}
		if len(memberFields) > 0 {
			p.HSet(ctx, k.communityMembers(), memberFields...)
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

// memberIndexFields encodes entity -> community ids as HSET arguments.
func memberIndexFields(of map[string][]string) ([]any, error) {
	fields := make([]any, 0, 2*len(of))
	for m, ids := range of {
		slices.Sort(ids)
		data, err := marshal(slices.Compact(ids), store.NoCompression)
		if err != nil {
			return nil, err
		}
		fields = append(fields, m, data)
	}
	return fields, nil
}

// CommunitiesOf returns the communities holding any of the entities.
func (s *Store) CommunitiesOf(ctx context.Context, tenant string, entityIDs []string) ([]store.Community, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("listing the communities of %d entities: %w", len(entityIDs), err)
	}
	out, err := s.communitiesOf(ctx, s.client, s.tenantKeys(tenant), entityIDs)
	if err != nil {
		return nil, fmt.Errorf("listing the communities of %d entities of %q: %w", len(entityIDs), tenant, err)
	}
	store.SortCommunities(out)
	return out, nil
}

// CommunitiesByID returns the stored communities among ids.
func (s *Store) CommunitiesByID(ctx context.Context, tenant string, ids []string) (map[string]store.Community, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("getting %d communities: %w", len(ids), err)
	}
	out, err := hmgetJSON[store.Community](ctx, s.client, s.tenantKeys(tenant).communities(), ids)
	if err != nil {
		return nil, fmt.Errorf("getting %d communities of %q: %w", len(ids), tenant, err)
	}
	return out, nil
}

// Clustered reports which entities the member index lists (see
// store.CommunityStore).
func (s *Store) Clustered(ctx context.Context, tenant string, entityIDs []string) (map[string]bool, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("looking up the membership of %d entities: %w", len(entityIDs), err)
	}
	idx, err := hmgetJSON[[]string](ctx, s.client, s.tenantKeys(tenant).communityMembers(), entityIDs)
	if err != nil {
		return nil, fmt.Errorf("looking up the membership of %d entities of %q: %w", len(entityIDs), tenant, err)
	}
	out := map[string]bool{}
	for id, l := range idx {
		if len(l) > 0 {
			out[id] = true
		}
	}
	return out, nil
}

func (s *Store) communitiesOf(ctx context.Context, c goredis.Cmdable, k keys, entityIDs []string) ([]store.Community, error) {
	idx, err := hmgetJSON[[]string](ctx, c, k.communityMembers(), entityIDs)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, l := range idx {
		ids = append(ids, l...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	byID, err := hmgetJSON[store.Community](ctx, c, k.communities(), ids)
	if err != nil {
		return nil, err
	}
	out := make([]store.Community, 0, len(byID))
	for _, id := range ids {
		cm, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("member index names community %q, which is missing", id)
		}
		out = append(out, cm)
	}
	return out, nil
}

// hmgetJSON reads the JSON values of the present fields of a hash.
func hmgetJSON[T any](ctx context.Context, c goredis.Cmdable, key string, fields []string) (map[string]T, error) {
	out := make(map[string]T, len(fields))
	for start := 0; start < len(fields); start += mgetChunk {
		chunk := fields[start:min(start+mgetChunk, len(fields))]
		vals, err := c.HMGet(ctx, key, chunk...).Result()
		if err != nil {
			return nil, err
		}
		err = decodeJSON(vals, func(i int) string { return fmt.Sprintf("%q of %q", chunk[i], key) },
			func(i int, v T) { out[chunk[i]] = v })
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UpdateCommunities replaces some communities of the last run in place, in
// one optimistic transaction on the run number and the communities hash.
func (s *Store) UpdateCommunities(ctx context.Context, tenant string, run int64, cs []store.Community) error {
	if err := store.ValidateCommunities(tenant, run, cs); err != nil {
		return fmt.Errorf("updating %d communities of %q: %w", len(cs), tenant, err)
	}
	k := s.tenantKeys(tenant)
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	err := s.optimistic(ctx, func(tx *goredis.Tx) error {
		cur, err := tx.Get(ctx, k.communitiesRun()).Int64()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return err
		}
		if cur != run {
			return fmt.Errorf("%w: run %d is not the last stored run", store.ErrConflict, run)
		}
		olds, err := hmgetJSON[store.Community](ctx, tx, k.communities(), ids)
		if err != nil {
			return err
		}
		// The member index entries of every entity that joins or leaves.
		var touched []string
		for _, c := range cs {
			old, ok := olds[c.ID]
			if !ok {
				return fmt.Errorf("%w: community %q", store.ErrNotFound, c.ID)
			}
			touched = append(touched, old.Members...)
			touched = append(touched, c.Members...)
		}
		slices.Sort(touched)
		touched = slices.Compact(touched)
		idx, err := hmgetJSON[[]string](ctx, tx, k.communityMembers(), touched)
		if err != nil {
			return err
		}
		of := make(map[string][]string, len(touched))
		for _, m := range touched {
			of[m] = idx[m]
		}
		for _, c := range cs {
			for _, m := range olds[c.ID].Members {
				of[m] = slices.DeleteFunc(of[m], func(id string) bool { return id == c.ID })
			}
			for _, m := range c.Members {
				of[m] = append(of[m], c.ID)
			}
		}
		var gone []string
		for m, l := range of {
			if len(l) == 0 {
				gone = append(gone, m)
				delete(of, m)
			}
		}
		memberFields, err := memberIndexFields(of)
		if err != nil {
			return err
		}
		fields := make([]any, 0, 2*len(cs))
		for _, c := range cs {
			data, err := marshal(c, store.CommunityCompression)
			if err != nil {
				return err
			}
			fields = append(fields, c.ID, data)
		}
		_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			if len(fields) > 0 {
				p.HSet(ctx, k.communities(), fields...)
			}
			if len(memberFields) > 0 {
				p.HSet(ctx, k.communityMembers(), memberFields...)
			}
			if len(gone) > 0 {
				p.HDel(ctx, k.communityMembers(), gone...)
			}
			return nil
		})
		return err
	}, k.communitiesRun(), k.communities())
	if err != nil {
		return fmt.Errorf("updating %d communities of %q in run %d: %w", len(cs), tenant, run, err)
	}
	return nil
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

// PutReport stores r, replacing the report of the same id and its index
// entries, in one optimistic transaction on the citations hash.
func (s *Store) PutReport(ctx context.Context, tenant string, r store.Report) error {
	if err := store.ValidateReport(tenant, r); err != nil {
		return fmt.Errorf("putting report %q in %q: %w", r.ID, tenant, err)
	}
	if err := s.putReports(ctx, tenant, []store.Report{r}); err != nil {
		return fmt.Errorf("putting report %q in %q: %w", r.ID, tenant, err)
	}
	return nil
}

// PutReports stores rs with their index entries in one optimistic
// transaction on the citations hash, as PutReport stores one: the
// citations the reports had are read under WATCH, and every report, its
// citations and its by-source entries are written in one MULTI/EXEC.
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
	ids := make([]string, len(rs))
	data := make([]string, len(rs))
	cites := make([][]provenance.SourceRef, len(rs))
	citesData := make([]string, len(rs))
	for i, r := range rs {
		var err error
		ids[i], cites[i] = r.ID, store.CitationsOf(r)
		if data[i], err = marshal(r, store.SmallCompression); err == nil {
			citesData[i], err = marshal(cites[i], store.SmallCompression)
		}
		if err != nil {
			return fmt.Errorf("encoding %q: %w", r.ID, err)
		}
	}
	k := s.tenantKeys(tenant)
	return s.rewriteReports(ctx, k, ids, func(p goredis.Pipeliner) {
		for i, id := range ids {
			p.HSet(ctx, k.reports(), id, data[i])
			p.HSet(ctx, k.reportCites(), id, citesData[i])
			for _, c := range cites[i] {
				p.HSet(ctx, k.reportsOf(c.DocID), id, "")
			}
		}
	})
}

// rewriteReports is the optimistic transaction, on the citations hash, of
// a write to the reports ids: it reads their stored citations under WATCH
// and, in one MULTI/EXEC, removes the by-source entries those citations
// made, then queues write.
func (s *Store) rewriteReports(ctx context.Context, k keys, ids []string, write func(goredis.Pipeliner)) error {
	if err := s.ensureLayout(ctx); err != nil {
		return err
	}
	return s.optimistic(ctx, func(tx *goredis.Tx) error {
		old, err := hmgetJSON[[]provenance.SourceRef](ctx, tx, k.reportCites(), ids)
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			for _, id := range ids {
				for _, c := range old[id] {
					p.HDel(ctx, k.reportsOf(c.DocID), id)
				}
			}
			write(p)
			return nil
		})
		return err
	}, k.reportCites())
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
// optimistic transaction on the citations hash, as DeleteReport removes
// one; absent ones are not an error.
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
	k := s.tenantKeys(tenant)
	return s.rewriteReports(ctx, k, ids, func(p goredis.Pipeliner) {
		p.HDel(ctx, k.reports(), ids...)
		p.HDel(ctx, k.reportCites(), ids...)
	})
}

// ReportsByID returns the reports among ids that exist.
func (s *Store) ReportsByID(ctx context.Context, tenant string, ids []string) (map[string]store.Report, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("getting %d reports: %w", len(ids), err)
	}
	out, err := s.reportsByID(ctx, s.tenantKeys(tenant), ids)
	if err != nil {
		return nil, fmt.Errorf("getting %d reports of %q: %w", len(ids), tenant, err)
	}
	return out, nil
}

func (s *Store) reportsByID(ctx context.Context, k keys, ids []string) (map[string]store.Report, error) {
	out := make(map[string]store.Report, len(ids))
	for start := 0; start < len(ids); start += mgetChunk {
		chunk := ids[start:min(start+mgetChunk, len(ids))]
		vals, err := s.client.HMGet(ctx, k.reports(), chunk...).Result()
		if err != nil {
			return nil, err
		}
		for i, raw := range vals {
			str, ok := raw.(string)
			if !ok {
				continue // absent
			}
			var r store.Report
			if err := store.DecodeValue([]byte(str), &r); err != nil {
				return nil, fmt.Errorf("decoding report %q: %w", chunk[i], err)
			}
			out[chunk[i]] = r
		}
	}
	return out, nil
}

// ReportsBySource returns the reports citing docID, sorted by id.
func (s *Store) ReportsBySource(ctx context.Context, tenant, docID string) ([]store.Report, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("listing the reports citing %q: %w", docID, err)
	}
	k := s.tenantKeys(tenant)
	err := s.ensureLayout(ctx)
	var ids []string
	if err == nil {
		ids, err = s.client.HKeys(ctx, k.reportsOf(docID)).Result()
	}
	var byID map[string]store.Report
	if err == nil {
		byID, err = s.reportsByID(ctx, k, ids)
	}
	if err != nil {
		return nil, fmt.Errorf("listing the reports of %q citing %q: %w", tenant, docID, err)
	}
	out := make([]store.Report, 0, len(byID))
	for _, r := range byID {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b store.Report) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// ReportCitations returns each report's (doc, version) citations.
func (s *Store) ReportCitations(ctx context.Context, tenant string) (map[string][]provenance.SourceRef, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("listing report citations: %w", err)
	}
	all, err := s.client.HGetAll(ctx, s.tenantKeys(tenant).reportCites()).Result()
	if err != nil {
		return nil, fmt.Errorf("listing the report citations of %q: %w", tenant, err)
	}
	out := make(map[string][]provenance.SourceRef, len(all))
	for id, raw := range all {
		var refs []provenance.SourceRef
		if err := store.DecodeValue([]byte(raw), &refs); err != nil {
			return nil, fmt.Errorf("decoding the citations of report %q of %q: %w", id, tenant, err)
		}
		out[id] = refs
	}
	return out, nil
}

// ReportCitationsOf returns the citations of the reports citing any of
// docIDs, through the by-source index.
func (s *Store) ReportCitationsOf(ctx context.Context, tenant string, docIDs []string) (map[string][]provenance.SourceRef, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("listing the citations of the reports citing %d documents: %w", len(docIDs), err)
	}
	k := s.tenantKeys(tenant)
	fail := func(err error) error {
		return fmt.Errorf("listing the citations of the reports of %q citing %d documents: %w", tenant, len(docIDs), err)
	}
	if err := s.ensureLayout(ctx); err != nil {
		return nil, fail(err)
	}
	var ids []string
	for start := 0; start < len(docIDs); start += mgetChunk {
		chunk := docIDs[start:min(start+mgetChunk, len(docIDs))]
		cmds := make([]*goredis.StringSliceCmd, len(chunk))
		_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, doc := range chunk {
				cmds[i] = p.HKeys(ctx, k.reportsOf(doc))
			}
			return nil
		})
		if err != nil {
			return nil, fail(err)
		}
		for _, c := range cmds {
			ids = append(ids, c.Val()...)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	// A report the index named but deleted since is left out (an absent
	// field): it cites nothing now.
	out, err := hmgetJSON[[]provenance.SourceRef](ctx, s.client, k.reportCites(), ids)
	if err != nil {
		return nil, fail(err)
	}
	return out, nil
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
		err = store.DecodeValue(data, &r)
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
		if err := store.DecodeValue([]byte(v), &x); err != nil {
			return nil, fmt.Errorf("decoding %T: %w", x, err)
		}
		out = append(out, x)
	}
	return out, nil
}
