package resolver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
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
	var chs []*change
	for _, doc := range docs {
		ch, err := w.reresolution(ctx, tenant, doc)
		if err != nil {
			return 0, err
		}
		if ch != nil {
			ch.i = len(chs)
			chs = append(chs, ch)
		}
	}
	n := 0
	for start := 0; start < len(chs); start += w.batchSize() {
		batch := chs[start:min(start+w.batchSize(), len(chs))]
		errs := make([]error, len(chs))
		w.applyChanges(ctx, batch, errs)
		for _, ch := range batch {
			switch err := errs[ch.i]; {
			case err == nil:
				n++
			case errors.Is(err, stream.ErrStale):
				// The document moved on meanwhile: its new version was
				// resolved with the new table.
			default:
				return n, err
			}
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

// reresolution returns the change re-applying doc's stored extraction with
// the next resolution when resolving it now gives other entities or edges
// than applied; nil when nothing changes (or nothing is stored).
func (w *Worker) reresolution(ctx context.Context, tenant, doc string) (*change, error) {
	rec, err := w.graph.Source(ctx, tenant, doc)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading source %s: %w", doc, err)
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
	ev.Resolution, ev.ReceivedAt = rec.Resolution+1, time.Now().UTC()
	raw, err := events.Encode(&ev)
	if err != nil {
		return nil, err
	}
	return &change{tenant: tenant, docID: doc, version: ev.Version, resolution: ev.Resolution, docType: ev.DocType,
		received: ev.ReceivedAt, ev: &ev, raw: raw, current: true}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
