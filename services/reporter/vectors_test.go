package reporter_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/embed"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/vector"
	vecembedded "github.com/kgstream/kgstream/pkg/vector/embedded"
	"github.com/kgstream/kgstream/services/reporter"
)

type vectorRig struct {
	t   *testing.T
	w   *reporter.Worker
	st  *embedded.Store
	bus *stream.Bus
	ix  *vecembedded.Index
	emb embed.Embedder
}

func newVectorRig(t *testing.T) *vectorRig {
	t.Helper()
	_, st, bus, _ := setup(t)
	ix, err := vecembedded.Open(filepath.Join(t.TempDir(), "vectors.db"), vecembedded.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ix.Close()) })
	emb := embed.NewHashing(64)
	w, err := reporter.New(reporter.Config{Vectors: ix, Embedder: emb}, bus, st, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	return &vectorRig{t: t, w: w, st: st, bus: bus, ix: ix, emb: emb}
}

func (r *vectorRig) handle(kind events.Kind, ev events.Validator) {
	r.t.Helper()
	data, err := events.Encode(ev)
	require.NoError(r.t, err)
	require.NoError(r.t, r.w.Handle(r.t.Context(), &stream.Message{Kind: kind, Tenant: "acme", Data: data}))
}

func (r *vectorRig) graphChanged(doc string, version int64, deleted bool, touched ...string) {
	r.t.Helper()
	r.handle(events.KindGraphChanged, &events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: doc, Version: version, Deleted: deleted, Touched: touched})
}

// search returns every item of kind f may read, by id.
func (r *vectorRig) search(kind vector.Kind, f vector.Filter) map[string]vector.Hit {
	r.t.Helper()
	v, err := r.emb.Embed(r.t.Context(), []string{"disk full on the database"})
	require.NoError(r.t, err)
	hits, err := r.ix.Search(r.t.Context(), "acme", kind, v[0], vector.MaxK, f)
	require.NoError(r.t, err)
	out := map[string]vector.Hit{}
	for _, h := range hits {
		out[h.ID] = h
	}
	return out
}

func ids[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (r *vectorRig) apply(doc string, version int64, acl provenance.ACL, units ...string) {
	r.t.Helper()
	ctx := r.t.Context()
	_, err := r.st.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: version, ACL: acl})
	require.NoError(r.t, err)
	c := store.Contributions{}
	var tus []string
	for i, u := range units {
		id := "u" + string(rune('0'+i))
		c.TextUnits = append(c.TextUnits, events.TextUnit{ID: id, Text: u})
		tus = append(tus, id)
	}
	inc := "incident:" + doc
	c.Entities = []store.EntityContribution{
		{ID: inc, Type: "incident", Name: doc, NameRank: 2, TextUnits: tus, Description: doc + " took the database down."},
		{ID: "failure_mode:disk-full", Type: "failure_mode", Name: "disk full", NameRank: 2, TextUnits: tus, Description: "A disk filled up."},
	}
	c.Edges = []store.EdgeContribution{{Source: inc, Relation: "failure", Target: "failure_mode:disk-full", Weight: 1, TextUnits: tus}}
	_, err = r.st.Apply(ctx, "acme", doc, version, c)
	require.NoError(r.t, err)
}

