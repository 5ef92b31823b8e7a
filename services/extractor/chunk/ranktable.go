package chunk

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
)

// rankTable maps token bytes to their rank, as the ranks map does, for
// tokenEnds and mergeEnds, which look up every piece of the text and
// every pair byte-pair merging considers: a map of 100k strings misses
// the cache on its slot and again on the key's bytes. Here a key of at
// most 8 bytes (most tokens, and every pair of bytes) is held in its
// slot, so a lookup reads one slot, hashed by a multiply; a longer key
// is hashed with maphash and its bytes compared in one arena.
//
// Slots are open-addressed with linear probing, the table at most half
// full.
type rankTable struct {
	slots []rankSlot
	shift uint // 64 - log2(len(slots))
	seed  maphash.Seed
	arena string // the bytes of the keys longer than 8
}

// rankSlot is one key of rankTable. rank is the rank plus one, 0 in an
// empty slot. key is a short key's bytes, little-endian and zero-padded;
// for a longer key, the offset of its bytes in the arena (low 32 bits)
// and the high 32 bits of its hash.
type rankSlot struct {
	key  uint64
	rank uint32
	n    uint32
}

// maxShortKey is the longest key held in its slot.
const maxShortKey = 8

func newRankTable(ranks map[string]int) *rankTable {
	size := 1 << bits.Len(uint(2*len(ranks)))
	t := &rankTable{slots: make([]rankSlot, size), shift: uint(64 - bits.Len(uint(size-1))), seed: maphash.MakeSeed()}
	var arena []byte
	for k, r := range ranks {
		h, key := t.hash(k)
		if len(k) > maxShortKey {
			key = uint64(len(arena)) | h&^(1<<32-1)
			arena = append(arena, k...)
		}
		i := h >> t.shift
		for t.slots[i].rank != 0 {
			i = (i + 1) & uint64(size-1)
		}
		t.slots[i] = rankSlot{key: key, rank: uint32(r) + 1, n: uint32(len(k))}
	}
	t.arena = string(arena)
	return t
}

// hash returns the hash of s and, when s is short, its bytes as a slot
// holds them.
func (t *rankTable) hash(s string) (h, key uint64) {
	if len(s) > maxShortKey {
		return maphash.String(t.seed, s), 0
	}
	for i := len(s) - 1; i >= 0; i-- {
		key = key<<8 | uint64(s[i])
	}
	hi, lo := bits.Mul64(key^uint64(len(s))<<59, 0x9e3779b97f4a7c15)
	return hi ^ lo, key
}

// rank returns the rank of s and whether s is a token.
func (t *rankTable) rank(s string) (int, bool) {
	h, key := t.hash(s)
	mask := uint64(len(t.slots) - 1)
	for i := h >> t.shift; ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.rank == 0 {
			return 0, false
		}
		if sl.n != uint32(len(s)) {
			continue
		}
		if len(s) <= maxShortKey {
			if sl.key == key {
				return int(sl.rank - 1), true
			}
			continue
		}
		if sl.key>>32 == h>>32 {
			if off := int(uint32(sl.key)); t.arena[off:off+len(s)] == s {
				return int(sl.rank - 1), true
			}
		}
	}
}

// mergeCache remembers the token ends of recent pieces that are no token
// (mergeEnds's result, relative to the piece): byte-pair merging costs a
// lookup per pair of parts each round, and a document repeats its
// identifiers, hosts and names. It is a table of mergeSlots slots, each
// holding the last piece hashed to it, so it stays small whatever the
// text; its slots are swapped atomically, so it is safe for concurrent
// use, and an entry is never changed once stored.
type mergeCache struct {
	slots []atomic.Pointer[mergedPiece]
	seed  maphash.Seed
}

// mergedPiece is a piece and the ends of its tokens, relative to it, a
// byte each (a piece remembered is shorter than 256 bytes), both in one
// string.
type mergedPiece struct {
	piece, ends string
}

const (
	mergeSlots = 1 << 13
	// maxMerged is the longest piece remembered.
	maxMerged = 64
)

func newMergeCache() *mergeCache {
	return &mergeCache{slots: make([]atomic.Pointer[mergedPiece], mergeSlots), seed: maphash.MakeSeed()}
}

// slot returns the slot of piece.
func (c *mergeCache) slot(piece string) *atomic.Pointer[mergedPiece] {
	return &c.slots[maphash.String(c.seed, piece)&(mergeSlots-1)]
}
