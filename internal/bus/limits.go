package bus

import (
	"errors"
	"fmt"
	"time"

	"github.com/verdict-dev/verdict/pkg/queue"
)

// StreamLimits are the size limits of Verdict's streams that services take
// from their configuration. Every service that provisions must use the same
// values (each Provision makes the streams match its own), so services
// carry them as one value, bound to the same flags.
type StreamLimits struct {
	// ResultHistory is how many messages VERDICT_RESULTS keeps per
	// subject (WithResultHistory).
	ResultHistory int
	// ResultsMaxBytes is VERDICT_RESULTS' size (WithResultsMaxBytes).
	ResultsMaxBytes int64
	// WorkMaxMsgs and WorkMaxBytes bound VERDICT_WORK (WithWorkMaxMsgs,
	// WithWorkMaxBytes).
	WorkMaxMsgs  int64
	WorkMaxBytes int64
	// DecisionsMaxAge and DecisionsMaxBytes bound VERDICT_DECISIONS, the
	// admission log (WithDecisionsMaxAge, WithDecisionsMaxBytes).
	DecisionsMaxAge   time.Duration
	DecisionsMaxBytes int64
}

// DefaultStreamLimits returns the defaults of the provisioning options.
func DefaultStreamLimits() StreamLimits {
	return StreamLimits{
		ResultHistory:     DefaultResultHistory,
		ResultsMaxBytes:   DefaultResultsMaxBytes,
		WorkMaxMsgs:       DefaultWorkMaxMsgs,
		WorkMaxBytes:      DefaultWorkMaxBytes,
		DecisionsMaxAge:   DefaultDecisionsMaxAge,
		DecisionsMaxBytes: DefaultDecisionsMaxBytes,
	}
}

// minStreamBytes is the smallest byte limit a configuration may set.
const minStreamBytes = 1 << 20

// Validate returns every problem, each wrapping queue.ErrInvalidOption.
func (l StreamLimits) Validate() error {
	var errs []error
	if l.ResultHistory < 1 || l.ResultHistory > MaxResultHistory {
		errs = append(errs, fmt.Errorf("%w: result history %d: 1 to %d", queue.ErrInvalidOption, l.ResultHistory, MaxResultHistory))
	}
	if l.ResultsMaxBytes < minStreamBytes {
		errs = append(errs, fmt.Errorf("%w: results max bytes %d: at least 1Mi", queue.ErrInvalidOption, l.ResultsMaxBytes))
	}
	if l.WorkMaxMsgs < 1 {
		errs = append(errs, fmt.Errorf("%w: work max messages %d must be positive", queue.ErrInvalidOption, l.WorkMaxMsgs))
	}
	if l.WorkMaxBytes < minStreamBytes {
		errs = append(errs, fmt.Errorf("%w: work max bytes %d: at least 1Mi", queue.ErrInvalidOption, l.WorkMaxBytes))
	}
	if l.DecisionsMaxAge < time.Minute {
		errs = append(errs, fmt.Errorf("%w: decisions max age %s: at least 1m", queue.ErrInvalidOption, l.DecisionsMaxAge))
	}
	if l.DecisionsMaxBytes < minStreamBytes {
		errs = append(errs, fmt.Errorf("%w: decisions max bytes %d: at least 1Mi", queue.ErrInvalidOption, l.DecisionsMaxBytes))
	}
	return errors.Join(errs...)
}

// ProvisionOptions are the limits as Provision options.
func (l StreamLimits) ProvisionOptions() []ProvisionOption {
	return []ProvisionOption{
		WithResultHistory(l.ResultHistory),
		WithResultsMaxBytes(l.ResultsMaxBytes),
		WithWorkMaxMsgs(l.WorkMaxMsgs),
		WithWorkMaxBytes(l.WorkMaxBytes),
		WithDecisionsMaxAge(l.DecisionsMaxAge),
		WithDecisionsMaxBytes(l.DecisionsMaxBytes),
	}
}
