// Package redis implements every kgstream store contract on Redis, the
// scale-out adapter.
//
// # Atomicity
//
// Every read-modify-write (Apply, Delete, Announce, SetACL, MarkDeleted) is
// an optimistic transaction: WATCH the keys it reads, read them, compute the
// new state in Go with the same pure functions the embedded adapter uses
// (store.Plan, store.NextAnnounced, ...), then write everything in one
// MULTI/EXEC. If a watched key changed meanwhile, EXEC does nothing and the
// transaction is retried after a jittered backoff, a bounded number of times,
// then fails with store.ErrConflict. Apply watches the source record first,
// then, before reading them, every entity and edge the old and new
// contributions touch, so two applies sharing an entity serialize on it: it
// watches their heads, or, when they are many, their stripes, keys that
// every write of an entity or edge rewrites in its MULTI (see stripes.go;
// WATCH of N keys costs Redis O(N²)).
//
// WATCH over Lua because the merge rules then exist once, in Go, for both
// adapters; a Lua port would be a second implementation to keep identical
// (and cjson cannot tell an empty array from an empty object). A Lua script
// applying a 10,000-entity source would also block the whole server while
// it ran; an optimistic transaction blocks nobody and only retries when it
// actually collides.
//
// Multi-key reads (Snapshot, Audit, Entities, EntitiesByType, Edges, ...)
// are one Lua script each, so they see the graph between two transactions
// and never an edge without its endpoints, however busy the writers are
// (see atomic.go). Reads are the one place scripts are used: they compute
// nothing but an edge id from an adjacency field (adjacency.go), so there
// is no second implementation of a rule to keep.
//
// # Keys
//
// Every key starts with "<prefix>:". Per-tenant keys carry the tenant as a
// hash tag, "{<tenant>}", so one tenant's keys share a cluster slot and its
// transactions are legal on Redis Cluster; the two global sets are written
// just before the transactions that need them (idempotently), never inside.
//
//	<p>:tenants                      set of registry tenants
//	<p>:graph-tenants                set of tenants with graph data
//	<p>:{<t>}:reg:<doc>              provenance.SourceState (JSON)
//	<p>:{<t>}:reg-docs               set of registry doc ids
//	<p>:{<t>}:reg-count              hash: live, deleted (registry counts), counted (1: they cover every document)
//	<p>:{<t>}:reg-gen                registry generation, INCR by every registry write (generation.go)
//	<p>:{<t>}:reg-log                sorted set of doc ids, each scored with the generation of its last registry write (store.RegistryChanges)
//	<p>:{<t>}:reg-log-from           the generation from which every registry write is in reg-log
//	<p>:{<t>}:reg-log-last           the generation of the last registry write reg-log recorded
//	<p>:{<t>}:g:src:<doc>            store.SourceRecord (JSON, tombstones too)
//	<p>:{<t>}:g:srcs                 set of doc ids with a record
//	<p>:{<t>}:g:live                 set of doc ids with a live record (Stats)
//	<p>:{<t>}:g:e:<id>               hash: "" -> store.EntityHead, <doc> -> the doc's store.Fragment (store.Encode*)
//	<p>:{<t>}:g:ents                 set of entity ids
//	<p>:{<t>}:g:type:<type>          set of entity ids of a type
//	<p>:{<t>}:g:x:<id>               store.EdgeHead (store.EncodeEdgeHead; the supports inline while they are few)
//	<p>:{<t>}:g:xs:<id>              hash <doc> -> the doc's support, once the head has spilled them (store.EdgeHead.Inline)
//	<p>:{<t>}:g:edge-count           how many edges there are (INCRBY by every write creating or removing edges)
//	<p>:{<t>}:g:gen                  graph generation, INCR by every applied change (store.GraphGenerations)
//	<p>:{<t>}:g:out:<entity>         hash: one field per edge leaving the entity, "<relation>|<target>", value "" (adjacency.go)
//	<p>:{<t>}:g:in:<entity>          hash: one field per edge entering the entity, "<source>|<relation>", value "" (adjacency.go)
//	<p>:{<t>}:g:rel:<relation>       set of ids of the relation's edges
//	<p>:{<t>}:g:name:<name key>      hash: one field per entity with the name (store.NameKey), value ""
//	<p>:{<t>}:gv:<n>                 stripe n: a random token, rewritten by every write of an entity or edge of the stripe (stripes.go)
//	<p>:{<t>}:communities            hash community id -> store.Community (JSON)
//	<p>:{<t>}:communities-run        last run number
//	<p>:{<t>}:cmembers               hash entity id -> ids of the communities holding it (JSON)
//	<p>:{<t>}:reports                hash report id -> store.Report (JSON)
//	<p>:{<t>}:rcites                 hash report id -> its citations (store.CitationsOf, JSON)
//	<p>:{<t>}:rsrc:<doc>             hash: one field per report citing the document, value ""
//	<p>:{<t>}:outbox                 hash event id -> pending event record (store.Outbox, see outbox.go)
//	<p>:outbox-tenants               set of tenants with pending events
//	<p>:graph-layout                 "5" once every graph is in the layout above (see layout.go)
//
// An entity is one hash of its head and one field per document; an edge is
// its head, holding its supports while they are few (most edges have one),
// and once they are many a hash of one field per document. So an apply
// reads (HMGET, MGET, HGET) and writes (HSET, MSET, HDEL) the heads it
// touches and its own document's fields, never the other documents'
// fragments, and adds and removes only the index entries that change (a
// head's type, spellings or endpoints).
// The adjacency indexes, the name index and the reports' by-source index
// are hashes, not sets, because Redis 7.0 keeps every set of strings in a
// hash table (~100 bytes a member here, ~225 bytes for a set of one) but
// a small hash in a listpack (a few bytes a field besides the field). There
// is no set of all edge ids (~80 bytes an edge): every edge is a field of
// its source's out hash and its source is in g:ents, so Snapshot lists
// the edges through those, and Stats reads g:edge-count.
// Stores written before that hold the name and by-source indexes as sets
// (layout 4), also a set of every edge id, g:edges (layout 3), also the
// adjacency indexes as sets of edge ids (layout 2), and the oldest
// (layout 1) each entity and edge whole under g:ent:<id> and
// g:edge:<id>; a Store converts them before its first graph or
// report-index operation (ensureLayout).
//
// A JSON value of at least store.CompressMin bytes is stored compressed
// (store.EncodeValue): heads and fragments with S2, source records,
// communities, reports and citations with zstd; registry states and the
// member index stay plain. Every read decodes either form, so values an
// older build wrote read unchanged.
package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/store"
)

