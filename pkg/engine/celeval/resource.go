package celeval

import (
	"errors"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The rest of Kyverno's resource library (kyverno/sdk
// extensions/cel/libs/resource) beside resource.Get and resource.List
// by apiVersion, resource and namespace (kyverno.go):
//
//	resource.Post(apiVersion, resource, namespace, data)  the answer
//	resource.Post(apiVersion, resource, data)        (a review: the
//	                                                 Context allows no
//	                                                 other)
//	resource.ToGVR(apiVersion, kind)                 a GVR value
//	resource.Get(gvr, namespace, name)
//	resource.List(gvr, namespace[, labels])
//	resource.Get(apiVersion, resource, name)         the forms of Kyverno's
//	resource.Get(gvr, name)                          namespaced policies:
//	resource.List(apiVersion, resource[, labels])    the policy's own
//	resource.List(gvr[, labels])                     namespace
//
// The namespaced forms read namespace '' (a namespaced policy's own
// namespace, the Context's confinement says; a cluster policy's
// cluster-scoped resources, or every namespace for a list). ToGVR names
// the kind's resource by the API server's rule for built-in kinds (Pod
// is pods, NetworkPolicy networkpolicies), as the engine guesses them
// elsewhere.

var gvrType = cel.ObjectType("kyverno.gvr")

// gvrVal is a group, version and resource.
type gvrVal struct{ apiVersion, resource string }

func (v gvrVal) ConvertToNative(t reflect.Type) (any, error) {
	if t == reflect.TypeFor[schema.GroupVersionResource]() {
		gv, err := schema.ParseGroupVersion(v.apiVersion)
		if err != nil {
			return nil, err
		}
		return gv.WithResource(v.resource), nil
	}
	return nil, errors.New("a GVR converts only to schema.GroupVersionResource")
}
func (v gvrVal) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.TypeType:
		return gvrType
	case types.StringType:
		return types.String(v.apiVersion + "/" + v.resource)
	}
	return types.NewErr("type conversion error from %s to %s", gvrType.TypeName(), t.TypeName())
}
func (v gvrVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(gvrVal)
	return types.Bool(ok && o == v)
}
func (v gvrVal) Type() ref.Type { return gvrType }
func (v gvrVal) Value() any     { return v }

