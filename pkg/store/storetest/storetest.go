// Package storetest is the conformance suite every store adapter must pass:
// one Run that exercises every method of store.Stores through the contract
// alone. An adapter's test calls Run with a constructor of fresh stores.
package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
)

// The tenants the suite writes to; every test gets fresh stores, so they
// never collide.
const (
	tenant = "acme"
	other  = "globex"
)

// NewStores returns fresh, empty stores for one test and registers their
// cleanup (Close, removing their data) with t. Close may already have been
// called by the test; the cleanup must tolerate that.
type NewStores func(t *testing.T) store.Stores

// Run runs the whole suite against the adapter newStores constructs. Tests
// run in parallel, each on its own stores.
func Run(t *testing.T, newStores NewStores) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Stores)
	}{
		{"Registry/AnnounceNextVersion", testAnnounceNextVersion},
		{"Registry/AnnounceExplicitVersion", testAnnounceExplicitVersion},
		{"Registry/AnnounceStaleRefused", testAnnounceStale},
		{"Registry/AnnounceSameVersionIdempotent", testAnnounceIdempotent},
		{"Registry/SetACLBumpsRevision", testSetACL},
		{"Registry/MarkDeleted", testMarkDeleted},
		{"Registry/RecreateAfterDelete", testRecreateAfterDelete},
		{"Registry/TenantsIsolated", testRegistryTenants},
		{"Registry/UnknownIDsAbsent", testRegistryUnknown},
		{"Registry/InvalidArguments", testRegistryInvalid},
		{"Registry/ConcurrentAnnounce", testConcurrentAnnounce},
		{"Registry/VersionBounds", testVersionBounds},
		{"Registry/ContentHash", testContentHash},
		{"Registry/IDsAsPeopleWriteThem", testIDsAsPeopleWriteThem},
		{"Registry/Generation", testRegistryGeneration},
		{"Registry/Changes", testRegistryChanges},
		{"Registry/SourceCounts", testSourceCounts},

		{"Graph/Apply", testApply},
		{"Graph/SameVersionIsDuplicate", testApplyDuplicate},
		{"Graph/ReResolutionReplaces", testReResolution},
		{"Graph/NewerVersionRetracts", testNewerVersionRetracts},
		{"Graph/OlderVersionIsStale", testOlderVersionStale},
		{"Graph/DeleteKeepsWhatOthersSupport", testDeleteKeepsShared},
		{"Graph/TombstoneRefusesOlder", testTombstone},
		{"Graph/DisplayNameRanks", testDisplayName},
		{"Graph/MergesWithinDocument", testMergeWithinDocument},
		{"Graph/Touched", testTouched},
		{"Graph/EdgesInOut", testEdges},
		{"Graph/EntitiesByType", testEntitiesByType},
		{"Graph/SnapshotStatsTenants", testSnapshotStats},
		{"Graph/TypeChange", testTypeChange},
		{"Graph/InvalidContributions", testInvalidContributions},
		{"Graph/AmbiguousEdgeID", testAmbiguousEdgeID},
		{"Graph/ConcurrentSourcesSharingEntities", testConcurrentSources},
		{"Graph/ConcurrentVersionsOfOneSource", testConcurrentVersions},
		{"Graph/ReadsDuringWrites", testReadsDuringWrites},
		{"Graph/LargeSource", testLargeSource},
		{"Graph/Unicode", testUnicode},
		{"Graph/Model", testModel},
		{"Graph/AccessPaths", testAccessPaths},
		{"Graph/ApplyBatch", testApplyBatch},
		{"Graph/ApplyBatchDependent", testApplyBatchDependent},
		{"Graph/EntityParts", testEntityParts},
		{"Graph/EdgesAmong", testEdgesAmong},
		{"Graph/SourceRecords", testSourceRecords},
		{"Graph/SourceIndexes", testSourceIndexes},
		{"Graph/Generation", testGraphGeneration},

		{"TenantIsolation", testTenantIsolation},
		{"Communities", testCommunities},
		{"Communities/MemberIndex", testCommunityMembers},
		{"Communities/ByID", testCommunitiesByID},
		{"Reports", testReports},
		{"Reports/BySourceIndex", testReportIndex},
		{"Reports/CitationsOf", testReportCitationsOf},
		{"Reports/Batch", testReportsBatch},
		{"PingClose", testPingClose},
	}
	tests = append(tests, outboxCases...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStores(t))
		})
	}
}

// --- builders --------------------------------------------------------------

// ent is an entity contribution; the type is the id's prefix.
func ent(id, name string, rank int, units ...string) store.EntityContribution {
	typ, _ := resolve.SplitID(id)
	return store.EntityContribution{ID: id, Type: typ, Name: name, NameRank: rank,
		Description: name + " described", TextUnits: units}
}

