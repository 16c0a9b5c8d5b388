package jmespath

import (
	"math"
	"strconv"

	"github.com/jmespath-community/go-jmespath/pkg/functions"
)

// Argument type shorthands for the function table.
var (
	tString = []functions.JpType{functions.JpString}
	tNumber = []functions.JpType{functions.JpNumber}
	tObject = []functions.JpType{functions.JpObject}
	tArray  = []functions.JpType{functions.JpArray}
	tAny    = []functions.JpType{functions.JpAny}
	// tScalar accepts a string or a number, which is converted to a string.
	tScalar = []functions.JpType{functions.JpString, functions.JpNumber}
	// tCollection accepts an object or an array.
	tCollection = []functions.JpType{functions.JpObject, functions.JpArray}
)

func args(types ...[]functions.JpType) []functions.ArgSpec {
	specs := make([]functions.ArgSpec, len(types))
	for i, t := range types {
		specs[i] = functions.ArgSpec{Types: t}
	}
	return specs
}

// customFunctions returns Kyverno's custom functions configured by o.
// Names, argument types and results follow Kyverno's function table.
func customFunctions(o *options) []functions.FunctionEntry {
	return []functions.FunctionEntry{
		// strings
		{Name: "compare", Arguments: args(tString, tString), Handler: jpCompare},
		{Name: "equal_fold", Arguments: args(tString, tString), Handler: jpEqualFold},
		{Name: "replace", Arguments: args(tString, tString, tString, tNumber), Handler: jpReplace},
		{Name: "replace_all", Arguments: args(tString, tString, tString), Handler: jpReplaceAll},
		{Name: "to_upper", Arguments: args(tString), Handler: jpToUpper},
		{Name: "to_lower", Arguments: args(tString), Handler: jpToLower},
		{Name: "trim", Arguments: args(tString, tString), Handler: jpTrim},
		{Name: "trim_prefix", Arguments: args(tString, tString), Handler: jpTrimPrefix},
		{Name: "split", Arguments: args(tString, tString), Handler: jpSplit},
		{Name: "truncate", Arguments: args(tString, tNumber), Handler: jpTruncate},
		{Name: "pattern_match", Arguments: args(tString, tScalar), Handler: jpPatternMatch},
		{Name: "regex_match", Arguments: args(tString, tScalar), Handler: jpRegexMatch},
		{Name: "regex_replace_all", Arguments: args(tString, tScalar, tScalar), Handler: jpRegexReplaceAll},
		{Name: "regex_replace_all_literal", Arguments: args(tString, tScalar, tScalar), Handler: jpRegexReplaceAllLiteral},
		{Name: "label_match", Arguments: args(tObject, tObject), Handler: jpLabelMatch},
		{Name: "to_boolean", Arguments: args(tString), Handler: jpToBoolean},
		{Name: "base64_decode", Arguments: args(tString), Handler: jpBase64Decode},
		{Name: "base64_encode", Arguments: args(tString), Handler: jpBase64Encode},
		{Name: "path_canonicalize", Arguments: args(tString), Handler: jpPathCanonicalize},
		{Name: "parse_json", Arguments: args(tString), Handler: jpParseJSON},
		{Name: "parse_yaml", Arguments: args(tString), Handler: jpParseYAML},
		{Name: "lookup", Arguments: args(tCollection, tScalar), Handler: jpLookup},
		{Name: "items", Arguments: args(tCollection, tString, tString), Handler: jpItems},
		{Name: "object_from_lists", Arguments: args(tArray, tArray), Handler: jpObjectFromLists},
		{Name: "random", Arguments: args(tString), Handler: jpRandom},
		{Name: "sha256", Arguments: args(tString), Handler: jpSHA256},
		{Name: "md5", Arguments: args(tString), Handler: jpMD5},
		{Name: "is_external_url", Arguments: args(tString), Handler: jpIsExternalURL(o)},
		{Name: "x509_decode", Arguments: args(tString), Handler: jpX509Decode},
		{Name: "image_normalize", Arguments: args(tString), Handler: jpImageNormalize(o)},
		{Name: "semver_compare", Arguments: args(tString, tString), Handler: jpSemverCompare},
		// arithmetic
		{Name: "add", Arguments: args(tAny, tAny), Handler: jpAdd},
		{Name: "subtract", Arguments: args(tAny, tAny), Handler: jpSubtract},
		{Name: "multiply", Arguments: args(tAny, tAny), Handler: jpMultiply},
		{Name: "divide", Arguments: args(tAny, tAny), Handler: jpDivide},
		{Name: "modulo", Arguments: args(tAny, tAny), Handler: jpModulo},
		{Name: "sum", Arguments: args(tArray), Handler: jpSum},
		{Name: "round", Arguments: args(tNumber, tNumber), Handler: jpRound},
		// time
		{Name: "time_since", Arguments: args(tString, tString, tString), Handler: jpTimeSince(o)},
		{Name: "time_now", Arguments: nil, Handler: jpTimeNow(o)},
		{Name: "time_now_utc", Arguments: nil, Handler: jpTimeNowUTC(o)},
		{Name: "time_add", Arguments: args(tString, tString), Handler: jpTimeAdd},
		{Name: "time_parse", Arguments: args(tString, tString), Handler: jpTimeParse},
		{Name: "time_to_cron", Arguments: args(tString), Handler: jpTimeToCron},
		{Name: "time_utc", Arguments: args(tString), Handler: jpTimeUTC},
		{Name: "time_diff", Arguments: args(tString, tString), Handler: jpTimeDiff},
		{Name: "time_before", Arguments: args(tString, tString), Handler: jpTimeBefore},
		{Name: "time_after", Arguments: args(tString, tString), Handler: jpTimeAfter},
		{Name: "time_between", Arguments: args(tString, tString, tString), Handler: jpTimeBetween},
		{Name: "time_truncate", Arguments: args(tString, tString), Handler: jpTimeTruncate},
	}
}