func TestVectorIndexFollowsGraphACLAndReports(t *testing.T) {
	r := newVectorRig(t)
	ctx := t.Context()
	sre := vector.Filter{Principal: "bob", Groups: []string{"sre"}}
	anyone := vector.Filter{Principal: "eve"}

	// graph.changed: the document's text units and entities are indexed
	// with the registry's ACL.
	r.apply("INC-1", 1, provenance.ACL{Groups: []string{"sre"}}, "The disk filled up on db-1.", "We deleted old logs.")
	r.apply("INC-2", 1, provenance.PublicACL(), "Disk full again on db-2.")
	r.graphChanged("INC-1", 1, false, "incident:INC-1", "failure_mode:disk-full")
	r.graphChanged("INC-2", 1, false)
	units := r.search(vector.KindTextUnit, sre)
	require.Equal(t, []string{"INC-1#u0", "INC-1#u1", "INC-2#u0"}, ids(units))
	require.Equal(t, []vector.Source{{SourceRef: provenance.SourceRef{DocID: "INC-1", Version: 1, TextUnit: "u0"}, ACL: provenance.ACL{Groups: []string{"sre"}}}},
		units["INC-1#u0"].Sources)
	require.Equal(t, "The disk filled up on db-1.", units["INC-1#u0"].Text)
	require.Equal(t, []string{"INC-2#u0"}, ids(r.search(vector.KindTextUnit, anyone)), "pre-filtered by the document's ACL")
	ents := r.search(vector.KindEntity, sre)
	require.Equal(t, []string{"failure_mode:disk-full", "incident:INC-1", "incident:INC-2"}, ids(ents))
	require.Equal(t, []string{"INC-1", "INC-2"}, ents["failure_mode:disk-full"].DocIDs(), "a merged description carries every source")
	require.Equal(t, []string{"incident:INC-2"}, ids(r.search(vector.KindEntity, anyone)), "a merged description is readable only by the intersection")

	// A report written for a changed community gets an item, sources with
	// their current ACLs; a removed community's item goes.
	require.NoError(t, r.st.ReplaceCommunities(ctx, "acme", 1, []store.Community{
		{ID: "c0-disk", Level: 0, Members: []string{"failure_mode:disk-full", "incident:INC-1", "incident:INC-2"}, MemberHash: "h"},
		{ID: "c0-two", Level: 0, Members: []string{"incident:INC-2"}, MemberHash: "h2"},
	}))
	r.handle(events.KindCommunitiesChanged, &events.CommunitiesChanged{Header: events.Header{Tenant: "acme"}, Run: 1, Changed: []events.CommunityChange{
		{ID: "c0-disk", Level: 0, MemberHash: "h"}, {ID: "c0-two", Level: 0, MemberHash: "h2"}}})
	reps := r.search(vector.KindReport, sre)
	require.Equal(t, []string{"r-c0-disk", "r-c0-two"}, ids(reps))
	require.Equal(t, []string{"INC-1", "INC-2"}, reps["r-c0-disk"].DocIDs())
	require.Equal(t, provenance.ACL{Groups: []string{"sre"}}, reps["r-c0-disk"].Sources[0].ACL)
	require.Equal(t, []string{"r-c0-two"}, ids(r.search(vector.KindReport, anyone)))
	require.NoError(t, r.st.ReplaceCommunities(ctx, "acme", 2, []store.Community{
		{ID: "c0-disk", Level: 0, Members: []string{"failure_mode:disk-full", "incident:INC-1", "incident:INC-2"}, MemberHash: "h"}}))
	r.handle(events.KindCommunitiesChanged, &events.CommunitiesChanged{Header: events.Header{Tenant: "acme"}, Run: 2, Removed: []string{"c0-two"}})
	require.Equal(t, []string{"r-c0-disk"}, ids(r.search(vector.KindReport, sre)))

	// doc.acl: the registry's ACL is copied into every item built on the
	// document, text units, descriptions and reports alike.
	_, err := r.st.SetACL(ctx, "acme", "INC-1", provenance.PublicACL())
	require.NoError(t, err)
	r.handle(events.KindDocACL, &events.DocACL{Header: events.Header{Tenant: "acme"}, DocID: "INC-1", Version: 1, ACLRevision: 1, ACL: provenance.ACL{Groups: []string{"stale-event"}}})
	require.Equal(t, []string{"INC-1#u0", "INC-1#u1", "INC-2#u0"}, ids(r.search(vector.KindTextUnit, anyone)))
	require.Equal(t, []string{"r-c0-disk"}, ids(r.search(vector.KindReport, anyone)))
	require.Equal(t, provenance.PublicACL(), r.search(vector.KindTextUnit, anyone)["INC-1#u0"].Sources[0].ACL, "the registry is the authority, not the event")

	// An edit replaces the document's text units; a replayed event changes
	// nothing; the report on the other document's current version survives.
	r.apply("INC-1", 2, provenance.PublicACL(), "Version two: the disk of db-1 was resized.")
	r.graphChanged("INC-1", 2, false, "incident:INC-1")
	r.graphChanged("INC-1", 2, false) // redelivery
	units = r.search(vector.KindTextUnit, anyone)
	require.Equal(t, []string{"INC-1#u0", "INC-2#u0"}, ids(units))
	require.EqualValues(t, 2, units["INC-1#u0"].Sources[0].Version)
	require.Contains(t, units["INC-1#u0"].Text, "Version two")
	require.Equal(t, []vector.Source{{SourceRef: provenance.SourceRef{DocID: "INC-1", Version: 2}, ACL: provenance.PublicACL()},
		{SourceRef: provenance.SourceRef{DocID: "INC-2", Version: 1}, ACL: provenance.PublicACL()}},
		r.search(vector.KindEntity, anyone)["failure_mode:disk-full"].Sources)
	require.Empty(t, r.search(vector.KindReport, anyone), "the report built on INC-1 v1 is gone until it is rewritten")

	// Deletion: everything built on the document goes; what others support stays.
	_, err = r.st.MarkDeleted(ctx, "acme", "INC-1")
	require.NoError(t, err)
	_, err = r.st.Delete(ctx, "acme", "INC-1", 3)
	require.NoError(t, err)
	// As the resolver announces it: the planner's Touched omits the shared
	// failure mode (it only lost INC-1's fragment), Contributed names it.
	r.handle(events.KindGraphChanged, &events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: "INC-1", Version: 3,
		Deleted: true, Touched: []string{"incident:INC-1"}, Contributed: []string{"failure_mode:disk-full", "incident:INC-1"}})
	require.Equal(t, []string{"INC-2#u0"}, ids(r.search(vector.KindTextUnit, anyone)))
	ents = r.search(vector.KindEntity, anyone)
	require.Equal(t, []string{"failure_mode:disk-full", "incident:INC-2"}, ids(ents))
	require.Equal(t, []string{"INC-2"}, ents["failure_mode:disk-full"].DocIDs())
}

