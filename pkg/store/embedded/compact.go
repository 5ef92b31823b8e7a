package embedded

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/internal/boltfile"
	"github.com/kgstream/kgstream/pkg/store"
)

// CompactStats describe one Compact.
type CompactStats struct {
	// BytesBefore and BytesAfter are the file's sizes.
	BytesBefore, BytesAfter int64
	// Values is how many values were copied; Recoded how many of them were
	// re-encoded (plain JSON written before values were compressed, or
	// compressed with another codec than their bucket's now).
	Values, Recoded int
}

// Compact rewrites the store file at path, which no process may have open:
// every bucket is copied into a new file with its pages filled (bbolt fills
// pages half when keys arrive out of order, and never returns the pages
// edits and deletions free), every value re-encoded as this build writes
// it, and the new file replaces the old one. What a deleted document left
// in freed pages is not copied, so it is gone from the disk once the old
// file is. On an error the old file is left as it was.
func Compact(ctx context.Context, path string) (CompactStats, error) {
	var st CompactStats
	// Open checks (and upgrades) the layout and builds missing indexes, so
	// the copy is of a file this build reads.
	s, err := Open(path, Options{})
	if err != nil {
		return st, fmt.Errorf("compacting: %w", err)
	}
	if err := s.Close(); err != nil {
		return st, fmt.Errorf("compacting %q: %w", path, err)
	}
	st.BytesBefore, st.BytesAfter, err = boltfile.Rewrite(path, false, func(dst, src *bolt.DB) error {
		return copyRecoded(ctx, dst, src, &st)
	})
	if err != nil {
		return CompactStats{}, fmt.Errorf("compacting %q: %w", path, err)
	}
	return st, nil
}

// copyRecoded copies every bucket of src into dst, in key order with full
// pages, re-encoding the values of the buckets that hold JSON values.
func copyRecoded(ctx context.Context, dst, src *bolt.DB, st *CompactStats) error {
	tx, err := dst.Begin(true)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var size int
	// target returns the destination bucket of a source bucket path.
	target := func(path [][]byte) *bolt.Bucket {
		b := tx.Bucket(path[0])
		for _, k := range path[1:] {
			b = b.Bucket(k)
		}
		b.FillPercent = 1.0 // keys arrive in order: fill every page
		return b
	}
	var walk func(path [][]byte, b *bolt.Bucket) error
	walk = func(path [][]byte, b *bolt.Bucket) error {
		codec, recode := compressionAt(path)
		return b.ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if size >= boltfile.TxBytes {
				if err := tx.Commit(); err != nil {
					return err
				}
				if tx, err = dst.Begin(true); err != nil {
					return err
				}
				size = 0
			}
			size += len(k) + len(v)
			if v == nil { // a nested bucket
				sub := b.Bucket(k)
				nb, err := target(path).CreateBucket(k)
				if err != nil {
					return err
				}
				if err := nb.SetSequence(sub.Sequence()); err != nil {
					return err
				}
				return walk(append(path[:len(path):len(path)], k), sub)
			}
			st.Values++
			if recode {
				out, changed, err := recodeValue(v, codec)
				if err != nil {
					return fmt.Errorf("value %q: %w", k, err)
				}
				if changed {
					st.Recoded++
					v = out
				}
			}
			return target(path).Put(k, v)
		})
	}
	err = src.View(func(stx *bolt.Tx) error {
		return stx.ForEach(func(name []byte, b *bolt.Bucket) error {
			nb, err := tx.CreateBucket(name)
			if err != nil {
				return err
			}
			if err := nb.SetSequence(b.Sequence()); err != nil {
				return err
			}
			return walk([][]byte{name}, b)
		})
	})
	if err != nil {
		return err
	}
	return tx.Commit()
}

// compressionAt says how the values of the bucket at path are written
// (putJSON's codec at each call site), and whether they are JSON values to
// re-encode at all: index, counter and meta buckets are copied as they are.
// Source records and communities are the exceptions: an apply writes
// records, a re-clustering communities, with S2 (sourceCompression,
// store.CommunityCompression), quick on the write path every writer waits
// for, and Compact rewrites them with zstd, about 70% of S2's size on
// them.
func compressionAt(path [][]byte) (store.Compression, bool) {
	switch top := string(path[0]); {
	case top == bucketGraph && len(path) == 3:
		switch string(path[2]) {
		case subEntityRows, subEdgeRows:
			return store.FastCompression, true
		case subSources:
			return store.SmallCompression, true
		}
	case top == bucketReports && len(path) == 2:
		return store.SmallCompression, true
	case top == bucketCommunities && len(path) == 3 && string(path[2]) == subItems:
		return store.SmallCompression, true
	case top == bucketReportIndex && len(path) == 3 && string(path[2]) == subCites:
		return store.SmallCompression, true
	}
	return store.NoCompression, false
}

// recodeValue re-encodes a stored value with codec; changed is false when
// it is already in that form (and the copy keeps its bytes).
func recodeValue(v []byte, codec store.Compression) (out []byte, changed bool, err error) {
	plain, err := store.DecompressValue(v)
	if err != nil {
		return nil, false, err
	}
	out = store.CompressValue(plain, codec)
	if store.CompressionOf(out) == store.CompressionOf(v) {
		return v, false, nil
	}
	return out, true, nil
}
