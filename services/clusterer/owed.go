package clusterer

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kgstream/kgstream/pkg/events"
)

// Owed announcements.
//
// A run's announcement is recorded in the KV bucket "<stream>_owed" (key:
// the tenant) before the run's communities are stored, and deleted once the
// announcement is published. A clusterer that dies in between leaves the
// record behind; the next one republishes it at start (under the run's
// message id, so a publish that did land is not announced twice) and then
// deletes it. A record whose run was never stored is folded into the next
// run's announcement instead, as an announcement that failed in this
// process is.

// owedBucket returns the bucket of owed announcements, creating it on first
// use. The caller holds commMu.
func (w *Worker) owedBucket(ctx context.Context) (jetstream.KeyValue, error) {
	if w.owedKV != nil {
		return w.owedKV, nil
	}
	name := w.bus.StreamName() + "_owed"
	kv, err := w.bus.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name,
		Description: "community announcements stored but not yet published, by tenant", History: 1})
	if err != nil {
		return nil, fmt.Errorf("opening bucket %s: %w", name, err)
	}
	w.owedKV = kv
	return kv, nil
}

// recordOwed stores ev as the tenant's owed announcement. The caller holds
// commMu.
func (w *Worker) recordOwed(ctx context.Context, ev *events.CommunitiesChanged) error {
	kv, err := w.owedBucket(ctx)
	if err != nil {
		return err
	}
	data, err := events.Encode(ev)
	if err != nil {
		return fmt.Errorf("encoding the announcement of run %d: %w", ev.Run, err)
	}
	if _, err := kv.Put(ctx, ev.Tenant, data); err != nil {
		return fmt.Errorf("recording the announcement of run %d: %w", ev.Run, err)
	}
	return nil
}

// clearOwed deletes the tenant's owed announcement. The caller holds commMu.
func (w *Worker) clearOwed(ctx context.Context, tenant string) error {
	kv, err := w.owedBucket(ctx)
	if err != nil {
		return err
	}
	if err := kv.Delete(ctx, tenant); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("clearing the owed announcement of %s: %w", tenant, err)
	}
	return nil
}

// PublishOwed republishes every owed announcement left by an earlier
// process whose run is stored, and clears it once published. An
// announcement whose run was never stored, or whose publish fails again,
// is kept in memory and folded into the tenant's next run. It returns the
// number republished. Run calls it at start.
func (w *Worker) PublishOwed(ctx context.Context) (int, error) {
	w.commMu.Lock()
	defer w.commMu.Unlock()
	kv, err := w.owedBucket(ctx)
	if err != nil {
		return 0, err
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("listing owed announcements: %w", err)
	}
	n := 0
	var errs []error
	for _, tenant := range keys {
		e, err := kv.Get(ctx, tenant)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the owed announcement of %s: %w", tenant, err))
			continue
		}
		var ev events.CommunitiesChanged
		if err := events.Decode(e.Value(), &ev); err != nil || ev.Tenant != tenant {
			// Not ours to keep: the reporter's reconciliation covers it.
			w.log.Warn("dropping an unreadable owed announcement", "tenant", tenant, "error", err)
			errs = append(errs, w.clearOwed(ctx, tenant))
			continue
		}
		last, err := w.st.LastRun(ctx, tenant)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading last run of %s: %w", tenant, err))
			continue
		}
		// What this process owes is recorded too (before its run was
		// stored), so the record is the whole debt.
		w.owed[tenant] = &ev
		if ev.Run > last {
			continue // never stored: the next run announces what still holds
		}
		if _, err := w.bus.Publish(ctx, events.KindCommunitiesChanged, tenant,
			events.CommunitiesID(tenant, ev.Run), &ev); err != nil {
			w.log.Warn("republishing an owed announcement failed, the next run carries it", "tenant", tenant, "run", ev.Run, "error", err)
			continue
		}
		delete(w.owed, tenant)
		if err := w.clearOwed(ctx, tenant); err != nil {
			errs = append(errs, err)
			continue
		}
		w.log.Info("republished an owed announcement", "tenant", tenant, "run", ev.Run,
			"changed", len(ev.Changed), "refreshed", len(ev.Refreshed), "removed", len(ev.Removed))
		n++
	}
	return n, errors.Join(errs...)
}
