package store

import (
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	json "github.com/segmentio/encoding/json"
)

// Stored values are JSON, and both adapters may compress a value they
// write: an entity with thousands of source fragments, a source record
// holding a document's text, a report. A compressed value is one tag byte
// then the compressed JSON; JSON text never begins with a control
// character, so a value without a tag is plain JSON and every value
// written before compression existed still reads as it did (no migration).
//
//	0x01 <S2 block>       (klauspost/compress/s2)
//	0x02 <zstd frame>     (klauspost/compress/zstd)
const (
	tagS2   = 0x01
	tagZstd = 0x02
)

// Compression is how a value is written.
type Compression uint8

const (
	// NoCompression writes plain JSON: small values read on every request
	// (registry states, counters).
	NoCompression Compression = iota
	// FastCompression is S2 (a Snappy descendant: roughly ten times the
	// speed of zstd and two thirds of its ratio on our values), for values
	// every apply reads and writes: entities and edges.
	FastCompression
	// SmallCompression is zstd at its default level, for large values
	// written once and read seldom: reports, citation lists, source
	// records with their text and communities (which the stores write
	// with S2 on the apply and clustering paths, the embedded store's
	// compaction rewriting them with zstd).
	SmallCompression
)

// CommunityCompression is how both stores write communities: S2, since
// every re-clustering writes all of them and every provisional placement
// rewrites the large ones it grows (zstd cost a re-clustering of 11,000
// entities about 70 ms); the embedded store's compaction rewrites them
// with zstd.
const CommunityCompression = FastCompression

// CompressMin is the smallest JSON value compressed: below it the saving
// is a few bytes and the tag and the codec's framing eat most of it.
const CompressMin = 256

// MaxValueSize bounds what a compressed value may expand to when read, so
// a corrupt length cannot make a reader allocate without limit.
const MaxValueSize = 1 << 30

var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(err) // only invalid options fail
		}
		return enc
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxValueSize))
		if err != nil {
			panic(err)
		}
		return dec
	})
)

// EncodeValue marshals v to JSON and compresses it as c says when it is at
// least CompressMin bytes and compression makes it smaller.
func EncodeValue(v any, c Compression) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return CompressValue(data, c), nil
}

// CompressValue is EncodeValue's compression of already-encoded JSON.
func CompressValue(data []byte, c Compression) []byte {
	if c == NoCompression || len(data) < CompressMin {
		return data
	}
	var out []byte
	switch c {
	case FastCompression:
		// s2.Encode writes into dst when it is long enough, from dst[0]:
		// give it the buffer after the tag byte.
		n := s2.MaxEncodedLen(len(data))
		if n < 0 {
			return data // too large for one block
		}
		buf := make([]byte, 1+n)
		buf[0] = tagS2
		out = buf[:1+len(s2.Encode(buf[1:], data))]
	case SmallCompression:
		out = zstdEncoder().EncodeAll(data, []byte{tagZstd})
	default:
		return data
	}
	if len(out) >= len(data) {
		return data
	}
	return out
}

// bufPool holds decompression buffers: the JSON decoder copies every
// string it keeps, so a buffer is free again once a value is decoded.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooled is the largest buffer kept for reuse; a rare huge value does
// not stay in the pool.
const maxPooled = 4 << 20

// DecodeValue unmarshals a stored value, compressed or plain JSON, into v.
func DecodeValue(data []byte, v any) error {
	if CompressionOf(data) == NoCompression {
		return json.Unmarshal(data, v)
	}
	bp := bufPool.Get().(*[]byte)
	plain, err := decompress(data, (*bp)[:0])
	if err == nil {
		err = json.Unmarshal(plain, v)
	}
	if cap(plain) <= maxPooled {
		*bp = plain[:0]
		bufPool.Put(bp)
	}
	return err
}

// CompressionOf says how a stored value was written.
func CompressionOf(data []byte) Compression {
	switch {
	case len(data) > 0 && data[0] == tagS2:
		return FastCompression
	case len(data) > 0 && data[0] == tagZstd:
		return SmallCompression
	}
	return NoCompression
}

// DecompressValue returns a stored value's JSON, decompressed if it was
// compressed (a plain value is returned as is).
func DecompressValue(data []byte) ([]byte, error) {
	if CompressionOf(data) == NoCompression {
		return data, nil
	}
	return decompress(data, nil)
}

var errCorrupt = errors.New("corrupt compressed value")

func decompress(data, dst []byte) ([]byte, error) {
	if len(data) < 2 {
		return nil, fmt.Errorf("%w: no payload after the tag", errCorrupt)
	}
	switch data[0] {
	case tagS2:
		n, err := s2.DecodedLen(data[1:])
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errCorrupt, err)
		}
		if n > MaxValueSize {
			return nil, fmt.Errorf("%w: %d bytes decoded", errCorrupt, n)
		}
		if cap(dst) < n {
			dst = make([]byte, n)
		}
		out, err := s2.Decode(dst[:n], data[1:])
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errCorrupt, err)
		}
		return out, nil
	default:
		out, err := zstdDecoder().DecodeAll(data[1:], dst)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errCorrupt, err)
		}
		return out, nil
	}
}
