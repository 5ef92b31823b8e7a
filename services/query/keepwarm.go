package query

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/kgstream/kgstream/pkg/provenance"
)

// keepWarmEvery is how long the documents applied are gathered before
// keepUnitsWarm reads them: one read per document, however many versions
// were applied meanwhile.
const keepWarmEvery = time.Second

// unitFeed gathers, per tenant, the documents kg.graph.changed events say
// were applied (not deleted), for keepUnitsWarm.
type unitFeed struct {
	mu   sync.Mutex
	docs map[string]map[string]bool
	kick chan struct{}
}

func newUnitFeed() *unitFeed {
	return &unitFeed{docs: map[string]map[string]bool{}, kick: make(chan struct{}, 1)}
}

func (f *unitFeed) add(tenant, doc string) {
	f.mu.Lock()
	ds := f.docs[tenant]
	if ds == nil {
		ds = map[string]bool{}
		f.docs[tenant] = ds
	}
	ds[doc] = true
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// take returns and forgets the documents gathered, sorted per tenant.
func (f *unitFeed) take() map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]string, len(f.docs))
	for t, ds := range f.docs {
		out[t] = slices.Sorted(maps.Keys(ds))
	}
	clear(f.docs)
	return out
}

// keepUnitsWarm keeps what the start-up warm-up read warm while documents
// are applied: the text units of the documents the feed gathers are read
// and indexed in the background, at most once per keepWarmEvery, instead
// of by the first question after them (after an import of 10,000
// documents, seconds of reading while its caller waits). Like the warm-up
// it reads content only: every request still admits what it takes. It
// starts once the warm-up is over and runs until ctx is done; a failed
// read is logged and left to the requests.
func (s *Service) keepUnitsWarm(ctx context.Context, feed *unitFeed) {
	select {
	case <-ctx.Done():
		return
	case <-s.warmed:
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-feed.kick:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(keepWarmEvery):
		}
		for tenant, ids := range feed.take() {
			if err := s.loadApplied(ctx, tenant, ids); err != nil && ctx.Err() == nil {
				s.log.Warn("keeping the text units of applied documents warm", "tenant", tenant, "documents", len(ids), "error", err)
			}
		}
	}
}

// loadApplied reads into the unit cache the documents ids of tenant at
// their registry version, those not cached at it already (loadLexDocs).
func (s *Service) loadApplied(ctx context.Context, tenant string, ids []string) error {
	states, err := s.st.Sources(ctx, tenant, ids)
	if err != nil {
		return err
	}
	live := make([]provenance.SourceState, 0, len(ids))
	liveIDs := make([]string, 0, len(ids))
	for _, id := range ids {
		if st, ok := states[id]; ok && !st.Deleted {
			live = append(live, st)
			liveIDs = append(liveIDs, id)
		}
	}
	if len(live) == 0 {
		return nil
	}
	t := s.units.tenant(tenant)
	t.loadMu.Lock()
	defer t.loadMu.Unlock()
	return s.loadLexDocs(ctx, tenant, t, live, t.lookup(liveIDs))
}