// TestVectorConsumersRun: with vectors configured, Run consumes graph and
// ACL changes from the bus next to community changes.
func TestVectorConsumersRun(t *testing.T) {
	r := newVectorRig(t)
	r.apply("INC-9", 1, provenance.ACL{Groups: []string{"sre"}}, "The disk filled up.")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.w.Run(ctx) }()
	_, err := r.bus.Publish(t.Context(), events.KindGraphChanged, "acme", events.GraphID("acme", "INC-9", 1, 0),
		&events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: "INC-9", Version: 1})
	require.NoError(t, err)
	sre := vector.Filter{Groups: []string{"sre"}}
	require.Eventually(t, func() bool { return len(r.search(vector.KindTextUnit, sre)) == 1 }, 20*time.Second, 20*time.Millisecond)
	_, err = r.st.SetACL(t.Context(), "acme", "INC-9", provenance.PublicACL())
	require.NoError(t, err)
	_, err = r.bus.Publish(t.Context(), events.KindDocACL, "acme", events.ACLID("acme", "INC-9", 1, 1),
		&events.DocACL{Header: events.Header{Tenant: "acme"}, DocID: "INC-9", Version: 1, ACLRevision: 1, ACL: provenance.PublicACL()})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(r.search(vector.KindTextUnit, vector.Filter{})) == 1 }, 20*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

// indexOnly is a vector index with the methods of vector.Index only, as
// an adapter without the embedded index's ReplaceDocItems is.
type indexOnly struct{ vector.Index }

