package stream

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// RunGroup runs actors together until one returns: the first to return,
// failed or not, cancels the context of the others, and RunGroup returns
// once all have, with the first error (nil when none failed). A worker's
// Run is its consumers and loops as one group, so one that stops never
// leaves the others running half-blind.
func RunGroup(ctx context.Context, actors ...func(context.Context) error) error {
	g, gctx := errgroup.WithContext(ctx)
	gctx, cancel := context.WithCancel(gctx)
	defer cancel()
	for _, a := range actors {
		g.Go(func() error {
			defer cancel()
			return a(gctx)
		})
	}
	return g.Wait()
}
