package resolver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
)

// WatchAliases re-resolves the applied documents whenever the alias table
// in force (Config.Aliases, reloaded by its own watcher) is replaced,
// checking every interval until ctx is done. A pass that fails is tried
// again at the next tick.
func (w *Worker) WatchAliases(ctx context.Context, interval time.Duration) error {
	if w.cfg.Aliases == nil {
		<-ctx.Done()
		return nil
	}
	seen := w.cfg.Aliases.Current()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cur := w.cfg.Aliases.Current()
		if cur == seen {
			continue
		}
		n, err := w.ReresolveAll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			w.log.Error("re-resolving after an alias change", "reresolved", n, "error", err)
			continue
		}
		seen = cur
		w.log.Info("alias table changed: documents re-resolved", "reresolved", n)
	}
}

// ReresolveAll resolves every applied document of every tenant again from
// its stored extraction with the alias table and catalog in force, and
// re-applies, with the next resolution number, those whose entities or
// edges change. It returns how many it re-applied.
func (w *Worker) ReresolveAll(ctx context.Context) (int, error) {
	tenants, err := w.graph.GraphTenants(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing tenants: %w", err)
	}
	total := 0
	var errs []error
	for _, tenant := range tenants {
		n, err := w.ReresolveTenant(ctx, tenant)
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("tenant %s: %w", tenant, err))
		}
	}
	return total, errors.Join(errs...)
}

// ReresolveTenant is ReresolveAll for one tenant.
func (w *Worker) ReresolveTenant(ctx context.Context, tenant string) (int, error) {
	docs, err := w.contributingDocs(ctx, tenant)
	if err != nil {
		return 0, err
	}
	return w.reresolve(ctx, tenant, docs, false, time.Now().UTC())
}

// handleReresolve serves a re-resolution request (kg.reresolve): every
// document it names is resolved again from its stored extraction, after
// reloading the alias table, and re-applied with the next resolution
// number, changed or not. A document that is deleted, moved on or has no
// stored extraction is skipped.
func (w *Worker) handleReresolve(ctx context.Context, m *stream.Message) error {
	ev, err := stream.DecodeTyped[events.Reresolve](m)
	if err != nil {
		return err
	}
	// A request must see the alias table that asked for it.
	if err := w.cfg.Aliases.Refresh(); err != nil {
		w.log.Error("alias table not reloaded for a re-resolution", "error", err)
	}
	n, err := w.reresolve(ctx, ev.Tenant, sortedUnique(ev.DocIDs), true, ev.RequestedAt)
	if err != nil {
		return fmt.Errorf("re-resolution %s: %w", ev.RequestID, err)
	}
	w.log.Info("re-resolution applied", "tenant", ev.Tenant, "request", ev.RequestID, "entity", ev.Entity,
		"documents", len(ev.DocIDs), "reapplied", n)
	return nil
}

// reresolve resolves docs of tenant again from their stored extractions
// and re-applies those whose entities or edges change (every one with
// force), a batch at a time; this is the one path of the alias watcher and
// of re-resolution requests. Each batch is read and applied under applyMu,
// so the resolution numbers it takes are the next ones. It returns how many
// documents it re-applied.
func (w *Worker) reresolve(ctx context.Context, tenant string, docs []string, force bool, at time.Time) (int, error) {
	n := 0
	for start := 0; start < len(docs); start += w.batchSize() {
		k, err := w.reresolveBatch(ctx, tenant, docs[start:min(start+w.batchSize(), len(docs))], force, at)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (w *Worker) reresolveBatch(ctx context.Context, tenant string, docs []string, force bool, at time.Time) (int, error) {
	w.applyMu.Lock()
	defer w.applyMu.Unlock()
	var chs []*change
	for _, doc := range docs {
		ch, err := w.reresolution(ctx, tenant, doc, force, at)
		if err != nil {
			return 0, err
		}
		if ch != nil {
			ch.i = len(chs)
			chs = append(chs, ch)
		}
	}
	errs := make([]error, len(chs))
	w.applyChanges(ctx, chs, errs)
	n := 0
	for _, ch := range chs {
		switch err := errs[ch.i]; {
		case err == nil:
			n++
		case errors.Is(err, stream.ErrStale):
			// The document moved on meanwhile: its new version was
			// resolved with the table in force.
		default:
			return n, err
		}
	}
	return n, nil
}

func (w *Worker) batchSize() int {
	if w.cfg.BatchSize > 0 {
		return w.cfg.BatchSize
	}
	return stream.DefaultBatchSize
}

// contributingDocs lists the documents contributing an entity of tenant,
// sorted.
func (w *Worker) contributingDocs(ctx context.Context, tenant string) ([]string, error) {
	ents, err := w.graph.EntitiesByType(ctx, tenant, "")
	if err != nil {
		return nil, fmt.Errorf("listing entities: %w", err)
	}
	var docs []string
	for _, e := range ents {
		for _, f := range e.Sources {
			docs = append(docs, f.DocID)
		}
	}
	return sortedUnique(docs), nil
}

// reresolution returns the change re-applying doc's stored extraction
// when resolving it now gives other entities or edges than applied (with
// force, always); nil when nothing changes or nothing is stored. The
// change keeps the stored extraction (and its extraction number); prepare
// numbers its resolution.
func (w *Worker) reresolution(ctx context.Context, tenant, doc string, force bool, at time.Time) (*change, error) {
	rec, err := w.source(ctx, tenant, doc)
	if err != nil || rec == nil {
		return nil, err
	}
	if rec.Deleted || len(rec.Raw) == 0 {
		return nil, nil
	}
	var ev events.Extracted
	if err := events.Decode(rec.Raw, &ev); err != nil {
		w.log.Error("stored extraction does not decode", "tenant", tenant, "doc", doc, "error", err)
		return nil, nil
	}
	if ev.Tenant != tenant || ev.Version != rec.Version {
		return nil, nil
	}
	if !force {
		c, err := w.resolve(ctx, &ev, true)
		if err != nil {
			return nil, err
		}
		ents := make([]string, 0, len(c.Entities))
		for _, e := range c.Entities {
			ents = append(ents, e.ID)
		}
		edges := make([]string, 0, len(c.Edges))
		for _, e := range c.Edges {
			edges = append(edges, e.ID())
		}
		if slices.Equal(ents, nonNil(rec.Entities)) && slices.Equal(edges, nonNil(rec.Edges)) {
			return nil, nil
		}
	}
	ev.ReceivedAt = at
	return &change{tenant: tenant, docID: doc, version: ev.Version, resolution: ev.Resolution, docType: ev.DocType,
		received: at, ev: &ev, raw: rec.Raw, reresolve: true}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
