package celeval

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// The expressions of an ImageValidatingPolicy compile in an environment
// with its variables and Kyverno's image verification library
// (kyverno/kyverno, pkg/cel/libs/imageverify):
//
//	images                        map(string, list(string)): the images
//	                              the policy selects, by list name
//	attestors                     map(string, dyn): the policy's attestors
//	attestations                  map(string, string): the names of its
//	                              attestations
//	verifyImageSignatures(image, [attestors...])             int
//	verifyAttestationSignatures(image, attestation, [attestors...]) int
//	extractPayload(image, attestation)                       dyn
//	getImageData(image)                                      dyn
//
// Each verification returns how many of the attestors verified the
// image (0 for an image matchImageReferences does not select). The
// functions are global in Kyverno's language; here each call is
// rewritten, when parsed, into a call on a hidden variable holding the
// evaluation's ImageFunctions, so that one compiled policy serves any
// number of concurrent evaluations.

// The variables of an ImageValidatingPolicy's expressions.
const (
	VarImages       = "images"
	VarAttestors    = "attestors"
	VarAttestations = "attestations"
	// varImageFuncs is the hidden receiver of the verification
	// functions.
	varImageFuncs = "__verdict_image_functions"
)

var imageFuncsType = cel.ObjectType("kyverno.imageverify")

// ImageFunctions serve an ImageValidatingPolicy's verification functions
// for one evaluation. Errors end the expression, as any CEL error does.
type ImageFunctions interface {
	// VerifySignatures is how many of attestors (the policy's attestors,
	// as JSON values) verify the image's signatures.
	VerifySignatures(ctx context.Context, image string, attestors []any) (int, error)
	// VerifyAttestations is how many of attestors verify the image's
	// attestation of that name.
	VerifyAttestations(ctx context.Context, image, attestation string, attestors []any) (int, error)
	// Payload is the verified payload of the image's attestation: an
	// in-toto statement, or a referrer's content.
	Payload(ctx context.Context, image, attestation string) (any, error)
	// ImageData is the image's metadata from its registry.
	ImageData(ctx context.Context, image string) (any, error)
}

var imageEnvOnce struct {
	once sync.Once
	env  *cel.Env
	err  error
}

// imageEnv is the environment of an ImageValidatingPolicy.
func imageEnv() (*cel.Env, error) {
	g := &imageEnvOnce
	g.once.Do(func() {
		base, err := env()
		if err != nil {
			g.err = err
			return
		}
		receiver := func(name string, args int) cel.EnvOption {
			return cel.Macros(cel.GlobalMacro(name, args, func(eh cel.MacroExprFactory, _ ast.Expr, in []ast.Expr) (ast.Expr, *cel.Error) {
				return eh.NewMemberCall(name, eh.NewIdent(varImageFuncs), in...), nil
			}))
		}
		list := cel.ListType(cel.DynType)
		g.env, g.err = base.Extend(
			cel.Variable(VarImages, cel.MapType(cel.StringType, cel.ListType(cel.StringType))),
			cel.Variable(VarAttestors, cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable(VarAttestations, cel.MapType(cel.StringType, cel.StringType)),
			cel.Variable(varImageFuncs, imageFuncsType),
			receiver("verifyImageSignatures", 2),
			receiver("verifyAttestationSignatures", 3),
			receiver("extractPayload", 2),
			receiver("getImageData", 1),
			cel.Function("verifyImageSignatures", cel.MemberOverload("imageverify_signatures", []*cel.Type{imageFuncsType, cel.StringType, list}, cel.IntType,
				cel.FunctionBinding(func(a ...ref.Val) ref.Val {
					return imageCall(a[0], func(ctx context.Context, f ImageFunctions) (any, error) {
						image, attestors, err := imageArgs(a[1], a[2])
						if err != nil {
							return nil, err
						}
						return f.VerifySignatures(ctx, image, attestors)
					})
				}))),
			cel.Function("verifyAttestationSignatures", cel.MemberOverload("imageverify_attestations", []*cel.Type{imageFuncsType, cel.StringType, cel.StringType, list}, cel.IntType,
				cel.FunctionBinding(func(a ...ref.Val) ref.Val {
					return imageCall(a[0], func(ctx context.Context, f ImageFunctions) (any, error) {
						image, attestors, err := imageArgs(a[1], a[3])
						if err != nil {
							return nil, err
						}
						attestation, ok := a[2].Value().(string)
						if !ok {
							return nil, fmt.Errorf("the attestation is a %s, not a string", a[2].Type().TypeName())
						}
						return f.VerifyAttestations(ctx, image, attestation, attestors)
					})
				}))),
			cel.Function("extractPayload", cel.MemberOverload("imageverify_payload", []*cel.Type{imageFuncsType, cel.StringType, cel.StringType}, cel.DynType,
				cel.FunctionBinding(func(a ...ref.Val) ref.Val {
					return imageCall(a[0], func(ctx context.Context, f ImageFunctions) (any, error) {
						image, _ := a[1].Value().(string)
						attestation, _ := a[2].Value().(string)
						return f.Payload(ctx, image, attestation)
					})
				}))),
			cel.Function("getImageData", cel.MemberOverload("imageverify_image_data", []*cel.Type{imageFuncsType, cel.StringType}, cel.DynType,
				cel.BinaryBinding(func(fv, imageV ref.Val) ref.Val {
					return imageCall(fv, func(ctx context.Context, f ImageFunctions) (any, error) {
						image, _ := imageV.Value().(string)
						return f.ImageData(ctx, image)
					})
				}))),
		)
		if g.err != nil {
			g.err = fmt.Errorf("celeval: building the image verification environment: %w", g.err)
		}
	})
	return g.env, g.err
}

// CompileImage compiles an expression of an ImageValidatingPolicy, which
// must evaluate to want, as Compile does.
func CompileImage(expr string, want Result) (*Program, error) {
	return compileIn(imageEnv, expr, want)
}

// imageFuncsVal is the hidden receiver's value: the evaluation's
// ImageFunctions and context.Context.
type imageFuncsVal struct {
	ctx context.Context
	f   ImageFunctions
}

func (v imageFuncsVal) ConvertToNative(reflect.Type) (any, error) {
	return nil, errors.New("image functions have no native value")
}
func (v imageFuncsVal) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return imageFuncsType
	}
	return types.NewErr("type conversion error from %s to %s", imageFuncsType.TypeName(), t.TypeName())
}
func (v imageFuncsVal) Equal(other ref.Val) ref.Val { return types.Bool(other == ref.Val(v)) }
func (v imageFuncsVal) Type() ref.Type              { return imageFuncsType }
func (v imageFuncsVal) Value() any                  { return v.f }