// edge is an edge contribution.
func edge(src, rel, dst string, w float64, units ...string) store.EdgeContribution {
	return store.EdgeContribution{Source: src, Relation: rel, Target: dst, Weight: w,
		Description: src + " " + rel + " " + dst, TextUnits: units}
}

// contrib bundles contributions with a text unit for every unit they cite.
func contrib(ents []store.EntityContribution, edges ...store.EdgeContribution) store.Contributions {
	seen := map[string]bool{}
	var units []events.TextUnit
	addUnits := func(ids []string) {
		for _, u := range ids {
			if !seen[u] {
				seen[u] = true
				units = append(units, events.TextUnit{ID: u, Text: "text of " + u, End: len(u)})
			}
		}
	}
	for _, e := range ents {
		addUnits(e.TextUnits)
	}
	for _, e := range edges {
		addUnits(e.TextUnits)
	}
	return store.Contributions{Title: "a document", DocType: "wiki", TextUnits: units,
		Entities: ents, Edges: edges, ReceivedAt: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)}
}

func ents(es ...store.EntityContribution) []store.EntityContribution { return es }

// --- helpers ---------------------------------------------------------------

// apply applies and fails the test on error; it retries store.ErrConflict,
// which the contract allows an adapter to return under contention.
func apply(t *testing.T, s store.Stores, tn, doc string, v int64, c store.Contributions) store.ApplyResult {
	t.Helper()
	res, err := retry(func() (store.ApplyResult, error) { return s.Apply(t.Context(), tn, doc, v, c) })
	require.NoError(t, err, "applying %s@%d", doc, v)
	return res
}

func del(t *testing.T, s store.Stores, tn, doc string, v int64) store.ApplyResult {
	t.Helper()
	res, err := retry(func() (store.ApplyResult, error) { return s.Delete(t.Context(), tn, doc, v) })
	require.NoError(t, err, "deleting %s@%d", doc, v)
	return res
}

func retry[T any](fn func() (T, error)) (T, error) {
	for range 100 {
		v, err := fn()
		if !errors.Is(err, store.ErrConflict) {
			return v, err
		}
	}
	return fn()
}

// requireClean audits the tenant: no orphan, no mismatch, and counts that
// agree with Stats and Snapshot. The suite calls it after every write.
func requireClean(t *testing.T, s store.Stores, tn string) store.AuditReport {
	t.Helper()
	ctx := t.Context()
	rep, err := s.Audit(ctx, tn)
	require.NoError(t, err)
	require.Zero(t, rep.OrphanEdges, "orphan edges: %v", rep.Problems)
	require.Zero(t, rep.OrphanEntities, "orphan entities: %v", rep.Problems)
	require.Zero(t, rep.IndexMismatches, "index mismatches: %v", rep.Problems)
	require.Empty(t, rep.Problems)
	st, err := s.Stats(ctx, tn)
	require.NoError(t, err)
	require.Equal(t, store.Stats{Sources: rep.Sources, Entities: rep.Entities, Edges: rep.Edges}, st)
	g, err := s.Snapshot(ctx, tn)
	require.NoError(t, err)
	require.Len(t, g.Entities, st.Entities)
	require.Len(t, g.Edges, st.Edges)
	return rep
}

func snapshot(t *testing.T, s store.Stores, tn string) store.Graph {
	t.Helper()
	g, err := s.Snapshot(t.Context(), tn)
	require.NoError(t, err)
	return g
}

func entity(t *testing.T, s store.Stores, tn, id string) store.Entity {
	t.Helper()
	e, err := s.Entity(t.Context(), tn, id)
	require.NoError(t, err, "getting entity %q", id)
	return e
}

func requireNoEntity(t *testing.T, s store.Stores, tn, id string) {
	t.Helper()
	_, err := s.Entity(t.Context(), tn, id)
	require.ErrorIs(t, err, store.ErrNotFound, "entity %q", id)
}

func source(t *testing.T, s store.Stores, tn, doc string) store.SourceRecord {
	t.Helper()
	r, err := s.Source(t.Context(), tn, doc)
	require.NoError(t, err, "getting source %q", doc)
	return r
}

func edges(t *testing.T, s store.Stores, tn, id string, dir store.Direction) []string {
	t.Helper()
	es, err := s.Edges(t.Context(), tn, id, dir)
	require.NoError(t, err)
	ids := []string{}
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

func entityIDs(es []store.Entity) []string {
	ids := []string{}
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

func edgeIDs(es []store.Edge) []string {
	ids := []string{}
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

func docsOf(fs []store.Fragment) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s@%d", f.DocID, f.Version))
	}
	return out
}

// parallel runs fn(i) for i in [0,n) concurrently and returns the first
// error. Goroutines must not call t.FailNow, hence errors.
func parallel(n int, fn func(i int) error) error {
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- fn(i) }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
