package store

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	json "github.com/segmentio/encoding/json"
)

// aHub is an entity with many fragments that say nearly the same thing,
// the shape of the values compression is for.
func aHub(n int) Entity {
	e := Entity{ID: "service:kafka", Type: "service", Name: "Kafka"}
	for i := range n {
		e.Sources = append(e.Sources, Fragment{DocID: "doc-" + strings.Repeat("0", 4) + string(rune('a'+i%26)),
			Version: int64(i + 1), Description: "Kafka (message broker)", Name: "Kafka"})
	}
	return e
}

func TestValueCodecRoundTrips(t *testing.T) {
	for _, c := range []Compression{NoCompression, FastCompression, SmallCompression} {
		for _, n := range []int{0, 1, 200} {
			want := aHub(n)
			data, err := EncodeValue(want, c)
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := json.Marshal(want)
			compressed := c != NoCompression && len(plain) >= CompressMin
			if compressed != (len(data) < len(plain)) {
				t.Errorf("compression %d, %d fragments: %d bytes stored for %d of JSON", c, n, len(data), len(plain))
			}
			if !compressed && !bytes.Equal(data, plain) {
				t.Errorf("compression %d, %d fragments: a value left plain is not its JSON", c, n)
			}
			var got Entity
			if err := DecodeValue(data, &got); err != nil {
				t.Fatalf("compression %d, %d fragments: %v", c, n, err)
			}
			if g, _ := json.Marshal(got); !bytes.Equal(g, plain) {
				t.Errorf("compression %d, %d fragments: decoded %s, want %s", c, n, g, plain)
			}
			back, err := DecompressValue(data)
			if err != nil || !bytes.Equal(back, plain) {
				t.Errorf("compression %d, %d fragments: DecompressValue = %q, %v", c, n, back, err)
			}
		}
	}
}

// A hub of 200 like fragments shrinks several times with either codec.
func TestValueCodecShrinksRepetitiveValues(t *testing.T) {
	plain, _ := json.Marshal(aHub(200))
	for _, c := range []Compression{FastCompression, SmallCompression} {
		data, _ := EncodeValue(aHub(200), c)
		if len(data)*4 > len(plain) {
			t.Errorf("compression %d: %d bytes for %d of JSON", c, len(data), len(plain))
		}
	}
}

// Values written before compression existed, and by a writer told not to
// compress, are plain JSON and read as such.
func TestValueCodecReadsPlainJSON(t *testing.T) {
	var got map[string]int
	if err := DecodeValue([]byte(`{"a":1}`), &got); err != nil || got["a"] != 1 {
		t.Fatalf("got %v, %v", got, err)
	}
	if err := DecodeValue([]byte(`{"a":`), &got); err == nil {
		t.Fatal("truncated JSON decoded without an error")
	}
}

func TestValueCodecRefusesCorruptValues(t *testing.T) {
	good, _ := EncodeValue(aHub(100), SmallCompression)
	fast, _ := EncodeValue(aHub(100), FastCompression)
	// An S2 block claiming to decode to more than MaxValueSize.
	huge := append([]byte{tagS2}, s2.Encode(nil, []byte("x"))...)
	huge = append(huge[:1], 0xff, 0xff, 0xff, 0xff, 0x07) // varint length 2^31-1
	for name, data := range map[string][]byte{
		"truncated zstd": good[:len(good)/2],
		"truncated s2":   fast[:len(fast)/2],
		"zstd tag only":  {tagZstd},
		"s2 tag only":    {tagS2},
		"s2 too large":   huge,
	} {
		var e Entity
		err := DecodeValue(data, &e)
		if !errors.Is(err, errCorrupt) {
			t.Errorf("%s: err = %v, want a corrupt-value error", name, err)
		}
		if _, err := DecompressValue(data); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: DecompressValue err = %v", name, err)
		}
	}
}
