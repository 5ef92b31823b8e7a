// Package embedded implements vector.Index in process: exact brute-force
// cosine search over vectors held in memory, persisted in a bbolt file so
// the index survives restarts. It is the default of `kgstream up`.
//
// Every item lives in memory (loaded when the file is opened) and on disk;
// a write updates the file first, in one transaction, then memory, under
// one lock, so the two never disagree. Search scans every item of the
// tenant and kind, skips those the filter does not admit (pre-filtering)
// and keeps the k best, splitting large scans across CPUs. That is exact
// and simple; it costs O(items × the query's non-zero dimensions) per
// query (vectors are kept dimension-major in blocks, see kindIndex), which
// stays within milliseconds for a hundred thousand 384-dimension hashing
// vectors and tens of milliseconds for dense ones (see BenchmarkSearch).
// Beyond that, use the weaviate adapter.
//
// # File layout
//
//	meta/layout                        layoutVersion
//	items/<tenant>/<kind>\x00<id>      record: uvarint JSON length, JSON of
//	                                   the item without its vector and
//	                                   sources, the unit-length vector as
//	                                   little-endian float32s
//	sources/<tenant>/<kind>\x00<id>\x00<doc>
//	                                   one source of the item: uvarint
//	                                   ordinal (the sources' order), JSON of
//	                                   the vector.Source
//
// Sources are rows of their own so that an item built from thousands of
// documents (a hub entity) changes by one row when one document's version
// or ACL changes (PatchSources, UpdateACL), not by a record of thousands.
// Layout 1 kept the sources in the item's record; Open converts such a
// file.
package embedded

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unique"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

const (
	bucketMeta    = "meta"
	bucketItems   = "items"
	bucketSources = "sources"
	keyLayout     = "layout"
	layoutVersion = "2"
)

// parallelScan is the number of items from which Search splits its scan
// across CPUs; below it the goroutines cost more than they save.
const parallelScan = 8192

// Options configure Open.
type Options struct {
	// Timeout bounds the wait for the file lock, which another process
	// holding the file keeps forever. Zero means one second.
	Timeout time.Duration
	// NoSync skips fsync on commit. It trades durability for speed and is
	// meant for tests and benchmarks only.
	NoSync bool
}

// Validate checks the options.
func (o Options) Validate() error {
	if o.Timeout < 0 {
		return fmt.Errorf("%w: negative timeout %v", vector.ErrInvalid, o.Timeout)
	}
	return nil
}

// Index is the embedded vector index.
type Index struct {
	db *bolt.DB

	mu      sync.RWMutex
	closed  bool
	tenants map[string]*tenantIndex
}

var _ vector.Index = (*Index)(nil)

type tenantIndex struct {
	kinds map[vector.Kind]*kindIndex
	// byDoc maps a document id to the items built from it.
	byDoc map[string]*docItems
	// acls are the distinct ACLs the items' sources hold, by aclKey.
	acls map[string]*sharedACL
}

// docItems are the keys of the items built from one document. Its id is
// the one copy of the document id that those items' sources share: an
// entity's item has a source per document mentioning it, and decoded each
// id would be an object of its own for every collection to mark.
type docItems struct {
	id   string
	keys map[key]struct{}
}

// sharedACL is one ACL value the sources of n items hold: a tenant's
// documents have few distinct ACLs, and every source of every item holds
// one. Items never modify it, and what leaves the index is copied
// (entry.full).
type sharedACL struct {
	acl provenance.ACL
	key string // aclKey(acl)
	n   int
}

// source is a vector.Source as the index keeps it: the document, ACL and
// text unit id shared with the item's other sources and other items
// (docItems, sharedACL, unique), in 48 bytes with three pointers where a
// vector.Source takes 144 with six. A hub entity's item has a source per
// document mentioning it, and the index is in the heap every collection
// marks.
type source struct {
	doc     *docItems
	unit    string
	version int64
	acl     *sharedACL
	// ord is the source's ordinal in its row (see the file layout):
	// ascending along the item's sources, kept when the source changes.
	ord uint64
}

// aclKey identifies an ACL value as stored (normalised: sorted lists, no
// writers).
func aclKey(a provenance.ACL) string {
	var b strings.Builder
	if a.Public {
		b.WriteByte('p')
	}
	for _, g := range a.Groups {
		b.WriteString("\x00g")
		b.WriteString(g)
	}
	for _, p := range a.Principals {
		b.WriteString("\x00u")
		b.WriteString(p)
	}
	return b.String()
}

// shareACL returns the shared copy of a, counting one more holder.
func (t *tenantIndex) shareACL(a provenance.ACL) *sharedACL {
	k := aclKey(a)
	sa := t.acls[k]
	if sa == nil {
		sa = &sharedACL{acl: a, key: k}
		t.acls[k] = sa
	}
	sa.n++
	return sa
}

// releaseACL counts one holder of sa less, dropping it with the last.
func (t *tenantIndex) releaseACL(sa *sharedACL) {
	if sa.n--; sa.n <= 0 {
		delete(t.acls, sa.key)
	}
}

type key struct {
	kind vector.Kind
	id   string
}

// kindIndex holds the items of one tenant and kind, with their vectors in
// blocks of up to blockSize entries, each block dimension-major: block b
// holds entries b*blockSize onwards, and value j of its entry e is
// blocks[b][j*stride+e], where stride (len(blocks[b])/dims) is blockSize
// for every block but the last, which grows by doubling (a small index
// wastes little). A search then reads, per block, only the dimensions
// where the query is non-zero, each as one contiguous run (a hashing
// embedder's query has a few dozen of hundreds: that many times less
// memory read than whole rows), and a dense query reads each block once,
// front to back.
type kindIndex struct {
	dims    int
	entries []*entry
	blocks  [][]float32 // unused slots are 0
	pos     map[string]int
}