// Argument accessors. The library checks arity and types against the
// function table before calling a handler; these accessors check again so
// that a handler never panics on unexpected input.

func arg(name string, a []any, i int) (any, error) {
	if i >= len(a) {
		return nil, fnErrorf(name, "missing argument #%d", i+1)
	}
	return a[i], nil
}

func stringArg(name string, a []any, i int) (string, error) {
	v, err := arg(name, a, i)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fnErrorf(name, "argument #%d must be a string, got %s", i+1, typeName(v))
	}
	return s, nil
}

func numberArg(name string, a []any, i int) (float64, error) {
	v, err := arg(name, a, i)
	if err != nil {
		return 0, err
	}
	f, ok := v.(float64)
	if !ok {
		return 0, fnErrorf(name, "argument #%d must be a number, got %s", i+1, typeName(v))
	}
	return f, nil
}

// intArg returns argument i, which must be a number with an integer value.
func intArg(name string, a []any, i int) (int, error) {
	f, err := numberArg(name, a, i)
	if err != nil {
		return 0, err
	}
	n, ok := toInt(f)
	if !ok {
		return 0, fnErrorf(name, "argument #%d must be an integer, got %v", i+1, f)
	}
	return n, nil
}

func objectArg(name string, a []any, i int) (map[string]any, error) {
	v, err := arg(name, a, i)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fnErrorf(name, "argument #%d must be an object, got %s", i+1, typeName(v))
	}
	return m, nil
}

func arrayArg(name string, a []any, i int) ([]any, error) {
	v, err := arg(name, a, i)
	if err != nil {
		return nil, err
	}
	s, ok := v.([]any)
	if !ok {
		return nil, fnErrorf(name, "argument #%d must be an array, got %s", i+1, typeName(v))
	}
	return s, nil
}

// scalarArg returns argument i, a string or a number, as a string.
func scalarArg(name string, a []any, i int) (string, error) {
	v, err := arg(name, a, i)
	if err != nil {
		return "", err
	}
	s, ok := scalarString(v)
	if !ok {
		return "", fnErrorf(name, "argument #%d must be a string or a number, got %s", i+1, typeName(v))
	}
	return s, nil
}

// scalarString converts a string, number or boolean to a string.
func scalarString(v any) (string, bool) {
	switch t := v.(type) {
	case string:
		return t, true
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(t), true
	default:
		return "", false
	}
}

// toInt converts f to an int if it is a finite integer value in range.
func toInt(f float64) (int, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Trunc(f) != f {
		return 0, false
	}
	if f < math.MinInt || f >= math.MaxInt {
		return 0, false
	}
	return int(f), true
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return "unsupported type"
	}
}