// imageCall runs one function on the evaluation's ImageFunctions.
func imageCall(fv ref.Val, call func(context.Context, ImageFunctions) (any, error)) ref.Val {
	c, ok := fv.(imageFuncsVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(fv)
	}
	if c.f == nil {
		return types.WrapErr(fmt.Errorf("%s: %w", imageFuncsType.TypeName(), ErrNoContext))
	}
	out, err := call(c.ctx, c.f)
	if err != nil {
		return types.WrapErr(err)
	}
	if n, isInt := out.(int); isInt {
		return types.Int(n)
	}
	return adapter.NativeToValue(out)
}

// imageArgs converts an image and a list of attestors.
func imageArgs(imageV, attestorsV ref.Val) (string, []any, error) {
	image, ok := imageV.Value().(string)
	if !ok {
		return "", nil, fmt.Errorf("the image is a %s, not a string", imageV.Type().TypeName())
	}
	v, err := JSONOf(attestorsV)
	if err != nil {
		return "", nil, err
	}
	list, _ := v.([]any)
	return image, list, nil
}

// SetImages gives an ImageValidatingPolicy's expressions their images,
// attestors and attestations, and the functions that verify them.
func (ev *Evaluation) SetImages(images map[string][]string, attestors map[string]any, attestations map[string]string, f ImageFunctions) {
	lists := make(map[string]any, len(images))
	for k, v := range images {
		lists[k] = stringsToJSON(v)
	}
	names := make(map[string]any, len(attestations))
	for k, v := range attestations {
		names[k] = v
	}
	ev.act.images = adapter.NativeToValue(lists)
	ev.act.attestors = adapter.NativeToValue(attestors)
	ev.act.attestations = adapter.NativeToValue(names)
	ev.act.imageFuncs = f
}

// VarImageRef is the variable of a matchImageReferences expression.
const VarImageRef = "imageRef"

var imageRefEnvOnce struct {
	once sync.Once
	env  *cel.Env
	err  error
}

// imageRefEnv is the environment of matchImageReferences expressions:
// the base one with imageRef, the image as the resource writes it.
func imageRefEnv() (*cel.Env, error) {
	g := &imageRefEnvOnce
	g.once.Do(func() {
		base, err := env()
		if err != nil {
			g.err = err
			return
		}
		g.env, g.err = base.Extend(cel.Variable(VarImageRef, cel.StringType))
	})
	return g.env, g.err
}

// CompileImageReference compiles a matchImageReferences expression,
// which must be a bool.
func CompileImageReference(expr string) (*Program, error) {
	return compileIn(imageRefEnv, expr, Bool)
}

// MatchImageReference evaluates a matchImageReferences expression on one
// image, bounded by the per-call cost limit.
func MatchImageReference(ctx context.Context, p *Program, image string) (bool, error) {
	val, _, err := p.prog.ContextEval(ctx, map[string]any{VarImageRef: image})
	if err != nil {
		return false, fmt.Errorf("matchImageReferences '%s': %w", p.Expression, err)
	}
	b, ok := val.(types.Bool)
	if !ok {
		return false, fmt.Errorf("matchImageReferences '%s' resulted in %s, not a bool", p.Expression, val.Type().TypeName())
	}
	return bool(b), nil
}
