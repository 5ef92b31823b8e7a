package storetest

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
)

// ModelOps is how many random operations the model test runs against each
// adapter (issue 4 asks for 10,000).
const ModelOps = 10_000

// ModelSeedEnv names the environment variable that overrides the model
// test's seed, to replay a failure: a failing run logs the seed it used.
const ModelSeedEnv = "KG_STORETEST_SEED"

const (
	modelDefaultSeed = 4
	// modelBatch is how many operations run between two full comparisons
	// of the store with the model.
	modelBatch = 100
	// modelDocs is the size of the main tenant's document pool; the
	// second tenant reuses the first modelOtherDocs ids, so a tenant
	// leaking into another shows up as a difference.
	modelDocs      = 50
	modelOtherDocs = 10
	// modelLegacyType is the type a contribution sometimes gives an
	// entity instead of its id's prefix: refused while another live
	// document holds the entity, a type change when none does.
	modelLegacyType = "legacy"
)

// vocabEntity is one entity of the model's shared vocabulary with the
// spellings documents use for it.
type vocabEntity struct {
	id    string
	names []string
}

// modelVocabulary is small on purpose: ~50 documents citing 2 to 7 of 26
// entities each merge on nearly every entity and share many edges.
func modelVocabulary() []vocabEntity {
	return []vocabEntity{
		{"service:api", []string{"API", "api", "Api", "the API"}},
		{"service:api-gw", []string{"API gateway", "api-gw", "APIGW"}},
		{"service:db", []string{"DB", "database", "the db"}},
		{"service:cache", []string{"cache", "Redis cache"}},
		{"service:queue", []string{"queue", "MQ"}},
		{"service:auth", []string{"auth", "Auth service", "authn"}},
		{"service:search", []string{"search"}},
		{"service:billing", []string{"billing", "Billing"}},
		{"service:café", []string{"Café", "cafe", "CAFÉ"}},
		{"team:sre", []string{"SRE", "sre team", "Site Reliability"}},
		{"team:payments", []string{"payments", "Payments team"}},
		{"team:platform", []string{"platform"}},
		{"team:東京", []string{"東京チーム", "Tokyo team"}},
		{"incident:inc-1", []string{"INC-1", "inc 1"}},
		{"incident:inc-2", []string{"INC-2"}},
		{"incident:inc-3", []string{"INC-3", "incident three"}},
		{"incident:inc-4", []string{"INC-4"}},
		{"incident:inc-5", []string{"INC-5"}},
		{"incident:inc-6", []string{"INC-6"}},
		{"failure:oom", []string{"OOM", "out of memory", "OOMKilled"}},
		{"failure:timeout", []string{"timeout", "timeouts"}},
		{"failure:cert-expiry", []string{"cert expiry", "expired certificate", "cert-manager renewal failure"}},
		{"failure:disk-full", []string{"disk full"}},
		{"tool:cert-manager", []string{"cert-manager", "certmanager", "Cert Manager"}},
		{"tool:k8s", []string{"Kubernetes", "k8s", "kube"}},
		{"tool:🚀", []string{"🚀 deployer"}},
	}
}

var modelRelations = [...]string{"depends_on", "owned_by", "caused_by", "affects", "uses"}

// modelACL is an ACL as a caller passes it and as the registry must store
// it (normalized: sorted, trimmed, deduplicated, empty lists nil).
type modelACL struct{ in, want provenance.ACL }

func modelACLs() []modelACL {
	return []modelACL{
		{provenance.PublicACL(), provenance.PublicACL()},
		{provenance.ACL{Groups: []string{"sre"}}, provenance.ACL{Groups: []string{"sre"}}},
		{provenance.ACL{Groups: []string{"sre", " ops", "sre"}}, provenance.ACL{Groups: []string{"ops", "sre"}}},
		{provenance.ACL{Principals: []string{"bob", "alice"}}, provenance.ACL{Principals: []string{"alice", "bob"}}},
		{provenance.ACL{Groups: []string{"payments"}, Principals: []string{"carol"}}, provenance.ACL{Groups: []string{"payments"}, Principals: []string{"carol"}}},
		{provenance.ACL{Groups: []string{}, Principals: []string{" "}}, provenance.ACL{}}, // readable by nobody
	}
}

// delivery is a graph change the gateway announced but the pipeline has not
// delivered yet: delivering it later is the out-of-order case.
type delivery struct {
	version int64
	delete  bool
	c       store.Contributions
}

