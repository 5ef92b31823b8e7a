package embedded

import (
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// compactTxBytes bounds the bytes one transaction of a copy writes.
const compactTxBytes = 64 << 20

// Compact rewrites the index file at path, which no process may have open,
// with its pages filled and without the pages deletions freed (bbolt never
// returns them). It returns the file's sizes before and after; a copy no
// smaller than the file is discarded, and on an error the file is left as
// it was.
func Compact(path string) (before, after int64, err error) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, 0, fmt.Errorf("compacting vector index %q: %w", path, err)
	}
	src, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return 0, 0, fmt.Errorf("compacting vector index %q: %w", path, err)
	}
	defer src.Close()
	tmp := path + ".compact"
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, info.Mode().Perm(), &bolt.Options{Timeout: time.Second, NoSync: true, NoFreelistSync: true})
	if err != nil {
		return 0, 0, fmt.Errorf("compacting vector index %q: %w", path, err)
	}
	err = bolt.Compact(dst, src, compactTxBytes)
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = src.Close()
	}
	var copied os.FileInfo
	if err == nil {
		copied, err = os.Stat(tmp)
	}
	if err == nil && copied.Size() >= info.Size() {
		// Items larger than a page fill pages of their own, packed or not:
		// an index that freed little does not shrink, and the file stays.
		_ = os.Remove(tmp)
		return info.Size(), info.Size(), nil
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, 0, fmt.Errorf("compacting vector index %q: %w", path, err)
	}
	return info.Size(), copied.Size(), nil
}
