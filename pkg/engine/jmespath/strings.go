package jmespath

import (
	"crypto/md5" //nolint:gosec // md5 is a Kyverno function, not used for security.
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math"
	"path"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/yaml"

	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// compare(string, string) number: -1, 0 or 1 as strings.Compare.
func jpCompare(a []any) (any, error) {
	x, err := stringArg("compare", a, 0)
	if err != nil {
		return nil, err
	}
	y, err := stringArg("compare", a, 1)
	if err != nil {
		return nil, err
	}
	return float64(strings.Compare(x, y)), nil
}

// equal_fold(string, string) boolean: equality under Unicode case folding.
func jpEqualFold(a []any) (any, error) {
	x, err := stringArg("equal_fold", a, 0)
	if err != nil {
		return nil, err
	}
	y, err := stringArg("equal_fold", a, 1)
	if err != nil {
		return nil, err
	}
	return strings.EqualFold(x, y), nil
}

// replace(str, old, new string, n number) string: replaces the first n
// instances of old; a negative n replaces all of them. A fractional n is
// truncated.
func jpReplace(a []any) (any, error) {
	const name = "replace"
	s, err := stringArg(name, a, 0)
	if err != nil {
		return nil, err
	}
	old, err := stringArg(name, a, 1)
	if err != nil {
		return nil, err
	}
	repl, err := stringArg(name, a, 2)
	if err != nil {
		return nil, err
	}
	f, err := numberArg(name, a, 3)
	if err != nil {
		return nil, err
	}
	n, ok := truncateToInt(f)
	if !ok {
		return nil, fnErrorf(name, "argument #4 must be a finite number, got %v", f)
	}
	if replacedLength(s, old, repl, n) > maxStringLength {
		return nil, errTooLong(name)
	}
	return strings.Replace(s, old, repl, n), nil
}

// replace_all(str, old, new string) string.
func jpReplaceAll(a []any) (any, error) {
	const name = "replace_all"
	s, err := stringArg(name, a, 0)
	if err != nil {
		return nil, err
	}
	old, err := stringArg(name, a, 1)
	if err != nil {
		return nil, err
	}
	repl, err := stringArg(name, a, 2)
	if err != nil {
		return nil, err
	}
	if replacedLength(s, old, repl, -1) > maxStringLength {
		return nil, errTooLong(name)
	}
	return strings.ReplaceAll(s, old, repl), nil
}

// replacedLength is the length of strings.Replace(s, old, repl, n), capped
// at maxStringLength+1.
func replacedLength(s, old, repl string, n int) int {
	count := strings.Count(s, old)
	if n >= 0 && n < count {
		count = n
	}
	growth := len(repl) - len(old)
	if growth <= 0 || count == 0 {
		return len(s) + count*growth
	}
	if count > (maxStringLength+1-len(s))/growth {
		return maxStringLength + 1
	}
	return len(s) + count*growth
}

func jpToUpper(a []any) (any, error) {
	s, err := stringArg("to_upper", a, 0)
	if err != nil {
		return nil, err
	}
	return strings.ToUpper(s), nil
}

func jpToLower(a []any) (any, error) {
	s, err := stringArg("to_lower", a, 0)
	if err != nil {
		return nil, err
	}
	return strings.ToLower(s), nil
}

// trim(str, cutset string) string: removes leading and trailing characters
// contained in cutset.
func jpTrim(a []any) (any, error) {
	s, err := stringArg("trim", a, 0)
	if err != nil {
		return nil, err
	}
	cutset, err := stringArg("trim", a, 1)
	if err != nil {
		return nil, err
	}
	return strings.Trim(s, cutset), nil
}

// trim_prefix(str, prefix string) string.
func jpTrimPrefix(a []any) (any, error) {
	s, err := stringArg("trim_prefix", a, 0)
	if err != nil {
		return nil, err
	}
	prefix, err := stringArg("trim_prefix", a, 1)
	if err != nil {
		return nil, err
	}
	return strings.TrimPrefix(s, prefix), nil
}

// split(str, sep string) array[string]: as strings.Split.
func jpSplit(a []any) (any, error) {
	s, err := stringArg("split", a, 0)
	if err != nil {
		return nil, err
	}
	sep, err := stringArg("split", a, 1)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(s, sep)
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

// truncate(str string, length number) string: keeps the first length
// characters (runes). A negative length yields "", a fractional one is
// truncated.
func jpTruncate(a []any) (any, error) {
	const name = "truncate"
	s, err := stringArg(name, a, 0)
	if err != nil {
		return nil, err
	}
	f, err := numberArg(name, a, 1)
	if err != nil {
		return nil, err
	}
	n, ok := truncateToInt(f)
	if !ok {
		return nil, fnErrorf(name, "argument #2 must be a finite number, got %v", f)
	}
	if n <= 0 {
		return "", nil
	}
	if utf8.RuneCountInString(s) <= n {
		return s, nil
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos], nil
		}
		i++
	}
	return s, nil
}