// modelDoc is the model of one document: what the graph store applied (a
// version and its contributions, or a tombstone) and what the registry holds.
type modelDoc struct {
	id      string
	applied int64 // 0: the graph store has no record
	deleted bool
	contrib store.Contributions // of the applied version, when live
	reg     *provenance.SourceState
	pending []delivery
	topic   []int // vocabulary indexes this document mostly talks about
}

// tenantModel is the trivially correct model of one tenant: documents and
// the graph they imply, recomputed from scratch after every change.
type tenantModel struct {
	tenant string
	docs   []*modelDoc // sorted by id
	byID   map[string]*modelDoc
	graph  store.Graph
}

// build returns the graph the live documents imply: the union of their
// contributions, merged per document into one fragment per entity and edge.
// Display names depend on the fragments only.
func (m *tenantModel) build() store.Graph {
	ents := map[string]*store.Entity{}
	edges := map[string]*store.Edge{}
	for _, d := range m.docs { // sorted by id, so fragments are too
		if d.applied == 0 || d.deleted {
			continue
		}
		frags := map[string]*store.Fragment{}
		for _, c := range d.contrib.Entities {
			f, ok := frags[c.ID]
			if !ok {
				f = &store.Fragment{DocID: d.id, Version: d.applied, Name: c.Name, NameRank: c.NameRank}
				frags[c.ID] = f
				if ents[c.ID] == nil {
					ents[c.ID] = &store.Entity{ID: c.ID, Type: c.Type}
				}
			} else if c.NameRank < f.NameRank {
				f.Name, f.NameRank = c.Name, c.NameRank
			}
			if f.Description == "" {
				f.Description = c.Description
			}
			f.TextUnits = append(f.TextUnits, c.TextUnits...)
		}
		for id, f := range frags {
			f.TextUnits = sortedSet(f.TextUnits)
			ents[id].Sources = append(ents[id].Sources, *f)
		}
		supports := map[string]*store.Fragment{}
		for _, c := range d.contrib.Edges {
			id := c.Source + "|" + c.Relation + "|" + c.Target
			f, ok := supports[id]
			if !ok {
				f = &store.Fragment{DocID: d.id, Version: d.applied, Weight: c.Weight}
				supports[id] = f
				if edges[id] == nil {
					edges[id] = &store.Edge{ID: id, Source: c.Source, Relation: c.Relation, Target: c.Target}
				}
			}
			f.Weight = max(f.Weight, c.Weight)
			if f.Description == "" {
				f.Description = c.Description
			}
			f.TextUnits = append(f.TextUnits, c.TextUnits...)
		}
		for id, f := range supports {
			f.TextUnits = sortedSet(f.TextUnits)
			edges[id].Supports = append(edges[id].Supports, *f)
		}
	}
	var g store.Graph
	for _, id := range slices.Sorted(maps.Keys(ents)) {
		e := ents[id]
		// Among the lowest rank, the spelling most documents use; on a tie,
		// the lowest doc id's spelling (sources are sorted by doc id).
		best := e.Sources[0].NameRank
		for _, f := range e.Sources {
			best = min(best, f.NameRank)
		}
		count := map[string]int{}
		for _, f := range e.Sources {
			if f.NameRank == best {
				count[f.Name]++
			}
		}
		picked := false
		for _, f := range e.Sources {
			if f.NameRank == best && (!picked || count[f.Name] > count[e.Name]) {
				e.Name, picked = f.Name, true
			}
		}
		g.Entities = append(g.Entities, *e)
	}
	for _, id := range slices.Sorted(maps.Keys(edges)) {
		g.Edges = append(g.Edges, *edges[id])
	}
	return g
}

