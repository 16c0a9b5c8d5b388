package jmespath

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jmespath-community/go-jmespath/pkg/functions"
	"github.com/jmespath-community/go-jmespath/pkg/interpreter"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"

	"github.com/verdict-dev/verdict/pkg/engine/imageref"
)

const (
	// DefaultCacheSize is the number of compiled expressions an Interpreter
	// keeps unless WithCacheSize says otherwise.
	DefaultCacheSize = 4096
	// DefaultRegistry is the registry image_normalize adds to images that
	// name none, unless WithDefaultRegistry says otherwise.
	DefaultRegistry = imageref.DefaultRegistry
	// DefaultLookupTimeout bounds the DNS lookup of is_external_url unless
	// WithLookupTimeout says otherwise.
	DefaultLookupTimeout = 3 * time.Second
	// MaxExpressionLength is the longest expression Compile accepts, in
	// bytes. It keeps the recursive parser away from pathological input.
	MaxExpressionLength = 64 << 10
)

// Resolver resolves host names for is_external_url. *net.Resolver
// implements it.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

type options struct {
	now                     func() time.Time
	cacheSize               int
	defaultRegistry         string
	defaultRegistryMutation bool
	resolver                Resolver
	lookupTimeout           time.Duration
	stepLimit               int64
	memoryLimit             int64
}

func defaultOptions() *options {
	return &options{
		now:                     time.Now,
		cacheSize:               DefaultCacheSize,
		defaultRegistry:         DefaultRegistry,
		defaultRegistryMutation: true,
		resolver:                net.DefaultResolver,
		lookupTimeout:           DefaultLookupTimeout,
		stepLimit:               DefaultStepLimit,
		memoryLimit:             DefaultMemoryLimit,
	}
}

// Option configures an Interpreter.
type Option func(*options) error

// WithClock sets the clock used by time_now, time_now_utc and time_since.
// The default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return fmt.Errorf("%w: clock must not be nil", ErrInvalidOption)
		}
		o.now = now
		return nil
	}
}

// WithCacheSize bounds the number of compiled expressions kept by the
// Interpreter. Zero disables caching. The default is DefaultCacheSize.
func WithCacheSize(size int) Option {
	return func(o *options) error {
		if size < 0 {
			return fmt.Errorf("%w: cache size must not be negative, got %d", ErrInvalidOption, size)
		}
		o.cacheSize = size
		return nil
	}
}

// WithDefaultRegistry sets the registry image_normalize adds to images that
// name none (Kyverno's defaultRegistry setting). The default is
// DefaultRegistry.
func WithDefaultRegistry(registry string) Option {
	return func(o *options) error {
		if !imageref.ValidRegistry(registry) {
			return fmt.Errorf("%w: invalid default registry %q", ErrInvalidOption, registry)
		}
		o.defaultRegistry = registry
		return nil
	}
}

// WithDefaultRegistryMutation says whether image_normalize keeps the default
// registry it added to an image (Kyverno's enableDefaultRegistryMutation
// setting). The default is true.
func WithDefaultRegistryMutation(enabled bool) Option {
	return func(o *options) error {
		o.defaultRegistryMutation = enabled
		return nil
	}
}

// WithResolver sets the resolver is_external_url uses for host names. The
// default is net.DefaultResolver.
func WithResolver(r Resolver) Option {
	return func(o *options) error {
		if r == nil {
			return fmt.Errorf("%w: resolver must not be nil", ErrInvalidOption)
		}
		o.resolver = r
		return nil
	}
}

// WithLookupTimeout bounds each DNS lookup made by is_external_url. The
// default is DefaultLookupTimeout.
func WithLookupTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: lookup timeout must be positive, got %s", ErrInvalidOption, d)
		}
		o.lookupTimeout = d
		return nil
	}
}

// WithStepLimit bounds the work of each search (see DefaultStepLimit for
// what a step is); a search that needs more fails with ErrStepLimit. The
// default is DefaultStepLimit.
func WithStepLimit(steps int64) Option {
	return func(o *options) error {
		if steps <= 0 {
			return fmt.Errorf("%w: step limit must be positive, got %d", ErrInvalidOption, steps)
		}
		o.stepLimit = steps
		return nil
	}
}

// WithMemoryLimit bounds the memory each search may allocate through
// function calls (see Budget); a search that needs more fails with
// ErrMemoryLimit. SearchBudget takes a budget shared by several searches
// instead. The default is DefaultMemoryLimit.
func WithMemoryLimit(bytes int64) Option {
	return func(o *options) error {
		if bytes <= 0 {
			return fmt.Errorf("%w: memory limit must be positive, got %d", ErrInvalidOption, bytes)
		}
		o.memoryLimit = bytes
		return nil
	}
}

// Interpreter compiles and evaluates JMESPath expressions with Kyverno's
// custom functions. It is safe for concurrent use.
type Interpreter struct {
	caller      interpreter.FunctionCaller
	cache       *lru
	stepLimit   int64
	memoryLimit int64
}

