package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/verdict-dev/verdict/pkg/engine/jmespath"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// Limits on one evaluation. An admission request is evaluated under the
// deadline of the context passed with it, and under these bounds on work,
// which also hold where there is no deadline (the CLI, background scans).
// None is reached by a policy of the Kyverno policy library on its test
// resources.
const (
	// DefaultMaxForEachElements is the largest list a foreach iterates:
	// ten thousand, well above the containers, volumes, ports or keys of
	// any real object (a ConfigMap holds at most 1 MiB).
	DefaultMaxForEachElements = 10_000
	// DefaultMaxForEachDepth is how deep foreach blocks nest: a foreach
	// inside a foreach is depth 2. The policy library nests two deep.
	DefaultMaxForEachDepth = 4
	// DefaultWorkBudget is the number of steps one Request may take over
	// all the policies evaluated with it. A step is one rule, one foreach
	// element, one condition of a foreach or deny block, or one pattern.
	// A foreach over a list of DefaultMaxForEachElements with a deny
	// condition takes about 20,000 steps; a million steps take from half
	// a second to a few seconds.
	DefaultWorkBudget = 1_000_000
	// DefaultMaxExpressionSteps bounds the work of one JMESPath
	// expression (see jmespath.DefaultStepLimit).
	DefaultMaxExpressionSteps = jmespath.DefaultStepLimit
	// DefaultMemoryBudget is the memory one rule may allocate or load:
	// what its JMESPath function calls allocate, over its context
	// entries, foreach lists, conditions and substitutions (see
	// jmespath.Budget), what its context entries load (an API call's
	// answer, a ConfigMap, an image's data: jmespath.Size), and the text,
	// lists and maps its substitutions build: 64 MiB, sixteen times a
	// ConfigMap's limit. Forty 16 MB strings of pad_left in one context
	// entry took 1.34 GB of the webhook's memory before it.
	DefaultMemoryBudget = jmespath.DefaultMemoryLimit
	// WorkPerStep is how much matching work counts as one step of the
	// work budget: a pattern value or condition operand compared to a
	// resource value, and a wildcard of a match or exclude block, an
	// exception, a podSecurity exclusion or a mutate target compared to
	// the request's or the cluster's string, charges about one unit per
	// byte it compares (see pattern.Meter, meter.match and
	// wildcard.Cost), so 1,024 bytes, about a
	// microsecond, are one step. A wildcard with a `?` between two `*`
	// costs its length times the value's: 40,000 characters against
	// 500 KB would take the budget ten thousand times over, and is
	// stopped before it starts.
	WorkPerStep = 1024
)

// StoppedPrefix starts the message of every rule the engine stopped,
// because the request's context ended or a limit was reached; the rule's
// status is then StatusError. The message is the text of an error
// wrapping ErrDeadline, ErrCanceled or ErrLimitExceeded:
//
//	evaluation stopped: request deadline exceeded after 12345 steps
//	evaluation stopped: request canceled after 12345 steps
//	evaluation stopped: limit exceeded: foreach list request.object.data has 20000 elements, more than the limit of 10000
//	evaluation stopped: limit exceeded: foreach nested deeper than the limit of 4
//	evaluation stopped: limit exceeded: work budget of 1000000 steps spent
//	evaluation stopped: limit exceeded: expression over the step limit of 1000000: <the JMESPath error>
//	evaluation stopped: limit exceeded: memory budget of 67108864 bytes spent: <the JMESPath error>
const StoppedPrefix = "evaluation stopped: "

var (
	// ErrDeadline is wrapped, with context.DeadlineExceeded, when the
	// request's deadline passed before its evaluation finished.
	ErrDeadline = errors.New("request deadline exceeded")
	// ErrCanceled is wrapped, with the context's error, when the
	// request's context was canceled before its evaluation finished.
	ErrCanceled = errors.New("request canceled")
	// ErrLimitExceeded is wrapped when an evaluation reached one of the
	// limits set by WithMaxForEachElements, WithMaxForEachDepth,
	// WithWorkBudget, WithMaxExpressionSteps or WithMemoryBudget.
	ErrLimitExceeded = errors.New("limit exceeded")
)

// limits are an Engine's bounds on work.
type limits struct {
	forEachElements int
	forEachDepth    int
	workBudget      int64
	exprSteps       int64
	memory          int64
}

