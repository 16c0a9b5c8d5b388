package celeval

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"github.com/google/go-containerregistry/pkg/name"
	"google.golang.org/protobuf/types/known/structpb"
)

// Kyverno's CEL functions that read outside the request, with the
// behaviour of its libraries (github.com/kyverno/sdk, extensions/cel/libs)
// and Verdict's own implementation:
//
//	http.Get(url), http.Get(url, headers), http.Post(url, body),
//	http.Post(url, body, headers), http.Client(caBundle).Get(...) (the
//	calls trusting caBundle: CABundle)
//	globalContext.Get(name), globalContext.Get(name, projection)
//	resource.Get(apiVersion, resource, namespace, name)   null when missing
//	resource.List(apiVersion, resource, namespace)         a List object
//	resource.List(apiVersion, resource, namespace, labels)
//	image.GetMetadata(reference)                           image metadata
//	time.now()                                             the evaluation's time
//
// (each also in camel case: http.get, resource.list, ...), and the image
// reference functions, which need nothing outside the expression:
//
//	image(reference) / parseImageReference(reference), isImage(reference),
//	and on an image: registry(), repository(), identifier(), tag(),
//	digest(), containsDigest()
//
// What they read is served by a Context (Input.Context); without one, or
// where the Context cannot serve it, the call ends in an error saying
// so, as any CEL error ends an expression.

// Context serves the Kyverno functions that read outside the request.
// Errors are reported in the expression's error; ErrNotFound from
// GetResource makes resource.Get null.
type Context interface {
	HTTP(ctx context.Context, method, url string, body any, headers map[string]string) (any, error)
	GlobalReference(ctx context.Context, name, projection string) (any, error)
	GetResource(ctx context.Context, apiVersion, resource, namespace, name string) (map[string]any, error)
	ListResources(ctx context.Context, apiVersion, resource, namespace string, labels map[string]string) ([]map[string]any, error)
	// PostResource creates data as a resource and returns the API
	// server's answer (a review: what Verdict's sources allow).
	PostResource(ctx context.Context, apiVersion, resource, namespace string, data map[string]any) (map[string]any, error)
	ImageData(ctx context.Context, reference string) (any, error)
	// Now is the time of the evaluation (time.now()).
	Now() time.Time
}

// ErrNotFound is what a Context returns for a missing resource.
var ErrNotFound = errors.New("not found")

// ErrNoContext is the error of a function whose Context is missing.
var ErrNoContext = errors.New("not available here")

// The types of the context variables.
var (
	httpType     = cel.ObjectType("kyverno.http")
	gctxType     = cel.ObjectType("kyverno.globalcontext")
	resourceType = cel.ObjectType("kyverno.resource")
	imageCtxType = cel.ObjectType("kyverno.imagedata")
	imageType    = cel.ObjectType("kyverno.image")
	timeCtxType  = cel.ObjectType("kyverno.time")
)

// Variable names of the Kyverno context variables.
const (
	VarHTTP          = "http"
	VarGlobalContext = "globalContext"
	VarResource      = "resource"
	VarImageData     = "image"
	VarTime          = "time"
)