// TestHandleVectorsEqualsOneByOne: graph and ACL changes handled in
// batches leave the index as handling them one by one does, through an
// edit, a permission change, a redelivery in the same batch and a deletion
// that leaves a shared entity to the other documents; a malformed message
// of a batch is refused alone. The one-by-one worker writes through
// vector.Index's methods only (DeleteByDoc and Upsert), the batched one
// through the embedded index's ReplaceDocItems.
func TestHandleVectorsEqualsOneByOne(t *testing.T) {
	one, batched := newVectorRig(t), newVectorRig(t)
	var err error
	one.w, err = reporter.New(reporter.Config{Vectors: indexOnly{one.ix}, Embedder: one.emb}, one.bus, one.st, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	sre := vector.Filter{Principal: "bob", Groups: []string{"sre"}}
	graph := func(doc string, version int64, deleted bool, touched, contributed []string) *stream.Message {
		data, err := events.Encode(&events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: doc, Version: version,
			Deleted: deleted, Touched: touched, Contributed: contributed})
		require.NoError(t, err)
		return &stream.Message{Kind: events.KindGraphChanged, Tenant: "acme", Data: data}
	}
	acl := func(doc string, rev int64) *stream.Message {
		data, err := events.Encode(&events.DocACL{Header: events.Header{Tenant: "acme"}, DocID: doc, Version: 1, ACLRevision: rev, ACL: provenance.PublicACL()})
		require.NoError(t, err)
		return &stream.Message{Kind: events.KindDocACL, Tenant: "acme", Data: data}
	}
	// The same store changes on both rigs, then the same events.
	step := func(change func(r *vectorRig), ms ...*stream.Message) {
		t.Helper()
		for _, r := range []*vectorRig{one, batched} {
			change(r)
		}
		for _, m := range ms {
			require.NoError(t, one.w.Handle(t.Context(), m))
		}
		for i, err := range batched.w.HandleVectors(t.Context(), ms) {
			require.NoError(t, err, "message %d", i)
		}
		for _, kind := range []vector.Kind{vector.KindTextUnit, vector.KindEntity, vector.KindReport} {
			want, got := one.search(kind, sre), batched.search(kind, sre)
			require.Equal(t, ids(want), ids(got), "%s items", kind)
			for id, h := range want {
				require.Equal(t, h.Text, got[id].Text, "%s %s", kind, id)
				require.Equal(t, h.Sources, got[id].Sources, "%s %s", kind, id)
			}
		}
	}
	var docs []string
	for i := range 6 {
		docs = append(docs, "INC-"+string(rune('1'+i)))
	}
	step(func(r *vectorRig) {
		for i, d := range docs {
			a := provenance.PublicACL()
			if i%2 == 0 {
				a = provenance.ACL{Groups: []string{"sre"}}
			}
			r.apply(d, 1, a, "The disk of "+d+" filled up.", "Logs of "+d+" were deleted.")
		}
		require.NoError(t, r.st.ReplaceCommunities(t.Context(), "acme", 1, []store.Community{
			{ID: "c0-disk", Level: 0, Members: []string{"failure_mode:disk-full", "incident:INC-1", "incident:INC-2"}, MemberHash: "h"}}))
		data, err := events.Encode(&events.CommunitiesChanged{Header: events.Header{Tenant: "acme"}, Run: 1,
			Changed: []events.CommunityChange{{ID: "c0-disk", Level: 0, MemberHash: "h"}}})
		require.NoError(t, err)
		require.NoError(t, r.w.Handle(t.Context(), &stream.Message{Kind: events.KindCommunitiesChanged, Tenant: "acme", Data: data}))
	}, graph("INC-1", 1, false, []string{"incident:INC-1", "failure_mode:disk-full"}, nil),
		graph("INC-2", 1, false, []string{"incident:INC-2"}, nil), graph("INC-3", 1, false, nil, nil),
		graph("INC-4", 1, false, nil, nil), graph("INC-5", 1, false, nil, nil), graph("INC-6", 1, false, nil, nil))
	require.Len(t, batched.search(vector.KindReport, sre), 1)

	// An edit and its redelivery, a permission change and a graph change of
	// another document in one batch.
	step(func(r *vectorRig) {
		r.apply("INC-2", 2, provenance.PublicACL(), "Version two of INC-2: the disk was resized.")
		_, err := r.st.SetACL(t.Context(), "acme", "INC-3", provenance.PublicACL())
		require.NoError(t, err)
	}, graph("INC-2", 2, false, []string{"incident:INC-2"}, nil), acl("INC-3", 1), graph("INC-2", 2, false, nil, nil),
		graph("INC-4", 1, false, nil, nil))

	// A deletion next to a permission change: the shared failure mode lives
	// on through the others, named only by the deletion's Contributed.
	step(func(r *vectorRig) {
		_, err := r.st.MarkDeleted(t.Context(), "acme", "INC-1")
		require.NoError(t, err)
		_, err = r.st.Delete(t.Context(), "acme", "INC-1", 3)
		require.NoError(t, err)
		_, err = r.st.SetACL(t.Context(), "acme", "INC-5", provenance.PublicACL())
		require.NoError(t, err)
	}, graph("INC-1", 3, true, []string{"incident:INC-1"}, []string{"failure_mode:disk-full", "incident:INC-1"}),
		acl("INC-5", 1))
	ents := batched.search(vector.KindEntity, sre)
	require.NotContains(t, ents, "incident:INC-1")
	require.NotContains(t, ents["failure_mode:disk-full"].DocIDs(), "INC-1")
	require.Contains(t, ents["failure_mode:disk-full"].DocIDs(), "INC-2")

	// A malformed message is refused alone, permanently.
	errs := batched.w.HandleVectors(t.Context(), []*stream.Message{
		{Kind: events.KindGraphChanged, Tenant: "acme", Data: []byte("{")}, graph("INC-6", 1, false, nil, nil)})
	require.Len(t, errs, 2)
	require.True(t, stream.IsPermanent(errs[0]), "%v", errs[0])
	require.NoError(t, errs[1])
}

