package reporter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// Reconciliation.
//
// Announcements are edges; the stored communities and reports are the
// level. At start and every ReconcileEvery, the reporter compares them per
// tenant and writes the report of every community that has none, or whose
// report cites a source version the registry no longer has, or leaves out
// a current document the community rests on; it removes the reports of
// communities that no longer exist. So a lost announcement (a clusterer
// that died between storing a run and publishing it, a report deleted by
// hand) cannot leave a community without its report for longer than
// ReconcileEvery. Such a full pass reads the communities, the report
// store's citation index and the registry entries of the documents cited;
// it decodes only the reports it rewrites. The member hash needs no
// decode: a report is stored under its community's id, which names the
// member set, and the rewrite compares the stored report's member hash
// with the community's.
//
// A communities event asks for a pass too, but a narrow one: it checks,
// by the same rules, only the communities the events handled since the
// last pass of the tenant wrote reports for (read again by id, so a
// community replaced or grown since is seen as stored), with their stored
// reports and the registry entries of their documents. Its cost follows
// what the events named, not the tenant: during a backfill, when events
// follow each other, a full pass after each would cost what the tenant
// holds per event. What the narrow pass cannot see (a run whose
// announcement was lost, an orphaned report) is the full pass's.

// Reconciled is what one reconciliation pass of a tenant did.
type Reconciled struct {
	// Written counts the reports stored (written or restamped), Removed
	// the reports of communities that no longer exist.
	Written, Removed int
	// Drifted counts the reports the pass found to write; More is set
	// when it stopped at ReconcileBatch with some of them left.
	Drifted int
	More    bool
}

// Reconcile brings the reports of one tenant in line with its stored
// communities, writing at most ReconcileBatch reports.
func (w *Worker) Reconcile(ctx context.Context, tenant string) (Reconciled, error) {
	w.rmu.Lock()
	defer w.rmu.Unlock()
	var out Reconciled
	comms, err := w.st.Communities(ctx, tenant)
	if err != nil {
		return out, fmt.Errorf("reading communities: %w", err)
	}
	// This pass sees every community: those named since the last one need
	// no narrow pass of their own.
	delete(w.named, tenant)
	cites, err := w.st.ReportCitations(ctx, tenant)
	if err != nil {
		return out, fmt.Errorf("reading report citations: %w", err)
	}
	jobs, orphans, err := w.drift(ctx, tenant, comms, cites)
	if err != nil {
		return out, err
	}
	out.Drifted = len(jobs)
	if len(jobs) > w.cfg.ReconcileBatch {
		// Start after where the last bounded pass stopped, so that reports
		// a pass cannot settle (the graph not yet at the registry's
		// version) do not hold back the rest.
		i, _ := slices.BinarySearchFunc(jobs, w.cursor[tenant], func(j job, c store.Community) int {
			return cmp.Or(cmp.Compare(j.c.Level, c.Level), cmp.Compare(j.c.ID, c.ID))
		})
		jobs = slices.Concat(jobs[i:], jobs[:i])[:w.cfg.ReconcileBatch]
		out.More = true
		last := jobs[len(jobs)-1].c
		w.cursor[tenant] = store.Community{ID: last.ID + "\x00", Level: last.Level}
	}
	return w.settle(ctx, tenant, out, jobs, orphans, nil)
}

// settle writes the reports of jobs, removes the reports orphans, indexes
// both and announces what was done. olds, when not nil, holds every
// stored report of jobs (see writeReports). The caller holds rmu.
func (w *Worker) settle(ctx context.Context, tenant string, out Reconciled, jobs []job, orphans []string, olds map[string]store.Report) (Reconciled, error) {
	reps, err := w.writeReports(ctx, tenant, jobs, olds)
	out.Written = len(reps)
	reasons := make(map[string]string, len(jobs))
	for _, j := range jobs {
		reasons[ReportID(j.c.ID)] = j.reason
	}
	for _, r := range reps {
		w.reconciled.WithLabelValues(reasons[r.ID]).Inc()
	}
	if err != nil {
		return out, err
	}
	if err := w.removeReports(ctx, tenant, orphans); err != nil {
		return out, err
	}
	out.Removed = len(orphans)
	w.reconciled.WithLabelValues("removed").Add(float64(len(orphans)))
	if out.Written == 0 && out.Removed == 0 {
		return out, nil
	}
	if w.vectorsOn() {
		if err := w.indexReports(ctx, tenant, reps, orphans); err != nil {
			return out, fmt.Errorf("indexing reports: %w", err)
		}
	}
	written := make([]string, 0, len(reps))
	for _, r := range reps {
		written = append(written, r.ID)
	}
	// Announced under a message id naming what was done, so a pass that
	// is repeated after a crash is not announced twice.
	if _, err := w.bus.Publish(ctx, events.KindReportsChanged, tenant, events.ReconcileID(tenant, written, orphans),
		&events.ReportsChanged{Header: events.Header{Tenant: tenant}, Reports: written, Removed: orphans}); err != nil {
		return out, fmt.Errorf("announcing reconciled reports: %w", err)
	}
	w.log.Info("reports reconciled", "tenant", tenant, "written", out.Written, "removed", out.Removed, "more", out.More)
	return out, nil
}

