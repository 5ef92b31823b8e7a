// Package boltfile rewrites a bbolt file through a copy: the embedded store
// and the embedded vector index compact their files with it.
package boltfile

import (
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TxBytes is how many key and value bytes one transaction of a copy
// writes before it commits and the next begins: it bounds the memory a
// copy of a large file needs.
const TxBytes = 64 << 20

// Rewrite copies the bbolt file at path, which no process may have open,
// into a new file with copy and puts the copy in its place. It returns the
// sizes of the file before and after. With onlySmaller a copy no smaller
// than the file is discarded and the file stays. On an error the file is
// left as it was and no copy remains.
func Rewrite(path string, onlySmaller bool, copy func(dst, src *bolt.DB) error) (before, after int64, err error) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	src, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return 0, 0, err
	}
	defer src.Close()
	tmp := path + ".compact"
	_ = os.Remove(tmp) // a copy an interrupted run left
	// The copy is synced once, at the end.
	dst, err := bolt.Open(tmp, info.Mode().Perm(), &bolt.Options{Timeout: time.Second, NoSync: true, NoFreelistSync: true})
	if err != nil {
		return 0, 0, err
	}
	err = copy(dst, src)
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
	if err == nil && onlySmaller && copied.Size() >= info.Size() {
		_ = os.Remove(tmp)
		return info.Size(), info.Size(), nil
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, 0, fmt.Errorf("rewriting %q: %w", path, err)
	}
	return info.Size(), copied.Size(), nil
}
