package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// bucketRegistryGen holds each tenant's registry generation (8 bytes, big
// endian) under the tenant's name; a file written before it existed starts
// every tenant at 0.
const bucketRegistryGen = "registry-gen"

var _ store.RegistryGenerations = (*Store)(nil)

// bumpRegistryGeneration raises tenant's registry generation inside the
// registry write's transaction tx, and records that the write at the new
// generation was of docID (see bucketRegistryLog).
func bumpRegistryGeneration(tx *bolt.Tx, tenant, docID string) error {
	b, err := tx.CreateBucketIfNotExists([]byte(bucketRegistryGen))
	if err != nil {
		return err
	}
	n := registryGenerationIn(tx, tenant)
	if err := b.Put([]byte(tenant), binary.BigEndian.AppendUint64(nil, n+1)); err != nil {
		return err
	}
	return logRegistryWrite(tx, tenant, docID, n, n+1)
}

// registryGenerationIn is tenant's registry generation as tx reads it (0
// for a tenant never written, or a file written before generations).
func registryGenerationIn(tx *bolt.Tx, tenant string) uint64 {
	if b := tx.Bucket([]byte(bucketRegistryGen)); b != nil {
		if v := b.Get([]byte(tenant)); len(v) == 8 {
			return binary.BigEndian.Uint64(v)
		}
	}
	return 0
}

// logValue is a generation as the registry log stores it (8 bytes, big
// endian), ok false when v is not one.
func logValue(v []byte) (uint64, bool) {
	if len(v) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}

// bucketRegistryLog holds, per tenant (a nested bucket), which document
// each registry generation's write was of, for SourcesChangedSince:
//
//   - "g" + generation (8 bytes, big endian) -> doc id, for the last write
//     of each document only;
//   - "d" + doc id -> the generation of its last write (to drop the entry
//     above when the document is written again);
//   - "last" -> the generation of the last write recorded;
//   - "from" -> the generation from which every write is recorded: a write
//     finding "last" other than the generation before its own (absent in a
//     file written before the log existed; older after a write of such a
//     build, which raises the generation without recording) records from
//     the generation before its own on.
//
// So the log names every write after "from" exactly when "last" is the
// current generation. One entry pair per document, however often it is
// written.
const bucketRegistryLog = "registry-log"

var (
	registryLogFrom = []byte("from")
	registryLogLast = []byte("last")
)

func registryLogGenKey(gen uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'g'}, gen) }

// logRegistryWrite records in tx that the write raising tenant's registry
// generation from before to gen was of docID.
func logRegistryWrite(tx *bolt.Tx, tenant, docID string, before, gen uint64) error {
	top, err := tx.CreateBucketIfNotExists([]byte(bucketRegistryLog))
	if err != nil {
		return err
	}
	b, err := top.CreateBucketIfNotExists([]byte(tenant))
	if err != nil {
		return err
	}
	if last, ok := logValue(b.Get(registryLogLast)); !ok || last != before {
		if err := b.Put(registryLogFrom, binary.BigEndian.AppendUint64(nil, before)); err != nil {
			return err
		}
	}
	if err := b.Put(registryLogLast, binary.BigEndian.AppendUint64(nil, gen)); err != nil {
		return err
	}
	docKey := append([]byte{'d'}, docID...)
	if old, ok := logValue(b.Get(docKey)); ok {
		if err := b.Delete(registryLogGenKey(old)); err != nil {
			return err
		}
	}
	if err := b.Put(registryLogGenKey(gen), []byte(docID)); err != nil {
		return err
	}
	return b.Put(docKey, binary.BigEndian.AppendUint64(nil, gen))
}

var _ store.RegistryChanges = (*Store)(nil)

// SourcesChangedSince returns the states of the documents written after
// generation since (see store.RegistryChanges), read in one transaction.
func (s *Store) SourcesChangedSince(ctx context.Context, tenant string, since uint64) ([]provenance.SourceState, bool, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, false, fmt.Errorf("reading registry changes: %w", err)
	}
	var out []provenance.SourceState
	ok := false
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if registryGenerationIn(tx, tenant) <= since {
			ok = true // nothing written since
			return nil
		}
		var log *bolt.Bucket
		if top := tx.Bucket([]byte(bucketRegistryLog)); top != nil {
			log = top.Bucket([]byte(tenant))
		}
		if log == nil {
			return nil // written, and nothing recorded
		}
		last, hasLast := logValue(log.Get(registryLogLast))
		from, hasFrom := logValue(log.Get(registryLogFrom))
		if !hasLast || !hasFrom || last != registryGenerationIn(tx, tenant) || from > since {
			return nil // a write since was not recorded
		}
		ok = true
		var ids []string
		c := log.Cursor()
		for k, v := c.Seek(registryLogGenKey(since + 1)); k != nil && k[0] == 'g'; k, v = c.Next() {
			ids = append(ids, string(v))
		}
		slices.Sort(ids)
		out = make([]provenance.SourceState, 0, len(ids))
		return statesIn(tx, tenant, ids, func(st provenance.SourceState) { out = append(out, st) })
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading registry changes of %q: %w", tenant, err)
	}
	return out, ok, nil
}

// RegistryGeneration returns the tenant's registry generation (see
// store.RegistryGenerations).
func (s *Store) RegistryGeneration(ctx context.Context, tenant string) (uint64, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return 0, fmt.Errorf("reading the registry generation: %w", err)
	}
	var n uint64
	err := s.view(ctx, func(tx *bolt.Tx) error {
		n = registryGenerationIn(tx, tenant)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reading the registry generation of %q: %w", tenant, err)
	}
	return n, nil
}
