package redis

import (
	"context"
	"math/rand/v2"
	"strconv"

	goredis "github.com/redis/go-redis/v9"
)

// Stripes: what an apply watches.
//
// An apply watches what it reads, so that a concurrent write of it makes
// its EXEC fail and the apply start again. Watching every entity and edge
// head it reads is exact, but Redis 7.0's WATCH compares each key it adds
// with every key the connection already watches, so watching N keys costs
// O(N²): the ~2,500 heads of a 1,000-contribution edit took ~40 ms of Redis
// CPU per apply, more than the rest of the apply.
//
// So every entity and edge id also falls in one of stripeCount stripes of
// its tenant (stripeOf), each a key, <p>:{<t>}:gv:<n>. Every transaction
// that writes an entity's hash or an edge's head or supports hash
// rewrites, inside its MULTI, the stripes of the ids it writes
// (bumpStripes). An apply reading at most watchHeadsMax entities and
// edges watches their heads, as before; a larger one watches their
// distinct stripes instead (watchKeys), at most stripeCount keys, on its
// first attempt (see watchStripes for the retries). Either way a
// concurrent write of a head it read changes a key it watches (the head
// itself, and its stripe), so its EXEC fails: the stripes give the same
// guarantee with coarser conflicts.
//
// Why not stripes for every apply: two small applies sharing no entity
// would then collide whenever their stripes meet by chance, which with 8
// writers of 10-contribution documents (18 ids each) and 1024 stripes
// made 70% more attempts than watching heads and the preload of the apply
// benchmark 60% slower. And a large apply watches most stripes, so it
// collides with almost any concurrent write: worth it for one attempt,
// which usually meets none, not for every one (see watchStripes).
//
// stripeCount is 1024. It bounds what a large apply watches and bumps:
// about 950 distinct stripes for the ~3,000 ids an edit of 1,000
// contributions reads and writes (WATCH ~5 ms of Redis CPU at the worst
// instead of ~40), and bounds what a large write bumps. Fewer stripes would make that
// cheaper but make an apply just above watchHeadsMax watch most of them
// (with 1024 it watches about 40%). A tenant's stripes are at most
// stripeCount keys of a 13-byte token (about 80 KiB), created by the
// first write; a store written by an older build has none, and watching
// an absent key is as sound as watching one that holds a value. Every process writing a store must agree
// on stripeCount and stripeOf: changing either needs new key names, or a
// reader would watch stripes the writers no longer bump.
const stripeCount = 1024

// stripeOf is the stripe of an entity or edge id: FNV-1a (32 bits) of the
// id, modulo stripeCount.
func stripeOf(id string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return h % stripeCount
}

// watchHeadsMax is the most entities and edges an apply reads and still
// watches one by one (WATCH of 512 keys costs ~1 ms of Redis CPU); above
// it, its first attempt watches their stripes. An edit of 100
// contributions reads ~300.
const watchHeadsMax = 512

// watchStripes says whether attempt (1 for the first) of an apply reading
// the heads of n entities and edges watches their stripes rather than the
// heads: only the first attempt of a large apply does. Once it failed,
// some write met one of its stripes, which for a large apply is likely
// whatever the write was (it watches most stripes), and as likely again
// next time while writers are busy: the retries watch the heads, paying
// the quadratic WATCH for conflicts that are real, as applies did before
// the stripes, rather than starving.
func (s *Store) watchStripes(n, attempt int) bool {
	if s.watchHeadsMax < 0 {
		return true // tests: stripes always
	}
	return n > s.watchHeadsMax && attempt == 1
}

// watchKeys returns the keys an apply reading the heads of entityIDs and
// edgeIDs watches: their stripes, or the heads themselves.
func (k keys) watchKeys(entityIDs, edgeIDs []string, stripes bool) []string {
	if stripes {
		return k.stripeKeys(entityIDs, edgeIDs)
	}
	return append(k.prefixed(k.entity, entityIDs), k.prefixed(k.edge, edgeIDs)...)
}

// stripe is the key of stripe n.
func (k keys) stripe(n uint32) string { return k.stripePrefix() + stripeNames[n] }

// stripePrefix is what every stripe key starts with, followed by the
// stripe's number.
func (k keys) stripePrefix() string { return k.base + "gv:" }

// stripeNames holds the decimal name of every stripe, "0" to "1023",
// so a stripe key is its prefix joined to its name (see stripeSetKeys).
var stripeNames = func() (names [stripeCount]string) {
	for n := range names {
		names[n] = strconv.Itoa(n)
	}
	return names
}()

// stripeKeys returns the keys of the distinct stripes of the ids, sorted
// by stripe.
func (k keys) stripeKeys(ids ...[]string) []string {
	var set stripeSet
	for _, group := range ids {
		for _, id := range group {
			set.add(id)
		}
	}
	return k.stripeSetKeys(&set)
}

// stripeSet is a set of stripes.
type stripeSet [stripeCount]bool

// add adds the stripe of an entity or edge id.
func (s *stripeSet) add(id string) { s[stripeOf(id)] = true }

// stripeSetKeys returns the keys of the stripes of set, sorted by stripe.
// They are substrings of one string (see joinKeys): a large apply names
// most of the stripes, twice.
func (k keys) stripeSetKeys(set *stripeSet) []string {
	n := 0
	for _, in := range set {
		if in {
			n++
		}
	}
	names := make([]string, 0, n)
	for s, in := range set {
		if in {
			names = append(names, stripeNames[s])
		}
	}
	return joinKeys(k.stripePrefix(), names)
}

// bumpStripes queues, on p (a transaction's pipeline), the write of every
// distinct stripe of the ids: each writer of entity and edge keys calls it
// in the MULTI that writes them. One MSET of a fresh random token: WATCH
// fires on any write of a key, whatever the value, and one command costs
// a small apply less than an INCR per stripe (which made the benchmark's
// preload ~10% slower).
func bumpStripes(ctx context.Context, p goredis.Pipeliner, stripeKeys []string) {
	if len(stripeKeys) == 0 {
		return
	}
	token := strconv.FormatUint(rand.Uint64(), 36)
	args := make([]any, 0, 2*len(stripeKeys))
	for _, key := range stripeKeys {
		args = append(args, key, token)
	}
	p.MSet(ctx, args...)
}
