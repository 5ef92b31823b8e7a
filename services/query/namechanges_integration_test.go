//go:build integration

package query_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/query"
)

// applyAnnounced applies (or, c nil, deletes) a document as the resolver
// does and publishes its kg.graph.changed as the resolver does: Touched
// from the store's result, Contributed the entities the document
// contributed before and contributes now.
func applyAnnounced(t *testing.T, st query.Stores, bus *stream.Bus, doc string, version int64, c *store.Contributions) {
	t.Helper()
	ctx := t.Context()
	var contributed []string
	rec, err := st.Source(ctx, tenantAcme, doc)
	switch {
	case err == nil:
		contributed = slices.Clone(rec.Entities)
	case !errors.Is(err, store.ErrNotFound):
		require.NoError(t, err)
	}
	var res store.ApplyResult
	if c == nil {
		_, err = st.MarkDeleted(ctx, tenantAcme, doc)
		require.NoError(t, err)
		res, err = st.Delete(ctx, tenantAcme, doc, version)
	} else {
		_, err = st.Announce(ctx, tenantAcme, store.Announcement{DocID: doc, Version: version, ACL: incidentACL(), Title: c.Title})
		require.NoError(t, err)
		res, err = st.Apply(ctx, tenantAcme, doc, version, *c)
		for _, e := range c.Entities {
			contributed = append(contributed, e.ID)
		}
	}
	require.NoError(t, err)
	require.Equal(t, store.Applied, res.Outcome)
	slices.Sort(contributed)
	_, err = bus.Publish(ctx, events.KindGraphChanged, tenantAcme, fmt.Sprintf("graph-%s-%d", doc, version),
		&events.GraphChanged{Header: events.Header{Tenant: tenantAcme}, DocID: doc, Version: version, Deleted: c == nil,
			Touched: res.Touched, Contributed: slices.Compact(contributed)})
	require.NoError(t, err)
}

// localAnswer is a local response without its timings.
func localAnswer(t *testing.T, f *fixture, question string) query.QueryResponse {
	t.Helper()
	r := ask(t, f, tokAlice, map[string]any{"mode": "local", "question": question})
	r.Timings = nil
	return r
}

func entityIDs(r query.QueryResponse) []string {
	var out []string
	for _, m := range r.Mapping {
		out = append(out, m.ID)
	}
	return out
}

// coldFixture serves st with a service that caches nothing (no events
// followed): what a live service must answer as.
func coldFixture(t *testing.T, st query.Stores) *fixture {
	t.Helper()
	a, err := newAuth()
	require.NoError(t, err)
	svc, err := query.New(query.Config{}, &failingStores{Stores: st}, a, nil, nil)
	require.NoError(t, err)
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return &fixture{t: t, st: &failingStores{Stores: st}, srv: srv}
}

