package clusterer

// CrashOnStop makes Run stop as a crash does: without releasing the
// clustering lease.
func (w *Worker) CrashOnStop() { w.keepLeaseOnStop = true }
