package clusterer

import "context"

// CrashOnStop makes Run stop as a crash does: without releasing the
// clustering lease.
func (w *Worker) CrashOnStop() { w.keepLeaseOnStop = true }

// ReclusterPatched re-clusters tenant as Run's own runs do: an incremental
// run patches the graph the last run read with what the graph changes
// handled since name.
func (w *Worker) ReclusterPatched(ctx context.Context, tenant string) error {
	return w.recluster(ctx, tenant, false, true)
}
