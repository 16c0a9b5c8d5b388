package celeval

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apiserver/pkg/cel/lazy"
)

// celGoAdapter is jsonAdapter with cel-go's own wrappers, which convert
// an element on every read: what a Prepared input must not differ from.
type celGoAdapter struct{}

func (celGoAdapter) NativeToValue(value any) ref.Val {
	switch v := value.(type) {
	case map[string]any:
		return types.NewStringInterfaceMap(celGoAdapter{}, v)
	case []any:
		return types.NewDynamicList(celGoAdapter{}, v)
	case float64:
		if v == math.Trunc(v) && v >= minInt && v < maxInt {
			return types.Int(int64(v))
		}
		return types.Double(v)
	}
	return adapter.NativeToValue(value)
}

// referenceEvaluation evaluates in with cel-go's wrappers and the API
// server's lazy.MapValue for the variables, as celeval did before
// Prepared.
func referenceEvaluation(in Input, variables []Variable) *Evaluation {
	conv := func(m map[string]any) ref.Val {
		if m == nil {
			return types.NullValue
		}
		return celGoAdapter{}.NativeToValue(m)
	}
	ev := &Evaluation{ctx: context.Background(), remaining: Budget}
	vars := lazy.NewMapValue(types.NewObjectType("kyverno.variables"))
	ev.act = activation{
		in:        &Prepared{object: conv(in.Object), oldObject: conv(in.OldObject), request: conv(in.Request), params: conv(in.Params), namespace: conv(in.Namespace)},
		variables: vars,
	}
	for _, v := range variables {
		p := v.Program
		vars.Append(v.Name, func(*lazy.MapValue) ref.Val {
			val, err := ev.Eval(p)
			if err != nil {
				return types.WrapErr(err)
			}
			return val
		})
	}
	return ev
}

// render writes a value with its type, maps in key order.
func render(v ref.Val) string {
	switch x := v.(type) {
	case nil:
		return "<nil>"
	case *types.Err:
		return "error(" + x.Error() + ")"
	case *types.Optional:
		if !x.HasValue() {
			return "optional.none()"
		}
		return "optional(" + render(x.GetValue()) + ")"
	case traits.Mapper:
		var entries []string
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			entries = append(entries, render(k)+": "+render(x.Get(k)))
		}
		sort.Strings(entries)
		return fmt.Sprintf("%s{%s}", v.Type().TypeName(), strings.Join(entries, ", "))
	case traits.Lister:
		var elems []string
		for i := types.Int(0); i < x.Size().(types.Int); i++ {
			elems = append(elems, render(x.Get(i)))
		}
		return fmt.Sprintf("%s[%s]", v.Type().TypeName(), strings.Join(elems, ", "))
	}
	return fmt.Sprintf("%s(%v)", v.Type().TypeName(), v.Value())
}

