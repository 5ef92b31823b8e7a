package embedded

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestUpdateMembersAgreesWithRewrite checks updateMembers against what
// UpdateCommunities did before it: delete the pair of every old member,
// then put the pair of every new one. On many random cases (duplicates,
// members kept, dropped and added, an index missing pairs or holding
// extra ones, other communities' pairs, several updates in one
// transaction) both leave the same keys.
func TestUpdateMembersAgreesWithRewrite(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rewrite := func(b *bolt.Bucket, id string, was, now []string) error {
		for _, m := range was {
			if err := b.Delete(pair(m, id)); err != nil {
				return err
			}
		}
		for _, m := range now {
			if err := b.Put(pair(m, id), nil); err != nil {
				return err
			}
		}
		return nil
	}
	keys := func(b *bolt.Bucket) []string {
		var out []string
		_ = b.ForEach(func(k, v []byte) error {
			out = append(out, fmt.Sprintf("%q=%q", k, v))
			return nil
		})
		return out
	}
	rng := rand.New(rand.NewPCG(1, 2))
	entities := func(n int) []string {
		out := make([]string, rng.IntN(n+1))
		for i := range out {
			out[i] = fmt.Sprintf("service:e%d", rng.IntN(40))
		}
		return out
	}
	ids := []string{"c1", "c2", "c10"}
	for trial := range 500 {
		err := db.Update(func(tx *bolt.Tx) error {
			_ = tx.DeleteBucket([]byte("slow"))
			_ = tx.DeleteBucket([]byte("fast"))
			slow, err := tx.CreateBucket([]byte("slow"))
			if err != nil {
				return err
			}
			fast, err := tx.CreateBucket([]byte("fast"))
			if err != nil {
				return err
			}
			// The index before: pairs of any community, consistent with
			// the stored members or not.
			for _, id := range ids {
				for _, m := range entities(30) {
					for _, b := range []*bolt.Bucket{slow, fast} {
						if err := b.Put(pair(m, id), nil); err != nil {
							return err
						}
					}
				}
			}
			for range 1 + rng.IntN(3) {
				id, was, now := ids[rng.IntN(len(ids))], entities(30), entities(30)
				if rng.IntN(2) == 0 {
					// A grown community: its old members and some more.
					now = append(slices.Clone(was), entities(5)...)
				}
				if err := rewrite(slow, id, was, now); err != nil {
					return err
				}
				if err := updateMembers(fast, id, was, now); err != nil {
					return err
				}
			}
			if s, f := keys(slow), keys(fast); !slices.Equal(s, f) {
				return fmt.Errorf("trial %d: rewrite left %v, updateMembers %v", trial, s, f)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
