// Package vectortest is the conformance suite every vector index adapter
// must pass: one Run that exercises vector.Index through the contract alone.
// An adapter's test calls Run with a constructor of fresh, empty indexes.
package vectortest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

// The tenants the suite writes to; every test gets a fresh index, so they
// never collide.
const (
	tenant = "acme"
	other  = "globex"
)

// scoreTolerance absorbs float32 rounding and an adapter's distance
// arithmetic.
const scoreTolerance = 1e-3

// NewIndex returns a fresh, empty index for one test and registers its
// cleanup (Close, removing its data) with t. The test may already have
// called Close; the cleanup must tolerate that.
type NewIndex func(t *testing.T) vector.Index

// Run runs the whole suite against the adapter newIndex constructs. Tests
// run in parallel, each on its own index.
func Run(t *testing.T, newIndex NewIndex) {
	tests := []struct {
		name string
		fn   func(t *testing.T, ix vector.Index)
	}{
		{"UpsertSearchRanking", testRanking},
		{"RoundTrip", testRoundTrip},
		{"K", testK},
		{"KindsSeparate", testKinds},
		{"TenantIsolation", testTenants},
		{"ACLPreFilter", testACLPreFilter},
		{"ACLPrincipalsAndGroups", testACLPrincipals},
		{"DerivedItemNeedsEverySource", testDerived},
		{"UpdateACLRevokes", testUpdateACL},
		{"ScanSources", testScanSources},
		{"AuditACLs", testAuditACLs},
		{"AuditSourcesCountsStale", testAuditSources},
		{"Delete", testDelete},
		{"DeleteByDoc", testDeleteByDoc},
		{"DeleteByDocOfKinds", testDeleteByDocKinds},
		{"PatchSources", testPatchSources},
		{"PatchSourcesRevokesAndRemoves", testPatchRevokes},
		{"PatchSourcesInvalid", testPatchInvalid},
		{"PatchSourcesMaxSources", testPatchMaxSources},
		{"UpsertReplaces", testUpsertReplaces},
		{"InvalidItemsNamed", testInvalidItems},
		{"DimensionMismatchNamed", testDimensionMismatch},
		{"InvalidArguments", testInvalidArguments},
		{"Unicode", testUnicode},
		{"LargeBatch", testLargeBatch},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newIndex(t))
		})
	}
}

// --- builders --------------------------------------------------------------

var (
	public = provenance.PublicACL()
	eng    = provenance.ACL{Groups: []string{"eng"}}
	secret = provenance.ACL{Groups: []string{"secret"}}

	anyone   = vector.Filter{}
	engineer = vector.Filter{Principal: "erin", Groups: []string{"eng"}}
	insider  = vector.Filter{Principal: "ivan", Groups: []string{"eng", "secret"}}
)

// src is a source at version 1 with an ACL.
func src(doc string, acl provenance.ACL) vector.Source {
	return vector.Source{SourceRef: provenance.SourceRef{DocID: doc, Version: 1}, ACL: acl}
}

// unit is a text unit of one document.
func unit(id string, v []float32, doc string, acl provenance.ACL) vector.Item {
	s := src(doc, acl)
	s.TextUnit = id
	return vector.Item{ID: id, Kind: vector.KindTextUnit, Vector: v, Text: "text of " + id, Sources: []vector.Source{s}}
}

// report is a report built from several sources.
func report(id string, v []float32, sources ...vector.Source) vector.Item {
	return vector.Item{ID: id, Kind: vector.KindReport, Vector: v, Text: "report " + id, Sources: sources}
}

// angle is the 2-d unit vector at deg degrees from the x axis, padded to 4
// dimensions; cosine between two of them is cos(difference).
func angle(deg float64) []float32 {
	r := deg * math.Pi / 180
	return []float32{float32(math.Cos(r)), float32(math.Sin(r)), 0, 0}
}

var query = angle(0)

// --- helpers ---------------------------------------------------------------

func upsert(t *testing.T, ix vector.Index, tn string, items ...vector.Item) {
	t.Helper()
	require.NoError(t, ix.Upsert(t.Context(), tn, items), "upserting %d items into %q", len(items), tn)
}

func search(t *testing.T, ix vector.Index, tn string, kind vector.Kind, v []float32, k int, f vector.Filter) []vector.Hit {
	t.Helper()
	hits, err := ix.Search(t.Context(), tn, kind, v, k, f)
	require.NoError(t, err, "searching %s in %q", kind, tn)
	require.LessOrEqual(t, len(hits), k)
	for i := 1; i < len(hits); i++ {
		require.GreaterOrEqual(t, hits[i-1].Score, hits[i].Score-1e-6, "hits out of order: %v", ids(hits))
	}
	for _, h := range hits {
		require.Equal(t, kind, h.Kind, "hit %q", h.ID)
		require.True(t, h.ReadableBy(f), "hit %q is not readable by %+v: %+v", h.ID, f, h.Sources)
	}
	return hits
}