// DefaultPrefix is the key prefix New uses when given "".
const DefaultPrefix = "kgstream"

// DefaultMaxAttempts is how many times an optimistic transaction runs
// before it gives up with store.ErrConflict.
const DefaultMaxAttempts = 50

// mgetChunk bounds the keys of one MGET so a huge source does not make one
// huge reply.
const mgetChunk = 1000

// Option configures a Store.
type Option func(*Store)

// WithMaxAttempts sets how many times an optimistic transaction runs before
// it fails with store.ErrConflict (values below 1 mean 1).
func WithMaxAttempts(n int) Option { return func(s *Store) { s.maxAttempts = max(n, 1) } }

// WithClock sets the clock that stamps SourceRecord.AppliedAt.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// Store is every kgstream store on one Redis deployment. It is safe for
// concurrent use.
type Store struct {
	client      goredis.UniversalClient
	prefix      string
	maxAttempts int
	// watchHeadsMax and watchCoarseMin are watchHeadsMax and
	// watchCoarseMin but for tests (see stripes.go).
	watchHeadsMax, watchCoarseMin int
	backoff                       time.Duration
	now                           func() time.Time
	// beforeWrite, if set (tests), is called by every attempt of an apply
	// that writes, with its number (1 for the first), once it has read
	// and planned, before its MULTI.
	beforeWrite func(attempt int)
	// layoutMu and layoutDone guard the conversion of older graphs
	// (ensureLayout).
	layoutMu   sync.Mutex
	layoutDone atomic.Bool
	// graphTenants holds the tenants this Store has added to the global
	// set of graph tenants (noteGraphTenant); regTenants and outboxTenants
	// those it has added to the registry's and the outbox's (noteTenant).
	graphTenants, regTenants, outboxTenants sync.Map
}

