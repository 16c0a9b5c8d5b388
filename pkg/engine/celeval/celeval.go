// Package celeval compiles and evaluates the CEL expressions of policies:
// validate.cel and celPreconditions of a ClusterPolicy rule, and the
// expressions of the policies.kyverno.io kinds.
//
// The environment is Kubernetes' own (k8s.io/apiserver's base
// environment: the standard CEL library with optional types, strings,
// sets, lists and two-variable comprehensions, and the Kubernetes
// libraries for lists, regular expressions, URLs, quantities, IP
// addresses and CIDRs, formats, semantic versions and authorization),
// with the variables of an admission expression (object, oldObject,
// request, params, namespaceObject, variables) and Kyverno's functions
// (kyverno.go). It is built once per process; a policy's
// expressions are compiled once, when the policy is, into Programs.
//
// Every evaluation is bounded: a Program stops at Kubernetes' per-call
// cost limit (about a tenth of a second of work), an Evaluation at the
// per-policy budget (about a second), and both at the context's end.
// Hitting a bound is an error naming it, never a stalled request.
package celeval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The variables an expression sees.
const (
	VarObject          = "object"
	VarOldObject       = "oldObject"
	VarRequest         = "request"
	VarParams          = "params"
	VarNamespaceObject = "namespaceObject"
	VarVariables       = "variables"
	// VarExceptions holds what partial PolicyExceptions allow
	// (allowedImages, allowedValues).
	VarExceptions = "exceptions"
)

// Bounds of evaluation, Kubernetes' (k8s.io/apiserver/pkg/apis/cel).
const (
	// PerCallLimit is the cost one evaluation of one expression may
	// reach.
	PerCallLimit = celconfig.PerCallLimit
	// Budget is the cost all the expressions of one policy (or rule)
	// may reach for one resource.
	Budget = celconfig.RuntimeCELCostBudget
	// maxMessageBytes bounds a message built by a messageExpression.
	maxMessageBytes = celconfig.MaxEvaluatedMessageExpressionSizeBytes
)

// ErrCompile marks an expression that does not compile; ErrBudget an
// evaluation stopped by a cost bound.
var (
	ErrCompile = errors.New("CEL compilation failed")
	ErrBudget  = errors.New("CEL cost budget exceeded")
)

// Result is the type an expression must evaluate to.
type Result int

const (
	// Any value.
	Any Result = iota
	// Bool: validations and conditions.
	Bool
	// String: messageExpression.
	String
	// StringOrNull: audit annotation values.
	StringOrNull
	// JSONPatchList: a JSONPatch mutation, a list of JSONPatch values
	// (compiled with the patch types).
	JSONPatchList
	// ApplyConfigurationObject: an ApplyConfiguration mutation, an
	// Object (compiled with the patch types).
	ApplyConfigurationObject
)

var (
	envOnce sync.Once
	envErr  error
	baseEnv *cel.Env
)

// env is the one environment every expression compiles in.
func env() (*cel.Env, error) {
	envOnce.Do(func() {
		set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
			IntroducedVersion: version.MajorMinor(1, 0),
			EnvOptions: append([]cel.EnvOption{
				cel.Variable(VarObject, cel.DynType),
				cel.Variable(VarOldObject, cel.DynType),
				cel.Variable(VarRequest, cel.DynType),
				cel.Variable(VarParams, cel.DynType),
				cel.Variable(VarNamespaceObject, cel.DynType),
				cel.Variable(VarVariables, cel.DynType),
				cel.Variable(VarExceptions, cel.DynType),
			}, append(append(kyvernoEnv(), libsEnv()...), resourceEnv()...)...),
		})
		if err != nil {
			envErr = fmt.Errorf("celeval: building the CEL environment: %w", err)
			return
		}
		// Stored expressions: every library, whatever version introduced
		// it (a policy is not refused for a function the API server of
		// the day lacks).
		baseEnv, envErr = set.Env(environment.StoredExpressions)
	})
	return baseEnv, envErr
}

// Program is one compiled expression.
type Program struct {
	// Expression is the source, as written.
	Expression string
	prog       cel.Program
}

// Compile compiles expr, which must evaluate to want. The error wraps
// ErrCompile and says what is wrong, in CEL's words.
func Compile(expr string, want Result) (*Program, error) {
	envOf := env
	if want == JSONPatchList || want == ApplyConfigurationObject {
		envOf = mutationEnv
	}
	return compileIn(envOf, expr, want)
}

