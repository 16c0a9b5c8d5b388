package celeval

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"  //nolint:gosec // Kyverno's md5(): a checksum, not a signature.
	"crypto/sha1" //nolint:gosec // Kyverno's sha1(): a checksum, not a signature.
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"math"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"sigs.k8s.io/yaml"

	"github.com/verdict-dev/verdict/pkg/engine/jmespath"
)

// Kyverno's CEL libraries that need nothing outside the expression
// (github.com/kyverno/sdk, extensions/cel/libs), with Kyverno's
// semantics and Verdict's own implementation; the functions a JMESPath
// function of Kyverno's also provides run that one (jmespath.Call), so
// that the two languages agree:
//
//	sha1(s), sha256(s), md5(s)          hex digests (also hash.sha1, ...)
//	math.round(x, digits)               x rounded half away from zero
//	random(), random(pattern)           a string matching pattern
//	                                    ([0-9a-z]{8} by default; also
//	                                    random.random), bounded
//	time.toCron(t), time.truncate(t, d) (beside time.now())
//	listObjToMap(keys, values, k, v)    {keys[i][k]: values[i][v]}
//	                                    (also transform.listObjToMap)
//	parseServiceAccount(user)           {namespace, name} of
//	                                    system:serviceaccount:ns:name
//	                                    (also user.parseServiceAccount)
//	x509.decode(pem)                    a certificate or CSR as a map
//	json.unmarshal(s), json.marshal(v)
//	yaml.parse(s)
//	gzip.compress(s), gzip.decompress(b) the latter bounded
//	                                    (maxDecompressedBytes)

// The types of the json and yaml variables.
var (
	jsonType = cel.ObjectType("kyverno.json")
	yamlType = cel.ObjectType("kyverno.yaml")
)

// Variable names of the json and yaml libraries.
const (
	VarJSON = "json"
	VarYAML = "yaml"
)

// maxDecompressedBytes bounds what gzip.decompress gives: a small input
// must not expand into a replica's memory.
const maxDecompressedBytes = 4 << 20