// New returns an Interpreter configured by opts.
func New(opts ...Option) (*Interpreter, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	var entries []functions.FunctionEntry
	entries = append(entries, functions.GetDefaultFunctions()...)
	// Custom functions come last so that they replace standard functions
	// of the same name, as in Kyverno.
	entries = append(entries, customFunctions(o)...)
	return &Interpreter{
		caller:      wrappingCaller{inner: interpreter.NewFunctionCaller(entries...)},
		cache:       newLRU(o.cacheSize),
		stepLimit:   o.stepLimit,
		memoryLimit: o.memoryLimit,
	}, nil
}

// Query is a compiled expression. It is safe for concurrent use.
type Query interface {
	// Search evaluates the expression against data.
	Search(data any) (any, error)
	// SearchContext evaluates the expression against data and stops,
	// with an error wrapping ctx.Err(), when ctx ends: before it starts,
	// and while it iterates lists inside per-element evaluations.
	SearchContext(ctx context.Context, data any) (any, error)
	// SearchBudget is SearchContext charging the memory its function
	// calls allocate to b, which the caller may share between searches
	// (one goroutine at a time); a nil b is a budget of the
	// interpreter's memory limit for this search alone.
	SearchBudget(ctx context.Context, data any, b *Budget) (any, error)
}

// Compile parses expr once; results are cached in the interpreter.
func (i *Interpreter) Compile(expr string) (Query, error) {
	if q, ok := i.cache.get(expr); ok {
		return q, nil
	}
	// A clone, before the parse whose tree refers to it: expr may be a
	// slice of a request's body (a substituted value), which the cache
	// must not keep alive.
	expr = strings.Clone(expr)
	node, err := parse(expr)
	if err != nil {
		return nil, err
	}
	q := &query{expr: expr, node: node, caller: i.caller, hasExpRef: containsExpRef(node), calls: containsCall(node), stepLimit: i.stepLimit, memoryLimit: i.memoryLimit}
	q.node, q.metered = instrument(node, false)
	if !q.metered && !q.hasExpRef {
		q.direct = compileDirect(q.node)
	}
	i.cache.add(expr, q)
	return q, nil
}

// Search compiles expr (or takes it from the cache) and evaluates it against
// data.
func (i *Interpreter) Search(expr string, data any) (any, error) {
	q, err := i.Compile(expr)
	if err != nil {
		return nil, err
	}
	return q.Search(data)
}

// FunctionNames lists every custom function, sorted, for docs and policy
// validation. Standard JMESPath functions are not included.
func FunctionNames() []string {
	entries := customFunctions(defaultOptions())
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name)
	}
	sort.Strings(names)
	return names
}

// Check parses expr and returns the error Compile would return for it,
// without an Interpreter: for validating policies, where nothing is
// evaluated. It keeps nothing.
func Check(expr string) error {
	_, err := parse(expr)
	return err
}

// parse reads and checks an expression of at most MaxExpressionLength
// bytes.
func parse(expr string) (node parsing.ASTNode, err error) {
	if len(expr) > MaxExpressionLength {
		return parsing.ASTNode{}, fmt.Errorf("%w: expression is %d bytes long, the limit is %d", ErrInvalidExpression, len(expr), MaxExpressionLength)
	}
	// The library's lexer panics on some invalid input (an unquoted
	// identifier followed by U+0080): report it as the syntax error it is.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: parser failure: %v", ErrInvalidExpression, r)
		}
	}()
	node, err = parsing.NewParser().Parse(expr)
	if err != nil {
		return parsing.ASTNode{}, fmt.Errorf("%w: %w", ErrInvalidExpression, err)
	}
	if err := validateAST(node); err != nil {
		return parsing.ASTNode{}, err
	}
	return node, nil
}

type query struct {
	expr   string
	node   parsing.ASTNode
	caller interpreter.FunctionCaller
	// hasExpRef is set when the expression holds an expression reference
	// (&expr). Misused outside a function such as sort_by, a reference
	// evaluates to a Go function; results of such queries are checked.
	hasExpRef bool
	// metered is set when the expression can do more work than its input
	// holds: its searches count steps (see instrument).
	metered bool
	// calls is set when the expression calls a function: its searches
	// count steps and charge memory.
	calls       bool
	stepLimit   int64
	memoryLimit int64
	// direct evaluates the expression without the interpreter, when it is
	// made only of nodes compileDirect handles (see fast.go).
	direct directEval
}

// Search evaluates the compiled expression against data, with no
// context to end it (the step limit still applies).
func (q *query) Search(data any) (any, error) {
	return q.search(context.Background(), data, nil)
}

// SearchContext evaluates the compiled expression against data, until ctx
// ends.
func (q *query) SearchContext(ctx context.Context, data any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrEvaluation, q.expr, err)
	}
	return q.search(ctx, data, nil)
}

// SearchBudget evaluates the compiled expression against data, until ctx
// ends, its function calls charging b.
func (q *query) SearchBudget(ctx context.Context, data any, b *Budget) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrEvaluation, q.expr, err)
	}
	return q.search(ctx, data, b)
}

