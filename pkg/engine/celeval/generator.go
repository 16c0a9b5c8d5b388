package celeval

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// The expressions of a GeneratingPolicy compile in an environment with
// Kyverno's generator library (github.com/kyverno/sdk,
// extensions/cel/libs/generator):
//
//	generator.Apply(namespace, list)   a GeneratingPolicy's
//	generator.Apply(list)              a NamespacedGeneratingPolicy's: into
//	                                   the policy's own namespace
//
// (also generator.apply). list holds objects, or List objects (maps with
// items) whose items are the objects; the call hands them to the
// Context, which must implement Generator, and is true. A cluster-wide
// policy cannot use the one-argument form, nor a namespaced one the
// other: the expression does not compile.

// VarGenerator is the generator library's variable.
const VarGenerator = "generator"

var generatorType = cel.ObjectType("kyverno.generator")

// Generator receives the resources generator.Apply generates. A Context
// that does not implement it makes every call an error.
type Generator interface {
	// Generate takes the objects of one call, as JSON values, into
	// namespace; own is set for the one-argument form, whose namespace is
	// the policy's.
	Generate(namespace string, own bool, objects []map[string]any) error
}

var generatorEnvs [2]struct {
	once sync.Once
	env  *cel.Env
	err  error
}

// generatorEnv is the environment of a GeneratingPolicy (namespaced: of
// a NamespacedGeneratingPolicy).
func generatorEnv(namespaced bool) (*cel.Env, error) {
	i := 0
	if namespaced {
		i = 1
	}
	g := &generatorEnvs[i]
	g.once.Do(func() {
		base, err := env()
		if err != nil {
			g.err = err
			return
		}
		objects := cel.ListType(cel.MapType(cel.StringType, cel.DynType))
		overloads := func(suffix string) cel.EnvOption {
			name := "Apply"
			if suffix == "camel" {
				name = "apply"
			}
			if namespaced {
				return cel.Function(name, cel.MemberOverload("generator_apply_list_"+suffix, []*cel.Type{generatorType, objects}, cel.BoolType,
					cel.BinaryBinding(func(g, list ref.Val) ref.Val { return generate(g, nil, list) })))
			}
			return cel.Function(name, cel.MemberOverload("generator_apply_string_list_"+suffix, []*cel.Type{generatorType, cel.StringType, objects}, cel.BoolType,
				cel.FunctionBinding(func(a ...ref.Val) ref.Val { return generate(a[0], a[1], a[2]) })))
		}
		g.env, g.err = base.Extend(cel.Variable(VarGenerator, generatorType), overloads("pascal"), overloads("camel"))
		if g.err != nil {
			g.err = fmt.Errorf("celeval: building the generator environment: %w", g.err)
		}
	})
	return g.env, g.err
}

// CompileGenerating compiles an expression of a GeneratingPolicy
// (namespaced: of a NamespacedGeneratingPolicy), which must evaluate to
// want, as Compile does.
func CompileGenerating(expr string, want Result, namespaced bool) (*Program, error) {
	return compileIn(func() (*cel.Env, error) { return generatorEnv(namespaced) }, expr, want)
}

// generate is generator.Apply: namespaceV is nil for the one-argument
// form.
func generate(cv, namespaceV, listV ref.Val) ref.Val {
	c, bad := contextOf(cv)
	if bad != nil {
		return bad
	}
	g, ok := c.c.(Generator)
	if !ok {
		return types.WrapErr(fmt.Errorf("%s: %w", generatorType.TypeName(), ErrNoContext))
	}
	namespace, own := "", namespaceV == nil
	if !own {
		if namespace, bad = stringArg(namespaceV); bad != nil {
			return bad
		}
	}
	list, bad := jsonOf(listV)
	if bad != nil {
		return bad
	}
	items, _ := list.([]any)
	objects := make([]map[string]any, len(items))
	for i, it := range items {
		m, isMap := it.(map[string]any)
		if !isMap {
			return types.NewErr("failed to generate resources: item %d is not an object", i)
		}
		objects[i] = m
	}
	if err := g.Generate(namespace, own, objects); err != nil {
		return types.NewErr("failed to generate resources: %v", err)
	}
	return types.True
}

// JSON evaluates p into JSON values (numbers are float64), as an object
// of a template takes them.
func (ev *Evaluation) JSON(p *Program) (any, error) {
	val, err := ev.Eval(p)
	if err != nil {
		return nil, err
	}
	if val == types.NullValue {
		return nil, nil
	}
	out, bad := jsonOf(val)
	if bad != nil {
		return nil, &EvalError{Expression: p.Expression, Err: fmt.Errorf("%v", bad)}
	}
	return out, nil
}

// Text evaluates p into the text of a scalar (a string, a bool or a
// number) as a template writes it into a string; scalar is false, with
// typeName naming what it is, for anything else (null included).
func (ev *Evaluation) Text(p *Program) (text string, scalar bool, typeName string, err error) {
	val, err := ev.Eval(p)
	if err != nil {
		return "", false, "", err
	}
	switch v := val.(type) {
	case types.String:
		return string(v), true, "", nil
	case types.Bool:
		return strconv.FormatBool(bool(v)), true, "", nil
	case types.Int:
		return strconv.FormatInt(int64(v), 10), true, "", nil
	case types.Uint:
		return strconv.FormatUint(uint64(v), 10), true, "", nil
	case types.Double:
		return fmt.Sprint(float64(v)), true, "", nil
	}
	return "", false, val.Type().TypeName(), nil
}