var _ store.SourceCounter = (*Store)(nil)
var _ store.Stores = (*Store)(nil)

// New returns a Store keeping every key under "<prefix>:" ("kgstream:" for
// an empty prefix). The Store owns client from then on: Close closes it.
func New(client goredis.UniversalClient, prefix string, opts ...Option) *Store {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	s := &Store{client: client, prefix: prefix, maxAttempts: DefaultMaxAttempts, watchHeadsMax: watchHeadsMax, watchCoarseMin: watchCoarseMin, backoff: time.Millisecond, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("pinging redis: %w", err)
	}
	return nil
}

// Close closes the client.
func (s *Store) Close() error {
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("closing redis client: %w", err)
	}
	return nil
}

// keys builds one tenant's keys.
type keys struct{ base string }

func (s *Store) tenantKeys(tenant string) keys { return keys{base: s.prefix + ":{" + tenant + "}:"} }

func (s *Store) tenantsKey() string      { return s.prefix + ":tenants" }
func (s *Store) graphTenantsKey() string { return s.prefix + ":graph-tenants" }

func (k keys) reg(doc string) string         { return k.base + "reg:" + doc }
func (k keys) regDocs() string               { return k.base + "reg-docs" }
func (k keys) regCount() string              { return k.base + "reg-count" }
func (k keys) graph() string                 { return k.base + "g:" }
func (k keys) src(doc string) string         { return k.base + "g:src:" + doc }
func (k keys) srcs() string                  { return k.base + "g:srcs" }
func (k keys) live() string                  { return k.base + "g:live" }
func (k keys) entity(id string) string       { return k.base + "g:e:" + id }
func (k keys) entities() string              { return k.base + "g:ents" }
func (k keys) byType(t string) string        { return k.base + "g:type:" + t }
func (k keys) edge(id string) string         { return k.base + "g:x:" + id }
func (k keys) edgeSupports(id string) string { return k.base + "g:xs:" + id }
func (k keys) edgeCount() string             { return k.base + "g:edge-count" }
func (k keys) graphGen() string              { return k.base + "g:gen" }
func (k keys) edgeSet() string               { return k.base + "g:edges" } // layouts 1 to 3 (layout.go)
func (k keys) out(id string) string          { return k.base + "g:out:" + id }
func (k keys) in(id string) string           { return k.base + "g:in:" + id }
func (k keys) byRel(r string) string         { return k.base + "g:rel:" + r }
func (k keys) byName(n string) string        { return k.base + "g:name:" + n }
func (k keys) communities() string           { return k.base + "communities" }
func (k keys) wholeEntity(id string) string  { return k.base + "g:ent:" + id }
func (k keys) wholeEdge(id string) string    { return k.base + "g:edge:" + id }
func (k keys) communitiesRun() string        { return k.base + "communities-run" }
func (k keys) communityMembers() string      { return k.base + "cmembers" }
func (k keys) reports() string               { return k.base + "reports" }
func (k keys) reportCites() string           { return k.base + "rcites" }
func (k keys) reportsOf(doc string) string {
	return k.base + "rsrc:" + doc
}

// prefixed returns the key f(id) of every id. f is a key method taking
// an id (k.entity, k.edge...): each is a prefix, f(""), followed by the id,
// so the keys are built in one string (see joinKeys).
func (k keys) prefixed(f func(string) string, ids []string) []string {
	return joinKeys(f(""), ids)
}