// libsEnv declares the libraries.
func libsEnv() []cel.EnvOption {
	digest := func(name string, h func() hash.Hash) []cel.EnvOption {
		fn := func(v ref.Val) ref.Val {
			s, bad := stringArg(v)
			if bad != nil {
				return bad
			}
			d := h()
			d.Write([]byte(s))
			return types.String(hex.EncodeToString(d.Sum(nil)))
		}
		return []cel.EnvOption{
			cel.Function(name, cel.Overload(name+"_string", []*cel.Type{cel.StringType}, cel.StringType, cel.UnaryBinding(fn))),
			cel.Function("hash."+name, cel.Overload("hash_"+name+"_string", []*cel.Type{cel.StringType}, cel.StringType, cel.UnaryBinding(fn))),
		}
	}
	var opts []cel.EnvOption
	opts = append(opts, digest("sha1", sha1.New)...)
	opts = append(opts, digest("sha256", sha256.New)...)
	opts = append(opts, digest("md5", md5.New)...)
	random := func(prefix string) cel.EnvOption {
		return cel.Function(prefix+"random",
			cel.Overload("kyverno_"+strings.ReplaceAll(prefix, ".", "_")+"random_string", []*cel.Type{cel.StringType}, cel.StringType, cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, bad := stringArg(v)
				if bad != nil {
					return bad
				}
				return randomString(s)
			})),
			cel.Overload("kyverno_"+strings.ReplaceAll(prefix, ".", "_")+"random_default", nil, cel.StringType, cel.FunctionBinding(func(...ref.Val) ref.Val {
				return randomString("[0-9a-z]{8}")
			})))
	}
	listObjToMap := func(name string) cel.EnvOption {
		return cel.Function(name, cel.Overload(strings.ReplaceAll(name, ".", "_")+"_list_list_string_string",
			[]*cel.Type{cel.ListType(cel.DynType), cel.ListType(cel.DynType), cel.StringType, cel.StringType}, cel.MapType(cel.StringType, cel.DynType),
			cel.FunctionBinding(listObjectsToMap)))
	}
	parseSA := func(name string) cel.EnvOption {
		return cel.Function(name, cel.Overload(strings.ReplaceAll(name, ".", "_")+"_string", []*cel.Type{cel.StringType}, cel.MapType(cel.StringType, cel.StringType),
			cel.UnaryBinding(parseServiceAccount)))
	}
	opts = append(opts,
		random(""), random("random."),
		listObjToMap("listObjToMap"), listObjToMap("transform.listObjToMap"),
		parseSA("parseServiceAccount"), parseSA("user.parseServiceAccount"),
		cel.Function("math.round", cel.Overload("math_round_double_int", []*cel.Type{cel.DoubleType, cel.IntType}, cel.DoubleType,
			cel.BinaryBinding(func(x, digits ref.Val) ref.Val {
				f, ok1 := x.(types.Double)
				n, ok2 := digits.(types.Int)
				if !ok1 || !ok2 {
					return types.MaybeNoSuchOverloadErr(x)
				}
				shift := math.Pow(10, float64(n))
				return types.Double(math.Round(float64(f)*shift) / shift)
			}))),
		cel.Function("x509.decode", cel.Overload("x509_decode_string", []*cel.Type{cel.StringType}, cel.DynType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, bad := stringArg(v)
				if bad != nil {
					return bad
				}
				out, err := jmespath.Call("x509_decode", s)
				if err != nil {
					return types.WrapErr(err)
				}
				return adapter.NativeToValue(out)
			}))),
		cel.Function("gzip.compress", cel.Overload("gzip_compress_dyn", []*cel.Type{cel.DynType}, cel.BytesType, cel.UnaryBinding(gzipCompress))),
		cel.Function("gzip.decompress", cel.Overload("gzip_decompress_bytes", []*cel.Type{cel.BytesType}, cel.StringType, cel.UnaryBinding(gzipDecompress))),
		cel.Variable(VarJSON, jsonType),
		cel.Variable(VarYAML, yamlType),
		cel.Function("unmarshal", cel.MemberOverload("json_unmarshal_string", []*cel.Type{jsonType, cel.StringType}, cel.DynType,
			cel.BinaryBinding(func(_, v ref.Val) ref.Val {
				s, bad := stringArg(v)
				if bad != nil {
					return bad
				}
				var out any
				if err := json.Unmarshal([]byte(s), &out); err != nil {
					return types.WrapErr(err)
				}
				return adapter.NativeToValue(out)
			}))),
		cel.Function("marshal", cel.MemberOverload("json_marshal_dyn", []*cel.Type{jsonType, cel.DynType}, cel.StringType,
			cel.BinaryBinding(func(_, v ref.Val) ref.Val {
				native, err := JSONOf(v)
				if err != nil {
					return types.WrapErr(err)
				}
				b, err := json.Marshal(native)
				if err != nil {
					return types.WrapErr(err)
				}
				return types.String(b)
			}))),
		cel.Function("parse", cel.MemberOverload("yaml_parse_string", []*cel.Type{yamlType, cel.StringType}, cel.DynType,
			cel.BinaryBinding(func(_, v ref.Val) ref.Val {
				s, bad := stringArg(v)
				if bad != nil {
					return bad
				}
				var out any
				if err := yaml.Unmarshal([]byte(s), &out); err != nil {
					return types.WrapErr(err)
				}
				return adapter.NativeToValue(out)
			}))),
		cel.Function("toCron", cel.MemberOverload("time_to_cron_timestamp", []*cel.Type{timeCtxType, cel.TimestampType}, cel.StringType,
			cel.BinaryBinding(func(_, v ref.Val) ref.Val {
				ts, ok := v.(types.Timestamp)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				t := ts.Time
				return types.String(fmt.Sprintf("%d %d %d %d %d", t.Minute(), t.Hour(), t.Day(), int(t.Month()), int(t.Weekday())))
			}))),
		cel.Function("truncate", cel.MemberOverload("time_truncate_timestamp_duration", []*cel.Type{timeCtxType, cel.TimestampType, cel.DurationType}, cel.TimestampType,
			cel.FunctionBinding(func(a ...ref.Val) ref.Val {
				ts, ok1 := a[1].(types.Timestamp)
				d, ok2 := a[2].(types.Duration)
				if !ok1 || !ok2 {
					return types.MaybeNoSuchOverloadErr(a[1])
				}
				return types.Timestamp{Time: ts.Truncate(d.Duration)}
			}))),
	)
	return opts
}

