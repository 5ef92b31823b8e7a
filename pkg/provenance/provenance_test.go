package provenance_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
)

func TestValidateDocID(t *testing.T) {
	for _, c := range []struct {
		id string
		ok bool
	}{
		{"INC-1", true}, {"team-a/2024/incident.md", true}, {"Runbooks/Redis", true}, {"a b", true}, {"/", true},
		{".", true}, {"..", true}, {"日本語", true}, {strings.Repeat("x", provenance.MaxDocIDBytes), true},
		{"", false}, {strings.Repeat("x", provenance.MaxDocIDBytes+1), false}, {" a", false}, {"a ", false},
		{"a\u00a0", false}, {"\ta", false}, {"a\nb", false}, {"a\x00", false}, {"a\x7f", false}, {"a\u0085", false},
		{"a\u202eb", false}, {"a\u2066b", false}, {"a\u200bb", false}, {"a\u200db", false}, {"\ufeffa", false},
		{"a\u2028b", false}, {"a\xffb", false}, {"a\ufffdb", false},
	} {
		err := provenance.ValidateDocID(c.id)
		if c.ok {
			require.NoError(t, err, "%q", c.id)
			continue
		}
		require.Error(t, err, "%q", c.id)
		require.True(t, errors.Is(err, provenance.ErrInvalidDocID), "%q: %v", c.id, err)
	}
}

func TestValidateVersion(t *testing.T) {
	for v, ok := range map[int64]bool{1: true, provenance.MaxContentVersion: true, 0: false, -1: false,
		provenance.MaxVersion: false, 1 << 62: false} {
		require.Equal(t, ok, provenance.ValidateVersion(v) == nil, "%d", v)
	}
	require.Equal(t, int64(9007199254740991), provenance.MaxVersion, "2^53-1, exact as a JSON number")
}

func TestReadersAndWriters(t *testing.T) {
	doc := func(acl provenance.ACL) provenance.SourceState {
		return provenance.SourceState{Tenant: "acme", DocID: "d", Version: 1, ACL: acl.Normalize()}
	}
	sre := provenance.Caller{Tenant: "acme", Principal: "sam", Groups: []string{"sre"}}
	ann := provenance.Caller{Tenant: "acme", Principal: "ann"}
	empty := provenance.Caller{Tenant: "acme", Principal: "eve", Groups: []string{""}}
	writer := provenance.Caller{Tenant: "acme", Principal: "ingest", Writer: true}
	admin := provenance.Caller{Tenant: "other", Principal: "root", Admin: true}
	stranger := provenance.Caller{Tenant: "beta", Principal: "ann", Writer: true}
	for _, c := range []struct {
		name        string
		acl         provenance.ACL
		caller      provenance.Caller
		read, write bool
	}{
		{"public reader is no writer", provenance.PublicACL(), sre, true, false},
		{"group reader", provenance.ACL{Groups: []string{"sre"}}, sre, true, false},
		{"named writer may not read", provenance.ACL{Groups: []string{"sre"}, Writers: provenance.Writers{Principals: []string{"ann"}}}, ann, false, true},
		{"writer group", provenance.ACL{Public: true, Writers: provenance.Writers{Groups: []string{"sre"}}}, sre, true, true},
		{"empty group matches nothing", provenance.ACL{Groups: []string{""}, Writers: provenance.Writers{Groups: []string{""}}}, empty, false, false},
		{"writer token", provenance.ACL{Groups: []string{"payments"}}, writer, false, true},
		{"admin token of another tenant writes", provenance.ACL{Groups: []string{"payments"}}, admin, false, true},
		{"another tenant's writer", provenance.PublicACL(), stranger, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := doc(c.acl)
			require.Equal(t, c.read, provenance.Readable(c.caller, st), "read")
			require.Equal(t, c.write, provenance.Writable(c.caller, st), "write")
		})
	}
	deleted := doc(provenance.PublicACL())
	deleted.Deleted = true
	require.False(t, provenance.Readable(sre, deleted))
}

