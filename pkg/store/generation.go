package store

import "context"

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
