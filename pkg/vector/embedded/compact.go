package embedded

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/internal/boltfile"
)

// Compact rewrites the index file at path, which no process may have open,
// with its pages filled and without the pages deletions freed (bbolt never
// returns them). It returns the file's sizes before and after; a copy no
// smaller than the file is discarded, and on an error the file is left as
// it was.
func Compact(path string) (before, after int64, err error) {
	before, after, err = boltfile.Rewrite(path, true, func(dst, src *bolt.DB) error {
		return bolt.Compact(dst, src, boltfile.TxBytes)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("compacting vector index %q: %w", path, err)
	}
	return before, after, nil
}