// name records that the reports of the communities of jobs were written
// for a communities event, for the next narrow pass to check (see
// ReconcileChanged), which reads them by id as stored then. A community
// without members is left to the full pass. Without reconciliation
// (ReconcileEvery negative) nothing is recorded: no pass would take it.
// The caller holds rmu.
func (w *Worker) name(tenant string, jobs []job) {
	if w.cfg.ReconcileEvery < 0 {
		return
	}
	for _, j := range jobs {
		if len(j.c.Members) == 0 {
			continue
		}
		if w.named[tenant] == nil {
			w.named[tenant] = map[string]bool{}
		}
		w.named[tenant][j.c.ID] = true
	}
}

// ReconcileChanged runs the narrow pass of every tenant with communities
// named since its last pass (see the top of this file): each is read as
// stored now, and its report written if missing or drifted, at most
// ReconcileBatch per tenant (the rest wait for the next pass, which is
// asked for at once). Nothing else of the tenant is read. It returns the
// reports written.
func (w *Worker) ReconcileChanged(ctx context.Context) Reconciled {
	var total Reconciled
	w.rmu.Lock()
	tenants := slices.Sorted(maps.Keys(w.named))
	w.rmu.Unlock()
	for _, t := range tenants {
		r, err := w.reconcileNamed(ctx, t)
		total.Written += r.Written
		total.Drifted += r.Drifted
		total.More = total.More || r.More
		if err != nil && !errors.Is(err, context.Canceled) {
			w.log.Warn("checking the reports of changed communities failed, retrying at the next pass", "tenant", t, "error", err)
		}
	}
	w.passes.WithLabelValues("changed").Inc()
	return total
}

// reconcileNamed is the narrow pass of one tenant.
func (w *Worker) reconcileNamed(ctx context.Context, tenant string) (Reconciled, error) {
	w.rmu.Lock()
	defer w.rmu.Unlock()
	var out Reconciled
	named := w.named[tenant]
	delete(w.named, tenant)
	if len(named) == 0 {
		return out, nil
	}
	// On failure the named communities wait for the next pass (none was
	// named since: rmu is held).
	keep := func() { w.named[tenant] = named }
	byID, err := w.st.CommunitiesByID(ctx, tenant, slices.Sorted(maps.Keys(named)))
	if err != nil {
		keep()
		return out, fmt.Errorf("reading %d changed communities: %w", len(named), err)
	}
	// A community no longer stored is gone with its run: removing its
	// report is the job of the run's event, or of the full pass.
	comms := slices.Collect(maps.Values(byID))
	store.SortCommunities(comms)
	ids := make([]string, len(comms))
	for i, c := range comms {
		ids[i] = ReportID(c.ID)
	}
	olds, err := w.st.ReportsByID(ctx, tenant, ids)
	if err != nil {
		keep()
		return out, fmt.Errorf("reading the reports of %d changed communities: %w", len(ids), err)
	}
	if olds == nil {
		olds = map[string]store.Report{}
	}
	cites := make(map[string][]provenance.SourceRef, len(olds))
	for id, r := range olds {
		cites[id] = store.CitationsOf(r)
	}
	jobs, err := w.check(ctx, tenant, comms, cites)
	if err != nil {
		keep()
		return out, err
	}
	out.Drifted = len(jobs)
	if len(jobs) > w.cfg.ReconcileBatch {
		w.name(tenant, jobs[w.cfg.ReconcileBatch:])
		jobs = jobs[:w.cfg.ReconcileBatch]
		out.More = true
		w.wakeReconcile()
	}
	return w.settle(ctx, tenant, out, jobs, nil, olds)
}

// drift lists the reports to write (sorted by level, then id, as comms
// are) and the reports to remove.
func (w *Worker) drift(ctx context.Context, tenant string, comms []store.Community, cites map[string][]provenance.SourceRef) ([]job, []string, error) {
	jobs, err := w.check(ctx, tenant, comms, cites)
	if err != nil {
		return nil, nil, err
	}
	alive := make(map[string]bool, len(comms))
	for _, c := range comms {
		alive[ReportID(c.ID)] = true
	}
	var orphans []string
	for id := range cites {
		if !alive[id] {
			orphans = append(orphans, id)
		}
	}
	slices.Sort(orphans)
	return jobs, orphans, nil
}

