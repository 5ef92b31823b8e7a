package query

import (
	"context"
	"fmt"
	"time"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// warm reads and indexes, for every tenant of the registry, what a
// tenant's first local question would otherwise read while its caller
// waits: every applied document's text units (the unit cache and its
// word index), the name index over every entity, the communities and
// reports, and the registry listing. At 100,000 documents that is tens of
// seconds of reading and indexing, once per start. Nothing of it is
// admitted: the unit cache and the name index hold content only, and
// every request still admits what it takes from them against the
// registry. A request arriving meanwhile waits for the load under way
// (loadMu, namesMu) and reads only what it left. Warmed is closed when it
// is over; a failure is logged and leaves the rest to the requests, as
// without warming.
func (s *Service) warm(ctx context.Context) {
	defer s.warmedOnce.Do(func() { close(s.warmed) })
	began := time.Now()
	tenants, err := s.st.Tenants(ctx)
	if err != nil {
		s.log.Warn("warming the query caches: listing tenants", "error", err)
		return
	}
	for _, tenant := range tenants {
		if err := s.warmTenant(ctx, tenant); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("warming the query caches", "tenant", tenant, "error", err)
		}
	}
	s.log.Info("query caches warmed", "tenants", len(tenants), "took", time.Since(began).Round(time.Millisecond))
}

// Warmed is closed once Run's start-up warm-up (Config.WarmOnStart) is
// over, failed or cancelled; at once when the service does not warm (no
// WarmOnStart or no Config.Events). The query process answers /readyz
// with 503 until then (service.Warmer).
func (s *Service) Warmed() <-chan struct{} { return s.warmed }

// warmTenant warms one tenant (see warm).
func (s *Service) warmTenant(ctx context.Context, tenant string) error {
	// The registry listing, taken after its generation as listRegistry
	// takes it: requests at that generation admit against it.
	var gen uint64
	g, withGen := s.st.(store.RegistryGenerations)
	if withGen {
		n, err := g.RegistryGeneration(ctx, tenant)
		if err != nil {
			return fmt.Errorf("reading the registry generation: %w", err)
		}
		gen = n
	}
	states, err := s.st.ListSources(ctx, tenant)
	if err != nil {
		return fmt.Errorf("listing sources: %w", err)
	}
	if withGen {
		s.regs.put(tenant, newRegView(gen, states))
	}
	live := make([]provenance.SourceState, 0, len(states))
	ids := make([]string, 0, len(states))
	var deleted []string
	for _, st := range states {
		if st.Deleted {
			deleted = append(deleted, st.DocID)
			continue
		}
		live = append(live, st)
		ids = append(ids, st.DocID)
	}
	t := s.units.tenant(tenant)
	t.drop(deleted)
	t.loadMu.Lock()
	err = s.loadLexDocs(ctx, tenant, t, live, t.lookup(ids))
	t.loadMu.Unlock()
	if err != nil {
		return err
	}
	if err := s.rewarmNames(ctx, tenant); err != nil {
		return err
	}
	_, err = s.derived(ctx, tenant)
	return err
}