// blockSize is how many entries a full vector block holds (runs of 4 KiB
// per dimension); minBlock the capacity a new last block starts with.
const (
	blockSize = 1024
	minBlock  = 16
)

// at returns the block holding value j of entry i and its index there.
func (ki *kindIndex) at(i, j int) ([]float32, int) {
	blk := ki.blocks[i/blockSize]
	return blk, j*(len(blk)/ki.dims) + i%blockSize
}

// grow makes room for entry i (the next one): a new block, or the last
// block at twice its capacity, its columns moved to their new places.
func (ki *kindIndex) grow(i int) {
	b, e := i/blockSize, i%blockSize
	if b == len(ki.blocks) {
		ki.blocks = append(ki.blocks, make([]float32, ki.dims*minBlock))
		return
	}
	old := ki.blocks[b]
	stride := len(old) / ki.dims
	if e < stride {
		return
	}
	wider := make([]float32, ki.dims*min(2*stride, blockSize))
	for j := range ki.dims {
		copy(wider[j*(len(wider)/ki.dims):], old[j*stride:(j+1)*stride])
	}
	ki.blocks[b] = wider
}

type entry struct {
	item vector.Item // without Vector and Sources
	srcs []source    // the item's sources
	// public is set when every source is public, to skip the ACL check.
	public bool
}

// Open opens (creating if needed) the index file at path and loads it.
func Open(path string, opts Options) (*Index, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("opening vector index %q: %w", path, err)
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.Timeout, NoSync: opts.NoSync})
	if err != nil {
		return nil, fmt.Errorf("opening vector index %q: %w", path, err)
	}
	ix := &Index{db: db, tenants: map[string]*tenantIndex{}}
	if err := ix.load(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening vector index %q: %w", path, err)
	}
	return ix, nil
}

func (ix *Index) load() error {
	return ix.db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists([]byte(bucketMeta))
		if err != nil {
			return err
		}
		items, err := tx.CreateBucketIfNotExists([]byte(bucketItems))
		if err != nil {
			return err
		}
		sources, err := tx.CreateBucketIfNotExists([]byte(bucketSources))
		if err != nil {
			return err
		}
		v := meta.Get([]byte(keyLayout))
		switch {
		case v == nil:
		case string(v) == "1":
			if err := splitSources(items, sources); err != nil {
				return fmt.Errorf("converting layout 1: %w", err)
			}
		case string(v) != layoutVersion:
			return fmt.Errorf("file has layout %q, this version reads %q", v, layoutVersion)
		}
		// Put only when it differs: an unchanged key would dirty a page on
		// every open.
		if string(v) != layoutVersion {
			if err := meta.Put([]byte(keyLayout), []byte(layoutVersion)); err != nil {
				return err
			}
		}
		return items.ForEachBucket(func(tn []byte) error {
			tenant := string(tn)
			rows := sources.Bucket(tn)
			return items.Bucket(tn).ForEach(func(k, v []byte) error {
				it, ords, err := decodeItem(v, rows, k)
				if err != nil {
					return fmt.Errorf("decoding item %q of tenant %q: %w", k, tenant, err)
				}
				if err := ix.tenant(tenant, true).put(it, ords); err != nil {
					return fmt.Errorf("loading item %q of tenant %q: %w", k, tenant, err)
				}
				return nil
			})
		})
	})
}

// Close closes the file. Calls after Close fail with vector.ErrClosed.
func (ix *Index) Close() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return nil
	}
	ix.closed = true
	ix.tenants = nil
	return ix.db.Close()
}

// Upsert writes items, replacing those with the same kind and id, in one
// transaction. An invalid item, or one whose dimensions differ from its
// tenant and kind's, fails the whole batch with a *vector.BatchError
// naming each such item; nothing is written then.
func (ix *Index) Upsert(ctx context.Context, tenant string, items []vector.Item) error {
	if err := ix.upsert(ctx, tenant, items); err != nil {
		return fmt.Errorf("upserting %d items into %q: %w", len(items), tenant, err)
	}
	return nil
}

func (ix *Index) upsert(ctx context.Context, tenant string, items []vector.Item) error {
	if err := vector.ValidateTenant(tenant); err != nil {
		return err
	}
	if err := vector.ValidateItems(items); err != nil {
		return err
	}
	if len(items) == 0 {
		return ctx.Err()
	}
	normed := make([]vector.Item, len(items))
	for i, it := range items {
		it = vector.Canonical(it)
		it.Vector = vector.Normalize(it.Vector)
		normed[i] = it
	}
	return ix.write(ctx, tenant, true, func(t *tenantIndex, b buckets) error {
		if err := checkDims(t, normed); err != nil {
			return err
		}
		for _, it := range normed {
			// putItem overwrites the rows of the documents the item keeps.
			if err := b.deleteSources(t, key{it.Kind, it.ID}, it.Sources); err != nil {
				return err
			}
			if err := b.putItem(t, it); err != nil {
				return fmt.Errorf("writing item %q: %w", it.ID, err)
			}
		}
		return nil
	}, func(t *tenantIndex) {
		for _, it := range normed {
			// Dimensions were checked above; put cannot fail.
			_ = t.put(it, nil)
		}
	})
}

// ReplaceDocItems removes the items of each of docs (of its kinds, as
// DeleteByDoc does) and writes items (as Upsert does), in one
// transaction: what DeleteByDoc of each document then Upsert leave, but
// an item removed and written again unchanged (text, metadata, vector,
// sources in order with their versions, text units and ACLs) is left as
// it is, neither deleted nor written. Re-indexing documents rewrites
// mostly such items: the reports and text units that cite them, a hub
// community's report with a source row per document it cites. Invalid
// arguments fail it whole, as they fail Upsert; nothing is written then.
func (ix *Index) ReplaceDocItems(ctx context.Context, tenant string, docs []vector.DocKinds, items []vector.Item) error {
	if err := ix.replaceDocItems(ctx, tenant, docs, items); err != nil {
		return fmt.Errorf("replacing the items of %d documents with %d items in %q: %w", len(docs), len(items), tenant, err)
	}
	return nil
}