// TestVectorConsumerGivesWay: with GiveWay set, the vector consumer leaves
// graph changes waiting while the stage named has a backlog, counting the
// wait in kgstream_stage_yield_seconds_total, and indexes them once it is
// worked off.
func TestVectorConsumerGivesWay(t *testing.T) {
	r := newVectorRig(t)
	var yields *prometheus.Registry
	r.bus, yields = meteredBus(t)
	w, err := reporter.New(reporter.Config{Vectors: r.ix, Embedder: r.emb,
		GiveWay: &stream.GiveWay{Stages: []string{"front"}, Above: 1, Max: time.Hour, Poll: 10 * time.Millisecond}},
		r.bus, r.st, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	drain := frontBacklog(t, r.bus)
	r.apply("INC-9", 1, provenance.PublicACL(), "The disk filled up.")
	r.apply("INC-10", 1, provenance.PublicACL(), "The queue backed up.")
	for _, doc := range []string{"INC-9", "INC-10"} {
		_, err = r.bus.Publish(t.Context(), events.KindGraphChanged, "acme", events.GraphID("acme", doc, 1, 0),
			&events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: doc, Version: 1})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitConsumers(t, r.bus, "reporter-vectors-graph_changed")
	time.Sleep(giveWayHeld)
	require.Empty(t, r.search(vector.KindTextUnit, vector.Filter{}), "indexed while the front stage had 2 events pending")

	drain(2)
	require.Eventually(t, func() bool { return len(r.search(vector.KindTextUnit, vector.Filter{})) == 2 }, 20*time.Second, 20*time.Millisecond)
	requireYielded(t, yields)
	cancel()
	require.NoError(t, <-done)
}

// recordCounter is a store counting the record reads of the vector stage:
// one at a time (Source) or a batch's at once (SourceRecords).
type recordCounter struct {
	reporter.Stores
	bulk             store.SourceRecords
	sources, records int
}

func (s *recordCounter) Source(ctx context.Context, tenant, docID string) (store.SourceRecord, error) {
	s.sources++
	return s.Stores.Source(ctx, tenant, docID)
}

func (s *recordCounter) SourceRecords(ctx context.Context, tenant string, ids []string) (map[string]store.SourceRecord, error) {
	s.records++
	return s.bulk.SourceRecords(ctx, tenant, ids)
}

// The vector stage reads the records of a batch's documents at once, not
// one by one, and indexes each document's text units from them (a
// document never applied gets none).
func TestVectorBatchReadsRecordsAtOnce(t *testing.T) {
	r := newVectorRig(t)
	rc := &recordCounter{Stores: r.st, bulk: r.st}
	w, err := reporter.New(reporter.Config{Vectors: r.ix, Embedder: r.emb}, r.bus, rc, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	r.apply("INC-1", 1, provenance.PublicACL(), "the disk filled up")
	r.apply("INC-2", 1, provenance.PublicACL(), "the database stopped", "writes failed")
	var ms []*stream.Message
	for _, doc := range []string{"INC-1", "INC-2", "INC-9"} {
		data, err := events.Encode(&events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: doc, Version: 1})
		require.NoError(t, err)
		ms = append(ms, &stream.Message{Kind: events.KindGraphChanged, Tenant: "acme", Data: data})
	}
	for _, err := range w.HandleVectors(t.Context(), ms) {
		require.NoError(t, err)
	}
	require.Equal(t, 1, rc.records, "one read of the batch's records")
	require.Zero(t, rc.sources, "no record read one by one")
	units := r.search(vector.KindTextUnit, vector.Filter{Principal: "anyone"})
	require.ElementsMatch(t, []string{"INC-1#u0", "INC-2#u0", "INC-2#u1"}, ids(units))
}

// TestRedeliveredChangeReachesTheVersionBefore: the event of a redelivered
// change (Duplicate) names only what the applied version contributes; the
// entities only the version before contributed lose their items (or the
// document's source in them) all the same, found by the items that cite it.
func TestRedeliveredChangeReachesTheVersionBefore(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "one by one", true: "batch"}[batch], func(t *testing.T) {
			r := newVectorRig(t)
			ctx := t.Context()
			anyone := vector.Filter{Principal: "eve"}
			apply := func(doc string, version int64, entities ...string) []string {
				t.Helper()
				_, err := r.st.Announce(ctx, "acme", store.Announcement{DocID: doc, Version: version, ACL: provenance.PublicACL()})
				require.NoError(t, err)
				c := store.Contributions{TextUnits: []events.TextUnit{{ID: "u0", Text: doc + " version text"}}}
				for _, id := range entities {
					c.Entities = append(c.Entities, store.EntityContribution{ID: id, Type: "service", Name: id, NameRank: 2,
						TextUnits: []string{"u0"}, Description: id + " as " + doc + " tells it."})
				}
				_, err = r.st.Apply(ctx, "acme", doc, version, c)
				require.NoError(t, err)
				return entities
			}
			announce := func(ev *events.GraphChanged) {
				t.Helper()
				if !batch {
					r.handle(events.KindGraphChanged, ev)
					return
				}
				data, err := events.Encode(ev)
				require.NoError(t, err)
				errs := r.w.HandleVectors(ctx, []*stream.Message{{Kind: events.KindGraphChanged, Tenant: "acme", Data: data}})
				require.NoError(t, errs[0])
			}
			v1 := apply("INC-1", 1, "service:api", "service:db")
			apply("INC-2", 1, "service:db")
			announce(&events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: "INC-1", Version: 1, Touched: v1, Contributed: v1})
			announce(&events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: "INC-2", Version: 1, Touched: []string{"service:db"}, Contributed: []string{"service:db"}})
			require.Equal(t, []string{"service:api", "service:db"}, ids(r.search(vector.KindEntity, anyone)))

			// Version 2 drops both; its first announcement was lost, and the
			// redelivery's event names only what version 2 contributes.
			v2 := apply("INC-1", 2, "service:cache")
			announce(&events.GraphChanged{Header: events.Header{Tenant: "acme"}, DocID: "INC-1", Version: 2, Duplicate: true, Contributed: v2})
			ents := r.search(vector.KindEntity, anyone)
			require.Equal(t, []string{"service:cache", "service:db"}, ids(ents), "the entity only version 1 contributed is gone")
			require.Equal(t, []string{"INC-2"}, ents["service:db"].DocIDs(), "the shared entity lost version 1's source")
		})
	}
}
