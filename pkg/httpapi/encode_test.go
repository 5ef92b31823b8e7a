package httpapi_test

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/httpapi"
)

// stdJSON is what encoding/json writes for v, as WriteJSON once wrote it.
func stdJSON(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return b.String()
}

func written(t *testing.T, v any) string {
	t.Helper()
	rec := httptest.NewRecorder()
	httpapi.WriteJSON(rec, 200, v)
	enc, err := httpapi.EncodeJSON(v)
	require.NoError(t, err)
	require.Equal(t, rec.Body.String(), string(enc), "EncodeJSON and WriteJSON differ")
	return rec.Body.String()
}

type textKey struct{ s string }

func (k textKey) MarshalText() ([]byte, error) { return []byte("k<" + k.s), nil }

type inner struct {
	ID string `json:"id"`
}

type response struct {
	inner
	Answer    string             `json:"answer"`
	Empty     string             `json:"empty,omitempty"`
	Count     int                `json:"count,string"`
	Score     float64            `json:"score"`
	Share     float32            `json:"share"`
	Ptr       *int               `json:"ptr"`
	Bytes     []byte             `json:"bytes"`
	ByInt     map[int]string     `json:"by_int"`
	ByText    map[textKey]int    `json:"by_text"`
	Any       any                `json:"any"`
	At        time.Time          `json:"at"`
	Nil       []string           `json:"nil"`
	NilMap    map[string]any     `json:"nil_map"`
	Timings   map[string]float64 `json:"timings"`
	Citations []struct {
		DocID   string `json:"doc_id"`
		Version int64  `json:"version"`
	} `json:"citations"`
	Skip string `json:"-"`
}

// TestWriteJSONWritesWhatEncodingJSONWrites holds WriteJSON's encoder to
// encoding/json's bytes (HTML characters unescaped), on the shapes the
// responses use and on random strings (invalid UTF-8, control and
// separator characters) and floats of every magnitude.
func TestWriteJSONWritesWhatEncodingJSONWrites(t *testing.T) {
	n := 7
	fixed := []any{
		response{inner: inner{"x"}, Answer: "a <b> & \"c\"\n\u2028\u2029\x00\x1f\x7f é", Count: 12, Score: 1e21, Share: 0.1, Ptr: &n,
			Bytes: []byte("hi"), ByInt: map[int]string{10: "a", 9: "b", -1: "c"}, ByText: map[textKey]int{{"b"}: 1, {"a"}: 2},
			Any: []any{1, "x", nil, 2.5, map[string]any{"z": 1, "a": []int{}}}, At: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
			Timings: map[string]float64{"retrieval_ms": 0.123, "map_ms": 1e-7, "b": 123456789.5}},
		map[string]int{"b": 1, "a": 2, "é": 3, "A": 4}, []any{nil, true, false, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Copysign(0, -1)},
		(*response)(nil), struct{}{}, []int(nil), json.Number("12"), uint64(math.MaxUint64), int64(math.MinInt64),
		"bad\xffutf8\xc3", httpapi.Errorf(400, "bad_request", "no <such> & thing"),
	}
	for _, v := range fixed {
		require.Equal(t, stdJSON(t, v), written(t, v), "%#v", v)
	}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "<>&\\\"\x00\x1f\t\n aé\u2028\u2029\ufffd"
	for range 20000 {
		bs := make([]byte, r.IntN(16))
		for j := range bs {
			if r.IntN(2) == 0 {
				bs[j] = byte(r.IntN(256))
			} else {
				bs[j] = alphabet[r.IntN(len(alphabet))]
			}
		}
		f := r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
		bits := math.Float64frombits(r.Uint64())
		if math.IsNaN(bits) || math.IsInf(bits, 0) {
			bits = 0
		}
		v := map[string]any{string(bs): []any{string(bs), f, float32(f), bits}}
		require.Equal(t, stdJSON(t, v), written(t, v), "%#v", v)
	}
}