func (q *query) search(ctx context.Context, data any, b *Budget) (result any, err error) {
	if q.direct != nil {
		if v, ok := q.direct(data); ok {
			return v, nil
		}
	}
	defer func() {
		if r := recover(); r != nil {
			result = nil
			err = fmt.Errorf("%w: %q: %w: %v", ErrEvaluation, q.expr, errPanic, r)
		}
	}()
	caller := q.caller
	var m *meter
	if q.metered || q.calls {
		m = &meter{inner: q.caller, ctx: ctx, limit: q.stepLimit, mem: b, countCalls: q.metered}
		if b == nil {
			m.own.limit = q.memoryLimit
			m.mem = &m.own
		}
		caller = m
	}
	result, err = interpreter.NewInterpreter(data, caller, nil).Execute(q.node, data)
	if m != nil && m.err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrEvaluation, q.expr, m.err)
	}
	if err != nil {
		if errors.Is(err, ErrEvaluation) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %q: %w", ErrEvaluation, q.expr, err)
	}
	if q.hasExpRef && !isJSONValue(result) {
		return nil, fmt.Errorf("%w: %q: an expression reference is not a value", ErrEvaluation, q.expr)
	}
	return result, nil
}

func containsCall(node parsing.ASTNode) bool {
	if node.NodeType == parsing.ASTFunctionExpression {
		return true
	}
	for _, child := range node.Children {
		if containsCall(child) {
			return true
		}
	}
	return false
}

func containsExpRef(node parsing.ASTNode) bool {
	if node.NodeType == parsing.ASTExpRef {
		return true
	}
	for _, child := range node.Children {
		if containsExpRef(child) {
			return true
		}
	}
	return false
}

// isJSONValue reports whether v is made of JSON-compatible values only.
func isJSONValue(v any) bool {
	switch t := v.(type) {
	case nil, string, float64, bool:
		return true
	case []any:
		for _, e := range t {
			if !isJSONValue(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range t {
			if !isJSONValue(e) {
				return false
			}
		}
		return true
	default:
		return false
	}
}

// wrappingCaller marks every error raised by a function call with
// ErrFunction, including the arity and type errors of the library, and
// enforces MaxStringLength.
type wrappingCaller struct {
	inner interpreter.FunctionCaller
}

func (c wrappingCaller) CallFunction(name string, args []any) (any, error) {
	if guard, ok := preCallGuards[name]; ok {
		if err := guard(args); err != nil {
			return nil, fnWrap(name, err)
		}
	}
	v, err := c.inner.CallFunction(name, args)
	if err != nil {
		if errors.Is(err, ErrFunction) {
			return nil, err
		}
		return nil, fnWrap(name, err)
	}
	if s, ok := v.(string); ok && len(s) > maxStringLength {
		return nil, errTooLong(name)
	}
	return v, nil
}

// callable are the custom functions Call runs, by name.
var callable = sync.OnceValue(func() map[string]functions.FunctionEntry {
	m := map[string]functions.FunctionEntry{}
	for _, e := range customFunctions(defaultOptions()) {
		m[e.Name] = e
	}
	return m
})

// Call runs the custom function name on JSON values (strings, float64
// numbers, bool, nil, []any, map[string]any) outside a search, with its
// own bounds: for the CEL libraries whose functions share its semantics
// (random, x509_decode, ...), so that each behaviour has one
// implementation. Arguments are not type-checked beyond what the
// function checks itself.
func Call(name string, args ...any) (any, error) {
	e, ok := callable()[name]
	if !ok {
		return nil, fmt.Errorf("%w: no function %s", ErrInvalidExpression, name)
	}
	return e.Handler(args)
}

// Signature is one custom function as `verdict jp function` lists it.
type Signature struct {
	Name string
	// Arguments are the accepted types of each argument ("string",
	// "string|number"), "?" after an optional one, "..." after the last
	// of a variadic function.
	Arguments []string
}

// String is the signature as written: name(type, type?, type...).
func (s Signature) String() string {
	return s.Name + "(" + strings.Join(s.Arguments, ", ") + ")"
}

// Signatures lists the custom functions with their argument types, by
// name.
func Signatures() []Signature {
	entries := customFunctions(defaultOptions())
	out := make([]Signature, 0, len(entries))
	for _, e := range entries {
		sig := Signature{Name: e.Name}
		for _, a := range e.Arguments {
			types := make([]string, len(a.Types))
			for i, t := range a.Types {
				types[i] = string(t)
			}
			arg := strings.Join(types, "|")
			switch {
			case a.Variadic:
				arg += "..."
			case a.Optional:
				arg += "?"
			}
			sig.Arguments = append(sig.Arguments, arg)
		}
		out = append(out, sig)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// AST is the parse tree of expr, one node per line, as `verdict jp parse`
// prints it; a syntax error is Compile's.
func AST(expr string) (string, error) {
	node, err := parse(expr)
	if err != nil {
		return "", err
	}
	return node.PrettyPrint(0), nil
}