func defaultLimits() limits {
	return limits{
		forEachElements: DefaultMaxForEachElements,
		forEachDepth:    DefaultMaxForEachDepth,
		workBudget:      DefaultWorkBudget,
		exprSteps:       DefaultMaxExpressionSteps,
		memory:          DefaultMemoryBudget,
	}
}

// WithMaxForEachElements bounds the number of elements of one foreach
// list; a longer list stops the rule with an error. The default is
// DefaultMaxForEachElements.
func WithMaxForEachElements(n int) Option {
	return func(e *Engine) error {
		if n <= 0 {
			return fmt.Errorf("%w: foreach element limit must be positive, got %d", ErrInvalidOption, n)
		}
		e.limits.forEachElements = n
		return nil
	}
}

// WithMaxForEachDepth bounds how deep foreach blocks nest (1: no foreach
// inside a foreach); a deeper one stops the rule with an error. The
// default is DefaultMaxForEachDepth.
func WithMaxForEachDepth(n int) Option {
	return func(e *Engine) error {
		if n <= 0 {
			return fmt.Errorf("%w: foreach depth limit must be positive, got %d", ErrInvalidOption, n)
		}
		e.limits.forEachDepth = n
		return nil
	}
}

// WithWorkBudget bounds the steps of one Request, over every policy
// evaluated with it (see DefaultWorkBudget for what a step is). Once it is
// spent, the rule running and every rule after it end with an error. The
// default is DefaultWorkBudget.
func WithWorkBudget(steps int64) Option {
	return func(e *Engine) error {
		if steps <= 0 {
			return fmt.Errorf("%w: work budget must be positive, got %d", ErrInvalidOption, steps)
		}
		e.limits.workBudget = steps
		return nil
	}
}

// WithMaxExpressionSteps bounds the work of one JMESPath expression (see
// jmespath.DefaultStepLimit for what a step is). An expression of a
// foreach list or a context entry over the limit stops the rule; one
// inside {{ }} elsewhere fails as any failing expression does. The default
// is DefaultMaxExpressionSteps.
func WithMaxExpressionSteps(steps int64) Option {
	return func(e *Engine) error {
		if steps <= 0 {
			return fmt.Errorf("%w: expression step limit must be positive, got %d", ErrInvalidOption, steps)
		}
		e.limits.exprSteps = steps
		return nil
	}
}

// WithMemoryBudget bounds the memory, in bytes, that one rule may
// allocate or load: what its JMESPath function calls allocate (see
// jmespath.Budget: strings, lists and objects built by functions,
// charged before the large ones are made), what its context entries load
// and what its substitutions build (see DefaultMemoryBudget); a rule
// over it stops with an error. The default is DefaultMemoryBudget.
func WithMemoryBudget(bytes int64) Option {
	return func(e *Engine) error {
		if bytes <= 0 {
			return fmt.Errorf("%w: memory budget must be positive, got %d", ErrInvalidOption, bytes)
		}
		e.limits.memory = bytes
		return nil
	}
}

// stopError is why an evaluation stopped. Its text starts with
// StoppedPrefix; it wraps one of the sentinels and, for a context that
// ended, the context's error.
type stopError struct {
	msg  string
	errs []error
}

func (e *stopError) Error() string   { return e.msg }
func (e *stopError) Unwrap() []error { return e.errs }

func limitError(format string, args ...any) error {
	return &stopError{
		msg:  StoppedPrefix + ErrLimitExceeded.Error() + ": " + fmt.Sprintf(format, args...),
		errs: []error{ErrLimitExceeded},
	}
}

func contextError(ctxErr error, steps int64) error {
	sentinel := ErrCanceled
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		sentinel = ErrDeadline
	}
	return &stopError{
		msg:  fmt.Sprintf("%s%s after %d steps", StoppedPrefix, sentinel, steps),
		errs: []error{sentinel, ctxErr},
	}
}

// budget is what one Request has spent. It lives in the request's scratch
// cache, so that it spans every policy and every call evaluated with the
// Request; a Request is evaluated by one goroutine at a time, so it needs
// no lock.
type budget struct {
	steps int64
	// spent is set once the budget is spent. It sticks: every rule still
	// to run, in this call or a later one, reports it.
	spent error
}

