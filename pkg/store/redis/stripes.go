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
//
// Coarse stripes. WATCH of the ~950 stripes of an edit of 1,000
// contributions still took 9-15 ms per apply in INFO commandstats on a
// busy 2-core machine, about a fifth of Redis's time for the apply:
// WATCH of N keys costs O(N²), and a stripe per id is worth watching
// only while an apply watches a minority of them. So every stripe n also
// falls in coarse stripe n mod coarseCount, a key <p>:{<t>}:gc:<n mod
// coarseCount>, which every write bumps together with the stripe
// (stripeSetKeys names both), and an apply reading more than
// watchCoarseMin entities and edges watches its coarse stripes instead of
// its stripes on its first attempt: at most coarseCount keys. It collides
// with more concurrent writes than fine stripes would, but hardly: with
// 1,024 ids it watches ~63% of the stripes, so a concurrent write of the
// usual ten or more ids meets one of them anyway (1 - 0.37^10 > 99.99%);
// only a write of one or two ids collides more often, and a collision
// costs one retry, which watches the heads. Like the stripes, every
// process writing a store must bump the coarse stripes: a build older
// than them writes heads whose change an apply watching coarse stripes
// does not see. (Not WATCH at all but a script comparing the stripes'
// values with those read and then running the apply's writes was
// measured too: Redis spent more CPU on the ~3,300 redis.call of such a
// script than on the WATCH and the MULTI it replaced.)
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

// coarseCount is how many coarse stripes a tenant has (see above): WATCH
// of 64 keys costs a few µs.
const coarseCount = 64

// watchCoarseMin is the most entities and edges an apply reads and still
// watches their stripes rather than their coarse stripes (see above):
// WATCH of the ~650 stripes of 1,024 ids costs ~2 ms of Redis CPU. An
// edit of 1,000 contributions reads ~3,000.
const watchCoarseMin = 1024

// watchStripes says whether attempt (1 for the first) of an apply reading
// the heads of n entities and edges watches their stripes (or coarse
// stripes, see watchKeys) rather than the heads: only the first attempt
// of a large apply does. Once it failed,
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
// edgeIDs watches: their stripes, or their coarse stripes when there are
// more than coarseMin ids, or the heads themselves.
func (k keys) watchKeys(entityIDs, edgeIDs []string, stripes bool, coarseMin int) []string {
	switch {
	case !stripes:
		return append(k.prefixed(k.entity, entityIDs), k.prefixed(k.edge, edgeIDs)...)
	case len(entityIDs)+len(edgeIDs) > coarseMin:
		return k.coarseKeys(entityIDs, edgeIDs)
	}
	var set stripeSet
	for _, group := range [...][]string{entityIDs, edgeIDs} {
		for _, id := range group {
			set.add(id)
		}
	}
	return joinKeys(k.stripePrefix(), set.names())
}

// coarseKeys returns the keys of the distinct coarse stripes of the ids,
// sorted by coarse stripe.
func (k keys) coarseKeys(ids ...[]string) []string {
	var coarse [coarseCount]bool
	n := 0
	for _, group := range ids {
		for _, id := range group {
			if c := stripeOf(id) % coarseCount; !coarse[c] {
				coarse[c] = true
				if n++; n == coarseCount {
					return k.coarseSetKeys(&coarse)
				}
			}
		}
	}
	return k.coarseSetKeys(&coarse)
}

// coarseSetKeys returns the keys of the coarse stripes in coarse, sorted.
func (k keys) coarseSetKeys(coarse *[coarseCount]bool) []string {
	var names []string
	for c, in := range coarse {
		if in {
			names = append(names, stripeNames[c])
		}
	}
	return joinKeys(k.coarsePrefix(), names)
}

// coarse is the key of coarse stripe n.
func (k keys) coarse(n uint32) string { return k.coarsePrefix() + stripeNames[n] }

// coarsePrefix is what every coarse stripe key starts with, followed by
// its number.
func (k keys) coarsePrefix() string { return k.base + "gc:" }

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
// by stripe, then those of their coarse stripes (see stripeSetKeys): what
// a write of the ids bumps.
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

// names returns the names of the stripes in s, sorted.
func (s *stripeSet) names() []string {
	n := 0
	for _, in := range s {
		if in {
			n++
		}
	}
	names := make([]string, 0, n)
	for st, in := range s {
		if in {
			names = append(names, stripeNames[st])
		}
	}
	return names
}

// stripeSetKeys returns the keys of the stripes of set, sorted by stripe,
// then those of their coarse stripes, sorted: what a write of the ids of
// set bumps. The stripes' keys are substrings of one string (see
// joinKeys): a large apply names most of the stripes, twice.
func (k keys) stripeSetKeys(set *stripeSet) []string {
	var coarse [coarseCount]bool
	for st, in := range set {
		if in {
			coarse[st%coarseCount] = true
		}
	}
	return append(joinKeys(k.stripePrefix(), set.names()), k.coarseSetKeys(&coarse)...)
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