func ids(hits []vector.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func searchIDs(t *testing.T, ix vector.Index, tn string, kind vector.Kind, v []float32, k int, f vector.Filter) []string {
	t.Helper()
	return ids(search(t, ix, tn, kind, v, k, f))
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// --- tests -----------------------------------------------------------------

func testRanking(t *testing.T, ix vector.Index) {
	// Angles from the query; inserted out of order so the result order is
	// the index's doing.
	degs := map[string]float64{"u30": 30, "u100": 100, "u5": 5, "u60": 60, "u170": 170, "u45": 45}
	var items []vector.Item
	for _, id := range []string{"u60", "u5", "u170", "u30", "u100", "u45"} {
		items = append(items, unit(id, angle(degs[id]), "d-"+id, public))
	}
	upsert(t, ix, tenant, items...)

	hits := search(t, ix, tenant, vector.KindTextUnit, query, 10, anyone)
	require.Equal(t, []string{"u5", "u30", "u45", "u60", "u100", "u170"}, ids(hits))
	for _, h := range hits {
		want := math.Cos(degs[h.ID] * math.Pi / 180)
		require.InDelta(t, want, float64(h.Score), scoreTolerance, "score of %q", h.ID)
		require.Nil(t, h.Vector, "hits carry no vector")
	}

	// The vector's length does not matter, only its direction.
	long := []float32{0, 7, 0, 0} // 90 degrees
	require.Equal(t, []string{"u100", "u60", "u45"}, searchIDs(t, ix, tenant, vector.KindTextUnit, long, 3, anyone))
}

func testRoundTrip(t *testing.T, ix vector.Index) {
	it := vector.Item{
		ID: "r1", Kind: vector.KindReport, Vector: angle(10), Text: "Expired certificates broke the login flow.",
		Sources: []vector.Source{
			{SourceRef: provenance.SourceRef{DocID: "INC-101", Version: 3}, ACL: provenance.ACL{Groups: []string{"eng", "sre"}, Principals: []string{"ann"}}},
			{SourceRef: provenance.SourceRef{DocID: "wiki-certs", Version: 12}, ACL: public},
		},
		Metadata: map[string]string{"community": "c-7", "level": "1"},
	}
	upsert(t, ix, tenant, it)
	hits := search(t, ix, tenant, vector.KindReport, query, 1, engineer)
	require.Len(t, hits, 1)
	got := hits[0].Item
	want := it
	want.Vector = nil
	require.Equal(t, want, got)
	require.Equal(t, []string{"INC-101", "wiki-certs"}, got.DocIDs())
	require.Equal(t, []provenance.SourceRef{{DocID: "INC-101", Version: 3}, {DocID: "wiki-certs", Version: 12}}, got.Refs())
}

func testK(t *testing.T, ix vector.Index) {
	var items []vector.Item
	for i := range 10 {
		items = append(items, unit(fmt.Sprintf("u%02d", i), angle(float64(i*10+1)), "d", public))
	}
	upsert(t, ix, tenant, items...)
	require.Equal(t, []string{"u00"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 1, anyone))
	require.Equal(t, []string{"u00", "u01", "u02"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 3, anyone))
	require.Len(t, searchIDs(t, ix, tenant, vector.KindTextUnit, query, vector.MaxK, anyone), 10)
	for _, k := range []int{0, -1, vector.MaxK + 1} {
		_, err := ix.Search(t.Context(), tenant, vector.KindTextUnit, query, k, anyone)
		require.ErrorIs(t, err, vector.ErrInvalid, "k = %d", k)
	}
}

func testKinds(t *testing.T, ix vector.Index) {
	// The same id under three kinds is three items.
	tu := unit("x", angle(10), "d1", public)
	en := vector.Item{ID: "x", Kind: vector.KindEntity, Vector: angle(20), Text: "entity x", Sources: []vector.Source{src("d1", public)}}
	rp := report("x", angle(30), src("d1", public))
	upsert(t, ix, tenant, tu, en, rp, unit("y", angle(40), "d2", public))

	require.Equal(t, []string{"x", "y"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
	hits := search(t, ix, tenant, vector.KindEntity, query, 10, anyone)
	require.Equal(t, []string{"x"}, ids(hits))
	require.Equal(t, "entity x", hits[0].Text)
	hits = search(t, ix, tenant, vector.KindReport, query, 10, anyone)
	require.Equal(t, []string{"x"}, ids(hits))
	require.Equal(t, "report x", hits[0].Text)

	// Delete removes the id under every kind.
	require.NoError(t, ix.Delete(t.Context(), tenant, []string{"x"}))
	for _, k := range vector.Kinds() {
		require.NotContains(t, searchIDs(t, ix, tenant, k, query, 10, anyone), "x", "kind %s", k)
	}
	require.Equal(t, []string{"y"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
}

func testTenants(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	upsert(t, ix, tenant, unit("a", angle(10), "d", public), unit("b", angle(20), "d", public))
	// Same ids, other vectors and texts, other dimensions even.
	oa := unit("a", []float32{0, 1, 0, 0, 0, 0}, "d", public)
	oa.Text = "globex a"
	oc := unit("c", []float32{1, 0, 0, 0, 0, 0}, "d", public)
	upsert(t, ix, other, oa, oc)

	hits := search(t, ix, tenant, vector.KindTextUnit, query, 10, anyone)
	require.Equal(t, []string{"a", "b"}, ids(hits))
	require.Equal(t, "text of a", hits[0].Text)
	hits = search(t, ix, other, vector.KindTextUnit, []float32{1, 0, 0, 0, 0, 0}, 10, anyone)
	require.Equal(t, []string{"c", "a"}, ids(hits))
	require.Equal(t, "globex a", hits[1].Text)

	// Writes in one tenant leave the other alone.
	require.NoError(t, ix.DeleteByDoc(ctx, other, "d"))
	require.Empty(t, searchIDs(t, ix, other, vector.KindTextUnit, []float32{1, 0, 0, 0, 0, 0}, 10, anyone))
	require.Equal(t, []string{"a", "b"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
	require.NoError(t, ix.UpdateACL(ctx, tenant, "d", secret))
	upsert(t, ix, other, unit("z", []float32{1, 1, 0, 0, 0, 0}, "d", public))
	require.Equal(t, []string{"z"}, searchIDs(t, ix, other, vector.KindTextUnit, []float32{1, 0, 0, 0, 0, 0}, 10, anyone))
	require.Empty(t, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
	require.NoError(t, ix.Delete(ctx, other, []string{"a", "b"}))
	require.Equal(t, []string{"a", "b"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, insider))

	// A tenant nobody wrote to has nothing, and is no error.
	require.Empty(t, searchIDs(t, ix, "initech", vector.KindTextUnit, query, 10, insider))
	require.NoError(t, ix.Delete(ctx, "initech", []string{"a"}))
	require.NoError(t, ix.DeleteByDoc(ctx, "initech", "d"))
	require.NoError(t, ix.UpdateACL(ctx, "initech", "d", public))
}

func testACLPreFilter(t *testing.T, ix vector.Index) {
	// The ten items nearest the query are secret; behind them ten readable
	// ones. A post-filter over the top k would return nothing.
	var items []vector.Item
	for i := range 10 {
		items = append(items, unit(fmt.Sprintf("s%d", i), angle(float64(i+1)), fmt.Sprintf("sd%d", i), secret))
	}
	for i := range 10 {
		acl := public
		if i%2 == 1 {
			acl = eng
		}
		items = append(items, unit(fmt.Sprintf("r%d", i), angle(float64(20+i*5)), fmt.Sprintf("rd%d", i), acl))
	}
	upsert(t, ix, tenant, items...)

	require.Equal(t, []string{"r0", "r1", "r2", "r3", "r4"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 5, engineer))
	require.Equal(t, []string{"r0", "r2", "r4", "r6", "r8"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 5, anyone))
	require.Equal(t, []string{"s0", "s1", "s2"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 3, insider))
	all := searchIDs(t, ix, tenant, vector.KindTextUnit, query, 100, engineer)
	require.Len(t, all, 10)
	outsider := vector.Filter{Principal: "olga", Groups: []string{"sales"}}
	require.Len(t, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 100, outsider), 5, "public items only")
}

func testACLPrincipals(t *testing.T, ix vector.Index) {
	upsert(t, ix, tenant,
		unit("by-principal", angle(1), "d1", provenance.ACL{Principals: []string{"ann", "bob"}}),
		unit("by-group", angle(2), "d2", provenance.ACL{Groups: []string{"ops", "eng"}}),
		unit("nobody", angle(3), "d3", provenance.ACL{}),
		unit("public", angle(4), "d4", public),
		// A principal named like a group admits the principal only.
		unit("named-eng", angle(5), "d5", provenance.ACL{Principals: []string{"eng"}}),
	)
	cases := []struct {
		f    vector.Filter
		want []string
	}{
		{vector.Filter{Principal: "ann"}, []string{"by-principal", "public"}},
		{vector.Filter{Principal: "bob", Groups: []string{"eng"}}, []string{"by-principal", "by-group", "public"}},
		{vector.Filter{Principal: "carl", Groups: []string{"ops"}}, []string{"by-group", "public"}},
		{vector.Filter{Principal: "eng"}, []string{"public", "named-eng"}},
		{vector.Filter{Groups: []string{"ann"}}, []string{"public"}},
		{anyone, []string{"public"}},
	}
	for _, c := range cases {
		require.Equal(t, c.want, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, c.f), "filter %+v", c.f)
	}
}

func testDerived(t *testing.T, ix vector.Index) {
	sre := src("INC-1", provenance.ACL{Groups: []string{"sre"}})
	db := src("INC-2", provenance.ACL{Groups: []string{"db"}, Principals: []string{"dana"}})
	pub := src("wiki", public)
	upsert(t, ix, tenant,
		report("both", angle(1), sre, db, pub),
		report("sre-only", angle(2), sre, pub),
		report("public", angle(3), pub),
	)
	cases := []struct {
		f    vector.Filter
		want []string
	}{
		{vector.Filter{Groups: []string{"sre"}}, []string{"sre-only", "public"}},
		{vector.Filter{Groups: []string{"db"}}, []string{"public"}},
		{vector.Filter{Groups: []string{"sre", "db"}}, []string{"both", "sre-only", "public"}},
		{vector.Filter{Principal: "dana", Groups: []string{"sre"}}, []string{"both", "sre-only", "public"}},
		{vector.Filter{Principal: "dana"}, []string{"public"}},
	}
	for _, c := range cases {
		require.Equal(t, c.want, searchIDs(t, ix, tenant, vector.KindReport, query, 10, c.f), "filter %+v", c.f)
	}
}

func testUpdateACL(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	var items []vector.Item
	for i := range 5 {
		items = append(items, unit(fmt.Sprintf("d1-%d", i), angle(float64(1+i)), "d1", public))
	}
	items = append(items,
		unit("d2-0", angle(10), "d2", public),
		report("r12", angle(11), src("d1", public), src("d2", public)),
		report("r2", angle(12), src("d2", public)),
	)
	upsert(t, ix, tenant, items...)
	require.Len(t, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone), 6)

	// Revoke d1 from everyone but the secret group: its units and every
	// report built on it vanish at once for the others.
	require.NoError(t, ix.UpdateACL(ctx, tenant, "d1", secret))
	require.Equal(t, []string{"d2-0"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, engineer))
	require.Equal(t, []string{"r2"}, searchIDs(t, ix, tenant, vector.KindReport, query, 10, engineer))
	require.Equal(t, []string{"d1-0", "d1-1", "d1-2", "d1-3", "d1-4", "d2-0"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, insider))
	require.Equal(t, []string{"r12", "r2"}, searchIDs(t, ix, tenant, vector.KindReport, query, 10, insider))

	// The stored ACL is the new one; the other source keeps its own.
	hits := search(t, ix, tenant, vector.KindReport, query, 1, insider)
	require.Equal(t, []vector.Source{src("d1", secret), src("d2", public)}, hits[0].Sources)

	// Narrow d2 to eng: r12 now needs secret AND eng.
	require.NoError(t, ix.UpdateACL(ctx, tenant, "d2", eng))
	require.Empty(t, searchIDs(t, ix, tenant, vector.KindReport, query, 10, anyone))
	require.Equal(t, []string{"r2"}, searchIDs(t, ix, tenant, vector.KindReport, query, 10, engineer))
	require.Equal(t, []string{"r12", "r2"}, searchIDs(t, ix, tenant, vector.KindReport, query, 10, insider))
	onlySecret := vector.Filter{Groups: []string{"secret"}}
	require.Empty(t, searchIDs(t, ix, tenant, vector.KindReport, query, 10, onlySecret))

	// Granting works the same way, and an unknown document is no error.
	require.NoError(t, ix.UpdateACL(ctx, tenant, "d1", public))
	require.NoError(t, ix.UpdateACL(ctx, tenant, "d2", public))
	require.Len(t, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone), 6)
	require.Equal(t, []string{"r12", "r2"}, searchIDs(t, ix, tenant, vector.KindReport, query, 10, anyone))
	require.NoError(t, ix.UpdateACL(ctx, tenant, "never-seen", secret))
}

// scan returns what ScanSources reports, sorted by kind and id.
func scan(t *testing.T, ix vector.Index, tn, docID string) []vector.ItemSources {
	t.Helper()
	var out []vector.ItemSources
	require.NoError(t, ix.ScanSources(t.Context(), tn, docID, func(it vector.ItemSources) error {
		out = append(out, it)
		return nil
	}), "scanning %q of %q", docID, tn)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func testScanSources(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	messy := provenance.ACL{Groups: []string{"sre", "eng", "eng"}, Principals: []string{"zed", "amy"},
		Writers: provenance.Writers{Groups: []string{"w"}}}
	tidy := provenance.ACL{Groups: []string{"eng", "sre"}, Principals: []string{"amy", "zed"}}
	upsert(t, ix, tenant,
		unit("d1-a", angle(1), "d1", messy), unit("d1-b", angle(2), "d1", messy),
		unit("d2-a", angle(3), "d2", public),
		report("r12", angle(4), src("d1", messy), src("d2", public)),
		vector.Item{ID: "e2", Kind: vector.KindEntity, Vector: angle(5), Text: "e2", Sources: []vector.Source{src("d2", public)}},
	)
	upsert(t, ix, other, unit("o-a", angle(1), "d1", public))
	u := func(id, doc string, acl provenance.ACL) vector.ItemSources {
		s := src(doc, acl)
		s.TextUnit = id
		return vector.ItemSources{Kind: vector.KindTextUnit, ID: id, Sources: []vector.Source{s}}
	}
	r12 := vector.ItemSources{Kind: vector.KindReport, ID: "r12", Sources: []vector.Source{src("d1", tidy), src("d2", public)}}
	e2 := vector.ItemSources{Kind: vector.KindEntity, ID: "e2", Sources: []vector.Source{src("d2", public)}}

	// A document's items, sources in the stored (normalised) form.
	require.Equal(t, []vector.ItemSources{r12, u("d1-a", "d1", tidy), u("d1-b", "d1", tidy)}, scan(t, ix, tenant, "d1"))
	require.Equal(t, []vector.ItemSources{e2, r12, u("d2-a", "d2", public)}, scan(t, ix, tenant, "d2"))
	// Every item of the tenant, and only of the tenant.
	require.Equal(t, []vector.ItemSources{e2, r12, u("d1-a", "d1", tidy), u("d1-b", "d1", tidy), u("d2-a", "d2", public)},
		scan(t, ix, tenant, ""))
	require.Equal(t, []vector.ItemSources{u("o-a", "d1", public)}, scan(t, ix, other, ""))
	require.Empty(t, scan(t, ix, tenant, "never-seen"))
	require.Empty(t, scan(t, ix, "initech", ""))

	// The copies follow UpdateACL and DeleteByDoc.
	require.NoError(t, ix.UpdateACL(ctx, tenant, "d1", secret))
	r12.Sources[0].ACL = secret
	require.Equal(t, []vector.ItemSources{r12, u("d1-a", "d1", secret), u("d1-b", "d1", secret)}, scan(t, ix, tenant, "d1"))
	require.NoError(t, ix.DeleteByDoc(ctx, tenant, "d2"))
	require.Equal(t, []vector.ItemSources{u("d1-a", "d1", secret), u("d1-b", "d1", secret)}, scan(t, ix, tenant, ""))

	// fn's error stops the scan and comes back.
	stop := errors.New("stop")
	calls := 0
	err := ix.ScanSources(ctx, tenant, "", func(vector.ItemSources) error { calls++; return stop })
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, calls)
	for name, err := range map[string]error{
		"bad tenant": ix.ScanSources(ctx, "Bad Tenant", "", func(vector.ItemSources) error { return nil }),
		"bad doc":    ix.ScanSources(ctx, tenant, " a", func(vector.ItemSources) error { return nil }),
	} {
		require.ErrorIs(t, err, vector.ErrInvalid, name)
	}
}

// testAuditACLs checks vector.AuditACLs over the adapter: an ACL change
// the index missed is a mismatch until applied; items of a document the
// registry no longer has are orphans.
func testAuditACLs(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	upsert(t, ix, tenant,
		unit("d1-a", angle(1), "d1", eng), unit("d1-b", angle(2), "d1", eng),
		unit("d2-a", angle(3), "d2", public),
		report("r12", angle(4), src("d1", eng), src("d2", public)),
		unit("gone-a", angle(5), "gone", public),
	)
	// The registry lists groups in another order and names writers: the
	// same readers, so no mismatch.
	live := map[string]provenance.ACL{
		"d1": {Groups: []string{"eng", "eng"}, Writers: provenance.Writers{Principals: []string{"w"}}},
		"d2": public,
	}
	a, err := vector.AuditACLs(ctx, ix, tenant, live)
	require.NoError(t, err)
	require.Equal(t, 5, a.Items)
	require.Zero(t, a.ACLMismatches, "%v", a.Problems)
	require.Equal(t, 1, a.Orphans, "gone-a: its document is unknown to the registry")

	// d1 narrowed to secret in the registry; the index missed the event.
	live["d1"] = secret
	a, err = vector.AuditACLs(ctx, ix, tenant, live)
	require.NoError(t, err)
	require.Equal(t, 3, a.ACLMismatches, "d1-a, d1-b and r12: %v", a.Problems)
	require.Len(t, a.Problems, 4)
	require.NoError(t, ix.UpdateACL(ctx, tenant, "d1", secret))
	require.NoError(t, ix.DeleteByDoc(ctx, tenant, "gone"))
	a, err = vector.AuditACLs(ctx, ix, tenant, live)
	require.NoError(t, err)
	require.Equal(t, vector.ACLAudit{Items: 4}, a)

	// An unknown tenant has nothing to audit.
	a, err = vector.AuditACLs(ctx, ix, "initech", live)
	require.NoError(t, err)
	require.Equal(t, vector.ACLAudit{}, a)
}

// testAuditSources checks vector.AuditSources over the adapter: items
// built from a version the registry has moved on from are stale until
// re-indexed, counted apart from ACL mismatches; orphans are not stale.
func testAuditSources(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	upsert(t, ix, tenant,
		unit("d1-a", angle(1), "d1", eng), unit("d2-a", angle(3), "d2", public),
		report("r12", angle(4), src("d1", eng), src("d2", public)),
		unit("gone-a", angle(5), "gone", public),
	)
	srcs := []provenance.SourceState{
		{Tenant: tenant, DocID: "d1", Version: 1, ACL: eng},
		{Tenant: tenant, DocID: "d2", Version: 1, ACL: public},
		{Tenant: tenant, DocID: "gone", Version: 2, Deleted: true, ACL: public},
	}
	a, err := vector.AuditSources(ctx, ix, tenant, srcs)
	require.NoError(t, err)
	require.Equal(t, 4, a.Items)
	require.Zero(t, a.Stale, "%v", a.Problems)
	require.Zero(t, a.ACLMismatches, "%v", a.Problems)
	require.Equal(t, 1, a.Orphans, "gone-a")

	// d1 moves to version 3 (and to another ACL) in the registry; the
	// index still holds version 1.
	srcs[0].Version, srcs[0].ACL = 3, secret
	a, err = vector.AuditSources(ctx, ix, tenant, srcs)
	require.NoError(t, err)
	require.Equal(t, 2, a.Stale, "d1-a and r12: %v", a.Problems)
	require.Equal(t, 2, a.ACLMismatches, "d1-a and r12: %v", a.Problems)
	require.Equal(t, 1, a.Orphans)
	require.Contains(t, a.Problems, `text_unit "d1-a": built from version 1 of "d1", the registry's is 3`)
	ver, err := vector.AuditACLs(ctx, ix, tenant, map[string]provenance.ACL{"d1": secret, "d2": public})
	require.NoError(t, err)
	require.Zero(t, ver.Stale, "AuditACLs knows no versions")

	// Confirmed against the registry read after the scan: an item of a
	// document registered after srcs was listed ("late"), or of one
	// re-permissioned since ("d1" back to eng at version 1, as the index
	// holds it), is no finding; the deleted "gone" still is one.
	upsert(t, ix, tenant, unit("late-a", angle(6), "late", public))
	a, err = vector.AuditSources(ctx, ix, tenant, srcs)
	require.NoError(t, err)
	require.Equal(t, 2, a.Orphans, "gone-a and late-a against the listing: %v", a.Problems)
	var asked []string
	recheck := func(_ context.Context, ids []string) (map[string]provenance.SourceState, error) {
		asked = ids
		return map[string]provenance.SourceState{
			"d1":   {Tenant: tenant, DocID: "d1", Version: 1, ACL: eng},
			"d2":   {Tenant: tenant, DocID: "d2", Version: 1, ACL: public},
			"gone": {Tenant: tenant, DocID: "gone", Version: 2, Deleted: true, ACL: public},
			"late": {Tenant: tenant, DocID: "late", Version: 1, ACL: public},
		}, nil
	}
	a, err = vector.AuditSourcesConfirmed(ctx, ix, tenant, srcs, recheck)
	require.NoError(t, err)
	require.Equal(t, vector.ACLAudit{Items: 5, Orphans: 1,
		Problems: []string{`text_unit "gone-a": built from "gone", which the registry has deleted or does not know`}}, a)
	require.Equal(t, []string{"d1", "d2", "gone", "late"}, asked, "the documents of the findings, once each")
	_, err = vector.AuditSourcesConfirmed(ctx, ix, tenant, srcs, func(context.Context, []string) (map[string]provenance.SourceState, error) {
		return nil, errors.New("registry down")
	})
	require.ErrorContains(t, err, "registry down")
	require.NoError(t, ix.DeleteByDoc(ctx, tenant, "late"))

	// Re-indexed at version 3.
	v3 := src("d1", secret)
	v3.Version = 3
	d1 := unit("d1-a", angle(1), "d1", secret)
	d1.Sources[0].Version = 3
	upsert(t, ix, tenant, d1, report("r12", angle(4), v3, src("d2", public)))
	require.NoError(t, ix.DeleteByDoc(ctx, tenant, "gone"))
	a, err = vector.AuditSources(ctx, ix, tenant, srcs)
	require.NoError(t, err)
	require.Equal(t, vector.ACLAudit{Items: 3}, a)
}

func testDelete(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	upsert(t, ix, tenant, unit("a", angle(1), "d", public), unit("b", angle(2), "d", public), unit("c", angle(3), "d", public))
	require.NoError(t, ix.Delete(ctx, tenant, []string{"b", "absent"}))
	require.Equal(t, []string{"a", "c"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
	require.NoError(t, ix.Delete(ctx, tenant, nil))
	require.NoError(t, ix.Delete(ctx, tenant, []string{"a", "c"}))
	require.Empty(t, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
	// A deleted id can come back.
	upsert(t, ix, tenant, unit("b", angle(2), "d", public))
	require.Equal(t, []string{"b"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
	err := ix.Delete(ctx, tenant, []string{""})
	require.ErrorIs(t, err, vector.ErrInvalid)

	// Of some kinds only: the same id under another kind stays.
	upsert(t, ix, tenant, report("b", angle(3), src("d", public)))
	require.NoError(t, ix.Delete(ctx, tenant, []string{"b"}, vector.KindReport, vector.KindEntity))
	require.Empty(t, searchIDs(t, ix, tenant, vector.KindReport, query, 10, anyone))
	require.Equal(t, []string{"b"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
	require.ErrorIs(t, ix.Delete(ctx, tenant, []string{"b"}, vector.Kind("nope")), vector.ErrInvalid)
}

func testDeleteByDoc(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	upsert(t, ix, tenant,
		unit("d1-a", angle(1), "d1", public), unit("d1-b", angle(2), "d1", public),
		unit("d2-a", angle(3), "d2", public),
		report("r1", angle(4), src("d1", public)),
		report("r12", angle(5), src("d2", public), src("d1", public)),
		report("r2", angle(6), src("d2", public)),
		vector.Item{ID: "e", Kind: vector.KindEntity, Vector: angle(7), Text: "e", Sources: []vector.Source{src("d2", public), src("d1", public)}},
	)
	require.NoError(t, ix.DeleteByDoc(ctx, tenant, "d1"))
	require.Equal(t, []string{"d2-a"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
	require.Equal(t, []string{"r2"}, searchIDs(t, ix, tenant, vector.KindReport, query, 10, anyone))
	require.Empty(t, searchIDs(t, ix, tenant, vector.KindEntity, query, 10, anyone))
	require.NoError(t, ix.DeleteByDoc(ctx, tenant, "d1"), "again")
	require.NoError(t, ix.DeleteByDoc(ctx, tenant, "d2"))
	for _, k := range vector.Kinds() {
		require.Empty(t, searchIDs(t, ix, tenant, k, query, 10, anyone), "kind %s", k)
	}
}

func testDeleteByDocKinds(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	upsert(t, ix, tenant,
		unit("d1-a", angle(1), "d1", public),
		report("r1", angle(4), src("d1", public)),
		vector.Item{ID: "e", Kind: vector.KindEntity, Vector: angle(7), Text: "e", Sources: []vector.Source{src("d2", public), src("d1", public)}},
	)
	require.NoError(t, ix.DeleteByDoc(ctx, tenant, "d1", vector.KindTextUnit, vector.KindReport))
	require.Empty(t, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
	require.Empty(t, searchIDs(t, ix, tenant, vector.KindReport, query, 10, anyone))
	require.Equal(t, []string{"e"}, searchIDs(t, ix, tenant, vector.KindEntity, query, 10, anyone), "another kind is kept")
	require.NoError(t, ix.DeleteByDoc(ctx, tenant, "d1", vector.KindEntity))
	require.Empty(t, searchIDs(t, ix, tenant, vector.KindEntity, query, 10, anyone))
	require.ErrorIs(t, ix.DeleteByDoc(ctx, tenant, "d1", vector.Kind("nope")), vector.ErrInvalid)
}

// hub is an entity item built from n documents, public but for those acls
// names.
func hub(n int, acls map[string]provenance.ACL) vector.Item {
	it := vector.Item{ID: "service:kafka", Kind: vector.KindEntity, Vector: angle(3), Text: "Kafka (service).",
		Metadata: map[string]string{"type": "service", "name": "Kafka"}}
	for i := range n {
		doc := fmt.Sprintf("d%03d", i)
		acl, ok := acls[doc]
		if !ok {
			acl = public
		}
		it.Sources = append(it.Sources, src(doc, acl))
	}
	return it
}

// patch patches one item and returns whether it was applied.
func patch(t *testing.T, ix vector.Index, p vector.SourcePatch) bool {
	t.Helper()
	applied, err := ix.PatchSources(t.Context(), tenant, []vector.SourcePatch{p})
	require.NoError(t, err, "patching %q", p.ID)
	require.Len(t, applied, 1)
	return applied[0]
}

// scanIDs returns the ids of the items ScanSources names for docID.
func scanIDs(t *testing.T, ix vector.Index, docID string) []string {
	t.Helper()
	var out []string
	for _, it := range scan(t, ix, tenant, docID) {
		out = append(out, it.ID)
	}
	return out
}

// entityHit returns the entity item id as insider reads it, or fails.
func entityHit(t *testing.T, ix vector.Index, id string) vector.Item {
	t.Helper()
	for _, h := range search(t, ix, tenant, vector.KindEntity, query, 10, insider) {
		if h.ID == id {
			return h.Item
		}
	}
	require.Failf(t, "missing item", "entity %q is not found", id)
	return vector.Item{}
}

func testPatchSources(t *testing.T, ix vector.Index) {
	it := hub(50, nil)
	upsert(t, ix, tenant, it, unit("u", angle(1), "d001", public))
	p := vector.SourcePatch{Kind: vector.KindEntity, ID: it.ID, Text: it.Text, Metadata: it.Metadata}

	// An edit moves one source to its new version in place, a new document
	// is added after the others, a document that no longer names the
	// entity goes; text, vector and metadata stay.
	edited := src("d010", eng)
	edited.Version = 2
	p.Put = []vector.Source{edited, src("d999", public)}
	p.Remove = []string{"d020", "never-a-source"}
	require.True(t, patch(t, ix, p))
	want := it
	want.Vector = nil
	want.Sources = p.PatchedSources(it.Sources)
	require.Len(t, want.Sources, 50)
	require.Equal(t, edited, want.Sources[10])
	require.Equal(t, "d999", want.Sources[49].DocID)
	got := entityHit(t, ix, it.ID)
	require.Equal(t, want, got)
	hits := search(t, ix, tenant, vector.KindEntity, query, 1, insider)
	require.InDelta(t, math.Cos(3*math.Pi/180), float64(hits[0].Score), scoreTolerance, "the vector is kept")
	require.Empty(t, searchIDs(t, ix, tenant, vector.KindEntity, query, 10, anyone), "d010 is eng's now")
	require.Equal(t, []string{"service:kafka"}, searchIDs(t, ix, tenant, vector.KindEntity, query, 10, engineer))

	// Documents follow the patch: DeleteByDoc and UpdateACL of a removed
	// document do not reach the item, of an added one they do.
	require.NoError(t, ix.UpdateACL(t.Context(), tenant, "d020", secret))
	require.Equal(t, []string{"service:kafka"}, searchIDs(t, ix, tenant, vector.KindEntity, query, 10, engineer))
	require.Equal(t, []string{it.ID}, scanIDs(t, ix, "d999"))
	require.Empty(t, scanIDs(t, ix, "d020"))
	require.Equal(t, []string{it.ID, "u"}, scanIDs(t, ix, "d001"))
	require.Equal(t, want.Sources, scan(t, ix, tenant, "d999")[0].Sources)

	// Another text or metadata, or an absent item: nothing changes.
	other := p
	other.Text = "Kafka (service). A broker."
	other.Put, other.Remove = nil, []string{"d000"}
	require.False(t, patch(t, ix, other))
	other = p
	other.Metadata = map[string]string{"type": "service"}
	other.Put, other.Remove = nil, []string{"d000"}
	require.False(t, patch(t, ix, other))
	absent := p
	absent.ID = "service:absent"
	require.False(t, patch(t, ix, absent))
	wrongKind := p
	wrongKind.Kind = vector.KindReport
	require.False(t, patch(t, ix, wrongKind))
	require.Equal(t, want, entityHit(t, ix, it.ID))

	// Applying a patch again changes nothing more.
	require.True(t, patch(t, ix, p))
	require.Equal(t, want, entityHit(t, ix, it.ID))
}

func testPatchRevokes(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	it := hub(5, map[string]provenance.ACL{"d002": eng})
	small := vector.Item{ID: "e-small", Kind: vector.KindEntity, Vector: angle(5), Text: "small", Sources: []vector.Source{src("d001", public)}}
	upsert(t, ix, tenant, it, small)
	require.Equal(t, []string{"service:kafka", "e-small"}, searchIDs(t, ix, tenant, vector.KindEntity, query, 10, engineer))

	// A patch narrowing one source's ACL takes effect for the next Search.
	p := vector.SourcePatch{Kind: vector.KindEntity, ID: it.ID, Text: it.Text, Metadata: it.Metadata, Put: []vector.Source{src("d003", secret)}}
	s2 := p
	s2.ID, s2.Text, s2.Metadata, s2.Put = small.ID, small.Text, nil, []vector.Source{src("d001", secret)}
	applied, err := ix.PatchSources(ctx, tenant, []vector.SourcePatch{p, s2})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, applied)
	require.Empty(t, searchIDs(t, ix, tenant, vector.KindEntity, query, 10, engineer))
	require.Equal(t, []string{"service:kafka", "e-small"}, searchIDs(t, ix, tenant, vector.KindEntity, query, 10, insider))

	// Removing a restricted source widens the audience to what is left.
	p = vector.SourcePatch{Kind: vector.KindEntity, ID: it.ID, Text: it.Text, Metadata: it.Metadata, Remove: []string{"d003", "d002"}}
	require.True(t, patch(t, ix, p))
	require.Equal(t, []string{"service:kafka"}, searchIDs(t, ix, tenant, vector.KindEntity, query, 10, anyone))
	require.Equal(t, []string{"d000", "d001", "d004"}, entityHit(t, ix, it.ID).DocIDs())

	// An item left without sources is removed, with its document links.
	p = vector.SourcePatch{Kind: vector.KindEntity, ID: small.ID, Text: small.Text, Remove: []string{"d001"}}
	require.True(t, patch(t, ix, p))
	require.Equal(t, []string{"service:kafka"}, searchIDs(t, ix, tenant, vector.KindEntity, query, 10, insider))
	require.Equal(t, []string{it.ID}, scanIDs(t, ix, "d001"))
	require.False(t, patch(t, ix, p), "it is gone")
	upsert(t, ix, tenant, small)
	require.Equal(t, []string{"service:kafka", "e-small"}, searchIDs(t, ix, tenant, vector.KindEntity, query, 10, anyone), "and can come back")
}

func testPatchInvalid(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	upsert(t, ix, tenant, hub(2, nil))
	// ok is valid and would show if applied: d000 would be gone.
	ok := vector.SourcePatch{Kind: vector.KindEntity, ID: "service:kafka", Text: "Kafka (service).", Metadata: map[string]string{"type": "service", "name": "Kafka"},
		Remove: []string{"d000"}}
	bad := []vector.SourcePatch{
		{Kind: "nope", ID: "x"},
		{Kind: vector.KindEntity, ID: ""},
		{Kind: vector.KindEntity, ID: "x", Put: []vector.Source{{SourceRef: provenance.SourceRef{DocID: "d", Version: 0}}}},
		{Kind: vector.KindEntity, ID: "x", Put: []vector.Source{src("d", public)}, Remove: []string{"d"}},
		{Kind: vector.KindEntity, ID: "x", Put: []vector.Source{src("d", public), src("d", eng)}},
		{Kind: vector.KindEntity, ID: "x", Remove: []string{""}},
	}
	for _, b := range bad {
		_, err := ix.PatchSources(ctx, tenant, []vector.SourcePatch{ok, b})
		require.ErrorIs(t, err, vector.ErrInvalid, "patch %+v", b)
	}
	_, err := ix.PatchSources(ctx, tenant, []vector.SourcePatch{ok, ok})
	require.ErrorIs(t, err, vector.ErrInvalid, "one item twice")
	_, err = ix.PatchSources(ctx, "Bad Tenant", []vector.SourcePatch{ok})
	require.ErrorIs(t, err, vector.ErrInvalid)
	// Nothing of a refused batch was applied.
	require.Equal(t, []string{"d000", "d001"}, entityHit(t, ix, "service:kafka").DocIDs())
	applied, err := ix.PatchSources(ctx, "unknown", []vector.SourcePatch{ok})
	require.NoError(t, err, "an unknown tenant has no items")
	require.Equal(t, []bool{false}, applied)
	applied, err = ix.PatchSources(ctx, tenant, nil)
	require.NoError(t, err)
	require.Empty(t, applied)
	// ok alone is applied.
	require.True(t, patch(t, ix, ok))
	require.Equal(t, []string{"d001"}, entityHit(t, ix, "service:kafka").DocIDs())
}

// testPatchMaxSources: a patch that would leave an item with more than
// vector.MaxSources sources is not applied and changes nothing; one that
// keeps it within the bound is.
func testPatchMaxSources(t *testing.T, ix vector.Index) {
	it := hub(vector.MaxSources, nil)
	upsert(t, ix, tenant, it)
	p := vector.SourcePatch{Kind: vector.KindEntity, ID: it.ID, Text: it.Text, Metadata: it.Metadata,
		Put: []vector.Source{src("one-more", public)}}
	require.False(t, patch(t, ix, p), "one source too many")
	require.Equal(t, it.DocIDs(), entityHit(t, ix, it.ID).DocIDs(), "the item is unchanged")
	// Replacing a source and adding one for a removed one stays within.
	p.Put = append(p.Put, src("d000", eng))
	p.Remove = []string{"d001"}
	require.True(t, patch(t, ix, p))
	got := entityHit(t, ix, it.ID)
	require.Len(t, got.Sources, vector.MaxSources)
	require.Equal(t, eng, got.Sources[0].ACL)
	require.Equal(t, "one-more", got.Sources[len(got.Sources)-1].DocID)
}

func testUpsertReplaces(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	upsert(t, ix, tenant, unit("a", angle(1), "old", public), unit("b", angle(50), "keep", public))
	// Version 2 of "a" moves away from the query and to another document.
	a2 := unit("a", angle(80), "new", public)
	a2.Sources[0].Version = 2
	a2.Text = "second version"
	upsert(t, ix, tenant, a2)
	hits := search(t, ix, tenant, vector.KindTextUnit, query, 10, anyone)
	require.Equal(t, []string{"b", "a"}, ids(hits))
	require.Equal(t, "second version", hits[1].Text)
	require.Equal(t, int64(2), hits[1].Sources[0].Version)
	require.InDelta(t, math.Cos(80*math.Pi/180), float64(hits[1].Score), scoreTolerance)

	// The old document no longer reaches it.
	require.NoError(t, ix.UpdateACL(ctx, tenant, "old", secret))
	require.NoError(t, ix.DeleteByDoc(ctx, tenant, "old"))
	require.Equal(t, []string{"b", "a"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
	require.NoError(t, ix.DeleteByDoc(ctx, tenant, "new"))
	require.Equal(t, []string{"b"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
}

func testInvalidItems(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	ok := unit("ok", angle(1), "d", public)
	nan := unit("nan", []float32{float32(math.NaN()), 0, 0, 0}, "d", public)
	zero := unit("zero", []float32{0, 0, 0, 0}, "d", public)
	noSrc := vector.Item{ID: "nosrc", Kind: vector.KindTextUnit, Vector: angle(2)}
	badKind := unit("badkind", angle(3), "d", public)
	badKind.Kind = "chunk"
	badDoc := unit("baddoc", angle(4), " a", public)
	v0 := unit("v0", angle(5), "d", public)
	v0.Sources[0].Version = 0
	twice := report("twice", angle(6), src("d", public), src("d", eng))
	dup := unit("ok", angle(7), "d", public)

	err := ix.Upsert(ctx, tenant, []vector.Item{ok, nan, zero, noSrc, badKind, badDoc, v0, twice, dup})
	require.ErrorIs(t, err, vector.ErrInvalid)
	var be *vector.BatchError
	require.ErrorAs(t, err, &be)
	var named []string
	for _, f := range be.Failed {
		named = append(named, f.ID)
	}
	require.Equal(t, []string{"nan", "zero", "nosrc", "badkind", "baddoc", "v0", "twice", "ok"}, named)
	require.True(t, vector.Failed(err, vector.KindTextUnit, "nan"))
	require.True(t, vector.Failed(err, vector.KindReport, "twice"))
	require.Contains(t, err.Error(), `"nan"`)

	_, err = ix.Search(ctx, tenant, vector.KindTextUnit, query, 10, anyone)
	require.NoError(t, err)
	// Empty ids are named too.
	err = ix.Upsert(ctx, tenant, []vector.Item{unit("", angle(1), "d", public)})
	require.ErrorIs(t, err, vector.ErrInvalid)
	require.True(t, vector.Failed(err, vector.KindTextUnit, ""))
	require.NoError(t, ix.Upsert(ctx, tenant, nil), "an empty batch")
}

func testDimensionMismatch(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	upsert(t, ix, tenant, unit("four", angle(1), "d", public))
	// Only the adapter knows the stored dimensions: it must check the batch
	// object by object and name the one that failed.
	good := unit("good", angle(2), "d", public)
	bad := unit("bad", []float32{1, 0, 0, 0, 0}, "d", public)
	err := ix.Upsert(ctx, tenant, []vector.Item{good, bad})
	require.Error(t, err)
	require.True(t, vector.Failed(err, vector.KindTextUnit, "bad"), "error names the failed item: %v", err)
	require.False(t, vector.Failed(err, vector.KindTextUnit, "good"), "error names only the failed item: %v", err)
	require.Contains(t, err.Error(), `"bad"`)

	// The good one is writable (if it was not written already) and the bad
	// one never became searchable.
	upsert(t, ix, tenant, good)
	require.Equal(t, []string{"four", "good"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
	_, err = ix.Search(ctx, tenant, vector.KindTextUnit, []float32{1, 0, 0, 0, 0}, 10, anyone)
	require.Error(t, err, "a query of other dimensions")
	// Other kinds and tenants have their own dimensions.
	upsert(t, ix, tenant, report("r", []float32{1, 0, 0, 0, 0}, src("d", public)))
	upsert(t, ix, other, unit("five", []float32{1, 0, 0, 0, 0}, "d", public))
}

func testInvalidArguments(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	upsert(t, ix, tenant, unit("a", angle(1), "d", public))
	checks := map[string]error{
		"upsert bad tenant":    ix.Upsert(ctx, "Bad Tenant", []vector.Item{unit("a", angle(1), "d", public)}),
		"delete bad tenant":    ix.Delete(ctx, "a.b", []string{"a"}),
		"deletebydoc bad doc":  ix.DeleteByDoc(ctx, tenant, ""),
		"deletebydoc spaced":   ix.DeleteByDoc(ctx, tenant, " a"),
		"updateacl bad tenant": ix.UpdateACL(ctx, "", "d", public),
		"updateacl bad doc":    ix.UpdateACL(ctx, tenant, "", public),
	}
	_, checks["search bad kind"] = ix.Search(ctx, tenant, "chunk", query, 1, anyone)
	_, checks["search zero vector"] = ix.Search(ctx, tenant, vector.KindTextUnit, []float32{0, 0, 0, 0}, 1, anyone)
	_, checks["search nan vector"] = ix.Search(ctx, tenant, vector.KindTextUnit, []float32{float32(math.NaN()), 1, 0, 0}, 1, anyone)
	_, checks["search empty vector"] = ix.Search(ctx, tenant, vector.KindTextUnit, nil, 1, anyone)
	_, checks["search bad tenant"] = ix.Search(ctx, "UPPER", vector.KindTextUnit, query, 1, anyone)
	for name, err := range checks {
		require.ErrorIs(t, err, vector.ErrInvalid, name)
	}
	require.Equal(t, []string{"a"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, anyone))
}

func testUnicode(t *testing.T, ix vector.Index) {
	text := "Störung im Rechenzentrum 東京: データベース停止 🔥 — «ça marche» \"quoted\" \\ back\nslash\ttab"
	it := vector.Item{
		ID: "ユニット-1 ümlaut", Kind: vector.KindTextUnit, Vector: angle(1), Text: text,
		Sources: []vector.Source{{
			SourceRef: provenance.SourceRef{DocID: "Störfall-東京", Version: 1, TextUnit: "ユニット-1 ümlaut"},
			ACL:       provenance.ACL{Groups: []string{"équipe-réseau"}, Principals: []string{"jürgen@example.com"}},
		}},
		Metadata: map[string]string{"titre": "Panne réseau 🌐"},
	}
	upsert(t, ix, tenant, it, unit("plain", angle(2), "plain", public))
	hits := search(t, ix, tenant, vector.KindTextUnit, query, 10, vector.Filter{Groups: []string{"équipe-réseau"}})
	require.Equal(t, []string{it.ID, "plain"}, ids(hits))
	want := it
	want.Vector = nil
	require.Equal(t, want, hits[0].Item)
	require.Equal(t, []string{it.ID, "plain"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, vector.Filter{Principal: "jürgen@example.com"}))
	require.Equal(t, []string{"plain"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, vector.Filter{Groups: []string{"equipe-reseau"}}))

	require.NoError(t, ix.UpdateACL(t.Context(), tenant, "Störfall-東京", secret))
	require.Equal(t, []string{"plain"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, vector.Filter{Groups: []string{"équipe-réseau"}}))
	require.NoError(t, ix.DeleteByDoc(t.Context(), tenant, "Störfall-東京"))
	require.Equal(t, []string{"plain"}, searchIDs(t, ix, tenant, vector.KindTextUnit, query, 10, insider))
}

func testLargeBatch(t *testing.T, ix vector.Index) {
	const n, dims = 1000, 16
	rng := rand.New(rand.NewPCG(1, 2))
	randVec := func() []float32 {
		v := make([]float32, dims)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	items := make([]vector.Item, n)
	for i := range items {
		acl := public
		if i%3 == 0 {
			acl = secret
		}
		items[i] = unit(fmt.Sprintf("u%04d", i), randVec(), fmt.Sprintf("doc-%d", i%50), acl)
	}
	upsert(t, ix, tenant, items...)

	// Every object of the batch is there, with its text.
	hits := search(t, ix, tenant, vector.KindTextUnit, randVec(), vector.MaxK, insider)
	require.Len(t, hits, n)
	byID := map[string]vector.Item{}
	for _, it := range items {
		byID[it.ID] = it
	}
	for _, h := range hits {
		want, ok := byID[h.ID]
		require.True(t, ok, "unknown hit %q", h.ID)
		require.Equal(t, want.Text, h.Text)
		delete(byID, h.ID)
	}
	require.Empty(t, byID)

	// Rankings are exact against brute force, under the ACL filter.
	for range 5 {
		q := randVec()
		type scored struct {
			id    string
			score float64
		}
		var want []scored
		for _, it := range items {
			if it.ReadableBy(engineer) {
				want = append(want, scored{it.ID, cosine(q, it.Vector)})
			}
		}
		sort.Slice(want, func(i, j int) bool { return want[i].score > want[j].score })
		hits := search(t, ix, tenant, vector.KindTextUnit, q, 10, engineer)
		require.Len(t, hits, 10)
		for i, h := range hits {
			require.InDelta(t, want[i].score, float64(h.Score), scoreTolerance, "rank %d", i)
			// Ids may differ only where scores tie within tolerance.
			if h.ID != want[i].id {
				require.InDelta(t, want[i].score, cosine(q, items[slices.IndexFunc(items, func(it vector.Item) bool { return it.ID == h.ID })].Vector), scoreTolerance)
			}
		}
	}

	// Each sampled object finds itself first.
	for i := 0; i < n; i += 37 {
		f := insider
		hits := search(t, ix, tenant, vector.KindTextUnit, items[i].Vector, 1, f)
		require.Equal(t, []string{items[i].ID}, ids(hits))
		require.InDelta(t, 1, float64(hits[0].Score), scoreTolerance)
	}

	// DeleteByDoc over a document with 20 items.
	require.NoError(t, ix.DeleteByDoc(t.Context(), tenant, "doc-7"))
	require.Len(t, search(t, ix, tenant, vector.KindTextUnit, randVec(), vector.MaxK, insider), n-20)
}

func testClose(t *testing.T, ix vector.Index) {
	ctx := t.Context()
	upsert(t, ix, tenant, unit("a", angle(1), "d", public))
	require.NoError(t, ix.Close())
	_, err := ix.Search(ctx, tenant, vector.KindTextUnit, query, 1, anyone)
	require.ErrorIs(t, err, vector.ErrClosed)
	require.ErrorIs(t, ix.Upsert(ctx, tenant, []vector.Item{unit("b", angle(1), "d", public)}), vector.ErrClosed)
	require.ErrorIs(t, ix.Delete(ctx, tenant, []string{"a"}), vector.ErrClosed)
	require.ErrorIs(t, ix.DeleteByDoc(ctx, tenant, "d"), vector.ErrClosed)
	require.ErrorIs(t, ix.UpdateACL(ctx, tenant, "d", public), vector.ErrClosed)
	_, err = ix.PatchSources(ctx, tenant, []vector.SourcePatch{{Kind: vector.KindTextUnit, ID: "a", Text: "t", Remove: []string{"d"}}})
	require.ErrorIs(t, err, vector.ErrClosed)
	require.ErrorIs(t, ix.ScanSources(ctx, tenant, "", func(vector.ItemSources) error { return nil }), vector.ErrClosed)
	if err := ix.Close(); err != nil && !errors.Is(err, vector.ErrClosed) {
		t.Fatalf("closing twice: %v", err)
	}
}
