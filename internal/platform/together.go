package platform

import (
	"context"
	"errors"

	"golang.org/x/sync/errgroup"
)

// Together runs the parts of a service (a projector and a scanner, an
// index and the API server that answers from it) so that they stop
// together: each runs with a context that ends when ctx ends or when any
// part returns, for whatever reason. It returns once every part has
// returned, with the first error other than a part's context ending
// (context.Canceled after the stop), or nil.
func Together(ctx context.Context, parts ...func(context.Context) error) error {
	g, gctx := errgroup.WithContext(ctx)
	gctx, stop := context.WithCancel(gctx)
	defer stop()
	for _, run := range parts {
		g.Go(func() error {
			defer stop()
			if err := run(gctx); err != nil && (!errors.Is(err, context.Canceled) || gctx.Err() == nil) {
				return err
			}
			return nil
		})
	}
	return g.Wait()
}