// compileIn compiles expr in the environment envOf builds.
func compileIn(envOf func() (*cel.Env, error), expr string, want Result) (*Program, error) {
	e, err := envOf()
	if err != nil {
		return nil, err
	}
	ast, issues := e.Compile(expr)
	if issues != nil && issues.Err() != nil {
		return nil, fmt.Errorf("%w: %s", ErrCompile, strings.TrimSpace(issues.String()))
	}
	out := ast.OutputType()
	ok := true
	switch want {
	case Bool:
		ok = out.IsExactType(cel.BoolType) || out.IsExactType(cel.DynType)
	case String:
		ok = out.IsExactType(cel.StringType) || out.IsExactType(cel.DynType)
	case StringOrNull:
		ok = out.IsExactType(cel.StringType) || out.IsExactType(cel.NullType) || out.IsExactType(cel.DynType)
	case JSONPatchList:
		ok = out.IsExactType(cel.ListType(jsonPatchType)) || out.IsExactType(cel.ListType(cel.DynType)) || out.IsExactType(cel.DynType)
	case ApplyConfigurationObject:
		ok = out.IsExactType(objectType) || out.IsExactType(cel.DynType)
	}
	if !ok {
		return nil, fmt.Errorf("%w: must evaluate to %s but got %s", ErrCompile, want, out)
	}
	prog, err := e.Program(ast, cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCompile, err)
	}
	return &Program{Expression: expr, prog: prog}, nil
}

func (r Result) String() string {
	switch r {
	case Bool:
		return "bool"
	case String:
		return "string"
	case StringOrNull:
		return "string or null"
	case JSONPatchList:
		return "list(JSONPatch)"
	case ApplyConfigurationObject:
		return "Object"
	}
	return "any"
}

// Variable is a named, compiled expression whose value is computed the
// first time an expression reads variables.<Name>.
type Variable struct {
	Name    string
	Program *Program
}

// Input is what the expressions of one evaluation see: the objects as
// the engine holds them (JSON values: map[string]any, []any, string,
// float64, bool, nil). A nil map is CEL's null.
type Input struct {
	Object, OldObject map[string]any
	Request           map[string]any
	Params            map[string]any
	Namespace         map[string]any
	// Context serves the Kyverno functions that read outside the request
	// (http, globalContext, resource, image metadata); nil: they fail.
	Context Context
}

// Evaluation evaluates the expressions of one policy (or rule) against
// one input, sharing the variables' values and the cost budget.
type Evaluation struct {
	ctx       context.Context
	act       activation
	vars      lazyVars
	remaining int64
	err       error // the first budget error: every later evaluation fails with it
}

// NewEvaluation prepares the evaluation of in's expressions, with
// variables (in order: a variable may read the ones before it) and a
// budget (Budget when 0). Evaluations on the same resource should share
// one Prepared instead (Prepare, Prepared.NewEvaluation).
func NewEvaluation(ctx context.Context, in Input, variables []Variable, budget int64) *Evaluation {
	return Prepare(in).NewEvaluation(ctx, variables, budget)
}

// Eval evaluates p. The error says which expression failed and why, as
// the API server's admission policies say it ("expression '...' resulted
// in error: ..."); a cost bound wraps ErrBudget.
func (ev *Evaluation) Eval(p *Program) (ref.Val, error) {
	if ev.err != nil {
		return nil, ev.err
	}
	if err := ev.ctx.Err(); err != nil {
		return nil, fmt.Errorf("expression '%s' not evaluated: %w", p.Expression, err)
	}
	val, details, err := p.prog.ContextEval(ev.ctx, &ev.act)
	if details != nil {
		if cost := details.ActualCost(); cost != nil {
			if *cost > math.MaxInt64 || int64(*cost) > ev.remaining {
				ev.err = fmt.Errorf("%w: validation failed due to running out of cost budget, no further validation rules will be run", ErrBudget)
				return nil, ev.err
			}
			ev.remaining -= int64(*cost)
		}
	}
	if err != nil {
		if cancelled := (interpreter.EvalCancelledError{}); errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
			return nil, fmt.Errorf("%w: expression '%s' exceeded the cost limit of one evaluation (%d)", ErrBudget, p.Expression, PerCallLimit)
		}
		if errors.Is(err, ErrBudget) {
			return nil, err
		}
		return nil, &EvalError{Expression: p.Expression, Err: err}
	}
	return val, nil
}