func (ix *Index) replaceDocItems(ctx context.Context, tenant string, docs []vector.DocKinds, items []vector.Item) error {
	if err := vector.ValidateTenant(tenant); err != nil {
		return err
	}
	kinds := make([][]vector.Kind, len(docs))
	for i, d := range docs {
		if err := vector.ValidateDocID(d.DocID); err != nil {
			return err
		}
		var err error
		if kinds[i], err = vector.ValidateKinds(d.Kinds); err != nil {
			return err
		}
	}
	if err := vector.ValidateItems(items); err != nil {
		return err
	}
	normed := make([]vector.Item, len(items))
	for i, it := range items {
		it = vector.Canonical(it)
		it.Vector = vector.Normalize(it.Vector)
		normed[i] = it
	}
	var (
		removed []key
		written []vector.Item
	)
	return ix.write(ctx, tenant, len(items) > 0, func(t *tenantIndex, b buckets) error {
		if err := checkDims(t, normed); err != nil {
			return err
		}
		keep := make(map[key]bool, len(normed))
		for _, it := range normed {
			keep[key{it.Kind, it.ID}] = true
		}
		gone := map[key]bool{}
		for i, d := range docs {
			for _, k := range t.docKeys(d.DocID) {
				if !keep[k] && !gone[k] && slices.Contains(kinds[i], k.kind) {
					gone[k] = true
					removed = append(removed, k)
				}
			}
		}
		for _, k := range removed {
			if err := b.deleteSources(t, k, nil); err != nil {
				return err
			}
			if err := b.items.Delete(dbKey(k.kind, k.id)); err != nil {
				return err
			}
		}
		for _, it := range normed {
			if t.holds(it) {
				continue
			}
			if err := b.deleteSources(t, key{it.Kind, it.ID}, it.Sources); err != nil {
				return err
			}
			if err := b.putItem(t, it); err != nil {
				return fmt.Errorf("writing item %q: %w", it.ID, err)
			}
			written = append(written, it)
		}
		if len(removed) == 0 && len(written) == 0 {
			return errUnchanged
		}
		return nil
	}, func(t *tenantIndex) {
		for _, k := range removed {
			t.remove(k)
		}
		for _, it := range written {
			// Dimensions were checked above; put cannot fail.
			_ = t.put(it, nil)
		}
	})
}

// checkDims checks that each item's vector has the dimensions of its
// tenant and kind: the stored ones, or the batch's first of that kind.
func checkDims(t *tenantIndex, items []vector.Item) error {
	var failed []vector.ItemError
	dims := map[vector.Kind]int{}
	for _, it := range items {
		want, ok := dims[it.Kind]
		if !ok {
			want = len(it.Vector)
			if ki := t.kinds[it.Kind]; ki != nil && len(ki.entries) > 0 {
				want = ki.dims
			}
			dims[it.Kind] = want
		}
		if len(it.Vector) != want {
			failed = append(failed, vector.ItemError{Kind: it.Kind, ID: it.ID,
				Err: fmt.Errorf("%w: vector has %d dimensions, %s items of this tenant have %d", vector.ErrInvalid, len(it.Vector), it.Kind, want)})
		}
	}
	if failed != nil {
		return &vector.BatchError{Failed: failed}
	}
	return nil
}

// Delete removes the items with these ids, of kinds (every kind when none
// is given).
func (ix *Index) Delete(ctx context.Context, tenant string, ids []string, kinds ...vector.Kind) error {
	if err := ix.delete(ctx, tenant, ids, kinds); err != nil {
		return fmt.Errorf("deleting %d items from %q: %w", len(ids), tenant, err)
	}
	return nil
}

func (ix *Index) delete(ctx context.Context, tenant string, ids []string, kinds []vector.Kind) error {
	if err := vector.ValidateTenant(tenant); err != nil {
		return err
	}
	kinds, err := vector.ValidateKinds(kinds)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := vector.ValidateID(id); err != nil {
			return err
		}
	}
	var keys []key
	for _, id := range ids {
		for _, k := range kinds {
			keys = append(keys, key{k, id})
		}
	}
	return ix.removeKeys(ctx, tenant, func(*tenantIndex) []key { return keys })
}

// DeleteByDoc removes every item of kinds (every kind when none is given)
// built from docID.
func (ix *Index) DeleteByDoc(ctx context.Context, tenant, docID string, kinds ...vector.Kind) error {
	err := func() error {
		if err := vector.ValidateTenant(tenant); err != nil {
			return err
		}
		if err := vector.ValidateDocID(docID); err != nil {
			return err
		}
		kinds, err := vector.ValidateKinds(kinds)
		if err != nil {
			return err
		}
		return ix.removeKeys(ctx, tenant, func(t *tenantIndex) []key {
			return slices.DeleteFunc(t.docKeys(docID), func(k key) bool { return !slices.Contains(kinds, k.kind) })
		})
	}()
	if err != nil {
		return fmt.Errorf("deleting the items of document %q from %q: %w", docID, tenant, err)
	}
	return nil
}

