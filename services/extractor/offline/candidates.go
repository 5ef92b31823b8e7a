package offline

import (
	"context"
	"fmt"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
)

// Names finds the spellings of a set of entities in text: which stored
// documents a catalog change can affect.
type Names struct {
	m *matcher
}

// In reports whether the text of any of units names one of the entities.
func (n *Names) In(units []events.TextUnit) bool {
	for _, u := range units {
		if len(n.m.find(u.Text)) > 0 {
			return true
		}
	}
	return false
}

// CandidateNames returns every spelling the entities ids may be found by
// in tenant's documents: their keys, the names x's gazetteer gives them
// and the spellings of bundled entities a catalog name displaces. It
// over-approximates what extraction matches (no capital or team-context
// checks): a candidate whose extraction does not change publishes
// nothing. x may be nil (another extractor): then the keys alone count.
func CandidateNames(ctx context.Context, x *Extractor, tenant string, ids []string) (*Names, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	minKey, maxWords := 3, 8
	var bundled *matcher
	var bundledEntries []Entry
	var current []Entry
	if x != nil {
		minKey, maxWords = x.cfg.MinKeyLen, x.cfg.MaxWords
		bundled, bundledEntries = x.bundledMatcher, x.bundled
		if g := x.cfg.Gazetteer; g != nil {
			var err error
			if current, err = g.Entries(ctx, tenant); err != nil {
				return nil, fmt.Errorf("reading the gazetteer: %w", err)
			}
		}
	}
	var es []Entry
	keys := map[string]bool{}
	plain := func(id, name string) {
		_, key := resolve.SplitID(id)
		es = append(es, Entry{ID: id, Type: "candidate", Name: name, Key: key})
		keys[resolve.Key(key)] = true
		if name != "" {
			keys[resolve.Key(name)] = true
		}
	}
	for _, id := range ids {
		plain(id, "")
	}
	for _, e := range current {
		if want[e.ID] {
			plain(e.ID, e.Name)
		}
	}
	// A catalog spelling displaces every spelling of a bundled entity
	// sharing it ("k8s" in the catalog unlinks "Kubernetes").
	if bundled != nil {
		displaced := map[string]bool{}
		for k := range keys {
			for _, e := range bundled.byKey[k] {
				displaced[e.ID] = true
			}
		}
		for _, e := range bundledEntries {
			if displaced[e.ID] {
				es = append(es, Entry{ID: e.ID, Type: "candidate", Name: e.Name, Key: resolve.Key(e.Name), Display: e.Name})
			}
		}
	}
	return &Names{m: newMatcher(es, "", minKey, maxWords)}, nil
}
