package webhook

import (
	"context"

	"github.com/rs/zerolog"
)

// logFrom returns the logger carried by ctx, or a disabled one.
func logFrom(ctx context.Context) *zerolog.Logger {
	return zerolog.Ctx(ctx)
}
