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
