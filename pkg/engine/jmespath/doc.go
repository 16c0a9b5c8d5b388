// Package jmespath evaluates JMESPath expressions as written in Kyverno
// policies.
//
// It builds on github.com/jmespath-community/go-jmespath, keeps every
// standard JMESPath function available and adds Kyverno's custom functions
// (string helpers, arithmetic on numbers, Kubernetes quantities and
// durations, semver ranges, time helpers, image normalisation, x509
// decoding and more; see FunctionNames for the full list). Where a custom
// function has the same name as a standard one (items, replace, split, sum,
// trim) the custom one wins, as it does in Kyverno.
//
// Documents are JSON-compatible Go values: map[string]any, []any, string,
// float64, bool and nil. Custom functions only accept and return values of
// these types.
//
// An Interpreter is safe for concurrent use. Compiled queries are cached in
// a bounded LRU cache keyed by the expression text.
//
// A key missing from the document evaluates to null, as in standard
// JMESPath; use "a.b || 'default'" for defaults.
//
// Expressions come from policy authors and documents from API clients, so
// evaluation is bounded: expressions are at most MaxExpressionLength bytes,
// no function returns a string longer than MaxStringLength, the memory
// function calls allocate is charged to a budget (WithMemoryLimit per
// search, or a Budget shared by searches with SearchBudget), random() output
// and work are capped, a wildcard match counts the work wildcard.Cost
// bounds, a search stops after its step limit (WithStepLimit,
// counting the lists iterated inside projections, filters and expression
// references, and function arguments) and, with SearchContext, when its
// context ends, and a panic in the underlying library is returned as an
// error.
//
// Errors wrap sentinels so callers can classify them with errors.Is:
// ErrInvalidExpression for expressions that do not parse, ErrEvaluation for
// every failure while searching and, in addition, ErrFunction when a
// function call failed (wrong arity, wrong argument types, invalid argument
// values), ErrStepLimit when the search did too much work, ErrMemoryLimit
// when its function calls would allocate more than its budget, or the
// context's error when its context ended.
package jmespath
