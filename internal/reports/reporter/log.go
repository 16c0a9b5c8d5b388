package reporter

import (
	"context"

	"github.com/rs/zerolog"
)

// logFrom returns the logger carried by ctx (a disabled one if none).
func logFrom(ctx context.Context) *zerolog.Logger { return zerolog.Ctx(ctx) }