func (ix *Index) removeKeys(ctx context.Context, tenant string, keysOf func(*tenantIndex) []key) error {
	var keys []key
	return ix.write(ctx, tenant, false, func(t *tenantIndex, b buckets) error {
		keys = keysOf(t)
		if !slices.ContainsFunc(keys, t.has) {
			return errUnchanged
		}
		for _, k := range keys {
			if err := b.deleteSources(t, k, nil); err != nil {
				return err
			}
			if err := b.items.Delete(dbKey(k.kind, k.id)); err != nil {
				return err
			}
		}
		return nil
	}, func(t *tenantIndex) {
		for _, k := range keys {
			t.remove(k)
		}
	})
}

// UpdateACL replaces docID's ACL in every item built from it.
func (ix *Index) UpdateACL(ctx context.Context, tenant, docID string, acl provenance.ACL) error {
	err := func() error {
		if err := vector.ValidateTenant(tenant); err != nil {
			return err
		}
		if err := vector.ValidateDocID(docID); err != nil {
			return err
		}
		acl = vector.NormalizeACL(acl)
		newKey := aclKey(acl)
		var patches []vector.SourcePatch
		return ix.write(ctx, tenant, false, func(t *tenantIndex, b buckets) error {
			// Each item's row of the document, and nothing else, changes,
			// unless it holds that ACL already.
			for _, k := range t.docKeys(docID) {
				ki := t.kinds[k.kind]
				e := ki.entries[ki.pos[k.id]]
				for _, s := range e.srcs {
					if s.doc.id != docID || s.acl.key == newKey {
						continue
					}
					src := s.asSource(acl)
					if err := b.putSource(k, src, s.ord); err != nil {
						return err
					}
					patches = append(patches, vector.SourcePatch{Kind: k.kind, ID: k.id, Put: []vector.Source{src}})
				}
			}
			if len(patches) == 0 {
				return errUnchanged
			}
			return nil
		}, func(t *tenantIndex) {
			for _, p := range patches {
				t.patch(p)
			}
		})
	}()
	if err != nil {
		return fmt.Errorf("updating the ACL of document %q in %q: %w", docID, tenant, err)
	}
	return nil
}

// PatchSources changes the sources of existing items (see
// vector.SourcePatch), all in one transaction: on disk and in memory, only
// the patched documents' source rows change, whatever the item's number of
// sources.
func (ix *Index) PatchSources(ctx context.Context, tenant string, patches []vector.SourcePatch) ([]bool, error) {
	applied, err := ix.patchSources(ctx, tenant, patches)
	if err != nil {
		return nil, fmt.Errorf("patching the sources of %d items in %q: %w", len(patches), tenant, err)
	}
	return applied, nil
}

