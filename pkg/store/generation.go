package store

import (
	"context"

	"github.com/kgstream/kgstream/pkg/provenance"
)

// RegistryGenerations is implemented by registries that count their
// writes. RegistryGeneration returns a tenant's registry generation: a
// counter that every registry write of the tenant (an announcement, an ACL
// change, a content record, a deletion) raises in the same transaction as
// the write, and that never goes down. Equal generations read at two times
// mean that no registry write of the tenant committed between them, so a
// copy of the registry listed after reading generation g holds every write
// up to g, and stays exact for as long as the generation reads g. A tenant
// never written is at 0.
type RegistryGenerations interface {
	RegistryGeneration(ctx context.Context, tenant string) (uint64, error)
}

// RegistryChanges is implemented by registries that record which
// document each registry write was of, so that a reader holding a copy of
// the registry at one generation brings it up to date by reading what
// changed instead of listing every document again.
//
// SourcesChangedSince returns the current states of the tenant's documents
// that a registry write raising the generation past since wrote, sorted by
// doc id (deleted ones included, as ListSources lists them), read after
// the writes up to the generation at the call: a copy of the registry at
// generation since, with these states put in, holds every write up to the
// generation the caller read before calling. ok is false when the registry
// cannot name them all (it began recording after since, as a store of a
// build before this interface does): the caller lists the registry then.
type RegistryChanges interface {
	SourcesChangedSince(ctx context.Context, tenant string, since uint64) (states []provenance.SourceState, ok bool, err error)
}

// GraphGenerations is implemented by graph stores that count their
// changes. GraphGeneration returns a tenant's graph generation: a counter
// that every applied change of the tenant (an apply or a deletion whose
// outcome is store.Applied) raises in the same transaction as the change,
// and that never goes down; a stale or duplicate change leaves it as it
// is. Equal generations read at two times mean that no change of the
// tenant's graph committed between them, so what was computed from the
// graph after reading generation g stays exact for as long as the
// generation reads g. A tenant never written is at 0.
type GraphGenerations interface {
	GraphGeneration(ctx context.Context, tenant string) (uint64, error)
}