// pattern_match(pattern string, value string|number) boolean: wildcard
// match where * matches any sequence and ? exactly one character.
func jpPatternMatch(a []any) (any, error) {
	pattern, err := stringArg("pattern_match", a, 0)
	if err != nil {
		return nil, err
	}
	s, err := scalarArg("pattern_match", a, 1)
	if err != nil {
		return nil, err
	}
	return wildcard.Match(pattern, s), nil
}

// regex_match(regex string, value string|number) boolean.
func jpRegexMatch(a []any) (any, error) {
	const name = "regex_match"
	expr, err := stringArg(name, a, 0)
	if err != nil {
		return nil, err
	}
	s, err := scalarArg(name, a, 1)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fnWrap(name, err)
	}
	return re.MatchString(s), nil
}

// regex_replace_all(regex string, src string|number, repl string|number)
// string: replaces every match, expanding $1 style references in repl.
func jpRegexReplaceAll(a []any) (any, error) {
	return regexReplace("regex_replace_all", a, false)
}

// regex_replace_all_literal(regex string, src string|number, repl
// string|number) string: replaces every match with repl taken literally.
func jpRegexReplaceAllLiteral(a []any) (any, error) {
	return regexReplace("regex_replace_all_literal", a, true)
}

func regexReplace(name string, a []any, literal bool) (any, error) {
	expr, err := stringArg(name, a, 0)
	if err != nil {
		return nil, err
	}
	src, err := scalarArg(name, a, 1)
	if err != nil {
		return nil, err
	}
	repl, err := scalarArg(name, a, 2)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fnWrap(name, err)
	}
	// Same result as Regexp.ReplaceAll(Literal)String, built with a bound
	// on the output size: a replacement can be larger than the match.
	refs := 0
	if !literal {
		refs = strings.Count(repl, "$")
	}
	var (
		out      strings.Builder
		expanded []byte
		last     int
	)
	for _, m := range re.FindAllStringSubmatchIndex(src, -1) {
		// Each reference expands to at most the text of the match.
		bound := out.Len() + (m[0] - last) + len(repl) + refs*(m[1]-m[0])
		if bound > maxStringLength {
			return nil, errTooLong(name)
		}
		out.WriteString(src[last:m[0]])
		if literal {
			out.WriteString(repl)
		} else {
			expanded = re.ExpandString(expanded[:0], repl, src, m)
			out.Write(expanded)
		}
		last = m[1]
	}
	if out.Len()+len(src)-last > maxStringLength {
		return nil, errTooLong(name)
	}
	out.WriteString(src[last:])
	return out.String(), nil
}

// label_match(selector, labels object) boolean: true when every key of
// selector is in labels with an equal value.
func jpLabelMatch(a []any) (any, error) {
	selector, err := objectArg("label_match", a, 0)
	if err != nil {
		return nil, err
	}
	labels, err := objectArg("label_match", a, 1)
	if err != nil {
		return nil, err
	}
	for k, want := range selector {
		got, ok := labels[k]
		if !ok || !reflect.DeepEqual(got, want) {
			return false, nil
		}
	}
	return true, nil
}

// to_boolean(string) boolean: "true" or "false" in any letter case.
func jpToBoolean(a []any) (any, error) {
	s, err := stringArg("to_boolean", a, 0)
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(s) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return nil, fnErrorf("to_boolean", "lowercase argument must be 'true' or 'false', got %q", s)
	}
}

// base64_decode(string) string: standard encoding with padding.
func jpBase64Decode(a []any) (any, error) {
	s, err := stringArg("base64_decode", a, 0)
	if err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fnWrap("base64_decode", err)
	}
	return string(b), nil
}

// base64_encode(string) string: standard encoding with padding.
func jpBase64Encode(a []any) (any, error) {
	s, err := stringArg("base64_encode", a, 0)
	if err != nil {
		return nil, err
	}
	return base64.StdEncoding.EncodeToString([]byte(s)), nil
}

// path_canonicalize(string) string: cleans a slash-separated path
// (duplicate slashes, "." and ".." elements); "" stays "".
func jpPathCanonicalize(a []any) (any, error) {
	s, err := stringArg("path_canonicalize", a, 0)
	if err != nil {
		return nil, err
	}
	return path.Join(s), nil
}