// resourceEnv declares the overloads, in both cases of each name.
func resourceEnv() []cel.EnvOption {
	strMap := cel.MapType(cel.StringType, cel.StringType)
	anyMap := cel.MapType(cel.StringType, cel.DynType)
	str := cel.StringType
	var opts []cel.EnvOption
	for _, c := range []struct{ get, list, toGVR, suffix string }{{"Get", "List", "ToGVR", "pascal"}, {"get", "list", "toGVR", "camel"}} {
		s := c.suffix
		post := "Post"
		if s == "camel" {
			post = "post"
		}
		opts = append(opts,
			cel.Function(post,
				cel.MemberOverload("resource_post_string_string_string_map_"+s, []*cel.Type{resourceType, str, str, str, anyMap}, anyMap,
					cel.FunctionBinding(func(a ...ref.Val) ref.Val { return postResource(a[0], a[1], a[2], a[3], a[4]) })),
				cel.MemberOverload("resource_post_string_string_map_"+s, []*cel.Type{resourceType, str, str, anyMap}, anyMap,
					cel.FunctionBinding(func(a ...ref.Val) ref.Val { return postResource(a[0], a[1], a[2], types.String(""), a[3]) }))),
			cel.Function(c.toGVR, cel.MemberOverload("resource_to_gvr_"+s, []*cel.Type{resourceType, str, str}, gvrType,
				cel.FunctionBinding(func(a ...ref.Val) ref.Val {
					apiVersion, bad := stringArg(a[1])
					if bad != nil {
						return bad
					}
					kind, bad := stringArg(a[2])
					if bad != nil {
						return bad
					}
					gv, err := schema.ParseGroupVersion(apiVersion)
					if err != nil {
						return types.NewErr("failed to map kind to resource: %v", err)
					}
					plural, _ := meta.UnsafeGuessKindToResource(gv.WithKind(kind))
					return gvrVal{apiVersion: apiVersion, resource: plural.Resource}
				}))),
			cel.Function(c.get,
				cel.MemberOverload("resource_get_string_string_string_"+s, []*cel.Type{resourceType, str, str, str}, anyMap,
					cel.FunctionBinding(func(a ...ref.Val) ref.Val { return getResource(a[0], a[1], a[2], types.String(""), a[3]) })),
				cel.MemberOverload("resource_get_gvr_string_string_"+s, []*cel.Type{resourceType, gvrType, str, str}, anyMap,
					cel.FunctionBinding(func(a ...ref.Val) ref.Val {
						return byGVR(a[1], func(av, r ref.Val) ref.Val { return getResource(a[0], av, r, a[2], a[3]) })
					})),
				cel.MemberOverload("resource_get_gvr_string_"+s, []*cel.Type{resourceType, gvrType, str}, anyMap,
					cel.FunctionBinding(func(a ...ref.Val) ref.Val {
						return byGVR(a[1], func(av, r ref.Val) ref.Val { return getResource(a[0], av, r, types.String(""), a[2]) })
					}))),
			cel.Function(c.list,
				cel.MemberOverload("resource_list_string_string_"+s, []*cel.Type{resourceType, str, str}, anyMap,
					cel.FunctionBinding(func(a ...ref.Val) ref.Val { return listResources(a[0], a[1], a[2], types.String(""), nil) })),
				cel.MemberOverload("resource_list_string_string_map_"+s, []*cel.Type{resourceType, str, str, strMap}, anyMap,
					cel.FunctionBinding(func(a ...ref.Val) ref.Val { return listResources(a[0], a[1], a[2], types.String(""), a[3]) })),
				cel.MemberOverload("resource_list_gvr_string_"+s, []*cel.Type{resourceType, gvrType, str}, anyMap,
					cel.FunctionBinding(func(a ...ref.Val) ref.Val {
						return byGVR(a[1], func(av, r ref.Val) ref.Val { return listResources(a[0], av, r, a[2], nil) })
					})),
				cel.MemberOverload("resource_list_gvr_string_map_"+s, []*cel.Type{resourceType, gvrType, str, strMap}, anyMap,
					cel.FunctionBinding(func(a ...ref.Val) ref.Val {
						return byGVR(a[1], func(av, r ref.Val) ref.Val { return listResources(a[0], av, r, a[2], a[3]) })
					})),
				cel.MemberOverload("resource_list_gvr_"+s, []*cel.Type{resourceType, gvrType}, anyMap,
					cel.FunctionBinding(func(a ...ref.Val) ref.Val {
						return byGVR(a[1], func(av, r ref.Val) ref.Val { return listResources(a[0], av, r, types.String(""), nil) })
					})),
				cel.MemberOverload("resource_list_gvr_map_"+s, []*cel.Type{resourceType, gvrType, strMap}, anyMap,
					cel.FunctionBinding(func(a ...ref.Val) ref.Val {
						return byGVR(a[1], func(av, r ref.Val) ref.Val { return listResources(a[0], av, r, types.String(""), a[2]) })
					}))),
		)
	}
	return opts
}

// byGVR calls f with a GVR's apiVersion and resource.
func byGVR(v ref.Val, f func(apiVersion, resource ref.Val) ref.Val) ref.Val {
	g, ok := v.(gvrVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	if strings.TrimSpace(g.resource) == "" {
		return types.NewErr("failed to map kind to resource: no resource")
	}
	return f(types.String(g.apiVersion), types.String(g.resource))
}

// postResource is resource.Post.
func postResource(cv, apiVersionV, resourceV, nsV, dataV ref.Val) ref.Val {
	c, bad := contextOf(cv)
	if bad != nil {
		return bad
	}
	s, bad := stringArgs(apiVersionV, resourceV, nsV)
	if bad != nil {
		return bad
	}
	data, err := JSONOf(dataV)
	if err != nil {
		return types.WrapErr(err)
	}
	m, _ := data.(map[string]any)
	out, err := c.c.PostResource(c.ctx, s[0], s[1], s[2], m)
	if err != nil {
		return types.NewErr("failed to create resource: %v", err)
	}
	return adapter.NativeToValue(out)
}