// change carries out a graph Apply (or Delete) on the model and returns the
// result the store must give; invalid means the store must refuse it with
// store.ErrInvalid and change nothing.
func (m *tenantModel) change(d *modelDoc, version int64, del bool, c store.Contributions) (want store.ApplyResult, invalid bool) {
	var outcome store.Outcome
	switch {
	case d.applied == 0:
		outcome = store.Applied
	case version < d.applied:
		outcome = store.Stale
	case version > d.applied:
		outcome = store.Applied
	case d.deleted && del:
		outcome = store.Duplicate
	case d.deleted:
		outcome = store.Stale // content at the version of its own deletion
	case del:
		outcome = store.Applied // a deletion wins the tie
	default:
		outcome = store.Duplicate
	}
	want = store.ApplyResult{Outcome: outcome, Previous: d.applied}
	if outcome != store.Applied {
		return want, false
	}
	if !del {
		// An entity's type is fixed while another document supports it.
		for _, e := range c.Entities {
			for _, o := range m.docs {
				if o == d || o.applied == 0 || o.deleted {
					continue
				}
				for _, oe := range o.contrib.Entities {
					if oe.ID == e.ID && oe.Type != e.Type {
						return store.ApplyResult{}, true
					}
				}
			}
		}
	}
	d.applied, d.deleted, d.contrib = version, del, store.Contributions{}
	if !del {
		d.contrib = c
	}
	next := m.build()

	touched := map[string]bool{}
	before, after := entityMap(m.graph), entityMap(next)
	for id, o := range before {
		if n, ok := after[id]; !ok || n.Type != o.Type {
			want.EntitiesRemoved++
			touched[id] = true
		}
	}
	for id, n := range after {
		if o, ok := before[id]; !ok || n.Type != o.Type {
			want.EntitiesAdded++
			touched[id] = true
		}
	}
	beforeE, afterE := edgeMap(m.graph), edgeMap(next)
	for id, e := range beforeE {
		if _, ok := afterE[id]; !ok {
			want.EdgesRemoved++
			touched[e.Source], touched[e.Target] = true, true
		}
	}
	for id, e := range afterE {
		if _, ok := beforeE[id]; !ok {
			want.EdgesAdded++
			touched[e.Source], touched[e.Target] = true, true
		}
	}
	if len(touched) > 0 {
		want.Touched = slices.Sorted(maps.Keys(touched))
	}
	m.graph = next
	return want, false
}

// announce carries out Registry.Announce on the model: the state to expect,
// or store.ErrStaleVersion.
func (m *tenantModel) announce(d *modelDoc, a store.Announcement, acl provenance.ACL) (provenance.SourceState, error) {
	next := provenance.SourceState{Tenant: m.tenant, DocID: d.id, Version: a.Version, ACL: acl,
		Source: a.Source, Title: a.Title, UpdatedAt: a.UpdatedAt}
	cur := d.reg
	switch {
	case cur == nil && next.Version == 0:
		next.Version = 1
	case cur == nil:
	case next.Version == 0:
		next.Version = cur.Version + 1
	case next.Version < cur.Version || cur.Deleted && next.Version == cur.Version:
		return provenance.SourceState{}, store.ErrStaleVersion
	}
	if cur != nil {
		next.ACLRevision = cur.ACLRevision
		if !reflect.DeepEqual(cur.ACL, acl) {
			next.ACLRevision++
		}
	}
	d.reg = &next
	return next, nil
}

func (m *tenantModel) liveSources() int {
	n := 0
	for _, d := range m.docs {
		if d.applied > 0 && !d.deleted {
			n++
		}
	}
	return n
}

// modelRun is one run of the model test: the store, the models of both
// tenants and the random source.
type modelRun struct {
	t       *testing.T
	s       store.Stores
	r       *rand.Rand // the operations
	checkR  *rand.Rand // what check samples, so batching leaves the operations alone
	vocab   []vocabEntity
	acls    []modelACL
	tenants []*tenantModel
	op      int
	log     []string // the last operations, shown on failure
	counts  map[string]int
	// batch, while not nil, gathers the graph changes of a batch
	// operation instead of applying them (see applyBatch).
	batch []batchedChange
}

// batchedChange is a change a batch operation gathered, with what the
// model says it gives.
type batchedChange struct {
	ch      store.Change
	want    store.ApplyResult
	invalid bool
	what    string
}

func newTenantModel(tenant string, n int, r *rand.Rand, vocab int) *tenantModel {
	m := &tenantModel{tenant: tenant, byID: map[string]*modelDoc{}}
	for i := range n {
		d := &modelDoc{id: fmt.Sprintf("doc-%02d", i)}
		for range 3 + r.IntN(5) {
			d.topic = append(d.topic, r.IntN(vocab))
		}
		m.docs = append(m.docs, d)
		m.byID[d.id] = d
	}
	return m
}

// testModel runs ModelOps random operations (create, edit, delete, ACL
// change, duplicate, out-of-order delivery, stale version, re-create after
// delete, refused type change) against the store and a trivially correct
// model, and compares the two after every batch.
func testModel(t *testing.T, s store.Stores) {
	seed := uint64(modelDefaultSeed)
	if v := os.Getenv(ModelSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "parsing %s", ModelSeedEnv)
		seed = n
	}
	r := rand.New(rand.NewPCG(seed, 0x6b67737472656d))
	run := &modelRun{t: t, s: s, r: r, checkR: rand.New(rand.NewPCG(seed, 1)), vocab: modelVocabulary(), acls: modelACLs(), counts: map[string]int{}}
	run.tenants = []*tenantModel{
		newTenantModel(tenant, modelDocs, r, len(run.vocab)),
		newTenantModel(other, modelOtherDocs, r, len(run.vocab)),
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("model test failed at operation %d with seed %d (replay: %s=%d); last operations:\n  %s",
				run.op, seed, ModelSeedEnv, seed, strings.Join(run.log, "\n  "))
		}
	})
	start := time.Now()
	for run.op = 1; run.op <= ModelOps; run.op++ {
		run.step()
		if run.op%modelBatch == 0 {
			for _, m := range run.tenants {
				run.check(m)
				if run.op%(50*modelBatch) == 0 {
					requireAccessPaths(t, s, m.tenant)
				}
			}
		}
	}
	t.Logf("model test: %d operations, seed %d, %v; %v", ModelOps, seed, time.Since(start).Round(time.Millisecond), run.counts)
	for _, m := range run.tenants {
		require.NotEmpty(t, m.graph.Edges, "the run should end with a non-trivial graph in %q", m.tenant)
	}
}