// parse_json(string) any.
func jpParseJSON(a []any) (any, error) {
	s, err := stringArg("parse_json", a, 0)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fnWrap("parse_json", err)
	}
	return out, nil
}

// parse_yaml(string) any: the YAML document must be representable as JSON.
func jpParseYAML(a []any) (any, error) {
	s, err := stringArg("parse_yaml", a, 0)
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		return nil, fnWrap("parse_yaml", err)
	}
	var out any
	if err := json.Unmarshal(j, &out); err != nil {
		return nil, fnWrap("parse_yaml", err)
	}
	return out, nil
}

// lookup(object, string) any or lookup(array, number) any: the value for a
// key or an integer index, or null when there is none.
func jpLookup(a []any) (any, error) {
	const name = "lookup"
	v, err := arg(name, a, 0)
	if err != nil {
		return nil, err
	}
	switch in := v.(type) {
	case map[string]any:
		key, err := stringArg(name, a, 1)
		if err != nil {
			return nil, err
		}
		return in[key], nil
	case []any:
		idx, err := intArg(name, a, 1)
		if err != nil {
			return nil, err
		}
		if idx < 0 || idx >= len(in) {
			return nil, nil
		}
		return in[idx], nil
	default:
		return nil, fnErrorf(name, "argument #1 must be an object or an array, got %s", typeName(v))
	}
}

// items(object|array, keyName, valueName string) array[object]: one
// {keyName: key, valueName: value} object per entry, objects in key order,
// arrays in index order (the key being the index).
func jpItems(a []any) (any, error) {
	const name = "items"
	v, err := arg(name, a, 0)
	if err != nil {
		return nil, err
	}
	keyName, err := stringArg(name, a, 1)
	if err != nil {
		return nil, err
	}
	valueName, err := stringArg(name, a, 2)
	if err != nil {
		return nil, err
	}
	switch in := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(in))
		for k := range in {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([]any, 0, len(in))
		for _, k := range keys {
			out = append(out, map[string]any{keyName: k, valueName: in[k]})
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(in))
		for i, item := range in {
			out = append(out, map[string]any{keyName: float64(i), valueName: item})
		}
		return out, nil
	default:
		return nil, fnErrorf(name, "argument #1 must be an object or an array, got %s", typeName(v))
	}
}

// object_from_lists(keys, values array) object: keys (strings, numbers or
// booleans, converted to strings) paired with values by position; keys
// without a value map to null.
func jpObjectFromLists(a []any) (any, error) {
	const name = "object_from_lists"
	keys, err := arrayArg(name, a, 0)
	if err != nil {
		return nil, err
	}
	values, err := arrayArg(name, a, 1)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(keys))
	for i, k := range keys {
		key, ok := scalarString(k)
		if !ok {
			return nil, fnErrorf(name, "key #%d must be a string, a number or a boolean, got %s", i+1, typeName(k))
		}
		if i < len(values) {
			out[key] = values[i]
		} else {
			out[key] = nil
		}
	}
	return out, nil
}

// sha256(string) string: lower-case hex digest.
func jpSHA256(a []any) (any, error) {
	s, err := stringArg("sha256", a, 0)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:]), nil
}

// md5(string) string: lower-case hex digest.
func jpMD5(a []any) (any, error) {
	s, err := stringArg("md5", a, 0)
	if err != nil {
		return nil, err
	}
	sum := md5.Sum([]byte(s)) //nolint:gosec // see import.
	return hex.EncodeToString(sum[:]), nil
}

// semver_compare(version, range string) boolean: whether version satisfies
// the blang/semver range (">=1.2.0 <2.0.0 || 3.x"). As in Kyverno, a version
// that does not parse is treated as 0.0.0; a range that does not parse is an
// error.
func jpSemverCompare(a []any) (any, error) {
	const name = "semver_compare"
	v, err := stringArg(name, a, 0)
	if err != nil {
		return nil, err
	}
	r, err := stringArg(name, a, 1)
	if err != nil {
		return nil, err
	}
	version, perr := semver.Parse(v)
	if perr != nil {
		version = semver.Version{}
	}
	rng, err := semver.ParseRange(r)
	if err != nil {
		return nil, fnWrap(name, err)
	}
	return rng(version), nil
}

// truncateToInt truncates f toward zero and clamps it to the int range. It
// fails for NaN and infinities.
func truncateToInt(f float64) (int, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	f = math.Trunc(f)
	switch {
	case f >= math.MaxInt:
		return math.MaxInt, true
	case f <= math.MinInt:
		return math.MinInt, true
	default:
		return int(f), true
	}
}