func TestACLNormalizeAndEqual(t *testing.T) {
	a := provenance.ACL{Groups: []string{"sre", " ops", "sre", ""}, Principals: []string{"b", "a"},
		Writers: provenance.Writers{Principals: []string{"x", "x "}}}
	require.Equal(t, provenance.ACL{Groups: []string{"ops", "sre"}, Principals: []string{"a", "b"},
		Writers: provenance.Writers{Groups: []string{}, Principals: []string{"x"}}}, a.Normalize())
	require.True(t, a.Equal(provenance.ACL{Groups: []string{"ops", "sre"}, Principals: []string{"a", "b"}, Writers: provenance.Writers{Principals: []string{"x"}}}))
	require.False(t, a.Equal(provenance.ACL{Groups: []string{"ops", "sre"}, Principals: []string{"a", "b"}}), "writers count")
	require.False(t, provenance.PublicACL().Equal(provenance.ACL{}))
}

func TestDerivedAdmission(t *testing.T) {
	states := map[string]provenance.SourceState{
		"a": {Tenant: "acme", DocID: "a", Version: 2, ACL: provenance.PublicACL()},
		"b": {Tenant: "acme", DocID: "b", Version: 1, ACL: provenance.ACL{Groups: []string{"payments"}}},
		"c": {Tenant: "acme", DocID: "c", Version: 3, ACL: provenance.PublicACL(), Deleted: true},
	}
	lookups := 0
	lookup := func(ids []string) (map[string]provenance.SourceState, error) {
		lookups++
		out := map[string]provenance.SourceState{}
		for _, id := range ids {
			if s, ok := states[id]; ok {
				out[id] = s
			}
		}
		return out, nil
	}
	ad := provenance.NewAdmitter(provenance.Caller{Tenant: "acme", Principal: "sam", Groups: []string{"sre"}}, lookup)
	for _, c := range []struct {
		name string
		refs []provenance.SourceRef
		ok   bool
	}{
		{"current", []provenance.SourceRef{{DocID: "a", Version: 2}}, true},
		{"moved on", []provenance.SourceRef{{DocID: "a", Version: 1}}, false},
		{"one unreadable", []provenance.SourceRef{{DocID: "a", Version: 2}, {DocID: "b", Version: 1}}, false},
		{"deleted", []provenance.SourceRef{{DocID: "c", Version: 3}}, false},
		{"unknown", []provenance.SourceRef{{DocID: "z", Version: 1}}, false},
		{"no source", nil, false},
	} {
		got, err := ad.Derived(c.refs)
		require.NoError(t, err)
		require.Equal(t, c.ok, got, c.name)
	}
	require.Equal(t, 4, lookups, "the admitter asks the registry once per document (a, b, c, z)")
	failing := provenance.NewAdmitter(provenance.Caller{Tenant: "acme"}, func([]string) (map[string]provenance.SourceState, error) {
		return nil, errors.New("registry down")
	})
	ok, err := failing.Direct("a")
	require.Error(t, err)
	require.False(t, ok, "admission fails closed")
}

// TestAdmitterSnapshot checks UseSnapshot: ids looked up before keep their
// answer, every other id is answered from the snapshot (an id it lacks is
// unknown) with no further lookup, for Direct and Derived alike.
func TestAdmitterSnapshot(t *testing.T) {
	before := map[string]provenance.SourceState{
		"a": {Tenant: "acme", DocID: "a", Version: 1, ACL: provenance.PublicACL()},
	}
	lookups := 0
	ad := provenance.NewAdmitter(provenance.Caller{Tenant: "acme", Principal: "sam", Groups: []string{"sre"}}, func(ids []string) (map[string]provenance.SourceState, error) {
		lookups++
		out := map[string]provenance.SourceState{}
		for _, id := range ids {
			if s, ok := before[id]; ok {
				out[id] = s
			}
		}
		return out, nil
	})
	ok, err := ad.Direct("a")
	require.NoError(t, err)
	require.True(t, ok)
	snap := snapshotStates()
	snap["d"] = provenance.SourceState{Tenant: "globex", DocID: "d", Version: 1, ACL: provenance.PublicACL()}
	ad.UseSnapshot(snapshot(snap))
	require.NoError(t, ad.Prefetch([]string{"a", "b", "c", "z"}))
	for id, want := range map[string]bool{"a": true, "b": true, "c": false, "d": false, "z": false} {
		got, err := ad.Direct(id)
		require.NoError(t, err)
		require.Equal(t, want, got, id)
	}
	for _, c := range []struct {
		refs []provenance.SourceRef
		ok   bool
	}{
		{[]provenance.SourceRef{{DocID: "a", Version: 1}}, true},
		{[]provenance.SourceRef{{DocID: "b", Version: 4}}, true},
		{[]provenance.SourceRef{{DocID: "b", Version: 3}}, false},
		{[]provenance.SourceRef{{DocID: "b", Version: 4}, {DocID: "c", Version: 1}}, false},
		{[]provenance.SourceRef{{DocID: "z", Version: 1}}, false},
	} {
		got, err := ad.Derived(c.refs)
		require.NoError(t, err)
		require.Equal(t, c.ok, got, c.refs)
	}
	require.Equal(t, 1, lookups, "after the snapshot nothing is looked up")
}

