package celeval

import (
	"math"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// jsonAdapter turns the engine's JSON values into CEL values, lazily (a
// map or list is wrapped, its elements converted when read), as the API
// server hands an unstructured object to CEL, with one difference the
// engine's decoding makes necessary: the engine holds every number as a
// float64, where the API server decodes a JSON number without a fraction
// as an int64. A float64 with an integral value in int64's range is
// therefore CEL's int, so that `object.spec.replicas == 3`,
// `string(port)` and int arithmetic behave as they do in the cluster.
type jsonAdapter struct{}

var adapter = jsonAdapter{}

// int64 bounds as float64: 2^63 is exact; -2^63 too.
const (
	maxInt = float64(1 << 63)
	minInt = -maxInt
)

func (jsonAdapter) NativeToValue(value any) ref.Val {
	switch v := value.(type) {
	case nil:
		return types.NullValue
	case map[string]any:
		return types.NewStringInterfaceMap(adapter, v)
	case []any:
		return types.NewDynamicList(adapter, v)
	case float64:
		if v == math.Trunc(v) && v >= minInt && v < maxInt {
			return types.Int(int64(v))
		}
		return types.Double(v)
	case string:
		return types.String(v)
	case bool:
		return types.Bool(v)
	}
	return types.DefaultTypeAdapter.NativeToValue(value)
}

// toVal is the CEL value of an input map; nil is null.
func toVal(m map[string]any) ref.Val {
	if m == nil {
		return types.NullValue
	}
	return types.NewStringInterfaceMap(adapter, m)
}
