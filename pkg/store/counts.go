package store

import (
	"context"

	"github.com/kgstream/kgstream/pkg/provenance"
)

// SourceCounts are how many documents a tenant's registry holds, live and
// deleted (a deletion leaves its document in the registry as a tombstone).
type SourceCounts struct {
	Live    int `json:"live"`
	Deleted int `json:"deleted"`
}

// SourceCounter is implemented by registries that keep each tenant's
// counts up to date with every write, in the write's transaction, so that
// counting reads two numbers instead of listing every document.
type SourceCounter interface {
	CountSources(ctx context.Context, tenant string) (SourceCounts, error)
}

// CountChange is what a registry write replacing cur (nil: the document
// was unknown) with next changes in the counts.
func CountChange(cur *provenance.SourceState, next provenance.SourceState) (live, deleted int) {
	if cur != nil {
		if cur.Deleted {
			deleted--
		} else {
			live--
		}
	}
	if next.Deleted {
		deleted++
	} else {
		live++
	}
	return live, deleted
}

// Add counts one registry state.
func (c *SourceCounts) Add(st provenance.SourceState) {
	if st.Deleted {
		c.Deleted++
	} else {
		c.Live++
	}
}

// CountStates counts a list of registry states as a SourceCounter does.
func CountStates(states []provenance.SourceState) SourceCounts {
	var c SourceCounts
	for _, st := range states {
		c.Add(st)
	}
	return c
}
