// Package embedded implements every kgstream store contract in one bbolt
// file, for the single-process mode (`kgstream up`) that needs nothing but
// Go. Every write is one bbolt read-write transaction, so Apply and Delete
// are atomic and writers are serialized: there are no conflicts to retry.
//
// Layout (all values JSON unless noted; "<a|b>" is a composite key, the
// uvarint length of a, a, then b, so prefix scans over a are exact):
//
//	meta                      layout = "3"
//	registry/<tenant>/<doc>   provenance.SourceState
//	graph/<tenant>/sources/<doc>          store.SourceRecord (tombstones too)
//	graph/<tenant>/entity_rows/<id|>      store.EntityHead (store.EncodeEntityHead)
//	graph/<tenant>/entity_rows/<id|doc>   the doc's store.Fragment of the entity (store.EncodeFragment)
//	graph/<tenant>/edge_rows/<id|>        store.EdgeHead (store.EncodeEdgeHead)
//	graph/<tenant>/edge_rows/<id|doc>     the doc's support of the edge (store.EncodeFragment)
//	graph/<tenant>/by_type/<type|id>      "" (EntitiesByType)
//	graph/<tenant>/out/<source|edge id>   "" (Edges Out)
//	graph/<tenant>/in/<target|edge id>    "" (Edges In)
//	graph/<tenant>/by_rel/<relation|edge id>    "" (EdgesByRelation)
//	graph/<tenant>/by_name/<store.NameKey|entity id>  "" (EntitiesByName)
//	graph/<tenant>/meta/{sources,entities,edges}  int64 big-endian counts (Stats)
//	communities/<tenant>/run              int64 big-endian
//	communities/<tenant>/items/<id>       store.Community
//	communities/<tenant>/members/<entity|community id>  "" (CommunitiesOf)
//	reports/<tenant>/<id>                 store.Report
//	report_index/<tenant>/by_src/<doc|report id>  "" (ReportsBySource)
//	report_index/<tenant>/cites/<report id>       []provenance.SourceRef (store.CitationsOf)
//	outbox/<tenant>/<event id>            a pending event's record (store.Outbox)
//
// A file written before report_index, communities/<tenant>/members,
// by_rel or by_name existed gets them built from its reports and communities when it is
// opened. A file of layout 1 or 2 keeps whole entities and edges, all
// their fragments in one value, under graph/<tenant>/entities/<id> and
// graph/<tenant>/edges/<id>: Open splits them into heads and fragments
// (migrateToHeads), in the transaction that marks the file layout 3.
package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/store"
)

// layoutVersion is the bucket layout this code reads and writes; Open
// refuses a file with another, rather than misreading it. Layout 2 is
// layout 1 whose values may be compressed (store.EncodeValue). Layout 3
// stores entities and edges as heads and per-document fragments. Open
// converts a layout 1 or 2 file to layout 3 (migrateToHeads); a build that
// knows only layout 2 refuses a layout 3 file instead of finding no
// entities in it.
const (
	layoutVersion      = "3"
	layoutWhole        = "2"
	layoutUncompressed = "1"
)

// Top-level bucket names and keys. Constants, not []byte variables, so no
// package state can be mutated.
const (
	bucketMeta        = "meta"
	bucketRegistry    = "registry"
	bucketGraph       = "graph"
	bucketCommunities = "communities"
	bucketReports     = "reports"
	bucketReportIndex = "report_index"
	keyLayout         = "layout"
)

// Options configure Open.
type Options struct {
	// Timeout bounds the wait for the file lock, which another process
	// holding the file keeps forever. Zero means one second.
	Timeout time.Duration
	// NoSync skips fsync on commit. It trades durability for speed and is
	// meant for tests only.
	NoSync bool
	// Now returns the time recorded as SourceRecord.AppliedAt. Nil means
	// time.Now.
	Now func() time.Time
}

// Validate checks the options.
func (o Options) Validate() error {
	if o.Timeout < 0 {
		return fmt.Errorf("%w: timeout %v is negative", store.ErrInvalid, o.Timeout)
	}
	return nil
}

// Store is every kgstream store in one bbolt file. It is safe for
// concurrent use.
type Store struct {
	db  *bolt.DB
	now func() time.Time
}

var _ store.Stores = (*Store)(nil)

