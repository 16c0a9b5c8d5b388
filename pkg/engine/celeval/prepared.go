package celeval

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// Prepared is an Input made ready for CEL once, to be shared by the
// evaluations of every policy on the same resource: its objects are
// converted into CEL values that keep what expressions read of them
// (see jsonMap), so that a field read by sixteen policies is converted
// once, not sixteen times. Results are those of an Input converted per
// evaluation.
//
// A Prepared is not safe for concurrent use (reading fills its cache),
// and the Input's maps must not change while it is used.
type Prepared struct {
	object, oldObject, request, params, namespace ref.Val
	context                                       Context
}

// Prepare converts in for the evaluations of its expressions.
func Prepare(in Input) *Prepared {
	return &Prepared{
		object:    toVal(in.Object),
		oldObject: toVal(in.OldObject),
		request:   toVal(in.Request),
		params:    toVal(in.Params),
		namespace: toVal(in.Namespace),
		context:   in.Context,
	}
}

// WithParams is p with params as the params variable (a validate.cel
// rule is evaluated once per params resource). It shares p's converted
// objects, and so p's lack of concurrency safety.
func (p *Prepared) WithParams(params map[string]any) *Prepared {
	out := *p
	out.params = toVal(params)
	return &out
}

// NewEvaluation prepares the evaluation of expressions on p, with
// variables (in order: a variable may read the ones before it) and a
// budget (Budget when 0).
func (p *Prepared) NewEvaluation(ctx context.Context, variables []Variable, budget int64) *Evaluation {
	if budget <= 0 {
		budget = Budget
	}
	ev := &Evaluation{ctx: ctx, remaining: budget}
	ev.vars = lazyVars{ev: ev, defs: variables}
	if n := len(variables); n <= len(ev.vars.store) {
		ev.vars.vals = ev.vars.store[:n]
	} else {
		ev.vars.vals = make([]ref.Val, n)
	}
	ev.act = activation{ctx: ctx, in: p, variables: &ev.vars}
	return ev
}

// lazyVars is the variables of an evaluation, a variable computed the
// first time an expression reads it and then kept. It is what
// k8s.io/apiserver's lazy.MapValue (which the API server's admission
// policies use) would be with a callback per variable, trait for trait
// and error for error, without building two maps and a closure per
// variable for every evaluation: the variables are the policy's slice,
// looked up by name (a policy has a handful), their values a slice.
// As with lazy.MapValue, a name given twice is the later variable's,
// iterated (and read) twice.
type lazyVars struct {
	ev   *Evaluation
	defs []Variable
	vals []ref.Val // vals[i] is defs[i]'s value, nil until read
	// store holds vals for the common few variables, saving an
	// allocation per evaluation.
	store [4]ref.Val
}

// variablesType is the type of variables, as lazy.MapValue makes it
// (the same name and traits).
var variablesType = types.NewObjectType("kyverno.variables", traits.IndexerType, traits.FieldTesterType, traits.IterableType)

var _ traits.Mapper = (*lazyVars)(nil)

// index is the position of the variable called name (the last one, as
// lazy.MapValue's later callback replaces the earlier), or -1.
func (m *lazyVars) index(name string) int {
	for i := len(m.defs) - 1; i >= 0; i-- {
		if m.defs[i].Name == name {
			return i
		}
	}
	return -1
}

// resolve is the value of the variable at i, evaluated on the first
// read; an error is the variable's value, and the error of whatever
// reads it.
func (m *lazyVars) resolve(i int) ref.Val {
	if v := m.vals[i]; v != nil {
		if v == evaluating {
			// A variable that reads itself, directly or through others
			// (variables is dyn, so no type check catches it): an error,
			// not a recursion without end.
			v = types.NewErr("variable %s refers to itself", m.defs[i].Name)
			m.vals[i] = v
		}
		return v
	}
	m.vals[i] = evaluating
	v, err := m.ev.Eval(m.defs[i].Program)
	if err != nil {
		v = types.WrapErr(err)
	}
	m.vals[i] = v
	return v
}

// evaluating marks a variable whose value is being computed.
var evaluating ref.Val = types.NewErr("variable being evaluated")

func (m *lazyVars) Find(key ref.Val) (ref.Val, bool) {
	n, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(n), true
	}
	name, ok := apiservercel.Unescape(string(n))
	if !ok {
		return nil, false
	}
	i := m.index(name)
	if i < 0 {
		return nil, false
	}
	return m.resolve(i), true
}

func (m *lazyVars) Contains(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if v != nil && types.IsUnknownOrError(v) {
		return v
	}
	return types.Bool(found)
}

func (m *lazyVars) Get(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if found {
		return v
	}
	return types.ValOrErr(key, "no such key: %v", key)
}

func (m *lazyVars) Iterator() traits.Iterator { return &varsIterator{parent: m} }

// Size is the number of names.
func (m *lazyVars) Size() ref.Val {
	n := 0
	for i := range m.defs {
		if m.index(m.defs[i].Name) == i {
			n++
		}
	}
	return types.Int(n)
}

func (m *lazyVars) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return nil, fmt.Errorf("disallowed conversion from %q to %q", variablesType.TypeName(), typeDesc.Name())
}

func (m *lazyVars) ConvertToType(typeVal ref.Type) ref.Val {
	switch typeVal {
	case variablesType:
		return m
	case types.TypeType:
		return variablesType
	}
	return types.NewErr("disallowed conversion from %q to %q", variablesType.TypeName(), typeVal.TypeName())
}

// Equal is identity.
func (m *lazyVars) Equal(other ref.Val) ref.Val {
	o, ok := other.(*lazyVars)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(m == o)
}

func (m *lazyVars) Type() ref.Type { return variablesType }
func (m *lazyVars) Value() any     { return types.NoSuchOverloadErr() }

// varsIterator is lazy.MapValue's iterator: it yields the variables'
// values, not their names.
type varsIterator struct {
	parent *lazyVars
	index  int
}

func (it *varsIterator) HasNext() ref.Val { return types.Bool(it.index < len(it.parent.defs)) }

func (it *varsIterator) Next() ref.Val {
	v := it.parent.Get(types.String(it.parent.defs[it.index].Name))
	it.index++
	return v
}

func (it *varsIterator) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return nil, fmt.Errorf("disallowed conversion to %q", typeDesc.Name())
}

func (it *varsIterator) ConvertToType(typeValue ref.Type) ref.Val {
	return types.NewErr("disallowed conversion o %q", typeValue.TypeName())
}

func (it *varsIterator) Equal(other ref.Val) ref.Val {
	o, ok := other.(*varsIterator)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(o == it)
}

func (it *varsIterator) Type() ref.Type { return types.IteratorType }
func (it *varsIterator) Value() any     { return nil }

var errIteratorConversion = errors.New("type conversion on iterators not supported")
