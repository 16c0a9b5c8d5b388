package webhook

import (
	"context"
	"io"
	"time"

	"github.com/rs/zerolog"
)

// Log keys, lowerCamelCase, defined once.
const (
	keyAddress     = "address"
	keyAdmission   = "admissionUid"
	keyCode        = "code"
	keyCount       = "count"
	keyDuration    = "duration"
	keyEndpoint    = "endpoint"
	keyFile        = "file"
	keyKind        = "kind"
	keyName        = "name"
	keyNamespace   = "namespace"
	keyNotAfter    = "notAfter"
	keyOperation   = "operation"
	keyOutcome     = "outcome"
	keyPanic       = "panic"
	keyPolicy      = "policy"
	keyReason      = "reason"
	keyRule        = "rule"
	keyRules       = "rules"
	keyStack       = "stack"
	keySubresource = "subresource"
	keyDryRun      = "dryRun"
)

// NewLogger returns the service's logger: JSON lines, or a console format
// for people, at the given level.
func NewLogger(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Nop(), err
	}
	if format == LogFormatConsole {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// logFrom returns the logger carried by ctx, or a disabled one.
func logFrom(ctx context.Context) *zerolog.Logger {
	return zerolog.Ctx(ctx)
}