// kyvernoEnv declares the Kyverno functions and their variables.
func kyvernoEnv() []cel.EnvOption {
	strMap := cel.MapType(cel.StringType, cel.StringType)
	anyMap := cel.MapType(cel.StringType, cel.DynType)
	both := func(name string, overloads func(suffix string) []cel.FunctionOpt) []cel.EnvOption {
		camel := strings.ToLower(name[:1]) + name[1:]
		return []cel.EnvOption{cel.Function(name, overloads("pascal")...), cel.Function(camel, overloads("camel")...)}
	}
	opts := []cel.EnvOption{
		// CEL's regex.replace, regex.extract and regex.extractAll, and
		// cel.bind, which Kyverno's environment has and Kubernetes'
		// does not.
		ext.Regex(ext.RegexVersion(1)),
		ext.Bindings(),
		cel.Variable(VarHTTP, httpType),
		cel.Variable(VarGlobalContext, gctxType),
		cel.Variable(VarResource, resourceType),
		cel.Variable(VarImageData, imageCtxType),
		cel.Variable(VarTime, timeCtxType),
		cel.Function("now", cel.MemberOverload("time_now", []*cel.Type{timeCtxType}, cel.TimestampType,
			cel.UnaryBinding(func(cv ref.Val) ref.Val {
				c, bad := contextOf(cv)
				if bad != nil {
					return bad
				}
				return types.Timestamp{Time: c.c.Now().UTC()}
			}))),
	}
	opts = append(opts, both("Get", func(s string) []cel.FunctionOpt {
		return []cel.FunctionOpt{
			cel.MemberOverload("http_get_string_"+s, []*cel.Type{httpType, cel.StringType}, cel.DynType,
				cel.BinaryBinding(func(c, url ref.Val) ref.Val { return httpCall(c, "GET", url, nil, nil) })),
			cel.MemberOverload("http_get_string_headers_"+s, []*cel.Type{httpType, cel.StringType, strMap}, cel.DynType,
				cel.FunctionBinding(func(a ...ref.Val) ref.Val { return httpCall(a[0], "GET", a[1], nil, a[2]) })),
			cel.MemberOverload("globalcontext_get_string_"+s, []*cel.Type{gctxType, cel.StringType}, cel.DynType,
				cel.BinaryBinding(func(c, n ref.Val) ref.Val { return globalRef(c, n, types.String("")) })),
			cel.MemberOverload("globalcontext_get_string_string_"+s, []*cel.Type{gctxType, cel.StringType, cel.StringType}, cel.DynType,
				cel.FunctionBinding(func(a ...ref.Val) ref.Val { return globalRef(a[0], a[1], a[2]) })),
			cel.MemberOverload("resource_get_string_string_string_string_"+s, []*cel.Type{resourceType, cel.StringType, cel.StringType, cel.StringType, cel.StringType}, anyMap,
				cel.FunctionBinding(getResource)),
		}
	})...)
	opts = append(opts, both("Post", func(s string) []cel.FunctionOpt {
		return []cel.FunctionOpt{
			cel.MemberOverload("http_post_string_any_"+s, []*cel.Type{httpType, cel.StringType, cel.DynType}, cel.DynType,
				cel.FunctionBinding(func(a ...ref.Val) ref.Val { return httpCall(a[0], "POST", a[1], a[2], nil) })),
			cel.MemberOverload("http_post_string_any_headers_"+s, []*cel.Type{httpType, cel.StringType, cel.DynType, strMap}, cel.DynType,
				cel.FunctionBinding(func(a ...ref.Val) ref.Val { return httpCall(a[0], "POST", a[1], a[2], a[3]) })),
		}
	})...)
	opts = append(opts, both("Client", func(s string) []cel.FunctionOpt {
		return []cel.FunctionOpt{
			cel.MemberOverload("http_client_string_"+s, []*cel.Type{httpType, cel.StringType}, httpType, cel.BinaryBinding(httpClient)),
		}
	})...)
	opts = append(opts, both("List", func(s string) []cel.FunctionOpt {
		return []cel.FunctionOpt{
			cel.MemberOverload("resource_list_string_string_string_"+s, []*cel.Type{resourceType, cel.StringType, cel.StringType, cel.StringType}, anyMap,
				cel.FunctionBinding(func(a ...ref.Val) ref.Val { return listResources(a[0], a[1], a[2], a[3], nil) })),
			cel.MemberOverload("resource_list_string_string_string_map_"+s, []*cel.Type{resourceType, cel.StringType, cel.StringType, cel.StringType, strMap}, anyMap,
				cel.FunctionBinding(func(a ...ref.Val) ref.Val { return listResources(a[0], a[1], a[2], a[3], a[4]) })),
		}
	})...)
	opts = append(opts, both("GetMetadata", func(s string) []cel.FunctionOpt {
		return []cel.FunctionOpt{
			cel.MemberOverload("imagedata_get_string_"+s, []*cel.Type{imageCtxType, cel.StringType}, cel.DynType,
				cel.BinaryBinding(imageData)),
		}
	})...)
	// Image references.
	opts = append(opts,
		cel.Function("image", cel.Overload("string_to_image_deprecated", []*cel.Type{cel.StringType}, imageType, cel.UnaryBinding(parseImage))),
		cel.Function("parseImageReference", cel.Overload("string_to_image", []*cel.Type{cel.StringType}, imageType, cel.UnaryBinding(parseImage))),
		cel.Function("isImage", cel.Overload("is_image_string", []*cel.Type{cel.StringType}, cel.BoolType, cel.UnaryBinding(func(v ref.Val) ref.Val {
			s, ok := v.Value().(string)
			if !ok {
				return types.MaybeNoSuchOverloadErr(v)
			}
			_, err := name.ParseReference(s)
			return types.Bool(err == nil)
		}))),
	)
	for fn, f := range map[string]func(name.Reference) ref.Val{
		"registry":   func(r name.Reference) ref.Val { return types.String(r.Context().RegistryStr()) },
		"repository": func(r name.Reference) ref.Val { return types.String(r.Context().RepositoryStr()) },
		"identifier": func(r name.Reference) ref.Val { return types.String(imageIdentifier(r)) },
		"tag":        func(r name.Reference) ref.Val { return types.String(imageTag(r)) },
		"digest": func(r name.Reference) ref.Val {
			if d, ok := r.(name.Digest); ok {
				return types.String(d.DigestStr())
			}
			return types.String("")
		},
		"containsDigest": func(r name.Reference) ref.Val {
			d, ok := r.(name.Digest)
			return types.Bool(ok && d.DigestStr() != "")
		},
	} {
		out := cel.StringType
		if fn == "containsDigest" {
			out = cel.BoolType
		}
		opts = append(opts, cel.Function(fn, cel.MemberOverload("image_"+fn, []*cel.Type{imageType}, out, cel.UnaryBinding(func(v ref.Val) ref.Val {
			img, ok := v.(imageVal)
			if !ok {
				return types.MaybeNoSuchOverloadErr(v)
			}
			return f(img.ref)
		}))))
	}
	return opts
}

