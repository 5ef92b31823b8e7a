package redis

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/kgstream/kgstream/pkg/store"
)

var _ store.EntityParts = (*Store)(nil)

// EntityParts returns the parts of the entities among ids that exist (see
// store.EntityParts), from their hashes read in one script (one state of
// the graph, as Entities reads them), decoding only the fragments a part
// holds: the first in doc-id order until their descriptions hold
// textBytes bytes, and those of docs[id]. An entity many documents name
// costs the transfer of its hash but not the decoding of every fragment.
func (s *Store) EntityParts(ctx context.Context, tenant string, ids []string, textBytes int, docs map[string][]string) (map[string]store.EntityPart, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("getting entity parts: %w", err)
	}
	k := s.tenantKeys(tenant)
	if err := s.ensureLayout(ctx); err != nil {
		return nil, err
	}
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	out := make(map[string]store.EntityPart, len(ids))
	err := hgetallAtomic(ctx, s.client, k.entity(""), ids, func(id string, read any) (store.EntityPart, bool, error) {
		return assemblePart(id, read, textBytes, docs[id])
	}, func(id string, p store.EntityPart) { out[id] = p })
	if err != nil {
		return nil, fmt.Errorf("getting parts of %d entities of %q: %w", len(ids), tenant, err)
	}
	return out, nil
}

// assemblePart is the part of an entity (see EntityParts) from its hash
// (an HGETALL reply); found is false when the hash has no head.
func assemblePart(id string, read any, textBytes int, docs []string) (store.EntityPart, bool, error) {
	hash, _ := read.([]any)
	head, frags := hashParts(hash)
	if head == nil {
		return store.EntityPart{}, false, nil
	}
	h, err := store.DecodeEntityHead(id, head)
	if err != nil {
		return store.EntityPart{}, false, err
	}
	p := store.EntityPart{ID: id, Type: h.Type, Name: h.Name, Fragments: len(frags), Of: make(map[string]store.Fragment, len(docs))}
	slices.SortFunc(frags, func(a, b [2]string) int { return cmp.Compare(a[0], b[0]) })
	decode := func(fv [2]string) (store.Fragment, error) {
		f, err := store.DecodeFragment(fv[0], []byte(fv[1]))
		if err != nil {
			return store.Fragment{}, fmt.Errorf("decoding the fragment of %q by %q: %w", id, fv[0], err)
		}
		return f, nil
	}
	held := 0
	for _, fv := range frags {
		if held >= textBytes {
			break
		}
		f, err := decode(fv)
		if err != nil {
			return store.EntityPart{}, false, err
		}
		p.First = append(p.First, f)
		if f.Description != "" {
			held += len(f.Description) + 1
		}
	}
	for _, doc := range docs {
		if i := slices.IndexFunc(p.First, func(f store.Fragment) bool { return f.DocID == doc }); i >= 0 {
			p.Of[doc] = p.First[i]
			continue
		}
		i, ok := slices.BinarySearchFunc(frags, doc, func(fv [2]string, doc string) int { return cmp.Compare(fv[0], doc) })
		if !ok {
			continue
		}
		f, err := decode(frags[i])
		if err != nil {
			return store.EntityPart{}, false, err
		}
		p.Of[doc] = f
	}
	return p, true, nil
}

var _ store.EdgesAmong = (*Store)(nil)

// EdgesAmong returns the edges of entityID in dir whose other end is
// among others (see store.EdgesAmong), read as Edges reads them (one
// script reads the adjacency hash and every edge it names) and decoded
// only when they may end among others (store.MayEndAmong): the transfer
// of the whole list is not spared, its decoding is.
func (s *Store) EdgesAmong(ctx context.Context, tenant, entityID string, dir store.Direction, others []string) ([]store.Edge, error) {
	if others == nil {
		others = []string{} // among none: none (adjacent takes nil for all)
	}
	return s.adjacent(ctx, tenant, entityID, dir, others)
}