func (ix *Index) patchSources(ctx context.Context, tenant string, patches []vector.SourcePatch) ([]bool, error) {
	if err := vector.ValidatePatches(tenant, patches); err != nil {
		return nil, err
	}
	applied := make([]bool, len(patches))
	if len(patches) == 0 {
		return applied, ctx.Err()
	}
	err := ix.write(ctx, tenant, false, func(t *tenantIndex, b buckets) error {
		for i, p := range patches {
			ki := t.kinds[p.Kind]
			if ki == nil {
				continue
			}
			at, ok := ki.pos[p.ID]
			if !ok || !p.Holds(ki.entries[at].item.Text, ki.entries[at].item.Metadata) {
				continue
			}
			e, k := ki.entries[at], key{p.Kind, p.ID}
			put, drop := p.Index()
			switch n := e.patchedLen(put, drop); {
			case n > vector.MaxSources:
				continue
			case n == 0:
				if err := b.deleteSources(t, k, nil); err != nil {
					return err
				}
				if err := b.items.Delete(dbKey(p.Kind, p.ID)); err != nil {
					return err
				}
			default:
				// The rows of the patched documents only; an added source
				// is numbered after the others, as patch places it.
				next := e.srcs[len(e.srcs)-1].ord + 1
				ords := make(map[string]uint64, len(put))
				for _, s := range e.srcs {
					if _, ok := put[s.doc.id]; ok {
						ords[s.doc.id] = s.ord
					} else if drop[s.doc.id] {
						if err := b.sources.Delete(sourceKey(k, s.doc.id)); err != nil {
							return err
						}
					}
				}
				for _, ns := range p.Put {
					ord, ok := ords[ns.DocID]
					if !ok {
						ord = next
						next++
					}
					if err := b.putSource(k, put[ns.DocID], ord); err != nil {
						return err
					}
				}
			}
			applied[i] = true
		}
		if !slices.Contains(applied, true) {
			return errUnchanged
		}
		return nil
	}, func(t *tenantIndex) {
		for i, p := range patches {
			if applied[i] {
				t.patch(p)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// ScanSources reports the sources of docID's items (every item of the
// tenant when docID is ""), ordered by kind and id. fn runs after the read
// lock is released, on copies, so it may call the index.
func (ix *Index) ScanSources(ctx context.Context, tenant, docID string, fn func(vector.ItemSources) error) error {
	items, err := ix.itemSources(ctx, tenant, docID)
	if err == nil {
		for _, it := range items {
			if err = fn(it); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("scanning the items of %q: %w", tenant, err)
}

func (ix *Index) itemSources(ctx context.Context, tenant, docID string) ([]vector.ItemSources, error) {
	if err := vector.ValidateScan(tenant, docID); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return nil, vector.ErrClosed
	}
	t := ix.tenants[tenant]
	if t == nil {
		return nil, nil
	}
	var keys []key
	if docID != "" {
		keys = t.docKeys(docID)
	} else {
		keys = t.allKeys()
	}
	out := make([]vector.ItemSources, len(keys))
	for i, k := range keys {
		ki := t.kinds[k.kind]
		e := ki.entries[ki.pos[k.id]]
		out[i] = vector.ItemSources{Kind: e.item.Kind, ID: e.item.ID, Sources: e.sources()}
	}
	return out, nil
}

// errUnchanged is what a write's fn returns when it has nothing to write:
// the transaction is rolled back, neither written nor synced, and apply is
// not called. (A document's re-index deletes its items first, and a new
// document has none.)
var errUnchanged = errors.New("nothing to write")

// write runs fn on the tenant's bucket in one transaction, then apply on
// memory if it committed, all under the write lock. Unless create is set,
// a tenant without items is left alone (nothing to delete or update).
func (ix *Index) write(ctx context.Context, tenant string, create bool, fn func(*tenantIndex, buckets) error, apply func(*tenantIndex)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return vector.ErrClosed
	}
	t := ix.tenant(tenant, false)
	if t == nil {
		if !create {
			return nil
		}
		t = newTenantIndex()
	}
	err := ix.db.Update(func(tx *bolt.Tx) error {
		items, err := tx.Bucket([]byte(bucketItems)).CreateBucketIfNotExists([]byte(tenant))
		if err != nil {
			return err
		}
		sources, err := tx.Bucket([]byte(bucketSources)).CreateBucketIfNotExists([]byte(tenant))
		if err != nil {
			return err
		}
		return fn(t, buckets{items: items, sources: sources})
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	if err != nil {
		return err
	}
	ix.tenants[tenant] = t
	apply(t)
	return nil
}

// Search ranks the admitted items of tenant and kind by cosine similarity.
func (ix *Index) Search(ctx context.Context, tenant string, kind vector.Kind, v []float32, k int, f vector.Filter) ([]vector.Hit, error) {
	hits, err := ix.search(ctx, tenant, kind, v, k, f)
	if err != nil {
		return nil, fmt.Errorf("searching %s items of %q: %w", kind, tenant, err)
	}
	return hits, nil
}

func (ix *Index) search(ctx context.Context, tenant string, kind vector.Kind, v []float32, k int, f vector.Filter) ([]vector.Hit, error) {
	if err := vector.ValidateSearch(tenant, kind, v, k); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q := vector.Normalize(v)
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return nil, vector.ErrClosed
	}
	t := ix.tenants[tenant]
	if t == nil || t.kinds[kind] == nil || len(t.kinds[kind].entries) == 0 {
		return nil, nil
	}
	ki := t.kinds[kind]
	if len(q) != ki.dims {
		return nil, fmt.Errorf("%w: query has %d dimensions, %s items have %d", vector.ErrInvalid, len(q), kind, ki.dims)
	}
	admits := admitter(f)
	n := len(ki.entries)
	parts := 1
	if n >= parallelScan {
		parts = min(runtime.GOMAXPROCS(0), n/(parallelScan/2))
	}
	results := make([]topK, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := partEdge(p, parts, n), partEdge(p+1, parts, n)
		wg.Go(func() { results[p] = ki.scan(q, lo, hi, k, admits) })
	}
	wg.Wait()
	var all topK
	for _, r := range results {
		all = append(all, r...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].better(all[j], ki) })
	if len(all) > k {
		all = all[:k]
	}
	hits := make([]vector.Hit, len(all))
	for i, c := range all {
		hits[i] = vector.Hit{Item: ki.entries[c.i].full(), Score: c.score}
	}
	return hits, nil
}

// partEdge is where part p of parts starts in n entries: on a block
// boundary (a block is scanned by one goroutine), n for p == parts.
func partEdge(p, parts, n int) int {
	return min(n, (p*n/parts+blockSize-1)/blockSize*blockSize)
}

// admitter compiles a filter into a check of one entry.
func admitter(f vector.Filter) func(*entry) bool {
	return func(e *entry) bool { return e.public || e.readableBy(f) }
}

// candidate is entry i with its score.
type candidate struct {
	i     int
	score float32
}

// better orders by score, then id, so results are deterministic.
func (c candidate) better(o candidate, ki *kindIndex) bool {
	if c.score != o.score {
		return c.score > o.score
	}
	return ki.entries[c.i].item.ID < ki.entries[o.i].item.ID
}

// topK is a min-heap of the best candidates seen (worst on top). The heap
// compares scores only; ties are settled by the final sort, so a tie at
// the k-th place may keep either item.
type topK []candidate

func (h topK) Len() int           { return len(h) }
func (h topK) Less(i, j int) bool { return h[i].score < h[j].score }
func (h topK) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *topK) Push(x any)        { *h = append(*h, x.(candidate)) }
func (h *topK) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

func (ki *kindIndex) scan(q []float32, lo, hi, k int, admits func(*entry) bool) topK {
	h := make(topK, 0, k)
	// The query's non-zero dimensions: the other products are exactly 0.
	var idx []int
	for j, x := range q {
		if x != 0 {
			idx = append(idx, j)
		}
	}
	d := ki.dims
	var scores [blockSize]float32
	for b := lo / blockSize; b*blockSize < hi; b++ {
		blk := ki.blocks[b]
		stride := len(blk) / d
		first, end := b*blockSize, min(len(ki.entries), b*blockSize+stride)
		sc := scores[:end-first]
		clear(sc)
		col := func(j int) []float32 { return blk[j*stride : j*stride+len(sc)] }
		// Four dimensions per pass: one load and store of a score per four
		// products.
		t := 0
		for ; t+4 <= len(idx); t += 4 {
			j0, j1, j2, j3 := idx[t], idx[t+1], idx[t+2], idx[t+3]
			q0, q1, q2, q3 := q[j0], q[j1], q[j2], q[j3]
			c0, c1, c2, c3 := col(j0), col(j1), col(j2), col(j3)
			c0, c1, c2, c3 = c0[:len(sc)], c1[:len(sc)], c2[:len(sc)], c3[:len(sc)]
			for e := range sc {
				sc[e] += q0*c0[e] + q1*c1[e] + q2*c2[e] + q3*c3[e]
			}
		}
		for ; t < len(idx); t++ {
			qj, c := q[idx[t]], col(idx[t])
			c = c[:len(sc)]
			for e := range sc {
				sc[e] += qj * c[e]
			}
		}
		// The filter is asked only about entries that would enter the k
		// best: the same result, without an ACL check of every entry.
		for i := max(lo, first); i < min(hi, end); i++ {
			s := sc[i-first]
			if len(h) < k {
				if admits(ki.entries[i]) {
					heap.Push(&h, candidate{i, s})
				}
			} else if s > h[0].score && admits(ki.entries[i]) {
				h[0] = candidate{i, s}
				heap.Fix(&h, 0)
			}
		}
	}
	return h
}

// --- memory ----------------------------------------------------------------

func newTenantIndex() *tenantIndex {
	return &tenantIndex{kinds: map[vector.Kind]*kindIndex{}, byDoc: map[string]*docItems{}, acls: map[string]*sharedACL{}}
}

// tenant returns the tenant's index, creating it when create is set.
func (ix *Index) tenant(name string, create bool) *tenantIndex {
	t := ix.tenants[name]
	if t == nil && create {
		t = newTenantIndex()
		ix.tenants[name] = t
	}
	return t
}

// has reports whether the tenant holds the item k.
func (t *tenantIndex) has(k key) bool {
	ki := t.kinds[k.kind]
	if ki == nil {
		return false
	}
	_, ok := ki.pos[k.id]
	return ok
}

// docKeys returns the keys of the items built from docID, sorted.
func (t *tenantIndex) docKeys(docID string) []key {
	d := t.byDoc[docID]
	if d == nil {
		return []key{}
	}
	keys := make([]key, 0, len(d.keys))
	for k := range d.keys {
		keys = append(keys, k)
	}
	sortKeys(keys)
	return keys
}

// allKeys returns the keys of every item of the tenant, sorted.
func (t *tenantIndex) allKeys() []key {
	var keys []key
	for kind, ki := range t.kinds {
		for _, e := range ki.entries {
			keys = append(keys, key{kind, e.item.ID})
		}
	}
	sortKeys(keys)
	return keys
}

func sortKeys(keys []key) {
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].kind != keys[j].kind {
			return keys[i].kind < keys[j].kind
		}
		return keys[i].id < keys[j].id
	})
}

// put adds or replaces an item whose vector is unit-length; ords are its
// sources' ordinals (nil: their positions).
func (t *tenantIndex) put(it vector.Item, ords []uint64) error {
	ki := t.kinds[it.Kind]
	if ki == nil {
		ki = &kindIndex{dims: len(it.Vector), pos: map[string]int{}}
		t.kinds[it.Kind] = ki
	}
	if len(ki.entries) == 0 {
		ki.dims = len(it.Vector)
	}
	if len(it.Vector) != ki.dims {
		return fmt.Errorf("%w: vector has %d dimensions, want %d", vector.ErrInvalid, len(it.Vector), ki.dims)
	}
	k := key{it.Kind, it.ID}
	t.remove(k)
	e := &entry{item: it, public: true, srcs: make([]source, len(it.Sources))}
	e.item.Vector, e.item.Sources = nil, nil
	for i, s := range it.Sources {
		e.public = e.public && s.ACL.Public
		e.srcs[i] = t.link(s, k)
		e.srcs[i].ord = uint64(i)
		if ords != nil {
			e.srcs[i].ord = ords[i]
		}
	}
	i := len(ki.entries)
	ki.pos[it.ID] = i
	ki.entries = append(ki.entries, e)
	ki.grow(i)
	for j, x := range it.Vector {
		blk, at := ki.at(i, j)
		blk[at] = x
	}
	return nil
}

// holds reports whether the tenant holds it (canonical, its vector unit
// length) as it is: its record (sameRecord), and sources in order with
// their versions, text units and ACLs.
func (t *tenantIndex) holds(it vector.Item) bool {
	k := key{kind: it.Kind, id: it.ID}
	if !t.sameRecord(k, it) {
		return false
	}
	e := t.entry(k)
	if len(e.srcs) != len(it.Sources) {
		return false
	}
	for j, s := range it.Sources {
		o := e.srcs[j]
		if o.doc.id != s.DocID || o.version != s.Version || o.unit != s.TextUnit || o.acl.key != aclKey(s.ACL) {
			return false
		}
	}
	return true
}

// entry returns the item k as the tenant holds it, or nil (t may be nil).
func (t *tenantIndex) entry(k key) *entry {
	if t == nil {
		return nil
	}
	ki := t.kinds[k.kind]
	if ki == nil {
		return nil
	}
	i, ok := ki.pos[k.id]
	if !ok {
		return nil
	}
	return ki.entries[i]
}

// sameRecord reports whether the record of it (canonical, its vector unit
// length) is the one of the item k the tenant holds: same text, metadata
// and vector bit for bit.
func (t *tenantIndex) sameRecord(k key, it vector.Item) bool {
	ki := t.kinds[k.kind]
	if ki == nil || len(it.Vector) != ki.dims {
		return false
	}
	i, ok := ki.pos[k.id]
	if !ok {
		return false
	}
	e := ki.entries[i]
	if e.item.Text != it.Text || !maps.Equal(e.item.Metadata, it.Metadata) {
		return false
	}
	for j, x := range it.Vector {
		blk, at := ki.at(i, j)
		if math.Float32bits(blk[at]) != math.Float32bits(x) {
			return false
		}
	}
	return true
}

// remove drops an item if present, moving the last entry into its place.
func (t *tenantIndex) remove(k key) {
	ki := t.kinds[k.kind]
	if ki == nil {
		return
	}
	i, ok := ki.pos[k.id]
	if !ok {
		return
	}
	for _, s := range ki.entries[i].srcs {
		t.unlink(s, k)
	}
	last := len(ki.entries) - 1
	if i != last {
		ki.entries[i] = ki.entries[last]
		for j := range ki.dims {
			to, at := ki.at(i, j)
			from, fat := ki.at(last, j)
			to[at] = from[fat]
		}
		ki.pos[ki.entries[i].item.ID] = i
	}
	for j := range ki.dims {
		blk, at := ki.at(last, j)
		blk[at] = 0
	}
	ki.entries[last] = nil
	ki.entries = ki.entries[:last]
	if last%blockSize == 0 { // the last block is empty
		ki.blocks[last/blockSize] = nil
		ki.blocks = ki.blocks[:last/blockSize]
	}
	delete(ki.pos, k.id)
}

// patch applies p to its item's sources in place (see
// vector.SourcePatch.PatchedSources), removing the item when none is left.
// The item exists and holds p's text.
func (t *tenantIndex) patch(p vector.SourcePatch) {
	k := key{p.Kind, p.ID}
	ki := t.kinds[p.Kind]
	e := ki.entries[ki.pos[p.ID]]
	put, drop := p.Index()
	n := e.patchedLen(put, drop)
	if n == 0 {
		t.remove(k)
		return
	}
	next := e.srcs[len(e.srcs)-1].ord + 1
	srcs := make([]source, 0, n)
	for _, s := range e.srcs {
		ns, replaced := put[s.doc.id]
		switch {
		case replaced:
			t.releaseACL(s.acl)
			s.version, s.unit, s.acl = ns.Version, uniqueUnit(ns.TextUnit), t.shareACL(ns.ACL)
			delete(put, s.doc.id)
		case drop[s.doc.id]:
			t.unlink(s, k)
			continue
		}
		srcs = append(srcs, s)
	}
	for _, ns := range p.Put {
		if ns, added := put[ns.DocID]; added {
			s := t.link(ns, k)
			s.ord = next
			next++
			srcs = append(srcs, s)
		}
	}
	e.srcs = srcs
	e.public = true
	for _, s := range srcs {
		e.public = e.public && s.acl.acl.Public
	}
}

// patchedLen is how many sources the entry has once a patch puts put and
// removes drop (see vector.SourcePatch.Index).
func (e *entry) patchedLen(put map[string]vector.Source, drop map[string]bool) int {
	n := len(put)
	for _, s := range e.srcs {
		if _, ok := put[s.doc.id]; !ok && !drop[s.doc.id] {
			n++
		}
	}
	return n
}

// link returns the index's form of s, a source of the item k, registering
// the item under its document and counting its ACL.
func (t *tenantIndex) link(s vector.Source, k key) source {
	d := t.byDoc[s.DocID]
	if d == nil {
		d = &docItems{id: s.DocID, keys: map[key]struct{}{}}
		t.byDoc[s.DocID] = d
	}
	d.keys[k] = struct{}{}
	return source{doc: d, unit: uniqueUnit(s.TextUnit), version: s.Version, acl: t.shareACL(s.ACL)}
}

// unlink undoes link: s is no longer a source of the item k.
func (t *tenantIndex) unlink(s source, k key) {
	delete(s.doc.keys, k)
	if len(s.doc.keys) == 0 {
		delete(t.byDoc, s.doc.id)
	}
	t.releaseACL(s.acl)
}

// uniqueUnit is a text unit id as sources share it.
func uniqueUnit(unit string) string {
	if unit == "" {
		return ""
	}
	return unique.Make(unit).Value()
}

func (ki *kindIndex) vec(i int) []float32 {
	out := make([]float32, ki.dims)
	for j := range out {
		blk, at := ki.at(i, j)
		out[j] = blk[at]
	}
	return out
}

// sources returns the entry's sources as vector.Sources, copied: a caller
// may modify them.
func (e *entry) sources() []vector.Source {
	out := make([]vector.Source, len(e.srcs))
	for i, s := range e.srcs {
		out[i] = s.asSource(s.acl.acl)
	}
	return out
}

// asSource returns s as a vector.Source with acl, its lists copied: a caller
// may modify them.
func (s source) asSource(acl provenance.ACL) vector.Source {
	acl.Groups, acl.Principals = slices.Clone(acl.Groups), slices.Clone(acl.Principals)
	return vector.Source{SourceRef: provenance.SourceRef{DocID: s.doc.id, Version: s.version, TextUnit: s.unit}, ACL: acl}
}

// full returns the entry's item with its sources (without its vector),
// copied: a caller may modify it.
func (e *entry) full() vector.Item {
	it := e.item
	it.Sources = e.sources()
	if it.Metadata != nil {
		m := make(map[string]string, len(it.Metadata))
		for k, v := range it.Metadata {
			m[k] = v
		}
		it.Metadata = m
	}
	return it
}

// readableBy is vector.Item.ReadableBy of the entry's item.
func (e *entry) readableBy(f vector.Filter) bool {
	if len(e.srcs) == 0 {
		return false
	}
	for _, s := range e.srcs {
		if !f.Admits(s.acl.acl) {
			return false
		}
	}
	return true
}

// --- records ---------------------------------------------------------------

func dbKey(kind vector.Kind, id string) []byte { return []byte(string(kind) + "\x00" + id) }

// sourceKey is the key of an item's source row; an item id holds no NUL,
// so the item's rows are the keys under dbKey + NUL.
func sourceKey(k key, docID string) []byte {
	return []byte(string(k.kind) + "\x00" + k.id + "\x00" + docID)
}

// buckets are a tenant's buckets in a write transaction.
type buckets struct {
	items, sources *bolt.Bucket
}

// putItem writes an item's record and its source rows, numbered in order,
// but those the file holds already as they would be written: of the item
// as t holds it (t may be nil), the record when text, metadata and vector
// are the same, and each row whose document, ordinal, version, text unit
// and ACL are. A hub's item changed by one source rewrites one row, not a
// row per document.
func (b buckets) putItem(t *tenantIndex, it vector.Item) error {
	k := key{it.Kind, it.ID}
	old := t.entry(k)
	if old == nil || !t.sameRecord(k, it) {
		rec, err := encode(it)
		if err != nil {
			return err
		}
		if err := b.items.Put(dbKey(it.Kind, it.ID), rec); err != nil {
			return err
		}
	}
	var had map[string]source
	if old != nil {
		had = make(map[string]source, len(old.srcs))
		for _, s := range old.srcs {
			had[s.doc.id] = s
		}
	}
	for i, s := range it.Sources {
		if o, ok := had[s.DocID]; ok && o.ord == uint64(i) && o.version == s.Version && o.unit == s.TextUnit && o.acl.key == aclKey(s.ACL) {
			continue
		}
		if err := b.putSource(k, s, uint64(i)); err != nil {
			return err
		}
	}
	return nil
}

// putSource writes one source row of the item k.
func (b buckets) putSource(k key, s vector.Source, ord uint64) error {
	row := binary.AppendUvarint(make([]byte, 0, 128), ord)
	return b.sources.Put(sourceKey(k, s.DocID), appendSourceJSON(row, s))
}

// deleteSources deletes the source rows of the item k as the index holds
// it (none if it holds no such item), but for the documents of keep.
func (b buckets) deleteSources(t *tenantIndex, k key, keep []vector.Source) error {
	e := t.entry(k)
	if e == nil {
		return nil
	}
	kept := make(map[string]bool, len(keep))
	for _, s := range keep {
		kept[s.DocID] = true
	}
	for _, s := range e.srcs {
		if kept[s.doc.id] {
			continue
		}
		if err := b.sources.Delete(sourceKey(k, s.doc.id)); err != nil {
			return err
		}
	}
	return nil
}

// encode is an item's record, without its sources (they are rows).
func encode(it vector.Item) ([]byte, error) {
	it.Sources = nil
	meta := appendItemJSON(nil, it)
	buf := make([]byte, 0, binary.MaxVarintLen64+len(meta)+4*len(it.Vector))
	buf = binary.AppendUvarint(buf, uint64(len(meta)))
	buf = append(buf, meta...)
	for _, x := range it.Vector {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
	}
	return buf, nil
}

// decodeRecord decodes an item's record, with the sources it holds (layout
// 1) or none.
func decodeRecord(rec []byte) (vector.Item, error) {
	n, w := binary.Uvarint(rec)
	if w <= 0 || uint64(len(rec)-w) < n {
		return vector.Item{}, errors.New("truncated record")
	}
	var it vector.Item
	dec := json.NewDecoder(bytes.NewReader(rec[w : w+int(n)]))
	if err := dec.Decode(&it); err != nil {
		return vector.Item{}, err
	}
	raw := rec[w+int(n):]
	if len(raw)%4 != 0 {
		return vector.Item{}, errors.New("vector bytes not a multiple of 4")
	}
	it.Vector = make([]float32, len(raw)/4)
	for i := range it.Vector {
		it.Vector[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[i*4:]))
	}
	return it, nil
}

