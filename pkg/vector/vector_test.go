package vector_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

func TestBatchError(t *testing.T) {
	var failed []vector.ItemError
	for i := range 7 {
		failed = append(failed, vector.ItemError{Kind: vector.KindReport, ID: fmt.Sprintf("r%d", i), Err: vector.ErrInvalid})
	}
	err := fmt.Errorf("upserting: %w", &vector.BatchError{Failed: failed})
	require.ErrorIs(t, err, vector.ErrInvalid)
	require.True(t, vector.Failed(err, vector.KindReport, "r6"))
	require.False(t, vector.Failed(err, vector.KindTextUnit, "r6"), "kind matters")
	require.False(t, vector.Failed(errors.New("other"), vector.KindReport, "r0"))
	require.Contains(t, err.Error(), `7 item(s) failed: report "r0": invalid argument`)
	require.Contains(t, err.Error(), "and 2 more")
}

func TestReadableBy(t *testing.T) {
	src := func(doc string, acl provenance.ACL) vector.Source {
		return vector.Source{SourceRef: provenance.SourceRef{DocID: doc, Version: 1}, ACL: acl}
	}
	it := vector.Item{Sources: []vector.Source{
		src("a", provenance.ACL{Groups: []string{"sre"}}),
		src("b", provenance.ACL{Principals: []string{"dana"}, Groups: []string{"db"}}),
		src("c", provenance.PublicACL()),
	}}
	require.True(t, it.ReadableBy(vector.Filter{Groups: []string{"sre", "db"}}))
	require.True(t, it.ReadableBy(vector.Filter{Principal: "dana", Groups: []string{"sre"}}))
	require.False(t, it.ReadableBy(vector.Filter{Groups: []string{"sre"}}))
	require.False(t, it.ReadableBy(vector.Filter{}))
	require.False(t, vector.Item{}.ReadableBy(vector.Filter{Principal: "dana"}), "no source, no reader")
	caller := provenance.Caller{Tenant: "acme", Principal: "dana", Groups: []string{"sre"}}
	require.True(t, it.ReadableBy(vector.FilterFor(caller)))
	require.Equal(t, []string{"a", "b", "c"}, it.DocIDs())
}

func TestNormalizeACL(t *testing.T) {
	require.Equal(t, provenance.ACL{Public: true}, vector.NormalizeACL(provenance.ACL{Public: true, Groups: []string{}}))
	require.Equal(t, provenance.ACL{Groups: []string{"a", "b"}}, vector.NormalizeACL(provenance.ACL{Groups: []string{"b", " a", "b", ""}}))
}

func TestValidateVector(t *testing.T) {
	require.NoError(t, vector.ValidateVector([]float32{0, 1}))
	require.ErrorIs(t, vector.ValidateVector(make([]float32, vector.MaxDimensions+1)), vector.ErrInvalid)
	require.ErrorIs(t, vector.ValidateVector([]float32{0, 0}), vector.ErrInvalid)
	n := vector.Normalize([]float32{3, 4})
	require.InDelta(t, 0.6, n[0], 1e-6)
	require.InDelta(t, 0.8, n[1], 1e-6)
}
