package embedded_test

import (
	"path/filepath"
	"testing"

	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Stores {
		// NoSync: every test gets a throwaway file; durability is bbolt's.
		s, err := embedded.Open(filepath.Join(t.TempDir(), "kgstream.db"), embedded.Options{NoSync: true})
		if err != nil {
			t.Fatalf("opening the store: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
