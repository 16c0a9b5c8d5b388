package imageverify

import (
	"errors"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// Outcome is how one verification ended, as metrics count it.
type Outcome string

// The outcomes of a verification.
const (
	// OutcomePass: every attestor set and attestation was satisfied.
	OutcomePass Outcome = "pass"
	// OutcomeFail: a signature or attestation was missing or did not
	// verify.
	OutcomeFail Outcome = "fail"
	// OutcomeError: no verdict was reached (a registry unreachable, a
	// deadline reached).
	OutcomeError Outcome = "error"
	// OutcomeUnsupported: the entry asks for what this verifier does not
	// check.
	OutcomeUnsupported Outcome = "unsupported"
)

// Observer is told of the verifier's work, for metrics. Its methods are
// called concurrently and must not block.
type Observer interface {
	// Verified reports one call of Verify: its outcome, whether the
	// result came from the cache, and how long it took (a call that
	// waited for a verification of the same key under way counts that
	// verification's outcome and its wait).
	Verified(outcome Outcome, cached bool, d time.Duration)
	// CacheLookup reports whether the cache held a result for the key.
	CacheLookup(hit bool)
}

// WithObserver reports the verifier's work to o.
func WithObserver(o Observer) Option {
	return func(v *Verifier) error {
		if o == nil {
			return errors.New("imageverify: nil observer")
		}
		v.observer = o
		return nil
	}
}

// outcomeOf classifies a Verify result.
func outcomeOf(res engine.ImageVerifyResult, err error) Outcome {
	switch {
	case errors.Is(err, ErrUnsupported):
		return OutcomeUnsupported
	case err != nil:
		return OutcomeError
	case res.Verified:
		return OutcomePass
	}
	return OutcomeFail
}

// noObserver is the observer of a verifier without WithObserver.
type noObserver struct{}

func (noObserver) Verified(Outcome, bool, time.Duration) {}
func (noObserver) CacheLookup(bool)                      {}