// ctxVal is the value of a context variable: the Context and the
// evaluation's context.Context.
type ctxVal struct {
	ctx context.Context
	c   Context
	t   *types.Type
}

func (v ctxVal) ConvertToNative(reflect.Type) (any, error) {
	return nil, errors.New("a Kyverno context has no native value")
}
func (v ctxVal) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return v.t
	}
	return types.NewErr("type conversion error from %s to %s", v.t.TypeName(), t.TypeName())
}
func (v ctxVal) Equal(other ref.Val) ref.Val { return types.Bool(other == ref.Val(v)) }
func (v ctxVal) Type() ref.Type              { return v.t }
func (v ctxVal) Value() any                  { return v.c }

func contextOf(v ref.Val) (ctxVal, ref.Val) {
	c, ok := v.(ctxVal)
	if !ok {
		return ctxVal{}, types.MaybeNoSuchOverloadErr(v)
	}
	if c.c == nil {
		return ctxVal{}, types.WrapErr(fmt.Errorf("%s: %w", c.t.TypeName(), ErrNoContext))
	}
	return c, nil
}

func stringArg(v ref.Val) (string, ref.Val) {
	s, ok := v.Value().(string)
	if !ok {
		return "", types.MaybeNoSuchOverloadErr(v)
	}
	return s, nil
}

// stringArgs converts string arguments, all or none.
func stringArgs(vals ...ref.Val) ([]string, ref.Val) {
	out := make([]string, len(vals))
	for i, v := range vals {
		s, bad := stringArg(v)
		if bad != nil {
			return nil, bad
		}
		out[i] = s
	}
	return out, nil
}

// stringMapArg converts a map(string, string) argument (nil: none).
func stringMapArg(v ref.Val) (map[string]string, ref.Val) {
	if v == nil {
		return nil, nil
	}
	native, err := v.ConvertToNative(reflect.TypeFor[map[string]string]())
	if err != nil {
		return nil, types.WrapErr(err)
	}
	return native.(map[string]string), nil
}

// JSONOf converts a CEL value into JSON values (numbers as float64).
func JSONOf(v ref.Val) (any, error) {
	out, bad := jsonOf(v)
	if bad != nil {
		return nil, fmt.Errorf("%v", bad)
	}
	return out, nil
}

// jsonOf converts a CEL value into JSON values (a request body), through
// protobuf's JSON value as CEL defines it (numbers become float64).
func jsonOf(v ref.Val) (any, ref.Val) {
	if v == nil {
		return nil, nil
	}
	native, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil, types.WrapErr(err)
	}
	return native.(*structpb.Value).AsInterface(), nil
}

func httpCall(cv ref.Val, method string, urlV, bodyV, headersV ref.Val) ref.Val {
	c, bad := contextOf(cv)
	if bad != nil {
		return bad
	}
	url, bad := stringArg(urlV)
	if bad != nil {
		return bad
	}
	headers, bad := stringMapArg(headersV)
	if bad != nil {
		return bad
	}
	body, bad := jsonOf(bodyV)
	if bad != nil {
		return bad
	}
	out, err := c.c.HTTP(c.ctx, method, url, body, headers)
	if err != nil {
		return types.NewErr("http %s %s: %v", method, url, err)
	}
	return adapter.NativeToValue(out)
}

// caBundleKey marks the context of http.Client(caBundle)'s calls.
type caBundleKey struct{}

// CABundle is the PEM bundle an expression's http.Client(caBundle) gave
// for the call made with ctx ("" for http's own calls): a Context
// trusts it for that call's TLS.
func CABundle(ctx context.Context) string {
	s, _ := ctx.Value(caBundleKey{}).(string)
	return s
}

