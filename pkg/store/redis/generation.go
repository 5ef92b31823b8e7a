package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kgstream/kgstream/pkg/store"
)

var _ store.RegistryGenerations = (*Store)(nil)

// regGen is the tenant's registry generation, raised by INCR inside every
// registry write's MULTI/EXEC (same hash slot as the registry keys).
func (k keys) regGen() string { return k.base + "reg-gen" }

// bumpRegistryGeneration queues the generation's INCR on p, the registry
// write's transaction pipeline.
func bumpRegistryGeneration(ctx context.Context, p goredis.Pipeliner, k keys) {
	p.Incr(ctx, k.regGen())
}

// RegistryGeneration returns the tenant's registry generation (see
// store.RegistryGenerations).
func (s *Store) RegistryGeneration(ctx context.Context, tenant string) (uint64, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return 0, fmt.Errorf("reading the registry generation: %w", err)
	}
	n, err := s.client.Get(ctx, s.tenantKeys(tenant).regGen()).Uint64()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the registry generation of %q: %w", tenant, err)
	}
	return n, nil
}