// TestNameIndexFollowsGraphChanges: while the service follows the bus, a
// graph change (a new document naming new entities, an edit renaming one
// and dropping another, a deletion) patches the tenant's name index for
// the entities the event names, read by id: local search then finds
// exactly what a service without caches finds, and no request lists
// every entity again. An event that names no entity drops the index, as
// one that cannot be decoded does.
func TestNameIndexFollowsGraphChanges(t *testing.T) {
	f, cs, bus := newCachingFixture(t)
	cold := coldFixture(t, cs.Stores)

	certQ := "What happened to cert-manager?"
	streamtest.Eventually(t, 10*time.Second, func() error {
		cs.reset()
		localAnswer(t, f, certQ)
		localAnswer(t, f, certQ)
		if n := cs.reset()["EntitiesByType()"]; n > 1 {
			return fmt.Errorf("%d listings of every entity for two questions", n)
		}
		return nil
	})
	// same waits until the live service answers as the cold one, and
	// returns the answer.
	same := func(question string) query.QueryResponse {
		t.Helper()
		var got query.QueryResponse
		streamtest.Eventually(t, 10*time.Second, func() error {
			want := localAnswer(t, cold, question)
			got = localAnswer(t, f, question)
			if diff := fmt.Sprint(got); diff != fmt.Sprint(want) {
				return fmt.Errorf("live answer\n%+v\ncold answer\n%+v", got, want)
			}
			return nil
		})
		return got
	}
	units := []events.TextUnit{{ID: "u0", Text: "INC-160: the zookeeper quorum lost the ledger replica.", End: 55}}
	v1 := store.Contributions{Title: "INC-160", DocType: "postmortem", TextUnits: units,
		Entities: []store.EntityContribution{
			{ID: "incident:inc160", Type: "incident", Name: "INC-160", NameRank: 2, TextUnits: []string{"u0"}},
			{ID: "component:zookeeperquorum", Type: "component", Name: "zookeeper quorum", NameRank: 2, TextUnits: []string{"u0"}},
			{ID: "service:ledgerreplica", Type: "service", Name: "ledger replica", NameRank: 2, TextUnits: []string{"u0"}},
		},
		Edges: []store.EdgeContribution{
			{Source: "incident:inc160", Relation: "involved", Target: "component:zookeeperquorum", Weight: 1, TextUnits: []string{"u0"}},
			{Source: "incident:inc160", Relation: "affected", Target: "service:ledgerreplica", Weight: 1, TextUnits: []string{"u0"}},
		}}
	zkQ, ledgerQ := "What happened to the zookeeper quorum?", "What happened to the ledger replica?"
	require.NotContains(t, entityIDs(localAnswer(t, f, zkQ)), "component:zookeeperquorum")
	require.NotContains(t, entityIDs(localAnswer(t, f, ledgerQ)), "service:ledgerreplica")
	cs.reset()

	// A new document naming new entities.
	applyAnnounced(t, f.st, bus, "INC-160", 1, &v1)
	require.Contains(t, entityIDs(same(zkQ)), "component:zookeeperquorum")
	require.Contains(t, entityIDs(same(ledgerQ)), "service:ledgerreplica")
	same(certQ)
	calls := cs.reset()
	require.Zero(t, calls["EntitiesByType()"], "the name index is patched, not built again: %v", calls)
	require.NotZero(t, calls["EntityParts"], "the changed entities are read by id, by their parts: %v", calls)
	require.Zero(t, calls["Edges component:certmanager"]+calls["EdgesAmong component:certmanager"], "the edges of an entity the change does not name are read once: %v", calls)
	require.NotZero(t, calls["Edges component:zookeeperquorum"]+calls["EdgesAmong component:zookeeperquorum"], "those of one it names are read again: %v", calls)

	// An edit renaming one and dropping the other.
	v2 := v1
	v2.Entities = []store.EntityContribution{
		{ID: "incident:inc160", Type: "incident", Name: "INC-160", NameRank: 2, TextUnits: []string{"u0"}},
		{ID: "component:zookeeperquorum", Type: "component", Name: "zookeeper ensemble", NameRank: 2, TextUnits: []string{"u0"}},
	}
	v2.Edges = v1.Edges[:1]
	applyAnnounced(t, f.st, bus, "INC-160", 2, &v2)
	require.Contains(t, entityIDs(same("What happened to the zookeeper ensemble?")), "component:zookeeperquorum")
	require.NotContains(t, entityIDs(same(ledgerQ)), "service:ledgerreplica")
	same(zkQ)

	// A deletion: the entities only it named are gone.
	applyAnnounced(t, f.st, bus, "INC-160", 3, nil)
	require.NotContains(t, entityIDs(same("What happened to the zookeeper ensemble?")), "component:zookeeperquorum")
	same(certQ)
	calls = cs.reset()
	require.Zero(t, calls["EntitiesByType()"], "the name index is patched, not built again: %v", calls)

	// An event that names no entity drops the index: it is built again.
	v4 := v1
	v4.Title = "INC-161"
	announceApply(t, f.st, tenantAcme, "INC-161", 1, incidentACL(), v4)
	_, err := bus.Publish(t.Context(), events.KindGraphChanged, tenantAcme, "graph-INC-161-1",
		&events.GraphChanged{Header: events.Header{Tenant: tenantAcme}, DocID: "INC-161", Version: 1})
	require.NoError(t, err)
	require.Contains(t, entityIDs(same(ledgerQ)), "service:ledgerreplica")
	require.NotZero(t, cs.reset()["EntitiesByType()"], "built again")

	// So does one naming only the entities it touched (an older
	// resolver's, without Contributed): it says nothing of the entities
	// whose fragments it changed.
	v5 := v1
	v5.Title = "INC-162"
	announceApply(t, f.st, tenantAcme, "INC-162", 1, incidentACL(), v5)
	_, err = bus.Publish(t.Context(), events.KindGraphChanged, tenantAcme, "graph-INC-162-1",
		&events.GraphChanged{Header: events.Header{Tenant: tenantAcme}, DocID: "INC-162", Version: 1, Touched: []string{"incident:inc162"}})
	require.NoError(t, err)
	require.Contains(t, entityIDs(same(ledgerQ)), "service:ledgerreplica")
	require.NotZero(t, cs.reset()["EntitiesByType()"], "built again without Contributed")

	// And one of a change applied again (its first announcement failed),
	// whose Contributed cannot name what the version before held.
	v6 := v1
	v6.Title = "INC-163"
	announceApply(t, f.st, tenantAcme, "INC-163", 1, incidentACL(), v6)
	_, err = bus.Publish(t.Context(), events.KindGraphChanged, tenantAcme, "graph-INC-163-1",
		&events.GraphChanged{Header: events.Header{Tenant: tenantAcme}, DocID: "INC-163", Version: 1, Duplicate: true,
			Contributed: []string{"incident:inc163"}})
	require.NoError(t, err)
	require.Contains(t, entityIDs(same(ledgerQ)), "service:ledgerreplica")
	require.NotZero(t, cs.reset()["EntitiesByType()"], "built again for a duplicate")
}