func (run *modelRun) logf(format string, args ...any) {
	const keep = 25
	if len(run.log) == keep {
		run.log = run.log[1:]
	}
	run.log = append(run.log, fmt.Sprintf("#%d ", run.op)+fmt.Sprintf(format, args...))
}

// step runs one random operation.
func (run *modelRun) step() {
	r := run.r
	m := run.tenants[0]
	if r.IntN(100) < 15 {
		m = run.tenants[1]
	}
	d := m.docs[r.IntN(len(m.docs))]
	switch p := r.IntN(100); {
	case p < 10:
		run.applyBatch(m)
	case p < 30:
		run.edit(m, d, "edit")
	case p < 38:
		// Re-create: prefer a deleted document.
		var deleted []*modelDoc
		for _, c := range m.docs {
			if c.reg != nil && c.reg.Deleted {
				deleted = append(deleted, c)
			}
		}
		if len(deleted) > 0 {
			d = deleted[r.IntN(len(deleted))]
		}
		run.edit(m, d, "recreate")
	case p < 46:
		run.delete(m, d)
	case p < 56:
		run.setACL(m, d)
	case p < 68:
		run.deliver(m)
	case p < 80:
		run.duplicate(m, d)
	case p < 90:
		run.stale(m, d)
	default:
		run.reannounce(m, d)
	}
}

// applyBatch runs 2 to 12 random graph changes of one tenant (edits,
// deletions, out-of-order deliveries, duplicates, stale versions; one
// document possibly several times) as one ApplyBatch, and checks each
// change's result and error against the model's, which applies them one
// after the other.
func (run *modelRun) applyBatch(m *tenantModel) {
	r := run.r
	run.batch = []batchedChange{}
	for range 2 + r.IntN(11) {
		d := m.docs[r.IntN(len(m.docs))]
		switch p := r.IntN(100); {
		case p < 45:
			run.edit(m, d, "edit")
		case p < 55:
			run.delete(m, d)
		case p < 70:
			run.deliver(m)
		case p < 85:
			run.duplicate(m, d)
		default:
			run.stale(m, d)
		}
	}
	batch := run.batch
	run.batch = nil
	if len(batch) == 0 {
		return
	}
	changes := make([]store.Change, len(batch))
	for i, b := range batch {
		changes[i] = b.ch
	}
	run.counts["batch"]++
	run.counts["batched changes"] += len(batch)
	run.logf("batch of %d changes in %s", len(batch), m.tenant)
	results, errs, err := run.s.ApplyBatch(run.t.Context(), m.tenant, changes)
	require.NoError(run.t, err, "batch of %d changes in %s", len(batch), m.tenant)
	for i, b := range batch {
		if b.invalid {
			require.ErrorIs(run.t, errs[i], store.ErrInvalid, "change %d of the batch: %s", i, b.what)
			continue
		}
		require.NoError(run.t, errs[i], "change %d of the batch: %s", i, b.what)
		require.Equal(run.t, b.want, results[i], "change %d of the batch: %s", i, b.what)
	}
}

// edit announces the next version of d and applies it now or, one time in
// four, leaves it pending for a later, out-of-order delivery.
func (run *modelRun) edit(m *tenantModel, d *modelDoc, kind string) {
	acl := run.acls[run.r.IntN(len(run.acls))]
	if d.reg != nil && run.r.IntN(3) > 0 {
		acl = modelACL{d.reg.ACL, d.reg.ACL} // most edits keep the ACL
	}
	a := store.Announcement{DocID: d.id, ACL: acl.in, Source: "wiki", Title: "title of " + d.id,
		UpdatedAt: fmt.Sprintf("op-%d", run.op)}
	st := run.announce(m, d, a, acl.want)
	c := run.contributions(d, st.Version)
	if run.r.IntN(4) == 0 {
		d.pending = append(d.pending, delivery{version: st.Version, c: c})
		run.logf("%s %s/%s: announced v%d, delivery pending", kind, m.tenant, d.id, st.Version)
		run.counts[kind+" (pending)"]++
		return
	}
	run.counts[kind]++
	run.apply(m, d, st.Version, false, c, kind)
}

