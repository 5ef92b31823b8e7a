package status

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// maxCachedCallers bounds the callers whose counts a countCache keeps.
const maxCachedCallers = 1024

// countCache keeps what CollectFor computed for callers who are no admin
// and may not read every document: counting what such a caller may read
// reads the contribution index of every readable document (seconds at
// 100,000 documents), and a dashboard asks again every few seconds.
//
// An entry is served again only while the tenant's registry generation and
// graph generation (store.RegistryGenerations, store.GraphGenerations)
// read what they read before it was computed: any registry write (an
// announcement, an ACL change, a deletion) or applied change of the
// tenant since makes it computed afresh, so a revocation changes the
// counts at once. Callers asking at the same generations while the counts
// are computed share the computation. Without both generations (a store
// counting neither) nothing is kept.
type countCache struct {
	mu      sync.Mutex
	entries map[string]countEntry
	flight  singleflight.Group
}

// generations are what an entry was computed at: the tenant's registry
// and graph generations, and how many changes of its documents the
// index cache had been told of (indexCache.generation): counts computed
// with an index an apply had replaced before its event came are not
// served once the event has come.
type generations struct{ registry, graph, docs uint64 }

type countEntry struct {
	at  generations
	rep Report
}

// generationsOf reads the tenant's generations; ok is false when the store
// counts neither or one cannot be read.
func generationsOf(ctx context.Context, st Stores, tenant string) (generations, bool) {
	reg, ok := st.(store.RegistryGenerations)
	graph, ok2 := st.(store.GraphGenerations)
	if !ok || !ok2 {
		return generations{}, false
	}
	r, err := reg.RegistryGeneration(ctx, tenant)
	if err != nil {
		return generations{}, false
	}
	g, err := graph.GraphGeneration(ctx, tenant)
	if err != nil {
		return generations{}, false
	}
	return generations{registry: r, graph: g}, true
}

// collect returns caller's counts, kept or computed now (and kept); ok is
// false when they cannot be kept (see countCache), and the caller computes
// them itself.
func (cc *countCache) collect(ctx context.Context, c *Collector, caller provenance.Caller) (Report, bool) {
	// Read before the counts are computed: what is kept at these
	// generations is never older than they are.
	at, ok := generationsOf(ctx, c.st, caller.Tenant)
	if !ok {
		return Report{}, false
	}
	at.docs = c.indexes.generation(caller.Tenant)
	key := caller.ReadKey()
	cc.mu.Lock()
	e, found := cc.entries[key]
	cc.mu.Unlock()
	if found && e.at == at {
		return e.rep.clone(), true
	}
	// Not cancelled with the first caller's context: the others share it.
	ch := cc.flight.DoChan(fmt.Sprintf("%s\x00%d\x00%d\x00%d", key, at.registry, at.graph, at.docs), func() (any, error) {
		r, err := c.collectFor(context.WithoutCancel(ctx), caller, false)
		if err == nil {
			cc.put(key, countEntry{at: at, rep: r})
		}
		return r, err
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return Report{}, false // computed again by the caller, which reports the error
		}
		return res.Val.(Report).clone(), true
	case <-ctx.Done():
		return Report{}, false
	}
}

// put keeps e unless what is kept for key was computed at later
// generations; when full, it drops an entry first.
func (cc *countCache) put(key string, e countEntry) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if old, ok := cc.entries[key]; ok && (old.at.registry > e.at.registry || old.at.graph > e.at.graph || old.at.docs > e.at.docs) {
		return
	}
	if cc.entries == nil {
		cc.entries = map[string]countEntry{}
	}
	if _, ok := cc.entries[key]; !ok && len(cc.entries) >= maxCachedCallers {
		for k := range cc.entries {
			delete(cc.entries, k)
			break
		}
	}
	cc.entries[key] = e
}

// clone copies what a caller of CollectFor could change in a kept report.
func (r Report) clone() Report {
	if r.AuditFigures != nil {
		a := *r.AuditFigures
		a.Problems = slices.Clone(a.Problems)
		r.AuditFigures = &a
	}
	return r
}