// TestAdmitterLookupGivesSnapshot: a lookup that hands the admitter a
// snapshot and returns nothing (as a request listing the registry for a
// large lookup does) leaves every id, those it was asked for included,
// to the snapshot: none is taken as unknown for its absence from the
// lookup's answer.
func TestAdmitterLookupGivesSnapshot(t *testing.T) {
	snap := snapshotStates()
	var ad *provenance.Admitter
	lookups := 0
	ad = provenance.NewAdmitter(provenance.Caller{Tenant: "acme", Principal: "sam", Groups: []string{"sre"}}, func([]string) (map[string]provenance.SourceState, error) {
		lookups++
		ad.UseSnapshot(snapshot(snap))
		return nil, nil
	})
	require.NoError(t, ad.Prefetch([]string{"b", "c", "z"}))
	for id, want := range map[string]bool{"b": true, "c": false, "z": false} {
		got, err := ad.Direct(id)
		require.NoError(t, err)
		require.Equal(t, want, got, id)
	}
	got, err := ad.Derived([]provenance.SourceRef{{DocID: "b", Version: 4}})
	require.NoError(t, err)
	require.True(t, got, "Derived admits from the snapshot too")
	require.Equal(t, 1, lookups)
}

// TestAdmitterBeforeFirstUse: the hook runs once, before the first lookup
// (so it can hand over a snapshot that answers even that one); its error
// fails the call closed and it runs again on the next.
func TestAdmitterBeforeFirstUse(t *testing.T) {
	lookups, runs := 0, 0
	ad := provenance.NewAdmitter(provenance.Caller{Tenant: "acme"}, func([]string) (map[string]provenance.SourceState, error) {
		lookups++
		return nil, nil
	})
	snap := map[string]provenance.SourceState{"a": {Tenant: "acme", DocID: "a", Version: 1, ACL: provenance.PublicACL()}}
	ad.BeforeFirstUse(func() error {
		runs++
		if runs == 1 {
			return errors.New("registry down")
		}
		ad.UseSnapshot(snapshot(snap))
		return nil
	})
	ok, err := ad.Direct("a")
	require.Error(t, err)
	require.False(t, ok, "fails closed")
	ok, err = ad.Direct("a")
	require.NoError(t, err)
	require.True(t, ok, "answered from the snapshot the hook handed over")
	require.NoError(t, ad.Prefetch([]string{"b"}))
	ok, err = ad.Derived([]provenance.SourceRef{{DocID: "a", Version: 1}})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, runs)
	require.Zero(t, lookups)
}

// TestAdmitterSnapshotReadable checks UseSnapshotReadable: Direct answers
// every id not looked up before from the readable function it was given
// (ids looked up before keep their answer), Derived still from the
// snapshot's states, and nothing is looked up after it.
func TestAdmitterSnapshotReadable(t *testing.T) {
	lookups := 0
	ad := provenance.NewAdmitter(provenance.Caller{Tenant: "acme", Principal: "sam", Groups: []string{"sre"}}, func(ids []string) (map[string]provenance.SourceState, error) {
		lookups++
		return map[string]provenance.SourceState{"a": {Tenant: "acme", DocID: "a", Version: 1, ACL: provenance.PublicACL()}}, nil
	})
	ok, err := ad.Direct("a")
	require.NoError(t, err)
	require.True(t, ok)
	snap := snapshotStates()
	asked := map[string]int{}
	// The readable function answers "b" only, as Readable does for sam; a
	// wrong answer for "c" shows that Direct takes the function's word.
	readable := func(id string) bool { asked[id]++; return id == "b" || id == "c" }
	ad.UseSnapshotReadable(snapshot(snap), readable)
	for id, want := range map[string]bool{"a": true, "b": true, "c": true, "z": false} {
		got, err := ad.Direct(id)
		require.NoError(t, err)
		require.Equal(t, want, got, id)
	}
	require.Equal(t, map[string]int{"b": 1, "c": 1, "z": 1}, asked, "ids looked up before keep their answer")
	got, err := ad.Derived([]provenance.SourceRef{{DocID: "c", Version: 1}})
	require.NoError(t, err)
	require.False(t, got, "Derived admits from the snapshot's states")
	require.Equal(t, 1, lookups)

	ad.UseSnapshot(snapshot(snap))
	got, err = ad.Direct("y")
	require.NoError(t, err)
	require.False(t, got)
	require.Zero(t, asked["y"], "UseSnapshot drops the readable function")
}