// decodeItem decodes the item whose record rec is under k, with its source
// rows from rows, in their order, and their ordinals.
func decodeItem(rec []byte, rows *bolt.Bucket, k []byte) (vector.Item, []uint64, error) {
	it, err := decodeRecord(rec)
	if err != nil {
		return vector.Item{}, nil, err
	}
	type row struct {
		ord uint64
		src vector.Source
	}
	var srcs []row
	if rows != nil {
		prefix := append(slices.Clone(k), 0)
		c := rows.Cursor()
		for rk, v := c.Seek(prefix); rk != nil && bytes.HasPrefix(rk, prefix); rk, v = c.Next() {
			ord, w := binary.Uvarint(v)
			if w <= 0 {
				return vector.Item{}, nil, fmt.Errorf("source row %q is truncated", rk)
			}
			var s vector.Source
			if err := json.Unmarshal(v[w:], &s); err != nil {
				return vector.Item{}, nil, fmt.Errorf("decoding source row %q: %w", rk, err)
			}
			srcs = append(srcs, row{ord, s})
		}
	}
	slices.SortFunc(srcs, func(a, b row) int { return cmp.Compare(a.ord, b.ord) })
	it.Sources = make([]vector.Source, len(srcs))
	ords := make([]uint64, len(srcs))
	for i, r := range srcs {
		it.Sources[i], ords[i] = r.src, r.ord
	}
	if err := vector.ValidateItem(it); err != nil {
		return vector.Item{}, nil, err
	}
	return it, ords, nil
}

// splitSources converts the records of layout 1, which held the sources,
// into layout 2's records and source rows.
func splitSources(items, sources *bolt.Bucket) error {
	return items.ForEachBucket(func(tn []byte) error {
		b := buckets{items: items.Bucket(tn)}
		var err error
		if b.sources, err = sources.CreateBucketIfNotExists(tn); err != nil {
			return err
		}
		var recs []vector.Item
		err = b.items.ForEach(func(k, v []byte) error {
			it, err := decodeRecord(v)
			if err != nil {
				return fmt.Errorf("decoding item %q of tenant %q: %w", k, tn, err)
			}
			recs = append(recs, it)
			return nil
		})
		if err != nil {
			return err
		}
		for _, it := range recs {
			if err := b.putItem(nil, it); err != nil {
				return fmt.Errorf("converting item %q of tenant %q: %w", it.ID, tn, err)
			}
		}
		return nil
	})
}