// delete marks d deleted in the registry and deletes it from the graph now
// or later.
func (run *modelRun) delete(m *tenantModel, d *modelDoc) {
	got, err := run.s.MarkDeleted(run.t.Context(), m.tenant, d.id)
	if d.reg == nil {
		require.ErrorIs(run.t, err, store.ErrNotFound, "deleting never announced %s/%s", m.tenant, d.id)
		run.logf("delete %s/%s: never announced, not found", m.tenant, d.id)
		run.counts["delete (unknown)"]++
		return
	}
	require.NoError(run.t, err, "marking %s/%s deleted", m.tenant, d.id)
	if !d.reg.Deleted {
		next := *d.reg
		next.Version++
		next.Deleted = true
		d.reg = &next
	}
	require.Equal(run.t, *d.reg, got, "registry state after deleting %s/%s", m.tenant, d.id)
	if run.r.IntN(4) == 0 {
		d.pending = append(d.pending, delivery{version: got.Version, delete: true})
		run.logf("delete %s/%s: registry v%d, delivery pending", m.tenant, d.id, got.Version)
		run.counts["delete (pending)"]++
		return
	}
	run.counts["delete"]++
	run.apply(m, d, got.Version, true, store.Contributions{}, "delete")
}

// setACL changes d's ACL through the registry; the graph must not change.
func (run *modelRun) setACL(m *tenantModel, d *modelDoc) {
	acl := run.acls[run.r.IntN(len(run.acls))]
	got, err := run.s.SetACL(run.t.Context(), m.tenant, d.id, acl.in)
	run.logf("acl %s/%s: %+v", m.tenant, d.id, acl.in)
	if d.reg == nil || d.reg.Deleted {
		require.ErrorIs(run.t, err, store.ErrNotFound, "setting the ACL of unknown or deleted %s/%s", m.tenant, d.id)
		run.counts["acl (not found)"]++
		return
	}
	require.NoError(run.t, err, "setting the ACL of %s/%s", m.tenant, d.id)
	next := *d.reg
	next.ACL = acl.want
	next.ACLRevision++
	d.reg = &next
	require.Equal(run.t, next, got, "registry state after setting the ACL of %s/%s", m.tenant, d.id)
	run.counts["acl"]++
}

// deliver delivers one pending change of a random document, in random order
// among that document's pending ones.
func (run *modelRun) deliver(m *tenantModel) {
	var withPending []*modelDoc
	for _, d := range m.docs {
		if len(d.pending) > 0 {
			withPending = append(withPending, d)
		}
	}
	if len(withPending) == 0 {
		run.edit(m, m.docs[run.r.IntN(len(m.docs))], "edit")
		return
	}
	d := withPending[run.r.IntN(len(withPending))]
	i := run.r.IntN(len(d.pending))
	p := d.pending[i]
	d.pending = slices.Delete(d.pending, i, i+1)
	run.counts["deliver"]++
	run.apply(m, d, p.version, p.delete, p.c, "deliver")
}

// duplicate re-delivers what the graph store applied last, with other
// contributions: the version, not the content, identifies a change.
func (run *modelRun) duplicate(m *tenantModel, d *modelDoc) {
	if d.applied == 0 {
		run.edit(m, d, "edit")
		return
	}
	run.counts["duplicate"]++
	if d.deleted {
		run.apply(m, d, d.applied, run.r.IntN(2) == 0, run.contributions(d, d.applied), "duplicate")
		return
	}
	c := d.contrib
	if run.r.IntN(2) == 0 {
		c = run.contributions(d, d.applied)
	}
	run.apply(m, d, d.applied, false, c, "duplicate")
}

// stale delivers a version older than the applied one (an apply or a
// delete), or, rarely, a deletion at the applied content version, which wins.
func (run *modelRun) stale(m *tenantModel, d *modelDoc) {
	switch {
	case d.applied == 0:
		run.edit(m, d, "edit")
	case !d.deleted && run.r.IntN(8) == 0:
		run.counts["delete at applied version"]++
		run.apply(m, d, d.applied, true, store.Contributions{}, "delete-tie")
	case d.applied == 1:
		run.duplicate(m, d)
	default:
		run.counts["stale"]++
		v := 1 + run.r.Int64N(d.applied-1)
		run.apply(m, d, v, run.r.IntN(3) == 0, run.contributions(d, v), "stale")
	}
}