// joinKeys returns prefix+ids[i] for every i. The keys are substrings of
// one string built at once: an apply of a large document names thousands
// of keys, and one allocation instead of one per key spares the garbage
// collector.
func joinKeys(prefix string, ids []string) []string {
	size := len(prefix) * len(ids)
	for _, id := range ids {
		size += len(id)
	}
	var b strings.Builder
	b.Grow(size)
	for _, id := range ids {
		b.WriteString(prefix)
		b.WriteString(id)
	}
	all := b.String()
	out := make([]string, len(ids))
	at := 0
	for i, id := range ids {
		end := at + len(prefix) + len(id)
		out[i] = all[at:end]
		at = end
	}
	return out
}

// noteTenant adds tenant to the global set key, a set that only ever
// grows, once per Store: seen holds the tenants added, so later writes of
// the tenant spare the round trip. Like noteGraphTenant's, the cache
// relies on the set never losing a member while the process runs.
func (s *Store) noteTenant(ctx context.Context, key string, seen *sync.Map, tenant string) error {
	if _, ok := seen.Load(tenant); ok {
		return nil
	}
	if err := s.client.SAdd(ctx, key, tenant).Err(); err != nil {
		return err
	}
	seen.Store(tenant, struct{}{})
	return nil
}

// optimistic runs fn in a WATCH transaction on watched, retrying when EXEC
// finds a watched key changed.
func (s *Store) optimistic(ctx context.Context, fn func(*goredis.Tx) error, watched ...string) error {
	for attempt := 0; ; attempt++ {
		err := s.client.Watch(ctx, fn, watched...)
		if !errors.Is(err, goredis.TxFailedErr) {
			return err
		}
		if attempt+1 >= s.maxAttempts {
			return fmt.Errorf("%w: concurrent writers won %d attempts", store.ErrConflict, s.maxAttempts)
		}
		if err := s.pause(ctx, attempt); err != nil {
			return err
		}
	}
}

// pause waits a jittered, exponentially growing delay (capped at 64 times
// the base) so colliding writers spread out instead of colliding again.
func (s *Store) pause(ctx context.Context, attempt int) error {
	d := time.Duration(rand.Int64N(int64(s.backoff<<min(attempt, 6)) + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// getJSON reads one JSON value; nil if the key is absent.
func getJSON[T any](ctx context.Context, c goredis.Cmdable, key string) (*T, error) {
	return decodeGet[T](c.Get(ctx, key), key)
}

// decodeGet decodes the reply of a GET of key; nil if the key is absent.
func decodeGet[T any](get *goredis.StringCmd, key string) (*T, error) {
	data, err := get.Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := store.DecodeValue(data, v); err != nil {
		return nil, fmt.Errorf("decoding %q: %w", key, err)
	}
	return v, nil
}

// mgetJSON reads JSON values by key, calling fn for each present one with
// its index in keys.
func mgetJSON[T any](ctx context.Context, c goredis.Cmdable, keys []string, fn func(i int, v T)) error {
	for start := 0; start < len(keys); start += mgetChunk {
		chunk := keys[start:min(start+mgetChunk, len(keys))]
		vals, err := c.MGet(ctx, chunk...).Result()
		if err != nil {
			return err
		}
		if err := decodeJSON(vals, func(i int) string { return fmt.Sprintf("%q", chunk[i]) },
			func(i int, v T) { fn(start+i, v) }); err != nil {
			return err
		}
	}
	return nil
}

// decodeJSON decodes the JSON values of a reply (MGET, HMGET or a script
// reading keys) and calls fn for each present one with its index; an
// absent value (not a string) is skipped. name names value i in an error.
func decodeJSON[T any](vals []any, name func(i int) string, fn func(i int, v T)) error {
	for i, raw := range vals {
		str, ok := raw.(string)
		if !ok {
			continue // absent
		}
		var v T
		if err := store.DecodeValue([]byte(str), &v); err != nil {
			return fmt.Errorf("decoding %s: %w", name(i), err)
		}
		fn(i, v)
	}
	return nil
}

// marshal encodes a value for SET or HSET, compressed as c says (see
// store.EncodeValue; every decoding path reads either form).
func marshal(v any, c store.Compression) (string, error) {
	data, err := store.EncodeValue(v, c)
	if err != nil {
		return "", fmt.Errorf("encoding %T: %w", v, err)
	}
	return string(data), nil
}