// Open opens (creating if needed) the store file at path.
func Open(path string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("opening store %q: %w", path, err)
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.Timeout, NoSync: opts.NoSync})
	if err != nil {
		return nil, fmt.Errorf("opening store %q: %w", path, err)
	}
	db.MaxBatchDelay = batchDelay
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists([]byte(bucketMeta))
		if err != nil {
			return err
		}
		v := meta.Get([]byte(keyLayout))
		switch {
		case v == nil, string(v) == layoutVersion, string(v) == layoutUncompressed, string(v) == layoutWhole:
		default:
			return fmt.Errorf("file has layout %q, this build reads %q", v, layoutVersion)
		}
		for _, name := range []string{bucketRegistry, bucketGraph, bucketCommunities, bucketReports} {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return err
			}
		}
		if v != nil && string(v) != layoutVersion {
			if err := migrateToHeads(tx); err != nil {
				return fmt.Errorf("converting layout %s to %s: %w", v, layoutVersion, err)
			}
		}
		if string(v) != layoutVersion {
			if err := meta.Put([]byte(keyLayout), []byte(layoutVersion)); err != nil {
				return err
			}
		}
		if err := buildGraphIndexes(tx); err != nil {
			return err
		}
		if err := buildMemberIndex(tx); err != nil {
			return err
		}
		if err := buildRegistryCounts(tx); err != nil {
			return err
		}
		if tx.Bucket([]byte(bucketReportIndex)) == nil {
			if _, err := tx.CreateBucket([]byte(bucketReportIndex)); err != nil {
				return err
			}
			return buildReportIndex(tx)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening store %q: %w", path, err)
	}
	return &Store{db: db, now: opts.Now}, nil
}

// Ping reports whether the file is open.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.db.View(func(*bolt.Tx) error { return nil }); err != nil {
		return fmt.Errorf("pinging store: %w", err)
	}
	return nil
}

// Close closes the file. Calls after Close fail.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("closing store: %w", err)
	}
	return nil
}

// view and update run fn in a transaction after checking ctx (bbolt cannot
// be interrupted once a transaction runs).
func (s *Store) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

func (s *Store) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(fn)
}

// batchDelay is how long a small write waits for others to share its
// commit (bolt.DB.MaxBatchDelay; bbolt's default is 10ms).
const batchDelay = 2 * time.Millisecond

// batch is update for small writes that arrive concurrently (a gateway's
// requests: registry changes, outbox records): bbolt groups concurrent
// calls into one transaction, one commit and one fsync for all. fn may run
// more than once (when another call of its group fails, the group is
// retried without it), so it must only write through tx and set results
// it overwrites on every run.
func (s *Store) batch(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Batch(fn)
}

// tenantBucket returns the tenant's bucket under the top-level bucket name,
// or nil if it does not exist (or, with create, creates it).
func tenantBucket(tx *bolt.Tx, name, tenant string, create bool) (*bolt.Bucket, error) {
	top := tx.Bucket([]byte(name))
	if top == nil {
		return nil, fmt.Errorf("bucket %q is missing", name)
	}
	if !create {
		return top.Bucket([]byte(tenant)), nil
	}
	return top.CreateBucketIfNotExists([]byte(tenant))
}

// tenantNames lists the tenant buckets under a top-level bucket, sorted
// (bbolt keeps keys in byte order).
func tenantNames(tx *bolt.Tx, name string) []string {
	out := []string{}
	_ = tx.Bucket([]byte(name)).ForEachBucket(func(k []byte) error {
		out = append(out, string(k))
		return nil
	})
	return out
}

// pair encodes the composite key <a|b>.
func pair(a, b string) []byte {
	k := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(a)+len(b)), uint64(len(a)))
	return append(append(k, a...), b...)
}

// pairPrefix is the prefix every <a|…> key starts with.
func pairPrefix(a string) []byte { return pair(a, "") }

// splitPair decodes a composite key.
func splitPair(k []byte) (a, b string, err error) {
	n, l := binary.Uvarint(k)
	if l <= 0 || uint64(len(k)-l) < n {
		return "", "", fmt.Errorf("malformed index key %q", k)
	}
	return string(k[l : l+int(n)]), string(k[l+int(n):]), nil
}

// scanPrefix calls fn with the b part of every <a|b> key of bucket.
func scanPrefix(bucket *bolt.Bucket, a string, fn func(b string) error) error {
	prefix := pairPrefix(a)
	c := bucket.Cursor()
	for k, _ := c.Seek(prefix); k != nil && len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix); k, _ = c.Next() {
		if err := fn(string(k[len(prefix):])); err != nil {
			return err
		}
	}
	return nil
}

func getJSON(b *bolt.Bucket, key string, v any) (bool, error) {
	data := b.Get([]byte(key))
	if data == nil {
		return false, nil
	}
	if err := store.DecodeValue(data, v); err != nil {
		return false, fmt.Errorf("decoding %q: %w", key, err)
	}
	return true, nil
}

// putJSON stores v's JSON, compressed as c says (see store.EncodeValue;
// getJSON and unmarshal read either form).
func putJSON(b *bolt.Bucket, key string, v any, c store.Compression) error {
	data, err := store.EncodeValue(v, c)
	if err != nil {
		return fmt.Errorf("encoding %q: %w", key, err)
	}
	return b.Put([]byte(key), data)
}

func getInt(b *bolt.Bucket, key string) int64 {
	v := b.Get([]byte(key))
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func putInt(b *bolt.Bucket, key string, n int64) error {
	return b.Put([]byte(key), binary.BigEndian.AppendUint64(nil, uint64(n)))
}
