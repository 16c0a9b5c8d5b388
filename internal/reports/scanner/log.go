package scanner

import (
	"context"

	"github.com/rs/zerolog"
)

// logFrom returns the logger carried by ctx (a disabled one if none).
func logFrom(ctx context.Context) *zerolog.Logger { return zerolog.Ctx(ctx) }

// Log keys, defined once (lowerCamelCase, as everywhere in Verdict; the
// same keys as the reporter's).
const (
	logKeyComponent = "component"
	logKeyUID       = "resourceUid"
	logKeySubject   = "subject"
	logKeyReason    = "reason"
	logKeyResults   = "results"
	logKeyPruned    = "pruned"
	logKeyExamined  = "examined"
	logKeyKind      = "kind"
)