// meter bounds one call's evaluation: it charges the request's budget and
// watches the context the call was given. A meter lives only as long as
// the call that made it. A nil meter counts nothing and never stops.
type meter struct {
	ctx    context.Context
	limits *limits
	budget *budget
	// stop is why the call stopped: its context ended. It sticks for the
	// rest of the call.
	stop error
	// ruleStop is why the current rule stopped (a foreach list too long,
	// nesting too deep, an expression over its step limit). It holds
	// until the next rule starts.
	ruleStop error
	// arena holds the rule responses of the call's policies (see
	// ruleSlots), allocated arenaSize at a time; a call with no
	// arenaSize has none.
	arena     []RuleResponse
	arenaSize int
	// run is the storage of the rule being evaluated (see ruleRun).
	run *ruleRun
	// work is the matching work not yet charged as steps (less than
	// WorkPerStep).
	work int64
	// mem is the memory budget of the rule being evaluated, reset as
	// each rule starts.
	mem *jmespath.Budget
}

// meterFor returns a meter for one call evaluating req under ctx. A
// request's calls run one after another (evalCache), so each reuses the
// meter of the call before, and the storage of its rule run: the webhook
// makes one call per policy, 22 for the Pod Security policies.
func (e *Engine) meterFor(ctx context.Context, req *Request) *meter {
	c := req.scratch()
	if c.budget == nil {
		c.budget = &budget{}
	}
	m := c.meter
	if m == nil {
		m = &meter{}
		c.meter = m
	}
	// The calls of one request share the rule-run storage and the arena
	// of rule responses: the webhook makes one call per policy.
	mem := m.mem
	if mem == nil || mem.Limit() != e.limits.memory {
		// The limit is positive (WithMemoryBudget), so there is no
		// error; without a budget a search has its own.
		mem, _ = jmespath.NewBudget(e.limits.memory)
	}
	*m = meter{ctx: ctx, limits: &e.limits, budget: c.budget, run: m.run, arena: m.arena, arenaSize: requestArenaSize, mem: mem}
	return m
}

// requestArenaSize is how many rule responses the calls of a request
// allocate at a time (Apply sizes its own from its policies).
const requestArenaSize = 16

// charge counts n steps and returns why the evaluation must stop, if it
// must.
func (m *meter) charge(n int64) error {
	if m == nil {
		return nil
	}
	b := m.budget
	if b.spent != nil {
		return b.spent
	}
	if m.stop != nil {
		return m.stop
	}
	if m.ruleStop != nil {
		return m.ruleStop
	}
	if err := m.ctx.Err(); err != nil {
		m.stop = contextError(err, b.steps)
		return m.stop
	}
	b.steps += n
	if b.steps > m.limits.workBudget {
		b.spent = limitError("work budget of %d steps spent", m.limits.workBudget)
		return b.spent
	}
	return nil
}

// check returns why the evaluation must stop, if it must, without
// counting a step.
func (m *meter) check() error { return m.charge(0) }

// ChargeWork counts n units of matching work, WorkPerStep to a step, and
// returns why the evaluation must stop, if it must; it looks at the
// context each time. It is the pattern.Meter and conditions.Meter of a
// rule's patterns and conditions.
func (m *meter) ChargeWork(n int64) error {
	if m == nil {
		return nil
	}
	m.work += n
	steps := m.work / WorkPerStep
	m.work -= steps * WorkPerStep
	return m.charge(steps)
}

// match reports whether s matches the wildcard pattern, the work of the
// match (wildcard.Cost) charged first: the wildcards of match and exclude
// blocks, exceptions, failure action overrides and mutate targets, whose
// patterns come from a policy and whose strings from a request or the
// cluster (an annotation value may be 256 KB). Work under a step is only
// added up, so a short match neither looks at the context nor fails on a
// budget another rule spent; once the work reaches a step it is charged,
// and a match the budget cannot pay for does not run: it returns false
// with why the evaluation must stop. A nil meter matches uncharged.
func (m *meter) match(pattern, s string) (bool, error) {
	if m != nil {
		if err := m.chargeMatch(wildcard.Cost(pattern, len(s))); err != nil {
			return false, err
		}
	}
	return wildcard.Match(pattern, s), nil
}

