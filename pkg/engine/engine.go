// Package engine evaluates Kyverno-language policies: it matches rules to
// a resource, builds each rule's variable context, checks preconditions
// and exceptions, then validates, mutates or generates. It is pure: no
// clients, no globals; external data comes through a ContextLoader and the
// clock is injected.
//
// Evaluation is bounded in time by the context passed to Apply, Validate,
// Mutate, Generate and VerifyImages, and in work by limits with defaults
// (WithMaxForEachElements, WithMaxForEachDepth, WithWorkBudget,
// WithMaxExpressionSteps): a rule that reaches one ends with StatusError,
// its message starting with StoppedPrefix, and never with a pass, so that
// a webhook under failurePolicy Fail denies.
package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine/jmespath"
)

// ErrInvalidOption wraps every error from an invalid option.
var ErrInvalidOption = errors.New("invalid engine option")

// Engine evaluates compiled policies. It is safe for concurrent use.
type Engine struct {
	jp *jmespath.Interpreter
	// loader, lister and reader are the sources the engine was given,
	// each behind the tenancy check (tenancy.go).
	loader confinedLoader
	lister confinedLister
	// reader serves context reads of resources (CEL's resource.Get and
	// resource.List, validate.cel params); unset means lister.
	reader    confinedLister
	now       func() time.Time
	templates templateCache
	limits    limits
	// imageVerifier verifies verifyImages rules' images; nil: those
	// rules are not evaluated (WithImageVerifier).
	imageVerifier ImageVerifier
	// ruleClock times each rule's evaluation (WithRuleClock); nil: no
	// rule is timed.
	ruleClock func() time.Time
}

// Option configures an Engine.
type Option func(*Engine) error

// WithContextLoader sets where configMap, apiCall, globalReference and
// imageRegistry context entries get their data.
func WithContextLoader(l ContextLoader) Option {
	return func(e *Engine) error {
		if l == nil {
			return fmt.Errorf("%w: nil context loader", ErrInvalidOption)
		}
		e.loader = confinedLoader{l}
		return nil
	}
}

// WithClock sets the clock used by time functions.
func WithClock(now func() time.Time) Option {
	return func(e *Engine) error {
		if now == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidOption)
		}
		e.now = now
		return nil
	}
}

// WithRuleClock has the engine time each rule's evaluation with now (a
// monotonic clock such as time.Now) into RuleResponse.Duration, for
// metrics that report per-rule latency. Without it no rule is timed and
// the clock is never read.
func WithRuleClock(now func() time.Time) Option {
	return func(e *Engine) error {
		if now == nil {
			return fmt.Errorf("%w: nil rule clock", ErrInvalidOption)
		}
		e.ruleClock = now
		return nil
	}
}

// New returns an Engine.
func New(opts ...Option) (*Engine, error) {
	e := &Engine{loader: confinedLoader{noLoader{}}, lister: confinedLister{noLister{}}, now: time.Now, limits: defaultLimits()}
	for _, o := range opts {
		if err := o(e); err != nil {
			return nil, err
		}
	}
	jp, err := jmespath.New(
		jmespath.WithClock(func() time.Time { return e.now() }),
		jmespath.WithStepLimit(e.limits.exprSteps),
	)
	if err != nil {
		return nil, fmt.Errorf("jmespath: %w", err)
	}
	e.jp = jp
	if e.reader.inner == nil {
		e.reader = e.lister
	}
	return e, nil
}