// TestAdmitterPrefetchSeq: without a snapshot the ids are gathered and
// looked up at once; once the hook hands over a snapshot they are not even
// iterated; the hook's error fails the call.
func TestAdmitterPrefetchSeq(t *testing.T) {
	var looked []string
	ad := provenance.NewAdmitter(provenance.Caller{Tenant: "acme"}, func(ids []string) (map[string]provenance.SourceState, error) {
		looked = append(looked, ids...)
		return nil, nil
	})
	iterated := 0
	ids := func(yield func(string) bool) {
		for _, id := range []string{"b", "a", "b"} {
			iterated++
			if !yield(id) {
				return
			}
		}
	}
	require.NoError(t, ad.PrefetchSeq(ids))
	require.Equal(t, []string{"a", "b"}, looked, "one lookup of each id")
	require.Equal(t, 3, iterated)

	snapped := provenance.NewAdmitter(provenance.Caller{Tenant: "acme"}, func([]string) (map[string]provenance.SourceState, error) {
		t.Fatal("nothing is looked up with a snapshot")
		return nil, nil
	})
	snapped.BeforeFirstUse(func() error { return errors.New("registry down") })
	require.Error(t, snapped.PrefetchSeq(ids), "the hook's error")
	snapped.BeforeFirstUse(func() error {
		snapped.UseSnapshot(snapshot(nil))
		return nil
	})
	iterated = 0
	require.NoError(t, snapped.PrefetchSeq(ids))
	require.Zero(t, iterated, "ids are not gathered when a snapshot answers them")
}

// snapshot is UseSnapshot's state function over m.
func snapshot(m map[string]provenance.SourceState) func(string) (provenance.SourceState, bool) {
	return func(id string) (provenance.SourceState, bool) { s, ok := m[id]; return s, ok }
}

// snapshotStates are the states the snapshot tests hand over: a deleted,
// b readable by sam (sre), c not.
func snapshotStates() map[string]provenance.SourceState {
	return map[string]provenance.SourceState{
		"a": {Tenant: "acme", DocID: "a", Version: 2, Deleted: true},
		"b": {Tenant: "acme", DocID: "b", Version: 4, ACL: provenance.ACL{Groups: []string{"sre"}}},
		"c": {Tenant: "acme", DocID: "c", Version: 1, ACL: provenance.ACL{Groups: []string{"payments"}}},
	}
}

// TestReadKey: callers who read the same documents share a key (groups in
// any order, a group twice); another tenant, principal or group set does
// not.
func TestReadKey(t *testing.T) {
	a := provenance.Caller{Tenant: "acme", Principal: "rita", Groups: []string{"ops", "dev"}}
	for _, same := range []provenance.Caller{
		{Tenant: "acme", Principal: "rita", Groups: []string{"dev", "ops"}},
		{Tenant: "acme", Principal: "rita", Groups: []string{"ops", "dev", "ops"}, Writer: true},
	} {
		if a.ReadKey() != same.ReadKey() {
			t.Errorf("%+v and %+v read the same documents: keys %q and %q", a, same, a.ReadKey(), same.ReadKey())
		}
	}
	for _, other := range []provenance.Caller{
		{Tenant: "globex", Principal: "rita", Groups: []string{"ops", "dev"}},
		{Tenant: "acme", Principal: "ravi", Groups: []string{"ops", "dev"}},
		{Tenant: "acme", Principal: "rita", Groups: []string{"ops"}},
		{Tenant: "acme", Principal: "rita", Groups: []string{"ops", "dev", "sec"}},
		{Tenant: "acme", Principal: "rita\x00dev", Groups: []string{"ops"}},
		{Tenant: "acme", Principal: "rita\" \"dev", Groups: []string{"ops"}},
	} {
		if a.ReadKey() == other.ReadKey() {
			t.Errorf("%+v and %+v share the key %q", a, other, a.ReadKey())
		}
	}
	if len(a.Groups) != 2 || a.Groups[0] != "ops" {
		t.Errorf("ReadKey reordered the caller's groups: %v", a.Groups)
	}
}
