package embedded

import (
	"bytes"
	"context"
	"fmt"

	"github.com/kgstream/kgstream/pkg/store"
)

var _ store.EntityParts = (*Store)(nil)

// EntityParts returns the parts of the entities among ids that exist (see
// store.EntityParts): each head, with the fragment count from its name
// tally (every fragment votes once), the first fragments by one cursor
// from the head (the rows of an entity are sorted by document), decoded
// only until their descriptions hold textBytes bytes, and the fragments of
// docs[id] by key. The other fragments are not read.
func (s *Store) EntityParts(ctx context.Context, tenant string, ids []string, textBytes int, docs map[string][]string) (map[string]store.EntityPart, error) {
	out := make(map[string]store.EntityPart, len(ids))
	err := s.readGraph(ctx, tenant, func(g *graphBuckets) error {
		c := g.entityRows.Cursor()
		for _, id := range ids {
			if _, done := out[id]; done {
				continue
			}
			head := headKey(id)
			k, v := c.Seek(head)
			if !bytes.Equal(k, head) {
				continue // no head: absent
			}
			h, err := store.DecodeEntityHead(id, v)
			if err != nil {
				return fmt.Errorf("decoding the head of entity %q: %w", id, err)
			}
			p := store.EntityPart{ID: id, Type: h.Type, Name: h.Name, Fragments: h.Fragments(),
				Of: make(map[string]store.Fragment, len(docs[id]))}
			held := 0
			for k, v = c.Next(); held < textBytes && k != nil && bytes.HasPrefix(k, head); k, v = c.Next() {
				doc := string(k[len(head):])
				f, err := store.DecodeFragment(doc, v)
				if err != nil {
					return fmt.Errorf("decoding the fragment of %q by %q: %w", id, doc, err)
				}
				p.First = append(p.First, f)
				if f.Description != "" {
					held += len(f.Description) + 1
				}
			}
			first := make(map[string]int, len(p.First))
			for i, f := range p.First {
				first[f.DocID] = i
			}
			for _, doc := range docs[id] {
				if i, ok := first[doc]; ok {
					p.Of[doc] = p.First[i]
					continue
				}
				f, ok, err := part(g.entityRows, id, doc)
				if err != nil {
					return err
				}
				if ok {
					p.Of[doc] = f
				}
			}
			out[id] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("getting parts of %d entities of %q: %w", len(ids), tenant, err)
	}
	return out, nil
}

var _ store.EdgesAmong = (*Store)(nil)

// EdgesAmong returns the edges of entityID in dir whose other end is
// among others (see store.EdgesAmong): the adjacency index's edge ids are
// scanned, and only those that may end among others (store.MayEndAmong)
// decoded.
func (s *Store) EdgesAmong(ctx context.Context, tenant, entityID string, dir store.Direction, others []string) ([]store.Edge, error) {
	if others == nil {
		others = []string{} // among none: none (adjacent takes nil for all)
	}
	out, err := s.adjacent(ctx, tenant, entityID, dir, others)
	if err != nil {
		return nil, fmt.Errorf("listing edges of %q among %d entities in %q: %w", entityID, len(others), tenant, err)
	}
	return out, nil
}
