package reporter

import (
	"context"

	"github.com/rs/zerolog"
)

// logFrom returns the logger carried by ctx (a disabled one if none).
func logFrom(ctx context.Context) *zerolog.Logger { return zerolog.Ctx(ctx) }

// Log keys, defined once (lowerCamelCase, as everywhere in Verdict).
const (
	logKeyComponent  = "component"
	logKeyUID        = "resourceUid"
	logKeyNamespace  = "namespace"
	logKeySubject    = "subject"
	logKeySequence   = "streamSeq"
	logKeyOutcome    = "outcome"
	logKeyReason     = "reason"
	logKeyResources  = "resources"
	logKeyResults    = "results"
	logKeyFailed     = "failed"
	logKeyPruned     = "pruned"
	logKeyElapsed    = "elapsed"
	logKeyExamined   = "examined"
	logKeyKind       = "kind"
	logKeyName       = "name"
	logKeyUnverified = "unverified"
	logKeyUnreadable = "unreadable"
	logKeyPartial    = "partial"
	logKeyPolicy     = "policy"
)