// httpClient is http.Client(caBundle): the http library whose calls
// trust caBundle.
func httpClient(cv, caV ref.Val) ref.Val {
	c, ok := cv.(ctxVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(cv)
	}
	ca, bad := stringArg(caV)
	if bad != nil {
		return bad
	}
	c.ctx = context.WithValue(c.ctx, caBundleKey{}, ca)
	return c
}

func globalRef(cv, nameV, projV ref.Val) ref.Val {
	c, bad := contextOf(cv)
	if bad != nil {
		return bad
	}
	n, bad := stringArg(nameV)
	if bad != nil {
		return bad
	}
	proj, bad := stringArg(projV)
	if bad != nil {
		return bad
	}
	out, err := c.c.GlobalReference(c.ctx, n, proj)
	if err != nil {
		return types.NewErr("failed to get global reference: %v", err)
	}
	return adapter.NativeToValue(out)
}

func getResource(a ...ref.Val) ref.Val {
	c, bad := contextOf(a[0])
	if bad != nil {
		return bad
	}
	s, bad := stringArgs(a[1:5]...)
	if bad != nil {
		return bad
	}
	obj, err := c.c.GetResource(c.ctx, s[0], s[1], s[2], s[3])
	if errors.Is(err, ErrNotFound) {
		return types.NullValue
	}
	if err != nil {
		return types.NewErr("failed to get resource: %v", err)
	}
	return adapter.NativeToValue(obj)
}

func listResources(cv, apiVersionV, resourceV, nsV, labelsV ref.Val) ref.Val {
	c, bad := contextOf(cv)
	if bad != nil {
		return bad
	}
	s, bad := stringArgs(apiVersionV, resourceV, nsV)
	if bad != nil {
		return bad
	}
	labels, bad := stringMapArg(labelsV)
	if bad != nil {
		return bad
	}
	items, err := c.c.ListResources(c.ctx, s[0], s[1], s[2], labels)
	if err != nil {
		return types.NewErr("failed to list resource: %v", err)
	}
	list := make([]any, len(items))
	for i, it := range items {
		list[i] = it
	}
	return adapter.NativeToValue(map[string]any{"apiVersion": s[0], "kind": "List", "items": list, "metadata": map[string]any{}})
}

func imageData(cv, refV ref.Val) ref.Val {
	c, bad := contextOf(cv)
	if bad != nil {
		return bad
	}
	r, bad := stringArg(refV)
	if bad != nil {
		return bad
	}
	out, err := c.c.ImageData(c.ctx, r)
	if err != nil {
		return types.NewErr("failed to get image data: %v", err)
	}
	return adapter.NativeToValue(out)
}

// imageVal is a parsed image reference.
type imageVal struct{ ref name.Reference }

func (v imageVal) ConvertToNative(t reflect.Type) (any, error) {
	if t.Kind() == reflect.String {
		return v.ref.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from image to %v", t)
}
func (v imageVal) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.StringType:
		return types.String(v.ref.String())
	case types.TypeType:
		return imageType
	}
	return types.NewErr("type conversion error from image to %s", t.TypeName())
}
func (v imageVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(imageVal)
	return types.Bool(ok && o.ref.String() == v.ref.String())
}
func (v imageVal) Type() ref.Type { return imageType }
func (v imageVal) Value() any     { return v.ref }

func parseImage(v ref.Val) ref.Val {
	s, ok := v.Value().(string)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	r, err := name.ParseReference(s)
	if err != nil {
		return types.WrapErr(err)
	}
	return imageVal{r}
}

// imageTag is the tag of a reference, also of repo:tag@digest (which
// go-containerregistry parses as a digest only).
func imageTag(r name.Reference) string {
	if t, ok := r.(name.Tag); ok {
		return t.TagStr()
	}
	return tagBeforeDigest(r.String())
}

// imageIdentifier is the tag or the digest; tag@digest when both.
func imageIdentifier(r name.Reference) string {
	if d, ok := r.(name.Digest); ok {
		if tag := tagBeforeDigest(r.String()); tag != "" {
			return tag + "@" + d.DigestStr()
		}
	}
	return r.Identifier()
}

// tagBeforeDigest is the tag of repo:tag@digest: the text after the last
// colon that follows the last slash, before the @.
func tagBeforeDigest(s string) string {
	at := strings.Index(s, "@")
	if at < 0 {
		return ""
	}
	before := s[:at]
	slash := strings.LastIndex(before, "/")
	colon := strings.LastIndex(before, ":")
	if colon < 0 || colon < slash {
		return ""
	}
	return before[colon+1:]
}
