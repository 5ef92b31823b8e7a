package query

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/stream"
)

// keepWarmEvery is how long changes are gathered before keepWarm follows
// them: one read per document, however many versions were applied
// meanwhile, and one reload of a tenant's reports however many runs
// rewrote them.
const keepWarmEvery = time.Second

// keepNamesWarmFor is how long after a request last used a tenant's name
// index keepWarm keeps it patched. Patching follows every entity the
// changes touch (a hub named by every document is read whole each
// time): worth it while questions come, not during an import nobody
// asks about (at 300 documents/s, 4% of the process's CPU).
const keepNamesWarmFor = time.Minute

// namesQuietAfter is how long a tenant whose name index was left as it
// was (no question lately) must go without changes before keepWarm
// patches it once: the first question after an import does not patch it
// for the whole import, and an import does not pay for a patch a second.
const namesQuietAfter = 5 * time.Second

// warmFeed gathers, per tenant, what the events keepWarm follows say:
// the documents kg.graph.changed says were applied (not deleted), and
// that the tenant's graph, communities or reports changed at all.
type warmFeed struct {
	mu   sync.Mutex
	docs map[string]map[string]bool
	kick chan struct{}
}

func newWarmFeed() *warmFeed {
	return &warmFeed{docs: map[string]map[string]bool{}, kick: make(chan struct{}, 1)}
}

// add records that doc was applied in tenant ("" : only that the tenant
// changed).
func (f *warmFeed) add(tenant, doc string) {
	f.mu.Lock()
	ds := f.docs[tenant]
	if ds == nil {
		ds = map[string]bool{}
		f.docs[tenant] = ds
	}
	if doc != "" {
		ds[doc] = true
	}
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// take returns and forgets what was gathered: every tenant that changed,
// with the documents applied, sorted (maybe none).
func (f *warmFeed) take() map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]string, len(f.docs))
	for t, ds := range f.docs {
		out[t] = slices.Sorted(maps.Keys(ds))
	}
	clear(f.docs)
	return out
}

// keepWarm keeps what the start-up warm-up read warm while the tenant
// changes, instead of leaving it to the first question after a change
// (after an import of 10,000 documents, seconds of reading while its
// caller waits; after every re-clustering, a reload of every community
// and report): at most once per keepWarmEvery, for each tenant that
// changed, the text units of the documents applied are read and indexed,
// the communities and reports are read again when an event dropped them,
// and, while requests use it (keepNamesWarmFor), the name index takes the
// entities changed; when none do, it takes them once the tenant has been
// quiet for namesQuietAfter. Like the warm-up it
// reads content only: every request still admits what it takes. With
// Config.GiveWay, each round first waits while the extractor and the
// resolver have a backlog (within the bound), so an import does not share
// its cores with reads for questions nobody asked yet. It starts
// once the warm-up is over and runs until ctx is done; a failed read is
// logged and left to the requests.
func (s *Service) keepWarm(ctx context.Context, feed *warmFeed, bus *stream.Bus) {
	select {
	case <-ctx.Done():
		return
	case <-s.warmed:
	}
	// The tenants whose name index was left as it was, by when they last
	// changed: patched once they have been quiet for namesQuietAfter.
	owed := map[string]time.Time{}
	var quiet <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-quiet:
			s.giveWay(ctx, bus)
			for tenant, at := range owed {
				if time.Since(at) < namesQuietAfter {
					continue
				}
				delete(owed, tenant)
				if err := s.rewarmNames(ctx, tenant); err != nil && ctx.Err() == nil {
					s.log.Warn("keeping the query caches warm", "tenant", tenant, "error", err)
				}
			}
		case <-feed.kick:
			select {
			case <-ctx.Done():
				return
			case <-time.After(keepWarmEvery):
			}
			s.giveWay(ctx, bus)
			for tenant, ids := range feed.take() {
				names, err := s.rewarm(ctx, tenant, ids)
				if err != nil && ctx.Err() == nil {
					s.log.Warn("keeping the query caches warm", "tenant", tenant, "documents", len(ids), "error", err)
				}
				if names {
					delete(owed, tenant)
				} else {
					owed[tenant] = time.Now()
				}
			}
		}
		quiet = nil
		if len(owed) > 0 {
			// Armed for the tenant quiet the longest: events of another
			// tenant do not put its patch off.
			quiet = time.After(untilQuiet(owed, time.Now()))
		}
	}
}

// giveWay waits while the stages Config.GiveWay names have a backlog,
// within its bound (nothing without one).
func (s *Service) giveWay(ctx context.Context, bus *stream.Bus) {
	bus.Yielder("query", s.cfg.GiveWay).GiveWay(ctx)
}

// untilQuiet is how long after now the first of the owed tenants (by when
// they last changed) will have been quiet for namesQuietAfter (0: one
// has already).
func untilQuiet(owed map[string]time.Time, now time.Time) time.Duration {
	var first time.Time
	for _, at := range owed {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return max(first.Add(namesQuietAfter).Sub(now), 0)
}

// rewarm reads again what changes dropped from tenant's caches: the
// documents ids applied, the communities and reports, and the name index
// when a request used it lately (names; each a cached read, nothing when
// it is current).
func (s *Service) rewarm(ctx context.Context, tenant string, ids []string) (names bool, err error) {
	if len(ids) > 0 {
		if err := s.loadApplied(ctx, tenant, ids); err != nil {
			return false, err
		}
	}
	if _, err := s.derived(ctx, tenant); err != nil {
		return false, err
	}
	if at, ok := s.namesAsked.Load(tenant); !ok || time.Since(at.(time.Time)) > keepNamesWarmFor {
		return false, nil
	}
	return true, s.rewarmNames(ctx, tenant)
}

// rewarmNames brings tenant's name index up to date, and records when
// (recentNames).
func (s *Service) rewarmNames(ctx context.Context, tenant string) error {
	gs, err := s.graphSet(ctx, tenant)
	if err != nil {
		return err
	}
	if _, err = s.nameIndexOf(ctx, tenant, gs); err != nil {
		return err
	}
	s.namesKept.Store(tenant, time.Now())
	return nil
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