// check lists the reports of comms to write, in the order of comms: those
// missing from cites (the citations of the stored reports by report id)
// and those drifted from the registry. It reads the registry entries of
// the documents the communities and the reports in cites name.
func (w *Worker) check(ctx context.Context, tenant string, comms []store.Community, cites map[string][]provenance.SourceRef) ([]job, error) {
	var docs []string
	for _, refs := range cites {
		for _, s := range refs {
			docs = append(docs, s.DocID)
		}
	}
	for _, c := range comms {
		for _, s := range c.Sources {
			docs = append(docs, s.DocID)
		}
	}
	slices.Sort(docs)
	cur, err := w.st.Sources(ctx, tenant, slices.Compact(docs))
	if err != nil {
		return nil, fmt.Errorf("reading sources: %w", err)
	}
	current := func(s provenance.SourceRef) bool { return currentIn(cur, s) }
	var jobs []job
	for _, c := range comms {
		refs, ok := cites[ReportID(c.ID)]
		switch {
		case !ok:
			jobs = append(jobs, job{c, "missing"})
		case slices.ContainsFunc(refs, func(r provenance.SourceRef) bool { return !current(r) }), uncovered(c, refs, current):
			jobs = append(jobs, job{c, "sources_changed"})
		}
	}
	return jobs, nil
}

// currentIn reports whether the registry entries cur hold s's document,
// not deleted, at s's version.
func currentIn(cur map[string]provenance.SourceState, s provenance.SourceRef) bool {
	st, ok := cur[s.DocID]
	return ok && !st.Deleted && st.Version == s.Version
}

// uncovered reports whether the community rests on a current document
// version its report does not cite at all: an announcement that the
// community's sources changed was lost. A community grown by provisional
// membership since it was computed is left alone: its report is kept on
// purpose until the next re-clustering (see the clusterer). So is a
// community source that is no longer current: the re-clustering the change
// triggered replaces the community, and writing now would not cover it.
func uncovered(c store.Community, refs []provenance.SourceRef, current func(provenance.SourceRef) bool) bool {
	if store.MemberHash(c.Members) != c.MemberHash {
		return false
	}
	cited := make(map[string]bool, len(refs))
	for _, r := range refs {
		cited[r.DocID] = true
	}
	for _, s := range c.Sources {
		if !cited[s.DocID] && current(s) {
			return true
		}
	}
	return false
}

// reconcileLoop reconciles every tenant at start and every ReconcileEvery
// (full passes), and runs the narrow pass when woken by an event, until
// ctx is cancelled. A failed pass is logged and retried at the next one; a
// pass that stopped at its bound is followed by another.
func (w *Worker) reconcileLoop(ctx context.Context) error {
	tick := time.NewTicker(w.cfg.ReconcileEvery)
	defer tick.Stop()
	full := true
	for {
		if full {
			w.ReconcileAll(ctx)
		} else {
			w.ReconcileChanged(ctx)
		}
		ended := time.Now()
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			full = true
		case <-w.wake:
			full = false
			// Woken by an event: not before the gap has passed (see
			// Config.ReconcileGap); the events meanwhile share the pass.
			if wait := time.Until(ended.Add(w.cfg.ReconcileGap)); wait > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait):
				}
			}
		}
	}
}

// ReconcileAll reconciles every tenant with a graph until no pass stops at
// its bound, logging failures; it returns the reports written and removed.
func (w *Worker) ReconcileAll(ctx context.Context) Reconciled {
	var total Reconciled
	tenants, err := w.st.GraphTenants(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("reconciling reports: listing tenants", "error", err)
		}
		return total
	}
	for _, t := range tenants {
		// Bounded passes follow each other until each drifted report had
		// its turn.
		limit := 0
		for turns := 0; ctx.Err() == nil; turns += w.cfg.ReconcileBatch {
			r, err := w.Reconcile(ctx, t)
			if turns == 0 {
				limit = r.Drifted
			}
			total.Written += r.Written
			total.Removed += r.Removed
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					w.log.Warn("reconciling reports failed, retrying at the next pass", "tenant", t, "error", err)
				}
				break
			}
			if !r.More || turns+w.cfg.ReconcileBatch >= limit {
				break
			}
		}
	}
	w.passes.WithLabelValues("all").Inc()
	return total
}

// wakeReconcile asks the reconcile loop for a pass.
func (w *Worker) wakeReconcile() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}