// randomString is random(pattern), through the JMESPath function's
// bounded generator.
func randomString(pattern string) ref.Val {
	out, err := jmespath.Call("random", pattern)
	if err != nil {
		return types.WrapErr(err)
	}
	return adapter.NativeToValue(out)
}

// listObjectsToMap is listObjToMap(keys, values, keyField, valueField):
// for each i, keys[i][keyField] (a string) maps to values[i][valueField],
// as Kyverno's transform library builds it; the lists must be as long.
func listObjectsToMap(a ...ref.Val) ref.Val {
	keys, err := JSONOf(a[0])
	if err != nil {
		return types.WrapErr(err)
	}
	values, err := JSONOf(a[1])
	if err != nil {
		return types.WrapErr(err)
	}
	keyField, bad := stringArg(a[2])
	if bad != nil {
		return bad
	}
	valueField, bad := stringArg(a[3])
	if bad != nil {
		return bad
	}
	kl, _ := keys.([]any)
	vl, _ := values.([]any)
	if len(kl) != len(vl) {
		return types.NewErr("listObjToMap must take lists of equal length. list1: %d, list2: %d", len(kl), len(vl))
	}
	out := make(map[string]any, len(kl))
	for i := range kl {
		km, ok := kl[i].(map[string]any)
		if !ok {
			return types.NewErr("object cannot be handled as a map string to any in the key object list")
		}
		k, ok := km[keyField].(string)
		if !ok {
			return types.NewErr("the passed key name cannot be handled as a string in the key object list")
		}
		vm, ok := vl[i].(map[string]any)
		if !ok {
			return types.NewErr("object cannot be handled as a map string to any in the value object list")
		}
		out[k] = vm[valueField]
	}
	return adapter.NativeToValue(out)
}

// parseServiceAccount is {namespace, name} of a service account's user
// name (system:serviceaccount:<namespace>:<name>), both empty for any
// other user, as Kyverno's user library parses it.
func parseServiceAccount(v ref.Val) ref.Val {
	user, bad := stringArg(v)
	if bad != nil {
		return bad
	}
	sa := map[string]any{"namespace": "", "name": ""}
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		if ns, name, found := strings.Cut(rest, ":"); found {
			sa["namespace"], sa["name"] = ns, name
		}
	}
	return adapter.NativeToValue(sa)
}

// gzipCompress compresses a string (or bytes), deterministically (no
// modification time), as Kyverno's gzip library does.
func gzipCompress(v ref.Val) ref.Val {
	var data []byte
	switch x := v.(type) {
	case types.String:
		data = []byte(x)
	case types.Bytes:
		data = x
	default:
		return types.MaybeNoSuchOverloadErr(v)
	}
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.ModTime = time.Unix(0, 0)
	if _, err := w.Write(data); err != nil {
		return types.WrapErr(err)
	}
	if err := w.Close(); err != nil {
		return types.WrapErr(err)
	}
	return types.Bytes(buf.Bytes())
}

// gzipDecompress decompresses gzip data into a string, at most
// maxDecompressedBytes of it: more is an error, never a replica's memory
// filled by a few kilobytes of input.
func gzipDecompress(v ref.Val) ref.Val {
	data, ok := v.(types.Bytes)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return types.WrapErr(err)
	}
	defer func() { _ = r.Close() }()
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressedBytes+1))
	if err != nil {
		return types.WrapErr(err)
	}
	if len(out) > maxDecompressedBytes {
		return types.NewErr("gzip.decompress: the data expands beyond %d bytes", maxDecompressedBytes)
	}
	return types.String(out)
}
