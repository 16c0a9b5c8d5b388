package webhook

import (
	"context"

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
	// keyDeniedBy lists the policies that blocked a request, on its
	// "request served" line.
	keyDeniedBy = "deniedBy"
)

// logFrom returns the logger carried by ctx, or a disabled one.
func logFrom(ctx context.Context) *zerolog.Logger {
	return zerolog.Ctx(ctx)
}
