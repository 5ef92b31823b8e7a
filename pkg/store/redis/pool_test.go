package redis_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// TestRegistryWritesNeedOneConnection runs many concurrent registry writes
// recording outbox events, for tenants the Store has not written yet, on a
// pool of two connections with a short timeout. A write that took a second
// connection from the pool while holding its transaction's (the global
// tenant sets used to be written that way) deadlocks such a pool until
// the timeout fails every waiting write.
func TestRegistryWritesNeedOneConnection(t *testing.T) {
	opts := options(t)
	opts.PoolSize, opts.PoolTimeout = 2, 300*time.Millisecond
	c := goredis.NewClient(opts)
	prefix := "kgtest-" + fmt.Sprint(rand.Uint64())
	s := storeOn(t, c, prefix)
	ctx := t.Context()
	pend := func(cur *provenance.SourceState, next provenance.SourceState) ([]store.Pending, error) {
		return []store.Pending{{Tenant: next.Tenant, ID: fmt.Sprintf("%s-%d-%d", next.DocID, next.Version, next.ACLRevision), Data: []byte("e")}}, nil
	}
	const writers, each = 16, 12
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				// A new tenant every few writes: each one's first write
				// adds it to the global sets.
				tenant := fmt.Sprintf("t%d", (w*each+i)/4)
				doc := fmt.Sprintf("d%d-%d", w, i)
				if _, err := s.AnnounceRecording(ctx, tenant, store.Announcement{DocID: doc, ACL: provenance.PublicACL()}, pend); err != nil {
					errs <- fmt.Errorf("announcing %s/%s: %w", tenant, doc, err)
					continue
				}
				if _, err := s.SetACLRecording(ctx, tenant, doc, provenance.ACL{Groups: []string{"g"}}, pend); err != nil {
					errs <- fmt.Errorf("setting the ACL of %s/%s: %w", tenant, doc, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	tenants, err := s.Tenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := writers * each / 4; len(tenants) != want {
		t.Fatalf("%d registry tenants listed, want %d", len(tenants), want)
	}
	n, err := s.PendingCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * writers * each; n != want {
		t.Fatalf("%d pending events, want %d", n, want)
	}
}