// reannounce replays the latest announcement (an idempotent replay that
// may change the ACL and metadata), announces an older version (refused)
// or jumps ahead.
func (run *modelRun) reannounce(m *tenantModel, d *modelDoc) {
	if d.reg == nil {
		run.edit(m, d, "edit")
		return
	}
	acl := run.acls[run.r.IntN(len(run.acls))]
	a := store.Announcement{DocID: d.id, ACL: acl.in, Source: "tracker", Title: "retitled " + d.id,
		UpdatedAt: fmt.Sprintf("op-%d", run.op)}
	switch p := run.r.IntN(3); {
	case p == 0 && d.reg.Version > 1:
		a.Version = 1 + run.r.Int64N(d.reg.Version-1)
		run.counts["announce stale"]++
	case p == 1:
		a.Version = d.reg.Version
		run.counts["announce replay"]++
	default:
		a.Version = d.reg.Version + 1 + run.r.Int64N(3)
		run.counts["announce jump"]++
	}
	run.announce(m, d, a, acl.want)
}

// announce runs Registry.Announce and checks it against the model.
func (run *modelRun) announce(m *tenantModel, d *modelDoc, a store.Announcement, acl provenance.ACL) provenance.SourceState {
	t := run.t
	want, wantErr := m.announce(d, a, acl)
	got, err := retry(func() (provenance.SourceState, error) { return run.s.Announce(t.Context(), m.tenant, a) })
	run.logf("announce %s/%s v%d: want %v %+v", m.tenant, d.id, a.Version, wantErr, want)
	if wantErr != nil {
		require.ErrorIs(t, err, wantErr, "announcing %s/%s v%d", m.tenant, d.id, a.Version)
		return provenance.SourceState{}
	}
	require.NoError(t, err, "announcing %s/%s v%d", m.tenant, d.id, a.Version)
	require.Equal(t, want, got, "announcing %s/%s v%d", m.tenant, d.id, a.Version)
	return got
}

// apply runs a graph Apply or Delete and checks its result against the model.
func (run *modelRun) apply(m *tenantModel, d *modelDoc, version int64, del bool, c store.Contributions, kind string) {
	t := run.t
	want, invalid := m.change(d, version, del, c)
	if run.batch != nil {
		what := fmt.Sprintf("%s %s/%s v%d delete=%v entities=%d edges=%d: want %+v invalid=%v", kind, m.tenant, d.id, version, del,
			len(c.Entities), len(c.Edges), want, invalid)
		run.logf("  (batched) %s", what)
		run.batch = append(run.batch, batchedChange{ch: store.Change{DocID: d.id, Version: version, Delete: del, Contributions: c},
			want: want, invalid: invalid, what: what})
		return
	}
	var got store.ApplyResult
	var err error
	if del {
		got, err = retry(func() (store.ApplyResult, error) { return run.s.Delete(t.Context(), m.tenant, d.id, version) })
	} else {
		got, err = retry(func() (store.ApplyResult, error) { return run.s.Apply(t.Context(), m.tenant, d.id, version, c) })
	}
	run.logf("%s %s/%s v%d delete=%v entities=%d edges=%d: want %+v invalid=%v", kind, m.tenant, d.id, version, del,
		len(c.Entities), len(c.Edges), want, invalid)
	if invalid {
		run.counts["refused type change"]++
		require.ErrorIs(t, err, store.ErrInvalid, "%s of %s/%s v%d retypes an entity another document holds", kind, m.tenant, d.id, version)
		return
	}
	require.NoError(t, err, "%s of %s/%s v%d", kind, m.tenant, d.id, version)
	require.Equal(t, want, got, "%s of %s/%s v%d", kind, m.tenant, d.id, version)
}