// What expressions read of a Prepared input and of variables is what
// they read of cel-go's wrappers and the API server's lazy map: the
// same values, errors and costs, whether the Prepared input is new or
// shared by earlier evaluations (as the engine shares it between
// policies).
func TestPreparedMatchesCELGo(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web"}},
		"spec": map[string]any{
			"replicas": 3.0, "ratio": 0.5, "list": []any{3.0, 1.0, 2.0}, "names": []any{"a", "b"}, "big": 1e20, "nul": nil,
			"empty": []any{}, "emptyMap": map[string]any{}, "nested": map[string]any{"a": map[string]any{"b": map[string]any{"c": 7.0}}},
			"containers": []any{
				map[string]any{"name": "a", "image": "nginx:1", "ports": []any{map[string]any{"containerPort": 80.0}}},
				map[string]any{"name": "b", "securityContext": map[string]any{"privileged": true, "runAsUser": 0.0}, "ports": []any{map[string]any{"containerPort": 8080.0}}},
			},
		},
	}
	inputs := map[string]Input{
		"object":    {Object: obj, OldObject: map[string]any{"spec": map[string]any{"list": []any{}}}, Request: map[string]any{"operation": "CREATE", "userInfo": map[string]any{"groups": []any{"g"}}}},
		"no object": {OldObject: obj},
	}
	vars := []Variable{
		{Name: "names", Program: mustCompile(t, "object.spec.containers.map(c, c.name)", Any)},
		{Name: "count", Program: mustCompile(t, "size(variables.names)", Any)},
		{Name: "broken", Program: mustCompile(t, "object.spec.nothing", Any)},
		{Name: "opt", Program: mustCompile(t, "object.?spec.?replicas", Any)},
		{Name: "count", Program: mustCompile(t, "size(variables.names) + 100", Any)}, // a name given twice: the later one
	}
	exprs := []string{
		"object", "oldObject", "request", "params", "type(object.spec)", "type(object.spec.list)", "object.spec.replicas + 1", "string(object.spec.replicas)",
		"object.spec.ratio * 2.0", "object.spec.big", "object.spec.nul == null", "has(object.spec.nul)", "object.spec.nothing", "object.spec.list[1.0]",
		"object.spec.list[-1]", "object.spec.list['a']", "object.spec.list[?7]", "object.spec.?list[?0]", "size(object.spec)", "object.spec.list.size()",
		"object.spec.list.all(x, x > 0)", "object.spec.list.map(x, x * 2)", "object.spec.list.filter(x, x > 1)", "object.spec.list.exists_one(x, x == 3)",
		// (Two-variable comprehensions over numbers are left out on
		// purpose: there JSON numbers are ints, where cel-go's wrappers
		// make them doubles; TestLibraries checks it.)
		"object.spec.list.transformList(i, v, i)", "object.spec.containers.transformList(i, c, c.name)", "object.metadata.labels.transformMap(k, v, type(v))",
		"object.spec.containers.all(c, c.?securityContext.?privileged.orValue(false) == false)", "object.spec.containers.map(c, c.?securityContext.?runAsUser.orValue(-1))",
		"object.spec.nested.?a.b.c", "object.spec.nested.a.?b.?c.orValue(0)", "object.spec.containers[0] in object.spec.containers",
		"{'name': 'a'} in object.spec.containers", "object.spec.containers == object.spec.containers", "object.spec.containers[0].ports == [{'containerPort': 80}]",
		"object.spec.list == [3.0, 1.0, 2.0]", "2.0 in object.spec.list", "object.metadata.labels == {'app': 'web'}", "{'app': 'web'} == object.metadata.labels",
		"'app' in object.metadata.labels", "object.metadata.labels[1]", "object.metadata.labels.all(k, k != '')", "object.spec.emptyMap == {}",
		"object.spec.list + []", "[] + object.spec.list", "object.spec.empty + object.spec.list", "object.spec.list + object.spec.list",
		"(object.spec.list + [4]).transformList(i, v, string(v))", "object.spec.containers + object.spec.?initContainers.orValue([])",
		"sets.contains(object.spec.list, [1])", "object.spec.list.sort()", "object.spec.list.distinct()", "object.spec.list.slice(0, 1)",
		"[object.spec.list, dyn([1])].flatten()", "object.spec.names.join(',')", "object.spec.containers.sortBy(c, c.name)", "string(object.spec)", "oldObject.spec.list.all(x, false)",
		"variables.names", "variables.count", "variables.broken", "variables.opt.orValue(1)", "has(variables.nothing)", "variables.nothing", "variables",
		"'names' in variables", "size(variables)", "variables == variables", "type(variables)", "variables.all(v, true)", "variables[?'names']", "variables[1]",
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			shared := Prepare(in)
			for _, expr := range exprs {
				p := mustCompile(t, expr, Any)
				for _, mode := range []string{"new", "shared"} {
					want := referenceEvaluation(in, vars)
					got := Prepare(in).NewEvaluation(context.Background(), vars, 0)
					if mode == "shared" {
						got = shared.NewEvaluation(context.Background(), vars, 0)
					}
					wantVal, wantErr := want.Eval(p)
					gotVal, gotErr := got.Eval(p)
					if render(gotVal) != render(wantVal) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || got.remaining != want.remaining {
						t.Errorf("%s (%s Prepared): got %s, %v, cost %d; cel-go gives %s, %v, cost %d", expr, mode,
							render(gotVal), gotErr, Budget-got.remaining, render(wantVal), wantErr, Budget-want.remaining)
					}
				}
			}
		})
	}
}