// EvalError is an expression that ended in an error. Its message is the
// API server's ("expression '...' resulted in error: ..."); Err is CEL's
// own error, which Kyverno's CEL policy kinds report as it is.
type EvalError struct {
	Expression string
	Err        error
}

func (e *EvalError) Error() string {
	return fmt.Sprintf("expression '%s' resulted in error: %v", e.Expression, e.Err)
}

func (e *EvalError) Unwrap() error { return e.Err }

// Cause is CEL's own error behind err (an *EvalError's Err), or err.
func Cause(err error) error {
	var ee *EvalError
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// SetExceptions gives the expressions what partial PolicyExceptions
// allow, as exceptions.allowedImages and exceptions.allowedValues.
func (ev *Evaluation) SetExceptions(images, values []string) {
	ev.act.exceptions = adapter.NativeToValue(map[string]any{"allowedImages": stringsToJSON(images), "allowedValues": stringsToJSON(values)})
}

// noExceptions is exceptions when no partial PolicyException applies.
var noExceptions = adapter.NativeToValue(map[string]any{"allowedImages": []any{}, "allowedValues": []any{}})

func stringsToJSON(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Bool evaluates a Bool program: true, false, or an error.
func (ev *Evaluation) Bool(p *Program) (bool, error) {
	val, err := ev.Eval(p)
	if err != nil {
		return false, err
	}
	b, ok := val.(types.Bool)
	if !ok {
		return false, fmt.Errorf("expression '%s' resulted in %s, not a bool", p.Expression, val.Type().TypeName())
	}
	return bool(b), nil
}

// Message evaluates a messageExpression as the API server does: its
// trimmed string, or "" when it fails, is not a string, spans lines or
// is longer than 5 KiB (the caller falls back to the static message).
func (ev *Evaluation) Message(p *Program) string {
	val, err := ev.Eval(p)
	if err != nil {
		return ""
	}
	s, ok := val.Value().(string)
	if !ok {
		return ""
	}
	s = strings.TrimSpace(s)
	if len(s) > maxMessageBytes || strings.Contains(s, "\n") {
		return ""
	}
	return s
}

// activation holds the variables of an evaluation.
type activation struct {
	ctx context.Context
	in  *Prepared
	// object, when set, is the object in place of in's (SetObject).
	object     ref.Val
	exceptions ref.Val
	// variables is the Evaluation's lazyVars (a test puts the API
	// server's lazy.MapValue in its place, to compare them).
	variables ref.Val
	// images, attestors, attestations and imageFuncs are an
	// ImageValidatingPolicy's (SetImages).
	images, attestors, attestations ref.Val
	imageFuncs                      ImageFunctions
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case VarObject:
		if a.object != nil {
			return a.object, true
		}
		return a.in.object, true
	case VarOldObject:
		return a.in.oldObject, true
	case VarRequest:
		return a.in.request, true
	case VarParams:
		return a.in.params, true
	case VarNamespaceObject:
		return a.in.namespace, true
	case VarVariables:
		return a.variables, true
	case VarHTTP:
		return ctxVal{a.ctx, a.in.context, httpType}, true
	case VarGlobalContext:
		return ctxVal{a.ctx, a.in.context, gctxType}, true
	case VarResource:
		return ctxVal{a.ctx, a.in.context, resourceType}, true
	case VarImageData:
		return ctxVal{a.ctx, a.in.context, imageCtxType}, true
	case VarTime:
		return ctxVal{a.ctx, a.in.context, timeCtxType}, true
	case VarGenerator:
		return ctxVal{a.ctx, a.in.context, generatorType}, true
	case VarImages:
		return orEmpty(a.images), true
	case VarAttestors:
		return orEmpty(a.attestors), true
	case VarAttestations:
		return orEmpty(a.attestations), true
	case varImageFuncs:
		return imageFuncsVal{ctx: a.ctx, f: a.imageFuncs}, true
	case VarJSON:
		// The json and yaml libraries read no Context.
		return ctxVal{t: jsonType}, true
	case VarYAML:
		return ctxVal{t: yamlType}, true
	case VarExceptions:
		if a.exceptions == nil {
			return noExceptions, true
		}
		return a.exceptions, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

var emptyMap = adapter.NativeToValue(map[string]any{})

func orEmpty(v ref.Val) ref.Val {
	if v == nil {
		return emptyMap
	}
	return v
}