// contributions draws a document version's contributions: mostly entities
// of its topic (so successive versions overlap), sometimes any entity,
// repeated mentions that merge within the document, and edges among them.
func (run *modelRun) contributions(d *modelDoc, version int64) store.Contributions {
	r := run.r
	c := store.Contributions{
		Title:      fmt.Sprintf("%s v%d", d.id, version),
		DocType:    []string{"wiki", "incident"}[r.IntN(2)],
		ReceivedAt: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(version) * time.Second),
	}
	units := make([]string, 1+r.IntN(3))
	for i := range units {
		units[i] = fmt.Sprintf("%s-u%d", d.id, i)
		c.TextUnits = append(c.TextUnits, events.TextUnit{ID: units[i], Text: "text " + units[i], Start: i * 10, End: i*10 + 9})
	}
	cite := func() []string {
		var out []string
		for _, u := range units {
			if r.IntN(2) == 0 {
				out = append(out, u)
			}
		}
		return out
	}
	var picked []string
	types := map[string]string{}
	retype := r.IntN(50) == 0 // one entity of this version gets the legacy type
	for i := range r.IntN(7) {
		v := run.vocab[d.topic[r.IntN(len(d.topic))]]
		if r.IntN(5) == 0 {
			v = run.vocab[r.IntN(len(run.vocab))]
		}
		typ, ok := types[v.id]
		if !ok {
			typ, _ = resolve.SplitID(v.id)
			if retype {
				typ, retype = modelLegacyType, false
			}
			types[v.id] = typ
			picked = append(picked, v.id)
		}
		desc := ""
		if r.IntN(4) > 0 {
			desc = fmt.Sprintf("%s as mention %d of %s v%d describes it", v.names[0], i, d.id, version)
		}
		c.Entities = append(c.Entities, store.EntityContribution{ID: v.id, Type: typ,
			Name: v.names[r.IntN(len(v.names))], NameRank: r.IntN(3), Description: desc, TextUnits: cite()})
	}
	if len(picked) == 0 {
		return c // an empty version retracts everything the document said
	}
	for i := range r.IntN(2*len(picked) + 1) {
		src, dst := picked[r.IntN(len(picked))], picked[r.IntN(len(picked))]
		desc := ""
		if r.IntN(3) > 0 {
			desc = fmt.Sprintf("%s -> %s per mention %d of %s", src, dst, i, d.id)
		}
		c.Edges = append(c.Edges, store.EdgeContribution{Source: src, Relation: modelRelations[r.IntN(len(modelRelations))],
			Target: dst, Description: desc, Weight: []float64{0, 0.5, 1, 2.5}[r.IntN(4)], TextUnits: cite()})
	}
	return c
}

// check compares the whole store with the model of one tenant.
func (run *modelRun) check(m *tenantModel) {
	t, ctx := run.t, run.t.Context()
	where := fmt.Sprintf("tenant %q after operation %d", m.tenant, run.op)

	g, err := run.s.Snapshot(ctx, m.tenant)
	require.NoError(t, err, where)
	if diff := diffGraphs(m.graph, g); len(diff) > 0 {
		require.Failf(t, "the store's graph differs from the model's", "%s:\n  %s", where, strings.Join(diff, "\n  "))
	}

	st, err := run.s.Stats(ctx, m.tenant)
	require.NoError(t, err, where)
	wantStats := store.Stats{Sources: m.liveSources(), Entities: len(m.graph.Entities), Edges: len(m.graph.Edges)}
	require.Equal(t, wantStats, st, "stats of %s", where)

	rep, err := run.s.Audit(ctx, m.tenant)
	require.NoError(t, err, where)
	require.Equal(t, store.AuditReport{Sources: wantStats.Sources, Entities: wantStats.Entities, Edges: wantStats.Edges}, rep,
		"audit of %s", where)

	// Source records: version, tombstone and the contribution index.
	for _, d := range m.docs {
		rec, err := run.s.Source(ctx, m.tenant, d.id)
		if d.applied == 0 {
			require.ErrorIs(t, err, store.ErrNotFound, "record of %s, never applied, in %s", d.id, where)
			continue
		}
		require.NoError(t, err, "record of %s in %s", d.id, where)
		require.False(t, rec.AppliedAt.IsZero(), "record of %s in %s has no AppliedAt", d.id, where)
		want := store.SourceRecord{DocID: d.id, Version: d.applied, Deleted: d.deleted}
		if !d.deleted {
			want.Title, want.DocType = d.contrib.Title, d.contrib.DocType
			want.TextUnits = d.contrib.TextUnits
			for _, e := range d.contrib.Entities {
				want.Entities = append(want.Entities, e.ID)
			}
			for _, e := range d.contrib.Edges {
				want.Edges = append(want.Edges, e.ID())
			}
			want.Entities, want.Edges = sortedSet(want.Entities), sortedSet(want.Edges)
			require.True(t, d.contrib.ReceivedAt.Equal(rec.ReceivedAt), "received_at of %s in %s", d.id, where)
		}
		rec.AppliedAt, rec.ReceivedAt = time.Time{}, time.Time{}
		require.Equal(t, want, rec, "record of %s in %s", d.id, where)
	}

	// The secondary indexes, through the reads that use them.
	types := map[string][]string{}
	for _, e := range m.graph.Entities {
		types[e.Type] = append(types[e.Type], e.ID)
	}
	for _, v := range append(run.vocab, vocabEntity{id: modelLegacyType + ":x"}) {
		typ, _ := resolve.SplitID(v.id)
		if _, ok := types[typ]; !ok {
			types[typ] = nil
		}
	}
	for typ, want := range types {
		es, err := run.s.EntitiesByType(ctx, m.tenant, typ)
		require.NoError(t, err, where)
		require.Equal(t, nilIfNone(want), nilIfNone(entityIDs(es)), "entities of type %q in %s", typ, where)
	}
	out, in := map[string][]string{}, map[string][]string{}
	for _, e := range m.graph.Edges {
		out[e.Source] = append(out[e.Source], e.ID)
		in[e.Target] = append(in[e.Target], e.ID)
	}
	for range 4 {
		id := run.vocab[run.checkR.IntN(len(run.vocab))].id
		for _, dir := range []struct {
			d    store.Direction
			want []string
		}{{store.Out, out[id]}, {store.In, in[id]}} {
			es, err := run.s.Edges(ctx, m.tenant, id, dir.d)
			require.NoError(t, err, where)
			require.Equal(t, nilIfNone(dir.want), nilIfNone(edgeIDs(es)), "edges of %q (direction %d) in %s", id, dir.d, where)
		}
	}

	// The registry.
	var wantReg []provenance.SourceState
	for _, d := range m.docs {
		if d.reg != nil {
			wantReg = append(wantReg, *d.reg)
		}
	}
	gotReg, err := run.s.ListSources(ctx, m.tenant)
	require.NoError(t, err, where)
	require.Equal(t, wantReg, nilIfNone(gotReg), "registry of %s", where)
	ids := make([]string, len(m.docs))
	for i, d := range m.docs {
		ids[i] = d.id
	}
	byID, err := run.s.Sources(ctx, m.tenant, ids)
	require.NoError(t, err, where)
	require.Len(t, byID, len(wantReg), "registry lookup of %s", where)
	for _, st := range wantReg {
		require.Equal(t, st, byID[st.DocID], "registry lookup of %s in %s", st.DocID, where)
	}
}