// TestNameIndexUnderConcurrentChanges: local questions asked while
// documents are applied and announced (sets succeeding one another while
// requests patch their indexes, some waiting for the one under way) end
// with the live service answering as a service without caches does.
func TestNameIndexUnderConcurrentChanges(t *testing.T) {
	f, cs, bus := newCachingFixture(t)
	cold := coldFixture(t, cs.Stores)
	questions := []string{"What happened to cert-manager?", "What happened to the zookeeper quorum?", "What happened to the ledger replica?"}
	streamtest.Eventually(t, 10*time.Second, func() error {
		cs.reset()
		localAnswer(t, f, questions[0])
		localAnswer(t, f, questions[0])
		if n := cs.reset()["EntitiesByType()"]; n > 1 {
			return fmt.Errorf("%d listings of every entity for two questions", n)
		}
		return nil
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for i := c; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				localAnswer(t, f, questions[i%len(questions)])
			}
		})
	}
	// Each change is a new document naming a component of its own besides
	// a shared one, so a change the index lost is named by no later one:
	// the last check asks about every component.
	var unique []string
	for i := range 20 {
		doc := fmt.Sprintf("INC-%d", 170+i)
		name := []string{"zookeeper quorum", "ledger replica", "cert-manager"}[i%3]
		id := "component:" + strings.ReplaceAll(strings.ReplaceAll(name, " ", ""), "-", "")
		own := fmt.Sprintf("relay %c%c", 'a'+i/5, 'a'+i%5)
		unique = append(unique, "What happened to the "+own+"?")
		text := doc + ": " + name + " and the " + own + " failed."
		c := store.Contributions{Title: doc, DocType: "postmortem",
			TextUnits: []events.TextUnit{{ID: "u0", Text: text, End: len(text)}},
			Entities: []store.EntityContribution{
				{ID: "incident:" + strings.ToLower(strings.ReplaceAll(doc, "-", "")), Type: "incident", Name: doc, NameRank: 2, TextUnits: []string{"u0"}},
				{ID: id, Type: "component", Name: name, NameRank: 2, TextUnits: []string{"u0"}},
				{ID: "component:" + strings.ReplaceAll(own, " ", ""), Type: "component", Name: own, NameRank: 2, TextUnits: []string{"u0"}},
			}}
		applyAnnounced(t, f.st, bus, doc, 1, &c)
	}
	close(stop)
	wg.Wait()
	for i, q := range unique {
		want := fmt.Sprintf("component:relay%c%c", 'a'+i/5, 'a'+i%5)
		require.Contains(t, entityIDs(localAnswer(t, cold, q)), want, "the cold service maps %q", q)
	}
	for _, q := range append(questions, unique...) {
		streamtest.Eventually(t, 10*time.Second, func() error {
			want, got := localAnswer(t, cold, q), localAnswer(t, f, q)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("live answer\n%+v\ncold answer\n%+v", got, want)
			}
			return nil
		})
	}
}