// matchAny reports whether s matches one of patterns, each charged as
// match charges it.
func (m *meter) matchAny(patterns []string, s string) (bool, error) {
	for _, p := range patterns {
		if ok, err := m.match(p, s); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// chargeMatch adds n units of matching work, and charges them as steps
// (ChargeWork) only once they reach one.
func (m *meter) chargeMatch(n int64) error {
	if m.work+n < WorkPerStep {
		m.work += n
		return nil
	}
	return m.ChargeWork(n)
}

// chargeMemory counts n bytes that what allocates or brings into the
// rule (a context entry's data, a substitution's text) against the
// rule's memory budget, the one its JMESPath function calls charge; over
// it, the rule stops with the memory budget's error, which it returns. A
// nil meter counts nothing.
func (m *meter) chargeMemory(what string, n int64) error {
	if m == nil || m.mem == nil {
		return nil
	}
	if err := m.mem.Charge(what, n); err != nil {
		return m.failRule(limitError("memory budget of %d bytes spent: %v", m.limits.memory, err))
	}
	return nil
}

// failRule stops the current rule with err.
func (m *meter) failRule(err error) error {
	if m != nil && m.ruleStop == nil {
		m.ruleStop = err
	}
	return err
}

// stopped returns why the current rule stopped, if it did.
func (m *meter) stopped() error {
	if m == nil {
		return nil
	}
	if m.budget.spent != nil {
		return m.budget.spent
	}
	if m.stop != nil {
		return m.stop
	}
	return m.ruleStop
}

// search runs a compiled query under the call's context. An expression
// over its step limit stops the rule, an ended context the request, even
// where the caller reads a failed expression as an empty value.
func (m *meter) search(q jmespath.Query, data any) (any, error) {
	if m == nil {
		return q.Search(data)
	}
	v, err := q.SearchBudget(m.ctx, data, m.mem)
	if err != nil {
		switch {
		case errors.Is(err, jmespath.ErrStepLimit):
			_ = m.failRule(limitError("expression over the step limit of %d: %v", m.limits.exprSteps, err))
		case errors.Is(err, jmespath.ErrMemoryLimit):
			_ = m.failRule(limitError("memory budget of %d bytes spent: %v", m.limits.memory, err))
		case m.ctx.Err() != nil:
			_ = m.check()
		}
	}
	return v, err
}

// evaluateBounded runs one matched rule under the request's meter: a
// request already stopped reports the rule as an error without running
// it, and a rule stopped while it ran reports why, whatever it returned.
func (run *ruleRun) evaluateBounded(m *meter, base *evalContext, exceptions []*policy.Exception, in *matchInput) RuleResponse {
	if m != nil {
		m.ruleStop = nil
		if m.mem != nil {
			m.mem.Reset()
		}
	}
	if err := m.charge(1); err != nil {
		return RuleResponse{Name: run.rule.Name, Type: ruleType(&run.rule.Rule), Status: StatusError, Message: err.Error()}
	}
	rr := run.evaluate(base, exceptions, in)
	if rr.Status == StatusError {
		// An error from the end of the context (a context loader's, say)
		// reads as the stop it is.
		_ = m.check()
	}
	if err := m.stopped(); err != nil {
		rr.Status, rr.Message = StatusError, err.Error()
		rr.Generated, rr.PodSecurityChecks, rr.Exception = nil, nil, ""
	}
	return rr
}

// meter is the meter of the call evaluating the rule.
func (run *ruleRun) meter() *meter { return run.m }

// step counts n steps of the rule and returns why it must stop, if it
// must.
func (run *ruleRun) step(n int64) error { return run.meter().charge(n) }

// conditions counts a condition block's conditions as steps, then checks
// it.
func (run *ruleRun) conditions(c *policy.Conditions) (bool, string, error) {
	if c != nil {
		if err := run.step(int64(len(c.All) + len(c.Any))); err != nil {
			return false, "", err
		}
	}
	return run.checkConditions(c)
}

// checkForEachDepth stops the rule when a foreach at depth (0 for a
// rule's own foreach) nests deeper than the limit.
func (run *ruleRun) checkForEachDepth(depth int) error {
	limit := run.e.limits.forEachDepth
	if depth < limit {
		return nil
	}
	return run.meter().failRule(limitError("foreach nested deeper than the limit of %d", limit))
}

// checkForEachList stops the rule when a foreach list is longer than the
// limit.
func (run *ruleRun) checkForEachList(expr string, n int) error {
	limit := run.e.limits.forEachElements
	if n <= limit {
		return nil
	}
	return run.meter().failRule(limitError("foreach list %s has %d elements, more than the limit of %d", expr, n, limit))
}