// diffGraphs describes how got differs from want, entity by entity and
// edge by edge (at most a few lines of each).
func diffGraphs(want, got store.Graph) []string {
	var out []string
	diff := func(kind string, w, g map[string]any) {
		n := 0
		for _, id := range slices.Sorted(maps.Keys(mergeKeys(w, g))) {
			wv, wok := w[id]
			gv, gok := g[id]
			switch {
			case wok && !gok:
				out = append(out, fmt.Sprintf("%s %q: missing from the store; model has %+v", kind, id, wv))
			case !wok && gok:
				out = append(out, fmt.Sprintf("%s %q: in the store, not in the model: %+v", kind, id, gv))
			case !reflect.DeepEqual(wv, gv):
				out = append(out, fmt.Sprintf("%s %q:\n    model %+v\n    store %+v", kind, id, wv, gv))
			default:
				continue
			}
			if n++; n == 8 {
				out = append(out, "... (more "+kind+" differences)")
				return
			}
		}
	}
	asMap := func(es []store.Entity) map[string]any {
		m := map[string]any{}
		for _, e := range es {
			m[e.ID] = e
		}
		return m
	}
	edgesMap := func(es []store.Edge) map[string]any {
		m := map[string]any{}
		for _, e := range es {
			m[e.ID] = e
		}
		return m
	}
	diff("entity", asMap(want.Entities), asMap(got.Entities))
	diff("edge", edgesMap(want.Edges), edgesMap(got.Edges))
	if len(out) == 0 {
		// Same contents: the order must be by id too.
		if !slices.IsSortedFunc(got.Entities, func(a, b store.Entity) int { return cmp.Compare(a.ID, b.ID) }) ||
			!slices.IsSortedFunc(got.Edges, func(a, b store.Edge) int { return cmp.Compare(a.ID, b.ID) }) ||
			len(got.Entities) != len(want.Entities) || len(got.Edges) != len(want.Edges) {
			out = append(out, "the snapshot is not sorted by id or lists an id twice")
		}
	}
	return out
}

func entityMap(g store.Graph) map[string]store.Entity {
	m := make(map[string]store.Entity, len(g.Entities))
	for _, e := range g.Entities {
		m[e.ID] = e
	}
	return m
}

func edgeMap(g store.Graph) map[string]store.Edge {
	m := make(map[string]store.Edge, len(g.Edges))
	for _, e := range g.Edges {
		m[e.ID] = e
	}
	return m
}

func mergeKeys(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// sortedSet sorts and deduplicates ids, nil when there are none (the form
// a stored value reads back as).
func sortedSet(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

func nilIfNone[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}
