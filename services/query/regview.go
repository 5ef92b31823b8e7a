package query

import (
	"fmt"
	"strings"
	"sync"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// listThreshold is how many registry states one lookup may ask for before
// the request lists the whole registry instead (one listing, kept for the
// tenant, costs about what Sources of that many ids costs).
const listThreshold = 256

// regView is a copy of a tenant's registry as of generation gen: a listing
// taken after reading gen, or an older view with the states written since
// put in (view.updatedRegView), read after reading gen. Either way it
// holds every registry write up to gen, so it is exact for every request
// that reads gen again (store.RegistryGenerations). It is never modified
// once built.
type regView struct {
	gen    uint64
	states []provenance.SourceState // sorted by doc id, deleted ones included
	byID   map[string]int           // index into states

	// lower holds each state's id and title in lower case, made the
	// first time a request searches them (GET /v1/sources?q=).
	lowerOnce sync.Once
	lower     [][2]string

	mu sync.Mutex
	// readable holds, per caller key (view.callerKey), which states the
	// caller reads (bit i for states[i]), computed once from the
	// immutable states; at most maxReadableCallers.
	readable map[string][]uint64
}

// maxReadableCallers bounds the callers whose readable sets a view keeps;
// the callers after them are admitted one lookup at a time, as before.
const maxReadableCallers = 256

// readableBits returns which states caller (whose key is key) reads, one
// bit per state, computed the first time the caller asks at this
// generation; kept is false when the view keeps no more callers (the bits
// were computed for this call alone).
func (rv *regView) readableBits(key string, c provenance.Caller) (bits []uint64, kept bool) {
	rv.mu.Lock()
	bits, ok := rv.readable[key]
	rv.mu.Unlock()
	if ok {
		return bits, true
	}
	bits = make([]uint64, (len(rv.states)+63)/64)
	for i, st := range rv.states {
		if provenance.Readable(c, st) {
			bits[i/64] |= 1 << (i % 64)
		}
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if kept, ok := rv.readable[key]; ok {
		return kept, true
	}
	if len(rv.readable) >= maxReadableCallers {
		return bits, false
	}
	if rv.readable == nil {
		rv.readable = map[string][]uint64{}
	}
	rv.readable[key] = bits
	return bits, true
}

// readableFor returns Direct's answers for caller (whose key is key)
// against this view (readableBits). ok is false when the view keeps no
// more callers.
func (rv *regView) readableFor(key string, c provenance.Caller) (func(id string) bool, bool) {
	bits, kept := rv.readableBits(key, c)
	if !kept {
		return nil, false
	}
	return func(id string) bool {
		i, ok := rv.byID[id]
		return ok && hasBit(bits, i)
	}, true
}

// hasBit says whether bit i of bits is set.
func hasBit(bits []uint64, i int) bool { return bits[i/64]&(1<<(i%64)) != 0 }

func newRegView(gen uint64, states []provenance.SourceState) *regView {
	rv := &regView{gen: gen, states: states, byID: make(map[string]int, len(states))}
	for i, st := range states {
		rv.byID[st.DocID] = i
	}
	return rv
}

// regViews keeps the newest registry view of each tenant. A view is used
// by a request only when the generation the request read equals the
// view's: a revocation, deletion or edit raises the generation in the
// transaction that records it, so the next request brings the view up to
// date (or lists the registry again) and no request ever admits against a
// registry older than its start.
type regViews struct {
	mu sync.Mutex
	m  map[string]*regView
}

func (r *regViews) get(tenant string) *regView {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[tenant]
}

func (r *regViews) put(tenant string, rv *regView) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur := r.m[tenant]; cur != nil && cur.gen > rv.gen {
		return
	}
	if r.m == nil {
		r.m = map[string]*regView{}
	}
	r.m[tenant] = rv
}

// checkRegistry reads the tenant's registry generation once per request
// (the first time the request needs the registry) and takes the kept view
// when it is at that generation. Stores without a generation are read per
// request, as before. A failed read fails the request closed.
func (v *view) checkRegistry() error {
	if v.regChecked {
		return nil
	}
	g, ok := v.s.st.(store.RegistryGenerations)
	if !ok {
		v.regChecked = true
		return nil
	}
	n, err := g.RegistryGeneration(v.ctx, v.tenant)
	if err != nil {
		return fmt.Errorf("%w: reading the registry generation: %w", errAdmissionUnavailable, err)
	}
	v.regChecked, v.regGen, v.regGenOK = true, n, true
	if rv := v.s.regs.get(v.tenant); rv != nil && rv.gen == n {
		v.useRegView(rv)
	}
	return nil
}

// useRegView makes rv this request's registry snapshot: the admitter
// answers from it from now on.
func (v *view) useRegView(rv *regView) {
	v.reg = rv
	if readable, ok := rv.readableFor(v.callerKey(), v.adm.Caller()); ok {
		v.adm.UseSnapshotReadable(rv.state, readable)
		return
	}
	v.adm.UseSnapshot(rv.state)
}

// lowered returns the states' ids and titles in lower case, in the
// states' order.
func (rv *regView) lowered() [][2]string {
	rv.lowerOnce.Do(func() {
		rv.lower = make([][2]string, len(rv.states))
		for i, st := range rv.states {
			rv.lower[i] = [2]string{strings.ToLower(st.DocID), strings.ToLower(st.Title)}
		}
	})
	return rv.lower
}

// state is the registry state of id in the view.
func (rv *regView) state(id string) (provenance.SourceState, bool) {
	i, ok := rv.byID[id]
	if !ok {
		return provenance.SourceState{}, false
	}
	return rv.states[i], true
}

// listRegistry makes a listing of the whole registry this request's
// snapshot (kept for the tenant when the store has a generation, read
// before the listing).
func (v *view) listRegistry() error {
	if err := v.checkRegistry(); err != nil {
		return err
	}
	if v.reg != nil {
		return nil
	}
	if rv, err := v.updatedRegView(); err != nil || rv != nil {
		if err != nil {
			return err
		}
		v.useRegView(rv)
		v.s.regs.put(v.tenant, rv)
		return nil
	}
	states, err := v.s.st.ListSources(v.ctx, v.tenant)
	if err != nil {
		return fmt.Errorf("%w: listing sources: %w", errAdmissionUnavailable, err)
	}
	v.useRegView(newRegView(v.regGen, states))
	if v.regGenOK {
		v.s.regs.put(v.tenant, v.reg)
	}
	return nil
}

// updatedRegView returns the tenant's kept registry view brought up to the
// request's generation with the states written since its own
// (store.RegistryChanges), or nil when there is none to bring up to date
// or the registry cannot name what changed: the registry is listed then.
// Under live ingestion the generation moves with every announcement, and
// listing every document for each request cost what the tenant holds.
func (v *view) updatedRegView() (*regView, error) {
	rc, ok := v.s.st.(store.RegistryChanges)
	if !ok || !v.regGenOK {
		return nil, nil
	}
	old := v.s.regs.get(v.tenant)
	if old == nil || old.gen >= v.regGen {
		return nil, nil
	}
	changed, ok, err := rc.SourcesChangedSince(v.ctx, v.tenant, old.gen)
	if err != nil {
		return nil, fmt.Errorf("%w: reading registry changes: %w", errAdmissionUnavailable, err)
	}
	if !ok {
		return nil, nil
	}
	return old.with(v.regGen, changed), nil
}

// with returns a new view at gen: rv's states with changed (sorted by doc
// id) put in, replacing those of the same documents.
func (rv *regView) with(gen uint64, changed []provenance.SourceState) *regView {
	states := make([]provenance.SourceState, 0, len(rv.states)+len(changed))
	i := 0
	for _, st := range changed {
		for i < len(rv.states) && rv.states[i].DocID < st.DocID {
			states = append(states, rv.states[i])
			i++
		}
		if i < len(rv.states) && rv.states[i].DocID == st.DocID {
			i++
		}
		states = append(states, st)
	}
	states = append(states, rv.states[i:]...)
	return newRegView(gen, states)
}

// lookupSources is the request's Admitter lookup: from the request's
// registry view when it has one, else from the registry itself; ids many
// enough to list the registry for make the listing the admitter's
// snapshot, and nothing is returned. Only the admitter may call it with
// more than listThreshold ids.
func (v *view) lookupSources(ids []string) (map[string]provenance.SourceState, error) {
	if err := v.checkRegistry(); err != nil {
		return nil, err
	}
	if v.reg == nil && len(ids) > listThreshold {
		if err := v.listRegistry(); err != nil {
			return nil, err
		}
		// The listing is the admitter's snapshot now (useRegView): it
		// answers the ids itself, without a copy of thousands of states
		// (provenance.Lookup).
		return nil, nil
	}
	out := make(map[string]provenance.SourceState, len(ids))
	if v.reg != nil {
		for _, id := range ids {
			if i, ok := v.reg.byID[id]; ok {
				out[id] = v.reg.states[i]
			}
		}
		return out, nil
	}
	m, err := v.s.st.Sources(v.ctx, v.tenant, ids)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errAdmissionUnavailable, err)
	}
	return m, nil
}
