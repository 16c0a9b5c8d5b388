package celeval

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/apiserver/pkg/cel/mutation"
	"k8s.io/apiserver/pkg/cel/mutation/dynamic"
)

// The expressions of a mutation (a MutatingPolicy's, as a
// MutatingAdmissionPolicy's) compile in the environment with the patch
// types: JSONPatch{op: ..., path: ..., value: ...}, and Object{...} with
// its field types named by path (Object.spec.template{...}), plus
// jsonpatch.escapeKey.

var (
	mutationOnce sync.Once
	mutationErr  error
	mutationEnvV *cel.Env
)

func mutationEnv() (*cel.Env, error) {
	mutationOnce.Do(func() {
		base, err := env()
		if err != nil {
			mutationErr = err
			return
		}
		mutationEnvV, mutationErr = base.Extend(
			common.ResolverEnvOption(&mutation.DynamicTypeResolver{}),
			library.JSONPatch(),
		)
		if mutationErr != nil {
			mutationErr = fmt.Errorf("celeval: building the mutation environment: %w", mutationErr)
		}
	})
	return mutationEnvV, mutationErr
}

var (
	jsonPatchType = types.NewObjectType("JSONPatch")
	objectType    = types.NewObjectType("Object")
)

// SetObject makes obj the object the evaluation's later expressions see
// (the result of a mutation, which the next mutation reads). Variables
// already computed keep their values, as the API server's do.
func (ev *Evaluation) SetObject(obj map[string]any) {
	ev.act.object = toVal(obj)
}

// PatchOperation is one RFC 6902 operation a JSONPatch expression gives:
// its value as JSON values (numbers as float64); HasValue tells a null
// value from none.
type PatchOperation struct {
	Op, Path, From string
	Value          any
	HasValue       bool
}

// JSONPatchOperations converts the value of a JSONPatch expression (a
// list of JSONPatch values) into RFC 6902 operations, in the API
// server's terms; a MutatingAdmissionPolicy's, which the API server's
// own CEL library evaluates, converts here too.
func JSONPatchOperations(val ref.Val) ([]PatchOperation, error) {
	list, ok := val.(traits.Lister)
	if !ok {
		return nil, fmt.Errorf("type mismatch: JSONPatchType.expression should evaluate to array")
	}
	var ops []PatchOperation
	for it := list.Iterator(); it.HasNext() == types.True; {
		native, err := it.Next().ConvertToNative(reflect.TypeFor[*mutation.JSONPatchVal]())
		if err != nil {
			return nil, fmt.Errorf("type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch: %w", err)
		}
		jp, ok := native.(*mutation.JSONPatchVal)
		if !ok {
			return nil, fmt.Errorf("type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of %T", native)
		}
		o := PatchOperation{Op: jp.Op, Path: jp.Path, From: jp.From}
		if jp.Val != nil {
			v, err := patchValue(jp.Val)
			if err != nil {
				return nil, fmt.Errorf("JSONPath valueExpression evaluated to a type that could not marshal to JSON: %w", err)
			}
			o.Value, o.HasValue = v, true
		}
		ops = append(ops, o)
	}
	return ops, nil
}

// ApplyConfigurationOf converts the value of an ApplyConfiguration
// expression (an Object whose type names follow its field path) into
// the apply configuration it builds, as JSON values.
func ApplyConfigurationOf(val ref.Val) (map[string]any, error) {
	obj, ok := val.(*dynamic.ObjectVal)
	if !ok {
		return nil, fmt.Errorf("unsupported return type from ApplyConfiguration expression: %v", val.Type())
	}
	if err := obj.CheckTypeNamesMatchFieldPathNames(); err != nil {
		return nil, fmt.Errorf("type mismatch: %w", err)
	}
	v, err := patchValue(obj)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("invalid return type: %T", v)
	}
	return m, nil
}

// patchValue converts the value of a patch into JSON values (numbers
// as float64). Objects are converted through their fields, at any depth
// (a list of Object.spec.containers{...}).
func patchValue(v ref.Val) (any, error) {
	if obj, ok := v.(*dynamic.ObjectVal); ok {
		if err := obj.CheckTypeNamesMatchFieldPathNames(); err != nil {
			return nil, fmt.Errorf("type mismatch: %w", err)
		}
	}
	return toJSON(v, 0)
}

// maxPatchDepth bounds the nesting of a patch value.
const maxPatchDepth = 10000

func toJSON(x any, depth int) (any, error) {
	if depth > maxPatchDepth {
		return nil, fmt.Errorf("patch value nested deeper than %d", maxPatchDepth)
	}
	switch t := x.(type) {
	case nil, string, bool, float64:
		return t, nil
	case int64:
		return float64(t), nil
	case uint64:
		return float64(t), nil
	case int:
		return float64(t), nil
	case structpb.NullValue:
		return nil, nil
	case *dynamic.ObjectVal:
		native, err := t.ConvertToNative(reflect.TypeFor[map[string]any]())
		if err != nil {
			return nil, err
		}
		return toJSON(native, depth+1)
	case types.Null:
		return nil, nil
	case traits.Lister:
		out := []any{}
		for it := t.Iterator(); it.HasNext() == types.True; {
			e, err := toJSON(it.Next(), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case traits.Mapper:
		out := map[string]any{}
		for it := t.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.Value().(string)
			if !ok {
				return nil, fmt.Errorf("map key %v is of type %s, not string", k, k.Type().TypeName())
			}
			e, err := toJSON(t.Get(k), depth+1)
			if err != nil {
				return nil, err
			}
			out[ks] = e
		}
		return out, nil
	case ref.Val:
		return toJSON(t.Value(), depth+1)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			v, err := toJSON(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			v, err := toJSON(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case []ref.Val:
		out := make([]any, len(t))
		for i, e := range t {
			v, err := toJSON(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case map[ref.Val]ref.Val:
		out := make(map[string]any, len(t))
		for k, e := range t {
			ks, ok := k.Value().(string)
			if !ok {
				return nil, fmt.Errorf("map key %v is of type %s, not string", k, k.Type().TypeName())
			}
			v, err := toJSON(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[ks] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("a value of type %T has no JSON form", x)
}
